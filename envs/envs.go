// Package envs defines the environment contract that every task (Sudoku,
// Sokoban, Plan-Path, code, math, debate) implements, and a registry of
// environments by name in the style of database/sql drivers.
//
// # Who owns what
//
// An environment package (envs/sudoku, envs/sokoban, envs/planpath, …)
// implements [Env] and registers a [Factory] in its init function; users
// blank-import it and call [New] with the experiment's [Config]:
//
//	import _ "github.com/troupe-rl/troupe/envs/planpath"
//
//	e, err := envs.New("planpath", cfg, envs.Deps{Runner: runner})
//	if err := e.Reset(seed); err != nil { … }
//	for !e.Done() {
//		role, turn := e.Next()
//		p, _ := e.Prompt(role)            // system + user text for the chat renderer
//		text := generate(p)               // the rollout engine's business
//		out, err := e.Step(ctx, role, text)
//		…                                 // out.Reward, out.Info go into the trajectory row
//	}
//
// The rollout engine owns the episode loop, sampling and tree search; the
// environment owns the task, the turn protocol, parsing of model output and
// rewards. The environment never calls a model.
//
// # Determinism
//
// Reset(seed) builds the same instance for the same seed and Config on every
// machine and Go version (generators use their own PRNG, not math/rand).
// Given the same sequence of completions, Step returns the same Outcomes and
// Prompt the same text. Tool code run through a [sandbox.Runner] is the one
// source of non-determinism a model can introduce (a program that reads the
// clock); the environment itself adds none.
//
// # Tree sampling and concurrency
//
// An Env is a value owned by one goroutine at a time: its methods must not be
// called concurrently. Clone returns a deep, independent copy; clones share
// nothing mutable with the original (they may share the injected Runner,
// which is safe for concurrent use by its own contract), so K branches may be
// stepped in K goroutines. Tree sampling steps copies, never the original.
//
// # Model output
//
// Parsers never panic and never return an error for bad model output: a
// completion that cannot be understood is a legal action with a penalty,
// and the reason is recorded in Outcome.Info["verdict"]. Step returns an
// error only when the caller broke the contract (wrong role, episode over,
// not reset), the context was cancelled, or the infrastructure failed (the
// sandbox could not start a program) — never because of what the model wrote.
//
// # Seeds
//
// Training seeds are in [0, [ValidationSeedBase]); validation uses the fixed
// seeds [ValidationSeeds] returns, which lie at and above ValidationSeedBase,
// so the two sets never overlap.
package envs

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/troupe-rl/troupe/internal/config"
	"github.com/troupe-rl/troupe/sandbox"
)

// Env is one episode of one task. See the package doc for the protocol,
// ownership and determinism rules.
type Env interface {
	// Reset builds the instance for seed and starts a new episode at turn 0.
	// It must be called before any other method except Roles and Clone.
	// Errors are configuration errors (e.g. an unsupported size).
	Reset(seed int64) error
	// Task describes the current instance (id, seed, board, solver length).
	Task() Task
	// Roles lists the agents in turn order; a turn is one Step per role, in
	// this order. The slice is the caller's to keep.
	Roles() []string
	// Next returns the role expected to act and the current turn (0-based),
	// or ("", turn) once the episode is done.
	Next() (role string, turn int)
	// Prompt returns the prompt for role at the current turn. It is an error
	// to ask for a role other than the one Next names.
	Prompt(role string) (Prompt, error)
	// Step feeds role's completion text and returns its outcome. ctx bounds
	// whatever the step runs (a tool agent's program).
	Step(ctx context.Context, role, completion string) (Outcome, error)
	// Done reports that the episode is over (solved, or max turns reached).
	Done() bool
	// Clone returns an independent deep copy in the same state.
	Clone() Env
}

// Solver is implemented by environments with a built-in solver (used for
// oracle tests and supervised demonstrations).
type Solver interface {
	// Solve returns a correct answer from the current state, in the format the
	// final (plan) agent answers in: a JSON value such as ["U","R"].
	Solve() (string, error)
}

// ProgramSolver is implemented by environments whose tool agent can be
// demonstrated a general solver: a Python program that reads the board on
// standard input and prints the answer line, the same text for every
// instance. Oracle writes it for the "tool" role instead of a program that
// prints a precomputed answer.
type ProgramSolver interface {
	// SolverProgram returns the program's source, or "" when there is none.
	SolverProgram() string
}

// Task describes one problem instance. It is JSON-serialisable (what
// `troupe env sample` prints).
type Task struct {
	Env      string   `json:"env"`       // registered name
	ID       string   `json:"id"`        // problem id, unique per (env, size, knobs, seed)
	Seed     int64    `json:"seed"`      // the seed Reset was given
	Split    string   `json:"split"`     // "train" or "eval" (from the seed range)
	Size     int      `json:"size"`      // grid side
	Roles    []string `json:"roles"`     // turn order
	MaxTurns int      `json:"max_turns"` // turns before the episode ends unsolved
	Board    string   `json:"board"`     // the initial state as the prompts render it
	// SolutionLen is the solver's solution length: moves for Plan-Path and
	// Sokoban (shortest), empty cells for Sudoku.
	SolutionLen int `json:"solution_len"`
	// Solution is the solver's answer in the final agent's format (JSON text).
	Solution string `json:"solution,omitempty"`
}

// Message is one chat message of a prompt.
type Message struct {
	Role    string `json:"role"` // "system" or "user"
	Content string `json:"content"`
}

// Prompt is what a role sees at one turn. Each turn is a fresh single-turn
// prompt: history the role needs is written into User by the environment.
type Prompt struct {
	System string `json:"system,omitempty"` // role instructions; may be empty
	User   string `json:"user"`             // task, state and history
}

// Messages returns the prompt as chat messages (system first when non-empty),
// for renderers that apply a chat template.
func (p Prompt) Messages() []Message {
	var m []Message
	if p.System != "" {
		m = append(m, Message{Role: "system", Content: p.System})
	}
	return append(m, Message{Role: "user", Content: p.User})
}

// Text returns the prompt as plain text (system, blank line, user), for
// models without a chat template.
func (p Prompt) Text() string {
	if p.System == "" {
		return p.User
	}
	return p.System + "\n\n" + p.User
}

// Outcome is the result of one Step.
type Outcome struct {
	Local   float64 `json:"reward_local"` // the role's own performance
	Team    float64 `json:"reward_team"`  // the team's progress on the task
	Reward  float64 `json:"reward"`       // Mix(alpha, Team, Local)
	Done    bool    `json:"done"`         // the episode is over
	Success bool    `json:"success"`      // the task is solved
	// Info holds env-specific verdicts: "verdict" (ok, or why the output was
	// rejected), parsed actions, tool exit status and stdout excerpt, ….
	// Values are JSON-serialisable (strings, numbers, bools, slices, maps).
	Info map[string]any `json:"info,omitempty"`
}

// Mix returns alpha·team + (1−alpha)·local.
func Mix(alpha, team, local float64) float64 {
	return alpha*team + (1-alpha)*local
}

// Deps are the run-time dependencies an environment may need. The zero
// value works for environments and modes that need none.
type Deps struct {
	// Runner runs model-written code (the tool agent's programs). Required
	// by environments with a code-running role in multi-agent mode.
	Runner sandbox.Runner
	// Log receives debug lines; nil means slog.Default().
	Log *slog.Logger
}

// Logger returns d.Log or slog.Default().
func (d Deps) Logger() *slog.Logger {
	if d.Log != nil {
		return d.Log
	}
	return slog.Default()
}

// Factory builds an environment from a validated config. It returns an Env
// that still needs Reset. Errors for bad config values should be made with
// config.Errorf naming the key, so the CLI reports them as bad input.
type Factory func(cfg Config, deps Deps) (Env, error)

var (
	mu        sync.RWMutex
	factories = map[string]Factory{}
)

// Register makes an environment available by name. It panics if f is nil or
// name is already registered; call it from the environment package's init.
func Register(name string, f Factory) {
	mu.Lock()
	defer mu.Unlock()
	if f == nil {
		panic("envs: Register factory is nil for " + name)
	}
	if _, dup := factories[name]; dup {
		panic("envs: Register called twice for " + name)
	}
	factories[name] = f
}

// Names returns the registered environment names, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	return slices.Sorted(maps.Keys(factories))
}

// New validates cfg and builds the environment registered as name (cfg.Name
// is ignored; pass a Config from DefaultConfig or a loaded experiment).
func New(name string, cfg Config, deps Deps) (Env, error) {
	mu.RLock()
	f, ok := factories[name]
	mu.RUnlock()
	if !ok {
		return nil, &unknownError{name: name, known: Names()}
	}
	cfg.Name = name
	if err := config.Validate(&cfg); err != nil {
		return nil, fmt.Errorf("envs: %s: %w", name, err)
	}
	e, err := f(cfg, deps)
	if err != nil {
		return nil, fmt.Errorf("envs: %s: %w", name, err)
	}
	return e, nil
}

type unknownError struct {
	name  string
	known []string
}

func (e *unknownError) Error() string {
	msg := fmt.Sprintf("envs: unknown environment %q (forgotten import?)", e.name)
	if len(e.known) > 0 {
		msg += "; registered: " + strings.Join(e.known, ", ")
	}
	return msg
}

// BadInput marks an unknown name as the user's mistake (exit code 2).
func (e *unknownError) BadInput() bool { return true }

// ValidationSeedBase is the first validation seed; training seeds lie below.
const ValidationSeedBase int64 = 1 << 40

// ValidationSeeds returns the n fixed validation seeds
// ValidationSeedBase, ValidationSeedBase+1, ….
func ValidationSeeds(n int) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = ValidationSeedBase + int64(i)
	}
	return s
}

// Split names the seed range a seed belongs to: "eval" at or above
// ValidationSeedBase, "train" below.
func Split(seed int64) string {
	if seed >= ValidationSeedBase {
		return "eval"
	}
	return "train"
}
