package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/generation/rollout"
	"github.com/troupe-rl/troupe/internal/progress"
	"github.com/troupe-rl/troupe/learner/trajectory"
)

func init() {
	register(&command{
		name:    "rollout",
		args:    "CONFIG [key=value ...] [--out DIR] [--iteration N] [--json]",
		summary: "run one iteration of rollouts and write its trajectory shard",
		detail: `Plays rollout.problems training problems (rollout.branches samples per agent-turn in
tree mode) against the configured backend and writes every LLM call to one Parquet shard
in DIR (default runs/<name>/trajectories), listed in DIR's manifest. Shows progress
(episodes/s, calls/s, ETA) on stderr and prints a summary: success rate, reward by role
and turn, tokens, latency percentiles. Failed episodes are named; their rows are dropped.
A shard appears only when complete: a killed rollout leaves none, and running the same
iteration again writes a complete one.`,
		run: runRollout,
	})
}

// trainSeeds returns the training seeds of one iteration: B consecutive
// seeds from a run-specific offset, below the validation range.
func trainSeeds(runSeed, iteration int64, problems int) []int64 {
	base := uint64(runSeed)*0x9e3779b97f4a7c15 + uint64(iteration)*uint64(problems)
	out := make([]int64, problems)
	for i := range out {
		out[i] = int64((base + uint64(i)) % uint64(envs.ValidationSeedBase))
	}
	return out
}

func runRollout(ctx context.Context, env *cliEnv, args []string) error {
	c := commands["rollout"]
	fs := newFlags(env, c)
	out := fs.String("out", "", "trajectories directory (default runs/<name>/trajectories)")
	iteration := fs.Int64("iteration", 0, "iteration number (names the shard and picks the problems)")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	pos, err := parseFlags(env, c, fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 {
		return usagef("missing CONFIG")
	}
	if *iteration < 0 {
		return usagef("--iteration must be ≥ 0")
	}
	exp, err := openExperiment(ctx, env, pos[0], pos[1:])
	if err != nil {
		return err
	}
	defer exp.close()
	dir := *out
	if dir == "" {
		dir = filepath.Join(exp.runDir(), "trajectories")
	}
	sum, info, err := rolloutIteration(ctx, env, exp, dir, *iteration, nil)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"shard": info, "summary": sum})
	}
	printSummary(env.stdout, sum)
	fmt.Fprintf(env.stdout, "shard: %s (%d rows, %.1f MB)\n", filepath.Join(dir, info.Name), info.Rows, float64(info.Bytes)/1e6)
	return nil
}

// rolloutIteration plays one iteration's training problems (roles served
// by policies; nil = the base model) into one shard of dir and lists it in
// the manifest.
func rolloutIteration(ctx context.Context, env *cliEnv, exp *experiment, dir string, iteration int64, policies map[string]rollout.Policy) (*rollout.Summary, trajectory.ShardInfo, error) {
	cfg := exp.cfg
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, trajectory.ShardInfo{}, err
	}
	man, err := trajectory.OpenManifest(ctx, dir)
	if err != nil {
		return nil, trajectory.ShardInfo{}, err
	}
	tag := "rollout"
	name := trajectory.ShardName(iteration, tag)
	if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
		return nil, trajectory.ShardInfo{}, &usageError{msg: fmt.Sprintf("%s already exists: iteration %d was rolled out (pick another --iteration)", filepath.Join(dir, name), iteration)}
	}
	w, err := trajectory.Create(dir, iteration, &trajectory.WriterOptions{Tag: tag,
		Metadata: map[string]string{"troupe.run": cfg.Name, "troupe.env": cfg.Env.Name, "troupe.mode": cfg.Rollout.Mode}})
	if err != nil {
		return nil, trajectory.ShardInfo{}, err
	}
	defer w.Abort()

	seeds := trainSeeds(cfg.Seed, iteration, cfg.Rollout.Problems)
	total := len(seeds)
	if cfg.Rollout.Mode == rollout.ModeNoTree {
		total *= cfg.Rollout.Branches
	}
	bar := progress.New(env.stderr, fmt.Sprintf("rollout it %d", iteration), "episodes", total)
	d := &rollout.Driver{
		Backend: exp.backend, BackendName: cfg.Generation.Backend, Model: cfg.Generation.Model,
		Env: cfg.Env, Deps: exp.deps(), Render: exp.render, Policies: policies,
		Sampling: cfg.Generation.Train, Config: cfg.Rollout, RunID: cfg.Name, Seed: cfg.Seed, Log: env.log,
		Progress: func(p rollout.Progress) {
			bar.Set(p.Episodes, fmt.Sprintf("calls %d (%.1f/s)", p.Calls, float64(p.Calls)/max(p.Elapsed.Seconds(), 1e-9)))
		},
	}
	sum, err := d.Run(ctx, iteration, seeds, func(rows []trajectory.Step) error { return w.Write(rows...) })
	bar.Finish()
	if err != nil {
		return sum, trajectory.ShardInfo{}, err
	}
	if sum.Episodes > 0 && len(sum.Failed) == sum.Episodes {
		return sum, trajectory.ShardInfo{}, fmt.Errorf("rollout: all %d episodes failed; first: %s: %s", sum.Episodes, sum.Failed[0].EpisodeID, sum.Failed[0].Err)
	}
	info, err := w.Commit()
	if err != nil {
		return sum, info, err
	}
	if err := man.Commit(ctx, info); err != nil {
		return sum, info, err
	}
	return sum, info, nil
}

// printSummary writes a rollout summary for people.
func printSummary(w io.Writer, s *rollout.Summary) {
	fmt.Fprintf(w, "episodes %d  success %.1f%%  failed %d  rows %d  llm calls %d (%d retried)  wall %s\n",
		s.Episodes, 100*s.SuccessRate(), len(s.Failed), s.Rows, s.Calls, s.RetriedCalls, s.Wall.Round(1e6))
	fmt.Fprintf(w, "tokens: prompt %d  completion %d   latency ms: p50 %.1f  p90 %.1f  p99 %.1f  max %.1f\n",
		s.PromptToks, s.OutToks, s.Latency.P50, s.Latency.P90, s.Latency.P99, s.Latency.Max)
	keys := make([]string, 0, len(s.Reward))
	for k := range s.Reward {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > 0 {
		fmt.Fprintln(w, "reward by role/turn:")
		for _, k := range keys {
			st := s.Reward[k]
			fmt.Fprintf(w, "  %-14s n=%-5d mean %+.3f  std %.3f\n", k, st.N, st.Mean, st.Std)
		}
	}
	for i, f := range s.Failed {
		if i == 10 {
			fmt.Fprintf(w, "  … %d more failed episodes\n", len(s.Failed)-10)
			break
		}
		fmt.Fprintf(w, "failed: %s (%s): %s\n", f.EpisodeID, f.ProblemID, strings.TrimSpace(f.Err))
	}
}
