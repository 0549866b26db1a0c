// Package envs defines the environment contract that every task (Sudoku,
// Sokoban, Plan-Path, code, math, debate) implements, and a registry of
// environments by name.
//
// The contract itself (Env, roles, Outcome, the registry) is built by the
// environments issue; this file holds the experiment config section.
package envs

import "github.com/troupe-rl/troupe/internal/config"

// Config is the "env:" section of an experiment config.
type Config struct {
	// Name of a registered environment: sudoku, sokoban, planpath, … (required).
	Name string `yaml:"name"`
	// Size is the grid side where it applies (0 = the environment's default).
	Size int `yaml:"size,omitempty"`
	// MaxTurns bounds the turns of an episode (default 4).
	MaxTurns int `yaml:"max_turns"`
	// Alpha mixes rewards: reward = alpha·team + (1−alpha)·local (default 0.7).
	Alpha float64 `yaml:"alpha"`
}

// SetDefaults fills the documented defaults.
func (c *Config) SetDefaults() {
	c.MaxTurns = 4
	c.Alpha = 0.7
}

// Validate checks the section.
func (c *Config) Validate() error {
	switch {
	case c.Name == "":
		return config.Errorf("name", "required (e.g. planpath)")
	case c.Size < 0:
		return config.Errorf("size", "must be ≥ 0, got %d", c.Size)
	case c.MaxTurns < 1:
		return config.Errorf("max_turns", "must be ≥ 1, got %d", c.MaxTurns)
	case !(c.Alpha >= 0 && c.Alpha <= 1):
		return config.Errorf("alpha", "must be in [0, 1], got %v", c.Alpha)
	}
	return nil
}
