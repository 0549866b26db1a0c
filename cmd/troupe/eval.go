package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/generation"
	"github.com/troupe-rl/troupe/generation/rollout"
	"github.com/troupe-rl/troupe/internal/progress"
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
	res, err := evaluate(ctx, env, exp, policies, -1)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Fprintln(env.stdout, res)
	roles := make([]string, 0, len(res.ByRole))
	for r := range res.ByRole {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	for _, r := range roles {
		fmt.Fprintf(env.stdout, "  solved by %-8s %.1f%%\n", r, 100*res.ByRole[r])
	}
	return nil
}

// evaluate runs the experiment's evaluation with the given policies.
func evaluate(ctx context.Context, env *cliEnv, exp *experiment, policies map[string]rollout.Policy, iteration int64) (*rollout.EvalResult, error) {
	cfg := exp.cfg
	seeds := envs.ValidationSeeds(cfg.Eval.Problems)
	bar := progress.New(env.stderr, "eval", "episodes", len(seeds)*cfg.Eval.Samples)
	d := &rollout.Driver{
		Backend: exp.backend, BackendName: cfg.Generation.Backend, Model: cfg.Generation.Model,
		Env: cfg.Env, Deps: exp.deps(), Render: exp.render, Policies: policies,
		Sampling: cfg.Generation.Eval, Config: cfg.Rollout, RunID: cfg.Name, Seed: cfg.Seed, Log: env.log,
		Progress: func(p rollout.Progress) { bar.Set(p.Episodes, fmt.Sprintf("calls %d", p.Calls)) },
	}
	res, err := d.Evaluate(ctx, max(iteration, 0), seeds, cfg.Eval.Samples, nil)
	bar.Finish()
	return res, err
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
