// Package learner turns trajectory rows into better LoRA adapters: it
// groups rows and computes AT-GRPO advantages (atgrpo), evaluates the
// policy loss (loss) on a GoMLX model of the base decoder (model) with one
// LoRA adapter per policy, steps AdamW per policy, exports adapters in PEFT
// layout (adapter) and checkpoints everything atomically so that a
// restarted learner resumes exactly.
//
// The entry point is [Learner]: New loads the base model and creates (or
// resumes) the adapters, Step trains on one batch of already-loaded rows
// and returns [Metrics], Export writes the adapters for the inference
// server, Checkpoint saves the state. Reading Parquet shards is the
// trajectory package's job (project trajectory.LearnerColumns); [FromStep]
// maps a row one field per field and [Trainable] says which rows to keep.
//
// The reward mix α is not a key of the learner section: env.alpha owns it
// and configs.Experiment.LearnerConfig copies it into Config.Alpha.
// `troupe learn` (cmd/troupe/learn.go) drives the loop over a run's shard
// manifest: step, metrics line, checkpoint (recording the consumed shard
// names), export, then trajectory.Manifest.MarkConsumed; on resume it
// re-applies MarkConsumed for the names the checkpoint holds.
package learner

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/troupe-rl/troupe/internal/config"
	"github.com/troupe-rl/troupe/internal/hf"
	"github.com/troupe-rl/troupe/learner/atgrpo"
	"github.com/troupe-rl/troupe/learner/loss"
)

// Policies modes.
const (
	PoliciesShared  = "shared"
	PoliciesPerRole = "per-role"
	// SharedPolicy is the adapter name when policies: shared.
	SharedPolicy = "shared"
)

// Config is the "learner:" section of an experiment config.
type Config struct {
	// Device is cpu (GoMLX pure-Go backend) or cuda (XLA with the PJRT CUDA plugin). Default cpu.
	Device string `yaml:"device"`
	// CPUParallelism is the pure-Go backend's worker count (set explicitly:
	// the default pool deadlocked intermittently in GoMLX v0.28). Default 8.
	CPUParallelism int `yaml:"cpu_parallelism"`
	// CUDAPlugin is the PJRT CUDA plugin .so; empty: search
	// $PJRT_PLUGIN_LIBRARY_PATH.
	CUDAPlugin string `yaml:"cuda_plugin"`
	// Policies is shared (one adapter for all roles) or per-role. Default per-role.
	Policies string `yaml:"policies"`
	// LR is the AdamW peak learning rate. Default 1e-5.
	LR float64 `yaml:"lr"`
	// WeightDecay is AdamW's decoupled weight decay (LoRA parameters are
	// the only trainable ones). Default 0.01.
	WeightDecay float64 `yaml:"weight_decay"`
	Beta1       float64 `yaml:"beta1"`    // default 0.9
	Beta2       float64 `yaml:"beta2"`    // default 0.999
	AdamEps     float64 `yaml:"adam_eps"` // default 1e-8
	// WarmupSteps of linear warmup. Default 10.
	WarmupSteps int `yaml:"warmup_steps"`
	// TotalSteps is where the cosine decay reaches MinLRRatio·LR; 0 (the
	// default) keeps LR constant after warmup.
	TotalSteps int     `yaml:"total_steps"`
	MinLRRatio float64 `yaml:"min_lr_ratio"` // default 0.3
	// GradClip is the global gradient-norm cap; 0 disables. Default 1.
	GradClip float64 `yaml:"grad_clip"`
	// LoRARank is the adapters' rank r. Default 16.
	LoRARank int `yaml:"lora_rank"`
	// LoRAAlpha is the adapters' scaling numerator. Default 32.
	LoRAAlpha float64 `yaml:"lora_alpha"`
	// LoRATargets are the PEFT module names adapted. Default all seven
	// (q,k,v,o,gate,up,down).
	LoRATargets []string `yaml:"lora_targets"`
	// MicroBatchTokens bounds rows×padded-length of one forward/backward
	// pass; gradients accumulate over micro-batches. Default 4096.
	MicroBatchTokens int `yaml:"micro_batch_tokens"`
	// MiniBatches splits each policy's rows of a learner step into this
	// many slices (rows dealt round-robin) with one optimiser step each, as
	// verl's ppo_mini_batch_size does (default 1: one step per rollout
	// batch). Later slices are trained off-policy: loss.ratio_to: behaviour
	// clips the ratio to the rollout policy as PPO does; learner (default)
	// corrects with the truncated importance weight only.
	MiniBatches int `yaml:"mini_batches"`
	// StepTimeout is the watchdog on one micro-batch's forward+backward: a
	// pass that exceeds it fails the step with a goroutine dump. Default 30m.
	StepTimeout time.Duration `yaml:"step_timeout"`
	// Model is the base model folder (Hugging Face layout: config.json,
	// model.safetensors) whose adapters the learner trains. Empty (the
	// default): generation.tokenizer, which for the embedded server and vLLM
	// is the served model's folder. `troupe learn` resolves it.
	Model string `yaml:"model,omitempty"`
	// Seed for adapter initialisation. Default 1.
	Seed uint64 `yaml:"seed"`
	// Grouping is tree (AT-GRPO: problem, turn, role), no_tree (GRPO
	// baseline: problem), or the ablations agent (problem, role: pools
	// turns) and turn (problem, turn: pools roles). Default tree.
	Grouping string `yaml:"grouping"`
	// Alpha weights the team reward: reward = α·team + (1−α)·local. It is
	// not a key of this section: env.alpha owns it, and the experiment
	// copies it here (configs.Experiment.LearnerConfig). Default 0.7.
	Alpha float64 `yaml:"-"`
	// NoStdNorm skips dividing advantages by the group std.
	NoStdNorm bool `yaml:"no_std_norm"`
	// DropZeroVariance drops groups whose rewards are all equal.
	DropZeroVariance bool `yaml:"drop_zero_variance"`
	// DropLowestMean drops this fraction of groups, lowest mean reward
	// first. Default 0.
	DropLowestMean float64 `yaml:"drop_lowest_mean"`
	// KeepCheckpoints is how many checkpoints to keep. Default 2.
	KeepCheckpoints int `yaml:"keep_checkpoints"`
	// Loss configures the policy loss.
	Loss loss.Config `yaml:"loss"`
}

// SetDefaults fills the documented defaults.
func (c *Config) SetDefaults() {
	c.Device = DeviceCPU
	c.CPUParallelism = 8
	c.Policies = PoliciesPerRole
	c.LR = 1e-5
	c.WeightDecay = 0.01
	c.Beta1, c.Beta2, c.AdamEps = 0.9, 0.999, 1e-8
	c.WarmupSteps = 10
	c.MinLRRatio = 0.3
	c.GradClip = 1
	c.LoRARank = 16
	c.LoRAAlpha = 32
	c.LoRATargets = slices.Clone(hf.AllModules)
	c.MicroBatchTokens = 4096
	c.MiniBatches = 1
	c.StepTimeout = 30 * time.Minute
	c.Seed = 1
	c.Grouping = string(atgrpo.Tree)
	c.Alpha = 0.7
	c.KeepCheckpoints = 2
	c.Loss.SetDefaults()
}

// Validate checks the section.
func (c *Config) Validate() error {
	switch {
	case c.Device != DeviceCPU && c.Device != DeviceCUDA:
		return config.Errorf("device", "must be cpu or cuda, got %q", c.Device)
	case c.CPUParallelism < 1:
		return config.Errorf("cpu_parallelism", "must be ≥ 1, got %d", c.CPUParallelism)
	case c.Policies != PoliciesShared && c.Policies != PoliciesPerRole:
		return config.Errorf("policies", "must be shared or per-role, got %q", c.Policies)
	case !(c.LR > 0 && c.LR < 1):
		return config.Errorf("lr", "must be in (0, 1), got %v", c.LR)
	case !(c.WeightDecay >= 0 && c.WeightDecay < 1):
		return config.Errorf("weight_decay", "must be in [0, 1), got %v", c.WeightDecay)
	case !(c.Beta1 >= 0 && c.Beta1 < 1):
		return config.Errorf("beta1", "must be in [0, 1), got %v", c.Beta1)
	case !(c.Beta2 >= 0 && c.Beta2 < 1):
		return config.Errorf("beta2", "must be in [0, 1), got %v", c.Beta2)
	case !(c.AdamEps > 0):
		return config.Errorf("adam_eps", "must be > 0, got %v", c.AdamEps)
	case c.WarmupSteps < 0:
		return config.Errorf("warmup_steps", "must be ≥ 0, got %d", c.WarmupSteps)
	case c.TotalSteps < 0 || (c.TotalSteps > 0 && c.TotalSteps <= c.WarmupSteps):
		return config.Errorf("total_steps", "must be 0 (no decay) or > warmup_steps (%d), got %d", c.WarmupSteps, c.TotalSteps)
	case !(c.MinLRRatio >= 0 && c.MinLRRatio <= 1):
		return config.Errorf("min_lr_ratio", "must be in [0, 1], got %v", c.MinLRRatio)
	case !(c.GradClip >= 0) || math.IsInf(c.GradClip, 0):
		return config.Errorf("grad_clip", "must be ≥ 0, got %v", c.GradClip)
	case c.LoRARank < 1:
		return config.Errorf("lora_rank", "must be ≥ 1, got %d", c.LoRARank)
	case !(c.LoRAAlpha > 0):
		return config.Errorf("lora_alpha", "must be > 0, got %v", c.LoRAAlpha)
	case c.MiniBatches < 1:
		return config.Errorf("mini_batches", "must be ≥ 1, got %d", c.MiniBatches)
	case c.MicroBatchTokens < 16:
		return config.Errorf("micro_batch_tokens", "must be ≥ 16, got %d", c.MicroBatchTokens)
	case c.StepTimeout <= 0:
		return config.Errorf("step_timeout", "must be > 0, got %v", c.StepTimeout)
	case !slices.Contains(atgrpo.Modes, atgrpo.Mode(c.Grouping)):
		return config.Errorf("grouping", "must be tree, no_tree, agent or turn, got %q", c.Grouping)
	case !(c.DropLowestMean >= 0 && c.DropLowestMean < 1):
		return config.Errorf("drop_lowest_mean", "must be in [0, 1), got %v", c.DropLowestMean)
	case c.KeepCheckpoints < 1:
		return config.Errorf("keep_checkpoints", "must be ≥ 1, got %d", c.KeepCheckpoints)
	}
	if len(c.LoRATargets) == 0 {
		return config.Errorf("lora_targets", "must name at least one of %v", hf.AllModules)
	}
	for _, t := range c.LoRATargets {
		if !slices.Contains(hf.AllModules, t) {
			return config.Errorf("lora_targets", "%q is not one of %v", t, hf.AllModules)
		}
	}
	return nil
}

// PolicyFor returns the adapter (policy) name that trains role.
func (c *Config) PolicyFor(role string) string {
	if c.Policies == PoliciesShared {
		return SharedPolicy
	}
	return role
}

// atgrpoOptions maps the config to atgrpo's options.
func (c *Config) atgrpoOptions() atgrpo.Options {
	return atgrpo.Options{Mode: atgrpo.Mode(c.Grouping), Alpha: c.Alpha, NoStdNorm: c.NoStdNorm,
		DropZeroVariance: c.DropZeroVariance, DropLowestMean: c.DropLowestMean}
}

// String is a short description for logs.
func (c *Config) String() string {
	return fmt.Sprintf("device=%s policies=%s lr=%g r=%d alpha=%g loss={%s}", c.Device, c.Policies, c.LR, c.LoRARank, c.LoRAAlpha, c.Loss)
}
