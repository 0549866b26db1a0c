// Package sandbox runs model-written programs in isolation with limits on
// time, memory, processes, output and files.
//
// The runner is built by the sandbox issue; this file holds the experiment
// config section.
package sandbox

import (
	"time"

	"github.com/troupe-rl/troupe/internal/config"
)

// Config is the "sandbox:" section of an experiment config.
type Config struct {
	// Require refuses to run without namespace isolation (default false:
	// fall back to rlimits and process-group kill, with a log line).
	Require bool `yaml:"require"`
	// Timeout is the wall-clock limit per run (default 5s).
	Timeout time.Duration `yaml:"timeout"`
	// MemoryMB is the memory limit per run in MiB (default 512).
	MemoryMB int `yaml:"memory_mb"`
	// Workers bounds concurrent runs (default 4).
	Workers int `yaml:"workers"`
}

// SetDefaults fills the documented defaults.
func (c *Config) SetDefaults() {
	c.Timeout = 5 * time.Second
	c.MemoryMB = 512
	c.Workers = 4
}

// Validate checks the section.
func (c *Config) Validate() error {
	switch {
	case c.Timeout <= 0:
		return config.Errorf("timeout", "must be > 0, got %v", c.Timeout)
	case c.MemoryMB < 16:
		return config.Errorf("memory_mb", "must be ≥ 16, got %d", c.MemoryMB)
	case c.Workers < 1:
		return config.Errorf("workers", "must be ≥ 1, got %d", c.Workers)
	}
	return nil
}
