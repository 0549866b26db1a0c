package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/troupe-rl/troupe/envs"
	_ "github.com/troupe-rl/troupe/envs/planpath"
	_ "github.com/troupe-rl/troupe/envs/sokoban"
	_ "github.com/troupe-rl/troupe/envs/sudoku"
	"github.com/troupe-rl/troupe/internal/config"
	"github.com/troupe-rl/troupe/sandbox"
)

func init() {
	register(&command{
		name:    "env",
		args:    "sample NAME [--n N] [--seed S] [--size N] [--eval] [key=value ...]",
		summary: "sample environment tasks as JSONL",
		detail: `troupe env sample NAME prints N tasks of environment NAME (sudoku, sokoban,
planpath), one JSON object per line: env, id, seed, split, size, roles,
max_turns, board (the text the prompts show), solution_len (shortest moves,
or empty cells for sudoku) and solution (the solver's answer).
Seeds are S, S+1, …; --eval samples the fixed validation seeds instead
(2^40+S, …), which never overlap the training seeds. key=value overrides
set env config keys, e.g. planpath.wall_prob=0.3 sokoban.boxes=2 sudoku.empty=8.`,
		run: runEnv,
	})
}

// noRunner lets multi-agent environments be built for what never runs a
// program (sampling tasks, asking the roles).
type noRunner struct{}

func (noRunner) Run(context.Context, sandbox.Program, sandbox.Limits) (sandbox.Result, error) {
	return sandbox.Result{}, errors.New("troupe: this command runs no programs")
}

func runEnv(ctx context.Context, env *cliEnv, args []string) error {
	c := commands["env"]
	fs := newFlags(env, c)
	n := fs.Int("n", 10, "number of tasks")
	seed := fs.Int64("seed", 0, "first seed")
	size := fs.Int("size", 0, "grid size (0 = the environment's default)")
	eval := fs.Bool("eval", false, "sample validation seeds")
	pos, err := parseFlags(env, c, fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 || pos[0] != "sample" {
		return usagef("want the verb sample")
	}
	if len(pos) < 2 {
		return usagef("missing NAME (one of %v)", envs.Names())
	}
	name := pos[1]
	switch {
	case *n < 1:
		return usagef("--n must be ≥ 1, got %d", *n)
	case *seed < 0:
		return usagef("--seed must be ≥ 0, got %d", *seed)
	case *size < 0:
		return usagef("--size must be ≥ 0, got %d", *size)
	case !*eval && *seed+int64(*n) > envs.ValidationSeedBase:
		return usagef("training seeds must stay below %d (use --eval for validation seeds)", envs.ValidationSeedBase)
	}
	var cfg envs.Config
	if err := config.Decode("command line", nil, &cfg, append([]string{"name=" + name}, pos[2:]...)...); err != nil {
		return err
	}
	if *size > 0 {
		cfg.Size = *size
	}
	e, err := envs.New(name, cfg, envs.Deps{Runner: noRunner{}, Log: env.log})
	if err != nil {
		return err
	}
	first := *seed
	if *eval {
		first += envs.ValidationSeedBase
	}
	enc := json.NewEncoder(env.stdout)
	for i := range int64(*n) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := e.Reset(first + i); err != nil {
			return err
		}
		if err := enc.Encode(e.Task()); err != nil {
			return fmt.Errorf("env sample: %w", err)
		}
	}
	return nil
}
