// Package rollout drives episodes: it steps environments, asks a
// generation.Backend for completions (K branches per agent-turn in tree
// mode), and writes every LLM call as a trajectory row.
//
// The driver is built by the rollout issue; this file holds the experiment
// config section.
package rollout

import "github.com/troupe-rl/troupe/internal/config"

// Config is the "rollout:" section of an experiment config.
type Config struct {
	// Mode is tree (AT-GRPO tree sampling) or no_tree (K independent
	// rollouts per problem, the GRPO baseline). Default tree.
	Mode string `yaml:"mode"`
	// Branches is K, the samples per agent-turn (tree) or per problem (no_tree). Default 4.
	Branches int `yaml:"branches"`
	// Problems is B, the problems per iteration. Default 16.
	Problems int `yaml:"problems"`
}

// SetDefaults fills the documented defaults.
func (c *Config) SetDefaults() {
	c.Mode = "tree"
	c.Branches = 4
	c.Problems = 16
}

// Validate checks the section.
func (c *Config) Validate() error {
	switch {
	case c.Mode != "tree" && c.Mode != "no_tree":
		return config.Errorf("mode", "must be tree or no_tree, got %q", c.Mode)
	case c.Branches < 1:
		return config.Errorf("branches", "must be ≥ 1, got %d", c.Branches)
	case c.Problems < 1:
		return config.Errorf("problems", "must be ≥ 1, got %d", c.Problems)
	}
	return nil
}
