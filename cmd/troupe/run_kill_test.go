//go:build integration

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-rl/troupe/generation/builtin/servertest"
	"github.com/troupe-rl/troupe/learner"
	"github.com/troupe-rl/troupe/learner/trajectory"
)

// runState reads what a finished run did: the learner steps logged in
// metrics.jsonl and the shards the latest checkpoint trained on.
func runState(t *testing.T, runDir string) (steps []int, consumed []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(runDir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var rec struct {
			Type string `json:"type"`
			Step int    `json:"step"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		if rec.Type == "" || rec.Type == "train" {
			steps = append(steps, rec.Step)
		}
	}
	ck, err := learner.LatestCheckpoint(filepath.Join(runDir, "checkpoints"))
	if err != nil || ck == "" {
		t.Fatalf("no checkpoint: %v", err)
	}
	var st struct {
		Consumed []string `json:"consumed"`
	}
	raw, err := os.ReadFile(filepath.Join(ck, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(raw, &st)
	return steps, st.Consumed
}

// TestRunKilledAtRandomResumes SIGKILLs `troupe run` at random moments
// (rollout, learn, export, eval), re-runs the same command until it
// finishes, and compares with an uninterrupted run: the same learner step
// count, every step logged once, no shard trained twice.
func TestRunKilledAtRandomResumes(t *testing.T) {
	srv := servertest.Start(t, servertest.Options{})
	cfgFor := func(dir string) string {
		return writeConfig(t, dir, fmt.Sprintf(`name: k
runs_dir: %s
iterations: 3
env: {name: planpath, size: 4, max_turns: 1, mode: single}
generation: {backend: openai, base_urls: [%s], model: tiny, tokenizer: %s, train: {max_tokens: 8}, eval: {max_tokens: 8}}
rollout: {mode: tree, branches: 2, problems: 2}
learner: {lora_rank: 2, lr: 1e-3}
eval: {every: 1, problems: 1, samples: 1}
`, dir, srv.URL, srv.ModelDir))
	}
	refDir := t.TempDir()
	if out, errs, code := runCLI("run", cfgFor(refDir)); code != 0 {
		t.Fatalf("reference run: exit %d\n%s\n%s", code, out, errs)
	}
	refSteps, refConsumed := runState(t, filepath.Join(refDir, "k"))
	if !slices.Equal(refSteps, []int{1, 2, 3}) || len(refConsumed) != 3 {
		t.Fatalf("reference run: steps %v, consumed %v", refSteps, refConsumed)
	}

	dir := t.TempDir()
	cfg := cfgFor(dir)
	r := rand.New(rand.NewPCG(1, 2))
	kills := 0
	for attempt := 0; attempt < 12; attempt++ {
		cmd := troupeCmd(t, "run", cfg)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("run %d failed: %v", attempt, err)
			}
			attempt = 1 << 30 // finished
		case <-time.After(time.Duration(200+r.IntN(2500)) * time.Millisecond):
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
			kills++
		}
	}
	t.Logf("killed %d times", kills)
	if kills == 0 {
		t.Fatal("the run was never killed: the test proves nothing")
	}
	if out, errs, code := runCLI("run", cfg); code != 0 {
		t.Fatalf("final run: exit %d\n%s\n%s", code, out, errs)
	}
	steps, consumed := runState(t, filepath.Join(dir, "k"))
	if !slices.Equal(steps, refSteps) {
		t.Fatalf("steps logged %v, uninterrupted run %v", steps, refSteps)
	}
	slices.Sort(consumed)
	if len(slices.Compact(slices.Clone(consumed))) != 3 || len(consumed) != 3 {
		t.Fatalf("consumed %v: want 3 distinct shards", consumed)
	}
	man, err := trajectory.OpenManifest(context.Background(), filepath.Join(dir, "k", "trajectories"))
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := man.Pending(context.Background()); len(p) != 0 {
		t.Fatalf("pending shards after the run: %+v", p)
	}
	if _, err := os.Stat(filepath.Join(dir, "k", "report.html")); err != nil {
		t.Fatal(err)
	}
}
