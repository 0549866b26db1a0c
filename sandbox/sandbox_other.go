//go:build !linux

package sandbox

import (
	"context"
	"log/slog"
	"runtime"
)

// Sandbox is unavailable off Linux: New always fails.
type Sandbox struct{}

// New fails: the sandbox needs Linux namespaces and rlimits.
func New(cfg Config, logger *slog.Logger) (*Sandbox, error) {
	if err := cfg.Validate(); err != nil {
		return nil, errorf("config: %w", err)
	}
	return nil, errorf("not supported on %s", runtime.GOOS)
}

// Run always fails.
func (s *Sandbox) Run(ctx context.Context, p Program, l Limits) (Result, error) {
	return Result{}, errorf("not supported on %s", runtime.GOOS)
}

// Isolation names the mechanism runs get.
func (s *Sandbox) Isolation() string { return "none" }

// Close does nothing.
func (s *Sandbox) Close() error { return nil }
