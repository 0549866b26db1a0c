package sft

import (
	"fmt"
	"slices"

	"github.com/troupe-rl/troupe/envs"

	"github.com/troupe-rl/troupe/internal/config"
)

// Config is the "sft:" section of an experiment config. The adapter's
// shape (lora_rank, lora_alpha, lora_targets), the optimiser's betas, weight
// decay and gradient clipping, micro-batching and the device come from the
// "learner:" section; SFT always trains one shared adapter.
type Config struct {
	// Model is the base model folder (Hugging Face layout, with its
	// tokenizer). Default: generation.model.
	Model string `yaml:"model,omitempty"`
	// Steps is the number of optimiser steps. Default 200.
	Steps int `yaml:"steps"`
	// BatchSize is the demonstrations per step. Default 16.
	BatchSize int `yaml:"batch_size"`
	// LR is the AdamW peak learning rate (linear warmup, then cosine decay
	// to 0.1·LR at Steps). Default 2e-3.
	LR float64 `yaml:"lr"`
	// WarmupSteps of linear warmup (at most steps−1). Default 10.
	WarmupSteps int `yaml:"warmup_steps"`
	// Seeds is the number of training seeds played by the oracle for
	// demonstrations (each gives one demonstration per role and turn).
	// Default 256.
	Seeds int `yaml:"seeds"`
	// EvalEvery evaluates greedy success on the validation seeds every N
	// steps (and always after the last step); 0 evaluates only at the end.
	// Default 50.
	EvalEvery int `yaml:"eval_every"`
	// EvalSeeds is the number of validation seeds (envs.ValidationSeeds).
	// Default 32; 0 skips evaluation.
	EvalSeeds int `yaml:"eval_seeds"`
	// EvalMaxTokens caps each greedy completion. Default 0: the longest
	// demonstration completion plus 16 tokens.
	EvalMaxTokens int `yaml:"eval_max_tokens"`
	// Full trains all weights instead of a LoRA adapter. Not supported yet:
	// the learner's GoMLX model keeps base weights frozen.
	Full bool `yaml:"full"`
	// Modes are the env modes (single, multi) whose oracle episodes are
	// demonstrated, each on the same seeds; default: env.mode only. A warm
	// start that both single-agent and multi-agent training begin from (the
	// demo's baselines) demonstrates both. Evaluation uses env.mode.
	Modes []string `yaml:"modes"`
	// LossAgg is how the cross-entropy of a batch is averaged: token-mean
	// (every completion token counts the same, so long completions — a tool
	// agent's program — outweigh short ones — a plan agent's answer) or
	// seq-mean-token-mean (the mean over examples of each example's token
	// mean, so every demonstration counts the same). Default token-mean.
	LossAgg string `yaml:"loss_agg"`
	// Detours is the fraction of seeds whose demonstration starts with 1 to
	// env.max_turns−1 wrong answers (the oracle's answers to other training
	// seeds) before the oracle solves the instance: without them every
	// demonstration ends at turn 0, and the prompts of later turns — the
	// board after a failed attempt, the history of earlier answers — are
	// never seen before RL. Default 0.
	Detours float64 `yaml:"detours"`
	// Merge also writes the base model with the adapter merged into its
	// weights (W + scaling·B·A) to runs/<name>/sft/model, for RL to start
	// from with fresh adapters. Default true.
	Merge bool `yaml:"merge"`
}

// Values of Config.LossAgg (verl's names for the same choices).
const (
	LossAggTokenMean        = "token-mean"
	LossAggSeqMeanTokenMean = "seq-mean-token-mean"
)

// SetDefaults fills the documented defaults.
func (c *Config) SetDefaults() {
	*c = Config{Steps: 200, BatchSize: 16, LR: 2e-3, WarmupSteps: 10, Seeds: 256, EvalEvery: 50, EvalSeeds: 32, Merge: true, LossAgg: LossAggTokenMean}
}

// Validate checks the section.
func (c *Config) Validate() error {
	switch {
	case c.Steps < 1:
		return config.Errorf("steps", "must be ≥ 1, got %d", c.Steps)
	case c.BatchSize < 1:
		return config.Errorf("batch_size", "must be ≥ 1, got %d", c.BatchSize)
	case !(c.LR > 0 && c.LR < 1):
		return config.Errorf("lr", "must be in (0, 1), got %v", c.LR)
	case c.WarmupSteps < 0:
		return config.Errorf("warmup_steps", "must be ≥ 0, got %d", c.WarmupSteps)
	case c.Seeds < 1:
		return config.Errorf("seeds", "must be ≥ 1, got %d", c.Seeds)
	case c.EvalEvery < 0:
		return config.Errorf("eval_every", "must be ≥ 0, got %d", c.EvalEvery)
	case c.EvalSeeds < 0:
		return config.Errorf("eval_seeds", "must be ≥ 0, got %d", c.EvalSeeds)
	case c.EvalMaxTokens < 0:
		return config.Errorf("eval_max_tokens", "must be ≥ 0, got %d", c.EvalMaxTokens)
	case c.LossAgg != LossAggTokenMean && c.LossAgg != LossAggSeqMeanTokenMean:
		return config.Errorf("loss_agg", "must be %q or %q, got %q", LossAggTokenMean, LossAggSeqMeanTokenMean, c.LossAgg)
	case !(c.Detours >= 0 && c.Detours <= 1):
		return config.Errorf("detours", "must be in [0, 1], got %v", c.Detours)
	case c.Full:
		return config.Errorf("full", "full fine-tuning is not supported yet (the learner trains LoRA adapters on frozen base weights); use LoRA with merge: true")
	}
	for i, m := range c.Modes {
		if m != envs.ModeSingle && m != envs.ModeMulti {
			return config.Errorf(fmt.Sprintf("modes[%d]", i), "must be %q or %q, got %q", envs.ModeSingle, envs.ModeMulti, m)
		}
		if slices.Index(c.Modes, m) != i {
			return config.Errorf(fmt.Sprintf("modes[%d]", i), "%q is listed twice", m)
		}
	}
	return nil
}

// EnvConfigs returns env once per demonstrated mode (see Modes).
func (c *Config) EnvConfigs(env envs.Config) []envs.Config {
	if len(c.Modes) == 0 {
		return []envs.Config{env}
	}
	out := make([]envs.Config, len(c.Modes))
	for i, m := range c.Modes {
		out[i] = env
		out[i].Mode = m
	}
	return out
}

// String is a short description for logs.
func (c *Config) String() string {
	return fmt.Sprintf("steps=%d batch=%d lr=%g warmup=%d seeds=%d detours=%g loss_agg=%s eval_every=%d eval_seeds=%d", c.Steps, c.BatchSize, c.LR, c.WarmupSteps, c.Seeds, c.Detours, c.LossAgg, c.EvalEvery, c.EvalSeeds)
}
