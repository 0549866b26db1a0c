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
	"time"

	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/generation"
	"github.com/troupe-rl/troupe/generation/rollout"
	"github.com/troupe-rl/troupe/internal/progress"
	"github.com/troupe-rl/troupe/internal/report"
)

func init() {
	register(&command{
		name:    "eval",
		args:    "CONFIG [key=value ...] [--adapter DIR] [--json]",
		summary: "evaluate on the fixed validation seeds (pass@1, per-role and per-turn success)",
		detail: `Plays eval.problems validation problems eval.samples times each in no_tree mode with
the generation.eval sampling settings and reports pass@1 (averaged over samples), success by
turn and by role, and the mean reward. --adapter DIR evaluates LoRA adapters: a PEFT folder
(used for every role), or a folder with one subfolder per role (a PEFT folder, or versions
v000001/… of which the newest is used), as troupe run writes under runs/<name>/adapters.`,
		run: runEval,
	})
}

func runEval(ctx context.Context, env *cliEnv, args []string) error {
	c := commands["eval"]
	fs := newFlags(env, c)
	adapter := fs.String("adapter", "", "adapter folder (PEFT, or one subfolder per role)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	pos, err := parseFlags(env, c, fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 {
		return usagef("missing CONFIG")
	}
	exp, err := openExperiment(ctx, env, pos[0], pos[1:])
	if err != nil {
		return err
	}
	defer exp.close()
	policies := map[string]rollout.Policy{}
	if *adapter != "" {
		policies, err = loadAdapters(ctx, exp, *adapter)
		if err != nil {
			return err
		}
	}
	rec, sum, err := evaluate(ctx, env, exp, policies, -1)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rec)
	}
	printEval(env.stdout, rec, sum)
	return nil
}

// printEval writes an evaluation for people.
func printEval(w io.Writer, rec report.EvalRecord, sum *rollout.Summary) {
	fmt.Fprintf(w, "pass@1 %.1f%% over %d problems, %d episodes (%d failed)  reward %.3f ± %.3f  format ok %.0f%%\n",
		100*rec.SuccessRate, rec.Problems, rec.Samples, len(sum.Failed), rec.RewardMean, rec.RewardStd, 100*rec.FormatOKRate)
	turns := make([]int, 0, len(rec.SuccessByTurn))
	for t := range rec.SuccessByTurn {
		turns = append(turns, t)
	}
	sort.Ints(turns)
	for _, t := range turns {
		fmt.Fprintf(w, "  solved by turn %d: %.1f%%\n", t, 100*rec.SuccessByTurn[t])
	}
	roles := make([]string, 0, len(rec.SuccessByRole))
	for r := range rec.SuccessByRole {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	for _, r := range roles {
		fmt.Fprintf(w, "  closed by %-6s %.1f%%\n", r, 100*rec.SuccessByRole[r])
	}
}

// evaluate runs the experiment's evaluation with the given policies and
// scores it.
func evaluate(ctx context.Context, env *cliEnv, exp *experiment, policies map[string]rollout.Policy, iteration int64) (report.EvalRecord, *rollout.Summary, error) {
	cfg := exp.cfg
	seeds := envs.ValidationSeeds(cfg.Eval.Problems)
	bar := progress.New(env.stderr, "eval", "episodes", len(seeds)*cfg.Eval.Samples)
	d := &rollout.Driver{
		Backend: exp.backend, BackendName: cfg.Generation.Backend, Model: cfg.Generation.Model,
		Env: cfg.Env, Deps: exp.deps(), Render: exp.render, Policies: policies,
		Sampling: cfg.Generation.Eval, Config: cfg.Rollout, RunID: cfg.Name, Seed: cfg.Seed, Log: env.log,
		Progress: func(p rollout.Progress) { bar.Set(p.Episodes, fmt.Sprintf("calls %d", p.Calls)) },
	}
	start := time.Now()
	rows, sum, err := d.Evaluate(ctx, max(iteration, 0), seeds, cfg.Eval.Samples)
	bar.Finish()
	if err != nil {
		return report.EvalRecord{}, sum, err
	}
	if sum.Episodes > 0 && len(sum.Failed) == sum.Episodes {
		return report.EvalRecord{}, sum, fmt.Errorf("eval: all %d episodes failed; first: %s: %s", sum.Episodes, sum.Failed[0].EpisodeID, sum.Failed[0].Err)
	}
	rec := report.EvalFromSteps(rows)
	rec.Iteration, rec.Time, rec.WallSeconds = iteration, time.Now(), time.Since(start).Seconds()
	return rec, sum, nil
}

// loadAdapters loads the adapters under dir into the backend and returns
// the role → policy map.
func loadAdapters(ctx context.Context, exp *experiment, dir string) (map[string]rollout.Policy, error) {
	al, ok := exp.backend.(generation.AdapterLoader)
	if !ok {
		return nil, &badConfig{key: "generation.backend", err: fmt.Errorf("backend %q cannot load LoRA adapters", exp.cfg.Generation.Backend)}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	isPEFT := func(d string) bool {
		_, err := os.Stat(filepath.Join(d, "adapter_config.json"))
		return err == nil
	}
	// newest returns d itself if it is a PEFT folder, else its newest v* subfolder.
	newest := func(d string) string {
		if isPEFT(d) {
			return d
		}
		vs, _ := filepath.Glob(filepath.Join(d, "v*"))
		sort.Strings(vs)
		for i := len(vs) - 1; i >= 0; i-- {
			if isPEFT(vs[i]) {
				return vs[i]
			}
		}
		return ""
	}
	policies := map[string]rollout.Policy{}
	roleEnv, err := envs.New(exp.cfg.Env.Name, exp.cfg.Env, exp.deps())
	if err != nil {
		return nil, err
	}
	if p := newest(abs); p != "" {
		name := "eval-" + filepath.Base(p)
		if err := al.LoadAdapter(ctx, name, p); err != nil {
			return nil, err
		}
		for _, r := range roleEnv.Roles() {
			policies[r] = rollout.Policy{Name: name}
		}
		return policies, nil
	}
	for _, r := range roleEnv.Roles() {
		p := newest(filepath.Join(abs, r))
		if p == "" {
			return nil, &usageError{msg: fmt.Sprintf("--adapter %s: no PEFT adapter for role %q (want %s/adapter_config.json or %s/v*/)", dir, r, filepath.Join(dir, r), filepath.Join(dir, r))}
		}
		name := "eval-" + r + "-" + strings.TrimPrefix(filepath.Base(p), "v")
		if err := al.LoadAdapter(ctx, name, p); err != nil {
			return nil, err
		}
		policies[r] = rollout.Policy{Name: name}
	}
	return policies, nil
}
