package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-rl/troupe/learner/trajectory"
)

func writeTestShard(t *testing.T, dir string) string {
	t.Helper()
	w, err := trajectory.Create(dir, 42, &trajectory.WriterOptions{Tag: "t"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		s := trajectory.Step{
			RunID: "r1", Iteration: 42, EpisodeID: "ep", ProblemID: "p1", Env: "planpath", Split: "train",
			Branch: int32(i % 4), Turn: int32(i % 3), Role: []string{"planner", "coder"}[i%2], Policy: "base",
			PromptText:     strings.Repeat("long prompt text ", 20),
			CompletionText: "答え 🙂",
			PromptIDs:      make([]int32, 100+i),
			CompletionIDs:  []int32{1, 2, 3},
			Logprobs:       []float32{-0.5, -1, -2},
			Reward:         float64(i), CreatedAt: time.Date(2026, 11, 22, 0, 0, i, 0, time.UTC),
			Info: `{"ok":true}`,
		}
		if err := w.Write(s); err != nil {
			t.Fatal(err)
		}
	}
	info, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, info.Name)
}

func TestInspect(t *testing.T) {
	path := writeTestShard(t, t.TempDir())
	out, errOut, code := runCLI("inspect", path, "--rows", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"30 rows", "troupe.schema_version=1", "message", "-- row 0", "-- row 1",
		"… 92 more] (len 100)", `"答え 🙂"`, "2026-11-22T00:00:00Z",
		"reward", "14.5", // mean reward of 0..29
		"prompt_ids", "LIST<INT32>", "114.5 elems", // avg prompt length
		"role", "distinct",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out, "-- row 2") {
		t.Error("printed more rows than --rows")
	}
	if t.Failed() {
		t.Log(out)
	}
}

func TestInspectBadInput(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile(writeTestShard(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	corrupt := bytes.Clone(good)
	for i := len(corrupt) / 3; i < len(corrupt)/3+64; i++ {
		corrupt[i] ^= 0xa5
	}
	files := map[string][]byte{
		"truncated.parquet": good[:len(good)/2],
		"corrupt.parquet":   corrupt,
		"text.parquet":      []byte("hello"),
	}
	for name, data := range files {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, errOut, code := runCLI("inspect", path)
			if code != 2 || !strings.Contains(errOut, path) {
				t.Fatalf("exit %d, stderr %q; want 2 naming %s", code, errOut, path)
			}
		})
	}
	tests := []struct {
		name string
		args []string
	}{
		{"missing file", []string{"inspect", filepath.Join(dir, "nope.parquet")}},
		{"no file", []string{"inspect"}},
		{"bad flag", []string{"inspect", "x.parquet", "--rows", "many"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, errOut, code := runCLI(tc.args...); code != 2 {
				t.Fatalf("exit %d (%s); want 2", code, errOut)
			}
		})
	}
}

// TestInspectSubprocess runs the real binary: the exit status of a corrupt
// file is 2 end to end.
func TestInspectSubprocess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "troupe")
	if out, err := exec_("go", "build", "-o", bin, "."); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	path := filepath.Join(dir, "bad.parquet")
	os.WriteFile(path, []byte("PAR1 definitely not parquet PAR1"), 0o644)
	out, err := exec_(bin, "inspect", path)
	code := exitStatus(err)
	if code != 2 || !strings.Contains(out, path) {
		t.Fatalf("exit %d, output %q; want 2 naming the file", code, out)
	}
}
