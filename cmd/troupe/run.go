package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/troupe-rl/troupe/configs"
	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/generation"
	"github.com/troupe-rl/troupe/generation/rollout"
	"github.com/troupe-rl/troupe/internal/atomicfile"
	"github.com/troupe-rl/troupe/internal/config"
	"github.com/troupe-rl/troupe/internal/progress"
	"github.com/troupe-rl/troupe/internal/report"
	"github.com/troupe-rl/troupe/learner"
	"github.com/troupe-rl/troupe/learner/trajectory"
)

func init() {
	register(&command{
		name:    "run",
		args:    "CONFIG [key=value ...] [--print-config]",
		summary: "run an experiment: rollouts, learning, hot-swap, evaluation, report (re-run = resume)",
		detail: `CONFIG is a YAML experiment config (see configs/). Overrides use dotted keys:
  troupe run configs/planpath-tiny.yaml learner.lr=1e-5 env.size=6
Each iteration rolls out rollout.problems training problems into a shard, trains the
adapters on it, exports them (runs/<name>/adapters/<policy>/v<step>/) and hot-swaps them into
the backend; every eval.every iterations (and before the first and after the last) it
evaluates on the fixed validation seeds. Everything lives in runs/<name>/: config.yaml,
trajectories/ (shards + manifest), adapters/, checkpoints/, metrics.jsonl, report.html.
Running the same command again resumes where it stopped; Ctrl-C stops at a safe point.
--print-config prints the fully resolved config (defaults, file, overrides) and exits.`,
		run: runRun,
	})
}

func runRun(ctx context.Context, env *cliEnv, args []string) error {
	c := commands["run"]
	fs := newFlags(env, c)
	printConfig := fs.Bool("print-config", false, "print the resolved config and exit")
	pos, err := parseFlags(env, c, fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 {
		return usagef("missing CONFIG")
	}
	if *printConfig {
		exp, err := configs.Load(pos[0], pos[1:]...)
		if err != nil {
			return err
		}
		out, err := config.Marshal(exp)
		if err != nil {
			return err
		}
		_, err = env.stdout.Write(out)
		return err
	}
	exp, err := openExperiment(ctx, env, pos[0], pos[1:])
	if err != nil {
		return err
	}
	defer exp.close()
	return runExperiment(ctx, env, exp)
}

// runExperiment is the iteration loop. Its state lives in files only, so
// that a killed run resumes: a shard exists for every iteration rolled out
// (trajectories/manifest.json), the learner checkpoint lists the shards it
// trained on, and metrics.jsonl holds the evaluations done.
func runExperiment(ctx context.Context, env *cliEnv, exp *experiment) error {
	cfg := exp.cfg
	runDir := exp.runDir()
	trajDir := filepath.Join(runDir, "trajectories")
	ckptDir := filepath.Join(runDir, "checkpoints")
	adapterDir := filepath.Join(runDir, "adapters")
	for _, d := range []string{trajDir, ckptDir, adapterDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := saveResolvedConfig(env, runDir, exp); err != nil {
		return err
	}
	man, err := trajectory.OpenManifest(ctx, trajDir)
	if err != nil {
		return err
	}
	roleEnv, err := envs.New(cfg.Env.Name, cfg.Env, exp.deps())
	if err != nil {
		return err
	}
	roles := roleEnv.Roles()
	if err := checkModelDir(cfg); err != nil {
		return err
	}
	lcfg := cfg.LearnerConfig()
	resume, err := learner.LatestCheckpoint(ckptDir)
	if err != nil {
		return err
	}
	lrn, err := learner.New(ctx, lcfg, lcfg.Model, roles, learner.Options{Logger: env.log, Resume: resume})
	if err != nil {
		return err
	}
	defer lrn.Close()
	// Replay what the checkpoint says was trained into the manifest (a kill
	// between checkpoint and MarkConsumed).
	if consumed := lrn.Consumed(); len(consumed) > 0 {
		if err := man.MarkConsumed(ctx, consumed...); err != nil {
			return err
		}
	}
	if err := truncateMetrics(filepath.Join(runDir, "metrics.jsonl"), lrn.StepCount()); err != nil {
		return err
	}
	done, err := report.ReadMetrics(filepath.Join(runDir, "metrics.jsonl"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	evaluated := map[int64]bool{}
	// stepTokens[s] is the completion tokens learner step s trained on
	// (train_tokens counts them through each iteration).
	stepTokens := map[int]int64{}
	if done != nil {
		for _, e := range done.Eval {
			evaluated[e.Iteration] = true
		}
		for _, t := range done.Train {
			stepTokens[t.Step] = int64(t.Tokens)
		}
	}
	metrics, err := learner.OpenMetrics(filepath.Join(runDir, "metrics.jsonl"))
	if err != nil {
		return err
	}
	defer metrics.Close()

	policies := map[string]rollout.Policy{}
	// hotSwap loads the learner's current adapters into the backend.
	hotSwap := func() error {
		if lrn.StepCount() == 0 {
			return nil
		}
		al, ok := exp.backend.(generation.AdapterLoader)
		if !ok {
			return &badConfig{key: "generation.backend", err: fmt.Errorf("backend %q cannot hot-swap LoRA adapters", cfg.Generation.Backend)}
		}
		dirs, err := exportAdapters(lrn, adapterDir)
		if err != nil {
			return err
		}
		for _, role := range roles {
			pol := lcfg.PolicyFor(role)
			name := cfg.Name + "-" + pol
			if _, loaded := policies[role]; !loaded || policies[role].Version != int64(lrn.StepCount()) {
				if err := al.LoadAdapter(ctx, name, dirs[pol]); err != nil {
					return fmt.Errorf("hot-swap %s: %w", name, err)
				}
			}
			policies[role] = rollout.Policy{Name: name, Version: int64(lrn.StepCount())}
		}
		return nil
	}
	if err := hotSwap(); err != nil { // a resumed run serves its latest adapters
		return err
	}
	evalAt := func(iteration int64) error {
		if evaluated[iteration] {
			return nil
		}
		rec, _, err := evaluate(ctx, env, exp, policies, iteration)
		if err != nil {
			return err
		}
		rec.Step = lrn.StepCount()
		fmt.Fprintf(env.stderr, "eval after iteration %d (step %d): pass@1 %.1f%%\n", iteration, rec.Step, 100*rec.SuccessRate)
		if err := report.AppendEval(runDir, rec); err != nil {
			return err
		}
		evaluated[iteration] = true
		return nil
	}
	if err := evalAt(-1); err != nil {
		return err
	}

	// With train_tokens the budget is tokens, and so is the bar.
	bar := progress.New(env.stderr, "run "+cfg.Name, "iterations", cfg.Iterations)
	if cfg.TrainTokens > 0 {
		bar = progress.New(env.stderr, "run "+cfg.Name, "tokens", int(cfg.TrainTokens))
	}
	consumed := map[string]bool{}
	for _, n := range lrn.Consumed() {
		consumed[n] = true
	}
	var ran, trained int64
	for it := int64(0); it < int64(cfg.Iterations); it++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("run: stopped before iteration %d: %w", it, err)
		}
		phases := map[string]float64{}
		name := trajectory.ShardName(it, "rollout")
		t0 := time.Now()
		if _, err := os.Stat(filepath.Join(trajDir, name)); errors.Is(err, os.ErrNotExist) {
			sum, _, err := rolloutIteration(ctx, env, exp, trajDir, it, policies)
			if err != nil {
				return err
			}
			env.log.Info("rollout", "iteration", it, "success", sum.SuccessRate(), "rows", sum.Rows, "failed", len(sum.Failed))
			phases["rollout"] = time.Since(t0).Seconds()
		}
		if !consumed[name] {
			t1 := time.Now()
			pending, err := man.Pending(ctx)
			if err != nil {
				return err
			}
			i := slices.IndexFunc(pending, func(s trajectory.ShardState) bool { return s.Name == name })
			if i < 0 {
				return fmt.Errorf("run: shard %s is neither pending nor trained", name)
			}
			batch, _, err := readBatch(ctx, trajDir, pending[i:i+1])
			if err != nil {
				return err
			}
			m, err := lrn.Step(ctx, batch)
			if err != nil {
				return err
			}
			if err := metrics.Write(m); err != nil {
				return err
			}
			stepTokens[m.Step] = int64(m.Tokens)
			phases["learn"] = time.Since(t1).Seconds()
			t2 := time.Now()
			if err := hotSwap(); err != nil {
				return err
			}
			if _, err := lrn.Checkpoint(ckptDir); err != nil {
				return err
			}
			if err := man.MarkConsumed(ctx, name); err != nil {
				return err
			}
			consumed[name] = true
			phases["export"] = time.Since(t2).Seconds()
		}
		trained += stepTokens[int(it)+1] // iteration it trains step it+1
		last := it == int64(cfg.Iterations)-1 || (cfg.TrainTokens > 0 && trained >= cfg.TrainTokens)
		if ((it+1)%int64(cfg.Eval.Every) == 0 || last) && !evaluated[it] {
			t3 := time.Now()
			if err := evalAt(it); err != nil {
				return err
			}
			phases["eval"] = time.Since(t3).Seconds()
		}
		if len(phases) > 0 {
			if err := report.AppendPhases(runDir, report.PhaseRecord{Iteration: it, Step: lrn.StepCount(), Time: time.Now(), Seconds: phases}); err != nil {
				return err
			}
		}
		if cfg.TrainTokens > 0 {
			bar.Set(int(min(trained, cfg.TrainTokens)), fmt.Sprintf("iteration %d, step %d", it+1, lrn.StepCount()))
		} else {
			bar.Set(int(it+1), fmt.Sprintf("step %d", lrn.StepCount()))
		}
		ran = it + 1
		if last {
			if it < int64(cfg.Iterations)-1 {
				env.log.Info("run: train_tokens reached", "iteration", it, "tokens", trained, "train_tokens", cfg.TrainTokens)
			}
			break
		}
	}
	bar.Finish()
	res, err := report.Write(ctx, []string{runDir}, report.Options{})
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "run %s done: %d iterations, %d learner steps, %d completion tokens trained; report: %s\n", cfg.Name, ran, lrn.StepCount(), trained, res.HTML)
	return nil
}

// exportAdapters writes the learner's adapters as version = its step
// count (replacing a half-done export of the same version from a killed
// run, whose training the resumed learner has just repeated exactly).
func exportAdapters(lrn *learner.Learner, root string) (map[string]string, error) {
	v := lrn.StepCount()
	for _, p := range lrn.Policies() {
		dir := filepath.Join(root, p, fmt.Sprintf("v%06d", v))
		if _, err := os.Stat(dir); err == nil {
			if err := os.RemoveAll(dir); err != nil {
				return nil, err
			}
		}
	}
	return lrn.Export(root, v)
}

// saveResolvedConfig writes runs/<name>/config.yaml (what report and resume
// read), warning when a resumed run's config changed.
func saveResolvedConfig(env *cliEnv, runDir string, exp *experiment) error {
	out, err := config.Marshal(exp.cfg)
	if err != nil {
		return err
	}
	path := filepath.Join(runDir, "config.yaml")
	if old, err := os.ReadFile(path); err == nil && string(old) != string(out) {
		env.log.Warn("run: the config differs from the one this run started with; continuing with the new one", "file", path)
	}
	return atomicfile.WriteFile(path, out, 0o644)
}
