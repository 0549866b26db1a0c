package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSFTBadInput(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, `name: s
env: {name: planpath, size: 4, mode: single}
generation: {backend: builtin, model: `+filepath.Join(dir, "nomodel")+`}
runs_dir: `+filepath.Join(dir, "runs")+`
`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{cfg, "sft.steps=0"}, "sft.steps"},
		{[]string{cfg, "sft.batch_size=0"}, "sft.batch_size"},
		{[]string{cfg, "sft.lr=3"}, "sft.lr"},
		{[]string{cfg, "sft.full=true"}, "sft.full"},
		{[]string{cfg, "sft.stpes=3"}, "sft.stpes"},
		{[]string{cfg}, "generation.model"},
		{[]string{cfg, "sft.model=" + dir}, "sft.model"},
		{[]string{}, "missing CONFIG"},
	} {
		_, stderr, code := runCLI(append([]string{"sft"}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("sft %v: exit %d, stderr %q; want 2 naming %s", tc.args, code, stderr, tc.want)
		}
	}
}

func TestSFTCorpus(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "name: s\nenv: {name: planpath, size: 4, mode: single}\nsft: {seeds: 3}\n")
	out := filepath.Join(dir, "corpus.txt")
	if _, stderr, code := runCLI("sft", cfg, "--corpus", out); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "<|im_start|>assistant\n"); n != 3 || strings.Count(string(data), "#### [") != 3 {
		t.Errorf("corpus has %d prompts, want 3 with answers:\n%.400s", n, data)
	}
	// sft.modes adds the multi-agent team's demonstrations (the tool agent's
	// run in the sandbox) to a single-agent config's.
	if _, stderr, code := runCLI("sft", cfg, "sft.modes=[single,multi]", "--corpus", out); code != 0 {
		t.Fatalf("modes [single, multi]: exit %d: %s", code, stderr)
	}
	if data, err = os.ReadFile(out); err != nil {
		t.Fatal(err)
	}
	if n, tool := strings.Count(string(data), "<|im_start|>assistant\n"), strings.Count(string(data), "```python\n"); n != 9 || tool != 6 {
		// 6: each tool program is a completion and is quoted in the plan agent's prompt.
		t.Errorf("modes [single, multi]: %d prompts and %d tool programs, want 9 and 6:\n%.600s", n, tool, data)
	}
}
