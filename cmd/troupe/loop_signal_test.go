package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/generation/builtin/modelgen"
	"github.com/troupe-rl/troupe/learner/trajectory"
)

// letterEnv is a one-step environment whose reward is the fraction of the
// completion's characters that are the letter e: a task any policy can
// improve on from random output, to check the sign and plumbing of the
// whole loop (rollout → shard → learner → export → hot-swap → rollout).
type letterEnv struct {
	seed int64
	done bool
}

func (e *letterEnv) Reset(seed int64) error { e.seed, e.done = seed, false; return nil }
func (e *letterEnv) Task() envs.Task {
	return envs.Task{Env: "letter-e", ID: fmt.Sprintf("letter/%d", e.seed), Seed: e.seed, Split: envs.Split(e.seed), Roles: []string{"plan"}, MaxTurns: 1}
}
func (e *letterEnv) Roles() []string { return []string{"plan"} }
func (e *letterEnv) Next() (string, int) {
	if e.done {
		return "", 1
	}
	return "plan", 0
}
func (e *letterEnv) Prompt(string) (envs.Prompt, error) {
	return envs.Prompt{User: fmt.Sprintf("Write some text (%d).", e.seed%7)}, nil
}
func (e *letterEnv) Step(_ context.Context, _, completion string) (envs.Outcome, error) {
	e.done = true
	r := 0.0
	if n := len(completion); n > 0 {
		r = float64(strings.Count(completion, "e")) / float64(n)
	}
	return envs.Outcome{Local: r, Team: r, Reward: r, Done: true, Success: r > 0.5}, nil
}
func (e *letterEnv) Done() bool { return e.done }
func (e *letterEnv) Clone() envs.Env {
	c := *e
	return &c
}

func init() {
	envs.Register("letter-e", func(envs.Config, envs.Deps) (envs.Env, error) { return &letterEnv{}, nil })
}

// TestLoopImprovesReward runs troupe run on the letter-e task and checks
// that the rollouts' mean reward rises over the iterations.
func TestLoopImprovesReward(t *testing.T) {
	if testing.Short() {
		t.Skip("trains for a while")
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	if _, err := modelgen.Write(model, modelgen.Options{InitStd: 0.3, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, dir, fmt.Sprintf(`name: sig
runs_dir: %s
iterations: 10
env: {name: letter-e, mode: single}
generation: {backend: builtin, model: %s, tokenizer: %s, train: {max_tokens: 8}, eval: {max_tokens: 8}}
rollout: {mode: tree, branches: 8, problems: 8}
learner: {lr: 3e-3, lora_rank: 8, warmup_steps: 1}
eval: {every: 100, problems: 1, samples: 1}
`, dir, model, model))
	if out, errs, code := runCLI("run", cfg); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	mean := func(it int64) float64 {
		rows, err := trajectory.ReadFile(context.Background(), filepath.Join(dir, "sig", "trajectories", trajectory.ShardName(it, "rollout")), nil)
		if err != nil {
			t.Fatal(err)
		}
		s := 0.0
		for _, r := range rows {
			s += r.Reward
		}
		return s / float64(len(rows))
	}
	first, last := (mean(0)+mean(1))/2, (mean(8)+mean(9))/2
	t.Logf("mean reward: iterations 0-1 %.3f, iterations 8-9 %.3f", first, last)
	for it := int64(0); it < 10; it++ {
		t.Logf("iteration %d: %.3f", it, mean(it))
	}
	if !(last > first+0.05) {
		t.Errorf("the loop did not improve the reward: %.3f → %.3f", first, last)
	}
}
