package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"

	"github.com/troupe-rl/troupe/configs"
	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/generation"
	"github.com/troupe-rl/troupe/generation/rollout"
	"github.com/troupe-rl/troupe/sandbox"

	// Registered backends and environments.
	_ "github.com/troupe-rl/troupe/envs/planpath"
	_ "github.com/troupe-rl/troupe/envs/sokoban"
	_ "github.com/troupe-rl/troupe/envs/sudoku"
	_ "github.com/troupe-rl/troupe/generation/builtin/inproc"
	_ "github.com/troupe-rl/troupe/generation/ollama"
	_ "github.com/troupe-rl/troupe/generation/openai"
)

// experiment is an experiment config with the parts every phase needs
// opened: the sandbox, the backend and the prompt renderer.
type experiment struct {
	cfg     *configs.Experiment
	sandbox *sandbox.Sandbox // nil in single-agent mode
	backend generation.Backend
	render  func(envs.Prompt) (string, error)
	log     *slog.Logger
}

// runDir is runs/<name>.
func (e *experiment) runDir() string { return filepath.Join(e.cfg.RunsDir, e.cfg.Name) }

// openExperiment loads and validates the config, then opens what it names.
// Bad input (config, unknown env, model folders) comes back as BadInput
// errors before any work is done.
func openExperiment(ctx context.Context, env *cliEnv, path string, overrides []string) (*experiment, error) {
	cfg, err := configs.Load(path, overrides...)
	if err != nil {
		return nil, err
	}
	e, err := openTasks(env, cfg)
	if err != nil {
		return nil, err
	}
	e.backend, err = generation.Open(ctx, cfg.Generation)
	if err != nil {
		e.close()
		return nil, &badConfig{key: "generation.backend", err: err}
	}
	return e, nil
}

// openTasks opens what an experiment needs to play its environment without
// a backend: the sandbox (multi-agent mode) and the prompt renderer.
func openTasks(env *cliEnv, cfg *configs.Experiment) (*experiment, error) {
	var err error
	e := &experiment{cfg: cfg, log: env.log}
	// Build one environment now so that an unknown name or bad knob fails
	// before any server is contacted.
	if cfg.Env.Mode == envs.ModeMulti || slices.Contains(cfg.SFT.Modes, envs.ModeMulti) {
		sb, err := sandbox.New(cfg.Sandbox, env.log)
		if err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		e.sandbox = sb
	}
	if _, err := envs.New(cfg.Env.Name, cfg.Env, e.deps()); err != nil {
		e.close()
		return nil, &badConfig{key: "env", err: err}
	}
	e.render, err = rollout.NewRenderer(cfg.Generation)
	if err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

func (e *experiment) deps() envs.Deps {
	d := envs.Deps{Log: e.log}
	if e.sandbox != nil {
		d.Runner = e.sandbox
	}
	return d
}

func (e *experiment) close() {
	if e.backend != nil {
		e.backend.Close()
	}
	if e.sandbox != nil {
		e.sandbox.Close()
	}
}

// badConfig marks an error found while opening what the config names.
type badConfig struct {
	key string
	err error
}

func (b *badConfig) Error() string  { return fmt.Sprintf("config %s: %v", b.key, b.err) }
func (b *badConfig) Unwrap() error  { return b.err }
func (b *badConfig) BadInput() bool { return true }
