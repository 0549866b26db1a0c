// Package configs holds troupe's experiment configs: the YAML files in this
// folder and the Experiment struct they decode into. Each section's struct
// lives with the package it configures (envs.Config, generation.Config, …);
// Experiment only composes them and checks what spans sections.
package configs

import (
	"regexp"

	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/generation"
	"github.com/troupe-rl/troupe/generation/rollout"
	"github.com/troupe-rl/troupe/internal/config"
	"github.com/troupe-rl/troupe/learner"
	"github.com/troupe-rl/troupe/learner/sft"
	"github.com/troupe-rl/troupe/sandbox"
)

// Experiment is a whole experiment config (what `troupe run CONFIG` reads).
type Experiment struct {
	// Name names the run; its files live in RunsDir/Name (required).
	Name string `yaml:"name"`
	// Seed seeds task sampling and generation (default 1).
	Seed int64 `yaml:"seed"`
	// RunsDir is the parent folder of runs (default "runs").
	RunsDir string `yaml:"runs_dir"`
	// Iterations is the number of rollout+learn iterations (default 10).
	Iterations int `yaml:"iterations"`
	// TrainTokens ends the run after the first iteration at which the
	// learner has trained on this many completion tokens in all (0: no
	// limit; iterations still bounds the run). Comparisons "on the same
	// number of tokens" set it to another run's total, as the demo's
	// single-agent baseline does.
	TrainTokens int64 `yaml:"train_tokens"`

	Env        envs.Config       `yaml:"env"`
	Generation generation.Config `yaml:"generation"`
	Rollout    rollout.Config    `yaml:"rollout"`
	Learner    learner.Config    `yaml:"learner"`
	Sandbox    sandbox.Config    `yaml:"sandbox"`
	Eval       EvalConfig        `yaml:"eval"`
	SFT        sft.Config        `yaml:"sft"`
}

// EvalConfig is the "eval:" section: evaluation on fixed validation seeds
// (envs.ValidationSeeds) in no_tree mode with the generation.eval sampling.
type EvalConfig struct {
	// Every is the number of iterations between evaluations (default 5);
	// runs also evaluate before the first and after the last iteration.
	Every int `yaml:"every"`
	// Problems is the number of validation problems (default 32).
	Problems int `yaml:"problems"`
	// Samples is the number of samples per problem; pass@1 is averaged
	// over them (default 4).
	Samples int `yaml:"samples"`
}

// SetDefaults fills the documented defaults.
func (c *EvalConfig) SetDefaults() { c.Every, c.Problems, c.Samples = 5, 32, 4 }

// Validate checks the section.
func (c *EvalConfig) Validate() error {
	switch {
	case c.Every < 1:
		return config.Errorf("every", "must be ≥ 1, got %d", c.Every)
	case c.Problems < 1:
		return config.Errorf("problems", "must be ≥ 1, got %d", c.Problems)
	case c.Samples < 1:
		return config.Errorf("samples", "must be ≥ 1, got %d", c.Samples)
	}
	return nil
}

// SetDefaults fills the top-level defaults (sections fill their own).
func (e *Experiment) SetDefaults() {
	e.Seed = 1
	e.RunsDir = "runs"
	e.Iterations = 10
}

var runName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// Validate checks the top-level keys (sections validate themselves first).
func (e *Experiment) Validate() error {
	switch {
	case e.Name == "":
		return config.Errorf("name", "required: the run's folder name")
	case !runName.MatchString(e.Name):
		return config.Errorf("name", "%q: use letters, digits, '.', '_' and '-' (it names a folder)", e.Name)
	case e.RunsDir == "":
		return config.Errorf("runs_dir", "must not be empty")
	case e.Iterations < 1:
		return config.Errorf("iterations", "must be ≥ 1, got %d", e.Iterations)
	case e.TrainTokens < 0:
		return config.Errorf("train_tokens", "must be ≥ 0, got %d", e.TrainTokens)
	}
	return nil
}

// LearnerConfig returns the learner section completed with what other
// sections own: the reward mix α comes from env.alpha (its single owner;
// the rollout mixes rewards with it too) and an empty learner.model falls
// back to generation.tokenizer.
func (e *Experiment) LearnerConfig() learner.Config {
	c := e.Learner
	c.Alpha = e.Env.Alpha
	if c.Model == "" {
		c.Model = e.Generation.Tokenizer
	}
	return c
}

// Load reads an experiment config, applies "key=value" overrides and
// validates it. Errors are *config.Error (exit code 2 at the CLI).
func Load(path string, overrides ...string) (*Experiment, error) {
	var e Experiment
	if err := config.Load(path, &e, overrides...); err != nil {
		return nil, err
	}
	return &e, nil
}
