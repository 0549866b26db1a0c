// Package sft is the supervised warm start of `troupe sft`: it plays
// training seeds with the environment's solver (envs.Demonstrate) through
// the same prompt path as rollouts (the chat template of the generation
// config, then the model's tokenizer), and trains the learner's GoMLX model
// on the oracle's completions with token-mean cross-entropy
// (learner.SFTStep, loss kind sft) — one shared LoRA adapter for every
// role. It evaluates greedy success on the validation seeds with the
// embedded engine (generation/builtin) as it goes, and writes
//
//	<out>/metrics.jsonl        one line per step (loss, lr, grad norm, time) and per evaluation
//	<out>/adapter/             the adapter, PEFT layout
//	<out>/model/               base + scaling·B·A merged into the weights (merge: true), with
//	                           the base folder's config and tokenizer: a model folder that RL
//	                           can start from with fresh adapters
package sft

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gomlx/compute"

	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/generation/builtin"
	"github.com/troupe-rl/troupe/internal/hf"
	"github.com/troupe-rl/troupe/internal/progress"
	"github.com/troupe-rl/troupe/learner"
	"github.com/troupe-rl/troupe/learner/adapter"
	"github.com/troupe-rl/troupe/learner/loss"
)

// AdapterName is the name of the SFT adapter in the eval engine.
const AdapterName = "sft"

// Options are Run's inputs.
type Options struct {
	Config   Config
	Learner  learner.Config // adapter shape, optimiser, micro-batching, device
	Env      envs.Config
	Deps     envs.Deps
	Render   func(envs.Prompt) (string, error) // rollout.NewRenderer of the generation config
	ModelDir string                            // base model folder
	OutDir   string                            // runs/<name>/sft
	Seed     int64                             // experiment seed: picks the training seeds and the batch order
	Log      *slog.Logger
	Progress io.Writer       // progress bar (nil: none)
	Backend  compute.Backend // overrides the learner's device (tests)
}

// EvalPoint is one evaluation during training.
type EvalPoint struct {
	Step         int     `json:"step"`
	TrainSeconds float64 `json:"train_seconds"` // wall time of training so far (evaluations excluded)
	EvalResult
}

// Result summarises a run.
type Result struct {
	Demos        int         `json:"demos"`
	DemoTokens   int         `json:"demo_tokens"` // completion tokens over all demos
	MaxSeqLen    int         `json:"max_seq_len"`
	Steps        int         `json:"steps"`
	FirstLoss    float64     `json:"first_loss"`
	LastLoss     float64     `json:"last_loss"`
	TrainSeconds float64     `json:"train_seconds"`
	Seconds      float64     `json:"seconds"` // everything: demos, training, evaluations, export
	Evals        []EvalPoint `json:"evals,omitempty"`
	AdapterDir   string      `json:"adapter_dir"`
	MergedDir    string      `json:"merged_dir,omitempty"`
}

// TrainSeeds returns n training seeds for experiment seed: consecutive
// from a seed-specific offset, below the validation range.
func TrainSeeds(seed int64, n int) []int64 {
	base := uint64(seed)*0x9e3779b97f4a7c15 + 0x5f7_0000
	out := make([]int64, n)
	for i := range out {
		out[i] = int64((base + uint64(i)) % uint64(envs.ValidationSeedBase))
	}
	return out
}

// LearnerConfig is the learner config SFT trains with: lc's adapter shape,
// optimiser and device, one shared policy, loss kind sft, c's learning
// rate and warmup with cosine decay to 0.1·lr at c.Steps, one optimiser
// step per batch of c.BatchSize (learner.mini_batches is RL's), and
// micro-batches large enough for a sequence of maxLen tokens.
func LearnerConfig(lc learner.Config, c Config, maxLen int) learner.Config {
	lc.Policies = learner.PoliciesShared
	lc.LR = c.LR
	lc.WarmupSteps = min(c.WarmupSteps, c.Steps-1)
	lc.TotalSteps = c.Steps
	if lc.TotalSteps <= lc.WarmupSteps {
		lc.TotalSteps = 0 // one step: no schedule
	}
	lc.MinLRRatio = 0.1
	lc.MiniBatches = 1
	lc.Loss.Kind = loss.KindSFT
	lc.Loss.KLCoef = 0
	lc.MicroBatchTokens = max(lc.MicroBatchTokens, (maxLen+15)/16*16)
	return lc
}

// Run demonstrates, trains, evaluates and exports; see the package doc.
func Run(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	c := o.Config
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("sft: %w", err)
	}
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("sft: %w", err)
	}
	enc, err := NewEncoder(o.ModelDir, o.Render)
	if err != nil {
		return nil, err
	}
	var demos []Demo
	for _, env := range c.EnvConfigs(o.Env) {
		d, err := Demonstrations(ctx, env, o.Deps, enc, TrainSeeds(o.Seed, c.Seeds), c.Detours, 4)
		if err != nil {
			return nil, err
		}
		demos = append(demos, d...)
	}
	res := &Result{Demos: len(demos), AdapterDir: filepath.Join(o.OutDir, "adapter")}
	examples := make([]learner.Example, len(demos))
	var roles []string
	maxCompletion := 0
	for i, d := range demos {
		examples[i] = learner.Example{Role: d.Role, PromptIDs: d.PromptIDs, CompletionIDs: d.CompletionIDs}
		res.DemoTokens += len(d.CompletionIDs)
		res.MaxSeqLen = max(res.MaxSeqLen, len(d.PromptIDs)+len(d.CompletionIDs))
		maxCompletion = max(maxCompletion, len(d.CompletionIDs))
		if !slices.Contains(roles, d.Role) {
			roles = append(roles, d.Role)
		}
	}
	log.InfoContext(ctx, "sft: demonstrations", "seeds", c.Seeds, "demos", len(demos), "roles", roles,
		"completion_tokens", res.DemoTokens, "max_seq_len", res.MaxSeqLen, "seconds", time.Since(start).Seconds())

	lc := LearnerConfig(o.Learner, c, res.MaxSeqLen)
	l, err := learner.New(ctx, lc, o.ModelDir, roles, learner.Options{Logger: log, Backend: o.Backend})
	if err != nil {
		return nil, fmt.Errorf("sft: %w", err)
	}
	defer l.Close()

	var eng *builtin.Engine
	maxTokens := c.EvalMaxTokens
	if maxTokens == 0 {
		maxTokens = maxCompletion + 16
	}
	if c.EvalSeeds > 0 {
		if eng, err = builtin.Open(o.ModelDir, builtin.Options{}); err != nil {
			return nil, fmt.Errorf("sft: %w", err)
		}
		defer eng.Close()
	}
	mf, err := os.Create(filepath.Join(o.OutDir, "metrics.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("sft: %w", err)
	}
	defer mf.Close()
	menc := json.NewEncoder(mf)

	var bar *progress.Bar
	if o.Progress != nil {
		bar = progress.New(o.Progress, "sft", "steps", c.Steps)
	}
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x5f7))
	order := rng.Perm(len(examples))
	pos := 0
	var trainDur time.Duration
	for step := 1; step <= c.Steps; step++ {
		batch := make([]learner.Example, 0, c.BatchSize)
		for len(batch) < c.BatchSize {
			if pos == len(order) {
				order, pos = rng.Perm(len(examples)), 0
			}
			batch = append(batch, examples[order[pos]])
			pos++
		}
		if c.LossAgg == LossAggSeqMeanTokenMean {
			weighBySequence(batch)
		}
		t0 := time.Now()
		m, err := l.SFTStep(ctx, batch)
		if err != nil {
			return nil, fmt.Errorf("sft: step %d: %w", step, err)
		}
		trainDur += time.Since(t0)
		pm := m.Policies[learner.SharedPolicy]
		if step == 1 {
			res.FirstLoss = m.Loss
		}
		res.LastLoss, res.Steps = m.Loss, step
		line := map[string]any{"step": step, "loss": m.Loss, "tokens": m.Tokens, "lr": pm.LR, "grad_norm": pm.GradNorm,
			"entropy": pm.Entropy, "seconds": m.Seconds, "train_seconds": trainDur.Seconds(), "time": m.Time}
		if err := menc.Encode(line); err != nil {
			return nil, fmt.Errorf("sft: metrics: %w", err)
		}
		if bar != nil {
			bar.Set(step, fmt.Sprintf("loss %.3f", m.Loss))
		}
		last := step == c.Steps
		if !last && (c.EvalEvery == 0 || step%c.EvalEvery != 0) {
			continue
		}
		if err := writeAdapter(res.AdapterDir, l, o.ModelDir); err != nil {
			return nil, err
		}
		if eng == nil {
			continue
		}
		if err := eng.LoadAdapter(ctx, AdapterName, res.AdapterDir); err != nil {
			return nil, fmt.Errorf("sft: %w", err)
		}
		ev, err := Evaluate(ctx, eng, AdapterName, o.Env, o.Deps, enc, envs.ValidationSeeds(c.EvalSeeds), maxTokens)
		if err != nil {
			return nil, err
		}
		pt := EvalPoint{Step: step, TrainSeconds: trainDur.Seconds(), EvalResult: *ev}
		res.Evals = append(res.Evals, pt)
		if err := menc.Encode(map[string]any{"step": step, "eval": pt}); err != nil {
			return nil, fmt.Errorf("sft: metrics: %w", err)
		}
		log.InfoContext(ctx, "sft: eval", "step", step, "loss", m.Loss, "success", ev.SuccessRate, "parse_ok", ev.ParseOK,
			"train_seconds", trainDur.Seconds(), "eval_seconds", ev.Seconds, "sample", truncate(ev.Sample, 120))
	}
	if bar != nil {
		bar.Finish()
	}
	res.TrainSeconds = trainDur.Seconds()
	if c.Merge {
		res.MergedDir = filepath.Join(o.OutDir, "model")
		if err := WriteMerged(res.MergedDir, o.ModelDir, l); err != nil {
			return nil, err
		}
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// weighBySequence sets each example's weight to N/(R·n), N the batch's
// completion tokens, R its examples and n the example's: the learner's
// token mean Σ w·ℓ/N is then the mean over examples of their token means.
func weighBySequence(batch []learner.Example) {
	n := 0
	for _, e := range batch {
		n += len(e.CompletionIDs)
	}
	for i := range batch {
		batch[i].Weight = float64(n) / float64(len(batch)*len(batch[i].CompletionIDs))
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// writeAdapter replaces dir with the shared adapter in PEFT layout.
func writeAdapter(dir string, l *learner.Learner, base string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("sft: %w", err)
	}
	err := adapter.WriteDirAtomic(dir, func(tmp string) error {
		return hf.WriteAdapter(tmp, l.LoRA(learner.SharedPolicy).Adapter(base))
	})
	if err != nil {
		return fmt.Errorf("sft: export adapter: %w", err)
	}
	return nil
}

// WriteMerged writes to dir (replacing it) the model folder base with the
// learner's shared adapter merged into its weights (float32), next to
// copies of base's other files (config, tokenizer, generation config).
func WriteMerged(dir, base string, l *learner.Learner) error {
	w, err := hf.LoadWeights(base)
	if err != nil {
		return fmt.Errorf("sft: merge: %w", err)
	}
	if err := l.LoRA(learner.SharedPolicy).MergeInto(w); err != nil {
		return fmt.Errorf("sft: %w", err)
	}
	ents, err := os.ReadDir(base)
	if err != nil {
		return fmt.Errorf("sft: merge: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("sft: %w", err)
	}
	err = adapter.WriteDirAtomic(dir, func(tmp string) error {
		for _, e := range ents {
			n := e.Name()
			if !e.Type().IsRegular() || strings.HasSuffix(n, ".safetensors") || n == "model.safetensors.index.json" {
				continue
			}
			data, err := os.ReadFile(filepath.Join(base, n))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(tmp, n), data, 0o644); err != nil {
				return err
			}
		}
		return hf.WriteSafetensors(filepath.Join(tmp, "model.safetensors"), w, map[string]string{"format": "pt"}, hf.DtypeF32)
	})
	if err != nil {
		return fmt.Errorf("sft: merge: %w", err)
	}
	return nil
}
