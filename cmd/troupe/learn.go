package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/troupe-rl/troupe/configs"
	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/internal/atomicfile"
	"github.com/troupe-rl/troupe/internal/hf"
	"github.com/troupe-rl/troupe/internal/progress"
	"github.com/troupe-rl/troupe/learner"
	"github.com/troupe-rl/troupe/learner/adapter"
	"github.com/troupe-rl/troupe/learner/trajectory"
)

func init() {
	register(&command{
		name:    "learn",
		args:    "CONFIG [key=value ...] --trajectories DIR [--out DIR] [--follow] [--max-steps N] [--shards-per-step N] [--poll D]",
		summary: "train the adapters on pending trajectory shards (also offline replay)",
		detail: `Takes the shards DIR's manifest lists as pending, oldest first, and trains one learner
step per --shards-per-step shards (default 1: one rollout iteration per step). After each
step it appends the step's metrics to OUT/metrics.jsonl, saves a checkpoint with the names
of the shards consumed so far (OUT/checkpoints/step-NNNNNN, atomic), exports the adapters
(OUT/adapters/<policy>/vNNNNNN, PEFT layout) and only then marks the shards consumed in
the manifest. OUT defaults to runs/<name>.

Running the same command again resumes from the latest checkpoint: it first re-marks the
shards the checkpoint recorded (a learner killed between its checkpoint and the manifest
update would otherwise train them twice), drops metrics lines of steps the checkpoint does
not hold, and exports the checkpoint's adapters if that was cut short. A learner killed at
any moment (even SIGKILL) therefore neither loses nor double-trains a shard.

Without --follow it trains on what is pending and exits (offline replay of a finished
run; nothing pending: nothing done). With --follow it polls DIR for new shards until
interrupted; Ctrl-C (SIGINT/SIGTERM) finishes the current step, saves it and exits.
--max-steps N stops once the learner has taken N steps in all (counting resumed ones).

The base model is learner.model (a Hugging Face folder: config.json, model.safetensors),
or generation.tokenizer when learner.model is empty; the reward mix α is env.alpha.
Roles come from the env section (per-role policies train one adapter each). Rows of the
eval split and rows without server token ids/logprobs (re-tokenized) are not trained on.`,
		run: runLearn,
	})
}

// learnState is OUT/learn.json: which trajectories folder this output
// folder learns from (so that shard names recorded in its checkpoints
// mean the same files).
type learnState struct {
	Trajectories string `json:"trajectories"`
}

// learnLine is one line of metrics.jsonl.
type learnLine struct {
	*learner.Metrics
	Shards  []string `json:"shards"`
	Dropped int      `json:"dropped_rows"`
}

func runLearn(ctx context.Context, env *cliEnv, args []string) error {
	c := commands["learn"]
	fs := newFlags(env, c)
	trajFlag := fs.String("trajectories", "", "trajectories directory holding the shards and their manifest (required)")
	outFlag := fs.String("out", "", "output directory for metrics.jsonl, checkpoints/ and adapters/ (default runs/<name>)")
	follow := fs.Bool("follow", false, "keep polling for new shards until interrupted")
	maxSteps := fs.Int("max-steps", 0, "stop once the learner has taken this many steps in all (0 = no limit)")
	perStep := fs.Int("shards-per-step", 1, "shards trained on per learner step")
	poll := fs.Duration("poll", 2*time.Second, "how often --follow looks for new shards")
	pos, err := parseFlags(env, c, fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) < 1:
		return usagef("missing CONFIG")
	case *trajFlag == "":
		return usagef("--trajectories DIR is required")
	case *maxSteps < 0:
		return usagef("--max-steps must be ≥ 0")
	case *perStep < 1:
		return usagef("--shards-per-step must be ≥ 1")
	case *poll <= 0:
		return usagef("--poll must be > 0")
	}
	trajDir := *trajFlag
	if st, err := os.Stat(trajDir); err != nil || !st.IsDir() {
		if !*follow || (err == nil && !st.IsDir()) || (err != nil && !os.IsNotExist(err)) {
			return usagef("--trajectories %s: not a directory", trajDir)
		}
	}
	cfg, err := configs.Load(pos[0], pos[1:]...)
	if err != nil {
		return err
	}
	lc := cfg.LearnerConfig()
	if err := checkModelDir(cfg); err != nil {
		return err
	}
	roles, err := envRoles(cfg, env)
	if err != nil {
		return err
	}
	out := *outFlag
	if out == "" {
		out = filepath.Join(cfg.RunsDir, cfg.Name)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("learn: %w", err)
	}
	unlock, err := lockDir(out, "learn.lock")
	if err != nil {
		return fmt.Errorf("learn: %w", err)
	}
	defer unlock()
	if err := checkLearnState(out, trajDir); err != nil {
		return err
	}
	man, err := trajectory.OpenManifest(ctx, trajDir)
	if err != nil {
		return fmt.Errorf("learn: %w", err)
	}

	ckRoot := filepath.Join(out, "checkpoints")
	adRoot := filepath.Join(out, "adapters")
	metricsPath := filepath.Join(out, "metrics.jsonl")
	resume, err := learner.LatestCheckpoint(ckRoot)
	if err != nil {
		return fmt.Errorf("learn: %w", err)
	}
	l, err := learner.New(ctx, lc, lc.Model, roles, learner.Options{Resume: resume, Logger: env.log})
	if err != nil {
		var bi badInput
		if errors.As(err, &bi) && bi.BadInput() {
			return &badConfig{key: modelKey(cfg), err: err}
		}
		return err
	}
	defer l.Close()
	if resume != "" {
		env.log.Info("learn: resuming", "checkpoint", resume, "step", l.StepCount(), "consumed", len(l.Consumed()))
	}
	// Heal the crash windows of the previous run, in the order steps write.
	if err := truncateMetrics(metricsPath, l.StepCount()); err != nil {
		return err
	}
	if l.StepCount() > 0 {
		if err := exportMissing(l, adRoot); err != nil {
			return err
		}
	}
	consumed := map[string]bool{}
	for _, n := range l.Consumed() {
		consumed[n] = true
	}
	if err := replayConsumed(ctx, man, l.Consumed(), env); err != nil {
		return err
	}
	mw, err := learner.OpenMetrics(metricsPath)
	if err != nil {
		return err
	}
	defer mw.Close()

	total := 0 // steps this run, when known (for the ETA)
	if !*follow {
		pend, err := man.Pending(ctx)
		if err != nil {
			return fmt.Errorf("learn: %w", err)
		}
		total = (len(pend) + *perStep - 1) / *perStep
		if *maxSteps > 0 {
			total = min(total, max(0, *maxSteps-l.StepCount()))
		}
		if total == 0 {
			fmt.Fprintf(env.stdout, "nothing to do: %d shards pending in %s, learner at step %d\n", len(pend), trajDir, l.StepCount())
			return nil
		}
	}
	bar := progress.New(env.stderr, "learn", "steps", total)
	var done, tokens, rows int
	var shardsDone []string
	start := time.Now()
	for {
		if ctx.Err() != nil {
			break
		}
		if *maxSteps > 0 && l.StepCount() >= *maxSteps {
			break
		}
		pend, err := man.Pending(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return fmt.Errorf("learn: %w", err)
		}
		pend = slices.DeleteFunc(pend, func(s trajectory.ShardState) bool { return consumed[s.Name] })
		if len(pend) == 0 {
			if !*follow {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(*poll):
				if err := man.Reconcile(ctx); err != nil && ctx.Err() == nil {
					return fmt.Errorf("learn: %w", err)
				}
			}
			continue
		}
		batchShards := pend[:min(*perStep, len(pend))]
		batch, dropped, err := readBatch(ctx, trajDir, batchShards)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return err
		}
		// The step, its checkpoint and the manifest update run to the end
		// even when interrupted: Ctrl-C stops at the next safe point.
		sctx := context.WithoutCancel(ctx)
		m, err := l.Step(sctx, batch)
		if err != nil {
			return err
		}
		if err := mw.Write(learnLine{Metrics: m, Shards: batch.Shards, Dropped: dropped}); err != nil {
			return err
		}
		if _, err := l.Checkpoint(ckRoot); err != nil {
			return err
		}
		if _, err := l.Export(adRoot, l.StepCount()); err != nil {
			return err
		}
		if err := man.MarkConsumed(sctx, batch.Shards...); err != nil {
			return fmt.Errorf("learn: %w", err)
		}
		for _, n := range batch.Shards {
			consumed[n] = true
		}
		done++
		tokens += m.Tokens
		rows += m.Rows
		shardsDone = append(shardsDone, batch.Shards...)
		bar.Set(done, fmt.Sprintf("step %d  %.0f tok/s  loss %+.4f  rows %d", m.Step, float64(tokens)/time.Since(start).Seconds(), m.Loss, m.Rows))
	}
	bar.Finish()
	if done == 0 {
		fmt.Fprintf(env.stdout, "nothing trained: learner at step %d\n", l.StepCount())
		return nil
	}
	fmt.Fprintf(env.stdout, "trained %d steps on %d shards (%d rows, %d completion tokens, %.0f tok/s); learner at step %d\n",
		done, len(shardsDone), rows, tokens, float64(tokens)/time.Since(start).Seconds(), l.StepCount())
	fmt.Fprintf(env.stdout, "adapters: %s\n", adapterDirs(adRoot, l))
	return nil
}

// modelKey is the config key that named the learner's base model.
func modelKey(cfg *configs.Experiment) string {
	if cfg.Learner.Model != "" {
		return "learner.model"
	}
	return "generation.tokenizer"
}

// checkModelDir fails with a bad-input error naming the key when the base
// model folder is missing or unreadable.
func checkModelDir(cfg *configs.Experiment) error {
	dir := cfg.LearnerConfig().Model
	if dir == "" {
		return &badConfig{key: "learner.model", err: errors.New("required: the base model folder (Hugging Face layout); set learner.model, or generation.tokenizer to the served model's folder")}
	}
	key := modelKey(cfg)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return &badConfig{key: key, err: fmt.Errorf("%s is not a model folder (want config.json and model.safetensors)", dir)}
	}
	if _, err := hf.ReadModelConfig(dir); err != nil {
		return &badConfig{key: key, err: err}
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.safetensors")); len(m) == 0 {
		return &badConfig{key: key, err: fmt.Errorf("%s holds no .safetensors weights", dir)}
	}
	return nil
}

// envRoles returns the roles of the configured environment in turn order.
func envRoles(cfg *configs.Experiment, env *cliEnv) ([]string, error) {
	// An environment built only to ask its roles runs no program.
	e, err := envs.New(cfg.Env.Name, cfg.Env, envs.Deps{Runner: noRunner{}, Log: env.log})
	if err != nil {
		return nil, &badConfig{key: "env", err: err}
	}
	return e.Roles(), nil
}

// checkLearnState records which trajectories folder out learns from, and
// refuses another one: the checkpoints' consumed names refer to its shards.
func checkLearnState(out, trajDir string) error {
	abs, err := filepath.Abs(trajDir)
	if err != nil {
		return fmt.Errorf("learn: %w", err)
	}
	path := filepath.Join(out, "learn.json")
	data, err := os.ReadFile(path)
	if err == nil {
		var st learnState
		if err := json.Unmarshal(data, &st); err != nil {
			return usagef("%s: %v", path, err)
		}
		if st.Trajectories != abs {
			return usagef("%s learns from %s, not %s: shard names in its checkpoints refer to that folder (use another --out)", out, st.Trajectories, abs)
		}
		return nil
	}
	if !os.IsNotExist(err) {
		return fmt.Errorf("learn: %w", err)
	}
	data, _ = json.MarshalIndent(learnState{Trajectories: abs}, "", "  ")
	return atomicfile.WriteFile(path, append(data, '\n'), 0o644)
}

// replayConsumed re-applies MarkConsumed for the shards the checkpoint
// recorded (idempotent): a learner killed after its checkpoint and before
// the manifest update left them pending.
func replayConsumed(ctx context.Context, man *trajectory.Manifest, names []string, env *cliEnv) error {
	if len(names) == 0 {
		return nil
	}
	listed, err := man.Shards(ctx)
	if err != nil {
		return fmt.Errorf("learn: %w", err)
	}
	state := map[string]bool{}
	for _, s := range listed {
		state[s.Name] = s.Consumed
	}
	var mark, unlisted []string
	for _, n := range names {
		consumed, ok := state[n]
		switch {
		case !ok:
			unlisted = append(unlisted, n)
		case !consumed:
			mark = append(mark, n)
		}
	}
	if len(unlisted) > 0 {
		env.log.Warn("learn: the checkpoint records shards the manifest does not list", "shards", unlisted)
	}
	if len(mark) == 0 {
		return nil
	}
	env.log.Info("learn: re-marking shards the checkpoint consumed", "shards", mark)
	if err := man.MarkConsumed(ctx, mark...); err != nil {
		return fmt.Errorf("learn: %w", err)
	}
	return nil
}

// readBatch reads the learner columns of shards into one batch, verifying
// each file against its manifest entry first.
func readBatch(ctx context.Context, dir string, shards []trajectory.ShardState) (*learner.Batch, int, error) {
	b := &learner.Batch{}
	dropped := 0
	for _, s := range shards {
		path := filepath.Join(dir, s.Name)
		if err := trajectory.VerifyShard(path, s.ShardInfo); err != nil {
			return nil, 0, err
		}
		steps, err := trajectory.ReadFile(ctx, path, &trajectory.ReadOptions{Columns: trajectory.LearnerColumns})
		if err != nil {
			return nil, 0, err
		}
		for i := range steps {
			if ok, _ := learner.Trainable(&steps[i]); !ok {
				dropped++
				continue
			}
			b.Rows = append(b.Rows, learner.FromStep(&steps[i]))
		}
		b.Shards = append(b.Shards, s.Name)
	}
	return b, dropped, nil
}

// truncateMetrics drops metrics lines of steps after step: they were
// written by a run killed before its checkpoint, and the step is redone.
func truncateMetrics(path string, step int) error {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("learn: %w", err)
	}
	var keep bytes.Buffer
	dropped := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var m struct {
			Step int `json:"step"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.Step > step {
			dropped = true // a torn last line, or a step the checkpoint lacks
			continue
		}
		keep.Write(sc.Bytes())
		keep.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("learn: %s: %w", path, err)
	}
	if !dropped {
		return nil
	}
	return atomicfile.WriteFile(path, keep.Bytes(), 0o644)
}

// exportMissing exports the current step's adapters if a killed run
// checkpointed the step but did not export (all of) it.
func exportMissing(l *learner.Learner, root string) error {
	for _, p := range l.Policies() {
		if _, err := os.Stat(adapter.Dir(root, p, l.StepCount())); err == nil {
			continue
		}
		if _, err := adapter.Export(root, p, l.StepCount(), l.LoRA(p), l.Model().Source); err != nil {
			return fmt.Errorf("learn: %w", err)
		}
	}
	return nil
}

func adapterDirs(root string, l *learner.Learner) string {
	var dirs []string
	for _, p := range l.Policies() {
		dirs = append(dirs, adapter.Dir(root, p, l.StepCount()))
	}
	return strings.Join(dirs, " ")
}
