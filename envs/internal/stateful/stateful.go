// Package stateful is the turn protocol shared by the grid games (Sudoku,
// Sokoban, Plan-Path), after PettingLLMs' stateful_env: a tool agent writes a
// Python program that prints an action list, which is simulated on a copy of
// the board, and a plan agent, who sees the program, its output and its
// actions, answers after "####" with the action list that is applied to the
// real board. Single-agent mode is the plan agent alone.
//
// A game implements [Game] (board, parsing of answers, moves, rewards,
// solver); [New] wraps it into an envs.Env. Rewards per step:
//
//	tool: local = r(tool actions simulated on a copy) or ParsePenalty
//	      team  = r(the last real step), 0 before the first
//	plan: local = team = r(its actions applied to the board), or
//	      local = ParsePenalty, team = 0 when its answer cannot be read;
//	      the game's Fail value is added to both on the last turn of an
//	      unsolved episode.
//
// and Reward = α·team + (1−α)·local. Every Outcome.Info has "role", "turn",
// "verdict" (ok, no_code, tool_failed, no_actions, bad_actions, no_answer,
// bad_answer) and, when not ok, "reason".
package stateful

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/envs/internal/parse"
	"github.com/troupe-rl/troupe/internal/config"
	"github.com/troupe-rl/troupe/sandbox"
)

// The roles, in turn order.
const (
	RoleTool = "tool"
	RolePlan = "plan"
)

// Game is one grid puzzle's state and rules. Methods are called by one
// goroutine at a time; Clone must deep-copy.
type Game interface {
	// Board renders the current state (also the tool program's stdin).
	Board() string
	// Apply performs a parsed action at turn (0-based) and returns its reward
	// and details for Info (JSON-serialisable; "summary" is shown in prompts).
	Apply(a any, turn int) (reward float64, info map[string]any)
	// Parse reads an action from a parsed answer; max caps list lengths.
	Parse(v parse.Value, max int) (any, error)
	// Solved reports that the puzzle is solved.
	Solved() bool
	// Clone returns an independent copy.
	Clone() Game
	// Solve returns a correct answer from the current state (JSON text).
	Solve() (string, error)
}

// Spec describes a game to New.
type Spec struct {
	Name    string // registered env name, e.g. "planpath"
	Title   string // for prompts, e.g. "Plan-Path"
	Variant string // instance knobs for problem ids, e.g. "10x10-w0.22"
	Size    int
	// Rules explains the board, the legend and the goal (plain text).
	Rules string
	// Answer describes the answer format, e.g. `a JSON list of moves such as ["U","R"]`.
	Answer string
	// Fail is added to both rewards on the last step of an unsolved episode.
	Fail float64
	// Program is a general solver in Python 3 (reads Board() on stdin,
	// prints "**Actions List**: ANSWER"), the tool agent's demonstration;
	// "" for none (see envs.ProgramSolver).
	Program string
	// Generate builds the instance for a seed; solutionLen and solution are
	// the solver's (see envs.Task).
	Generate func(seed int64) (g Game, solutionLen int, solution string, err error)
}

// Env implements envs.Env over a Game.
type Env struct {
	spec  *Spec
	cfg   envs.Config
	deps  envs.Deps
	roles []string

	task    envs.Task
	game    Game
	turn    int
	next    int // index into roles
	done    bool
	success bool
	reset   bool
	team    float64 // reward of the last real step
	tool    toolRecord
	history []string // one line per finished turn, for prompts
}

type toolRecord struct {
	set     bool
	code    string
	output  string
	actions string // rendered action list, or "" when none
	verdict string
}

// New returns the environment for spec; multi-agent mode needs deps.Runner.
func New(spec *Spec, cfg envs.Config, deps envs.Deps) (*Env, error) {
	e := &Env{spec: spec, cfg: cfg, deps: deps}
	switch cfg.Mode {
	case envs.ModeSingle:
		e.roles = []string{RolePlan}
	default:
		if deps.Runner == nil {
			return nil, errors.New("multi-agent mode needs a sandbox.Runner in envs.Deps (or env.mode: single)")
		}
		e.roles = []string{RoleTool, RolePlan}
	}
	return e, nil
}

// Reset implements envs.Env.
func (e *Env) Reset(seed int64) error {
	g, n, sol, err := e.spec.Generate(seed)
	if err != nil {
		return fmt.Errorf("envs: %s: seed %d: %w", e.spec.Name, seed, err)
	}
	*e = Env{spec: e.spec, cfg: e.cfg, deps: e.deps, roles: e.roles, game: g, reset: true}
	e.task = envs.Task{
		Env:         e.spec.Name,
		ID:          fmt.Sprintf("%s/%s/%d", e.spec.Name, e.spec.Variant, seed),
		Seed:        seed,
		Split:       envs.Split(seed),
		Size:        e.spec.Size,
		Roles:       e.Roles(),
		MaxTurns:    e.cfg.MaxTurns,
		Board:       g.Board(),
		SolutionLen: n,
		Solution:    sol,
	}
	return nil
}

// Task implements envs.Env.
func (e *Env) Task() envs.Task {
	t := e.task
	t.Roles = append([]string(nil), t.Roles...)
	return t
}

// Roles implements envs.Env.
func (e *Env) Roles() []string { return append([]string(nil), e.roles...) }

// Next implements envs.Env.
func (e *Env) Next() (string, int) {
	if e.done || !e.reset {
		return "", e.turn
	}
	return e.roles[e.next], e.turn
}

// Done implements envs.Env.
func (e *Env) Done() bool { return e.done }

// Solve implements envs.Solver from the current state.
func (e *Env) Solve() (string, error) {
	if !e.reset {
		return "", errNotReset
	}
	return e.game.Solve()
}

// SolverProgram implements envs.ProgramSolver.
func (e *Env) SolverProgram() string { return e.spec.Program }

// Clone implements envs.Env.
func (e *Env) Clone() envs.Env {
	c := *e
	if e.game != nil {
		c.game = e.game.Clone()
	}
	c.roles = append([]string(nil), e.roles...)
	c.task.Roles = append([]string(nil), e.task.Roles...)
	c.history = append([]string(nil), e.history...)
	return &c
}

var errNotReset = errors.New("envs: Reset not called")

func (e *Env) check(role string) error {
	switch {
	case !e.reset:
		return errNotReset
	case e.done:
		return fmt.Errorf("envs: %s: episode is over", e.spec.Name)
	case role != e.roles[e.next]:
		return fmt.Errorf("envs: %s: role %q cannot act now; next is %q", e.spec.Name, role, e.roles[e.next])
	}
	return nil
}

// Step implements envs.Env.
func (e *Env) Step(ctx context.Context, role, completion string) (envs.Outcome, error) {
	if err := e.check(role); err != nil {
		return envs.Outcome{}, err
	}
	if err := ctx.Err(); err != nil {
		return envs.Outcome{}, fmt.Errorf("envs: %s: %w", e.spec.Name, err)
	}
	info := map[string]any{"role": role, "turn": e.turn}
	var local, team float64
	if role == RoleTool {
		var err error
		local, err = e.stepTool(ctx, completion, info)
		if err != nil {
			return envs.Outcome{}, err
		}
		team = e.team
	} else {
		local, team = e.stepPlan(completion, info)
	}
	e.next++
	if e.next == len(e.roles) {
		e.next = 0
		e.turn++
		e.tool = toolRecord{}
		if !e.done && e.turn >= e.cfg.MaxTurns {
			e.done = true
			local += e.spec.Fail
			team += e.spec.Fail
			info["fail_penalty"] = e.spec.Fail
		}
	}
	if info["verdict"] == nil {
		info["verdict"] = "ok"
	}
	return envs.Outcome{
		Local: local, Team: team, Reward: envs.Mix(e.cfg.Alpha, team, local),
		Done: e.done, Success: e.success, Info: info,
	}, nil
}

func reject(info map[string]any, verdict, reason string) {
	info["verdict"] = verdict
	info["reason"] = reason
}

func (e *Env) stepTool(ctx context.Context, completion string, info map[string]any) (float64, error) {
	rec := toolRecord{}
	defer func() { e.tool = rec; e.tool.set = true; e.tool.verdict, _ = info["verdict"].(string) }()
	code, how := parse.Code(completion)
	info["code_from"] = how
	rec.code = code
	if strings.TrimSpace(code) == "" {
		reject(info, "no_code", "the reply has no program")
		return e.cfg.ParsePenalty, nil
	}
	tc := e.cfg.Tool
	res, err := e.deps.Runner.Run(ctx, sandbox.Program{Lang: "python", Source: code, Stdin: []byte(e.game.Board())},
		sandbox.Limits{Wall: tc.Timeout, MemoryBytes: int64(tc.MemoryMB) << 20, OutputBytes: tc.OutputBytes})
	if err != nil {
		return 0, fmt.Errorf("envs: %s: tool program: %w", e.spec.Name, err)
	}
	if res.Status == sandbox.StatusSetup {
		return 0, fmt.Errorf("envs: %s: tool program: sandbox setup failed: %s", e.spec.Name, res.Detail)
	}
	e.deps.Logger().Debug("envs: tool program", "env", e.spec.Name, "turn", e.turn, "status", res.Status, "exit_code", res.ExitCode, "wall", res.Wall)
	stdout := parse.Excerpt(string(res.Stdout), tc.ExcerptBytes)
	info["exit_status"] = string(res.Status)
	info["exit_code"] = res.ExitCode
	info["stdout"] = stdout
	if len(res.Stderr) > 0 {
		info["stderr"] = parse.Excerpt(string(res.Stderr), min(tc.ExcerptBytes, 500))
	}
	rec.output = stdout
	if res.Status != sandbox.StatusOK {
		rec.output = stdout + parse.Excerpt(string(res.Stderr), min(tc.ExcerptBytes, 500))
		reason := fmt.Sprintf("program stopped: %s", res.Status)
		if res.Status == sandbox.StatusExit {
			reason = fmt.Sprintf("program exited with status %d", res.ExitCode)
		}
		if res.Detail != "" {
			reason += " (" + res.Detail + ")"
		}
		reject(info, "tool_failed", reason)
		return e.cfg.ParsePenalty, nil
	}
	v, how, err := parse.ToolActions(string(res.Stdout))
	info["actions_from"] = how
	if err != nil {
		reject(info, "no_actions", err.Error())
		return e.cfg.ParsePenalty, nil
	}
	a, err := e.game.Parse(v, e.cfg.MaxActions)
	if err != nil {
		reject(info, "bad_actions", err.Error())
		return e.cfg.ParsePenalty, nil
	}
	sim := e.game.Clone()
	r, simInfo := sim.Apply(a, e.turn)
	rec.actions = fmt.Sprint(simInfo["action"])
	info["action"] = simInfo["action"]
	info["sim"] = simInfo
	info["sim_solved"] = sim.Solved()
	return r, nil
}

func (e *Env) stepPlan(completion string, info map[string]any) (local, team float64) {
	payload, ok := parse.Answer(completion)
	var a any
	var err error
	switch {
	case !ok:
		reject(info, "no_answer", "no answer after ####")
	default:
		var v parse.Value
		if v, err = parse.List(payload); err == nil {
			a, err = e.game.Parse(v, e.cfg.MaxActions)
		}
		if err != nil {
			reject(info, "bad_answer", err.Error())
		}
	}
	if !ok || err != nil {
		e.team = 0
		e.history = append(e.history, fmt.Sprintf("turn %d: the plan agent's answer could not be read (%s); the board did not change.", e.turn+1, info["reason"]))
		return e.cfg.ParsePenalty, 0
	}
	r, ginfo := e.game.Apply(a, e.turn)
	for k, v := range ginfo {
		info[k] = v
	}
	e.team = r
	if e.game.Solved() {
		e.done, e.success = true, true
	}
	e.history = append(e.history, fmt.Sprintf("turn %d: the plan agent answered %v: %v", e.turn+1, ginfo["action"], ginfo["summary"]))
	return r, r
}

// Prompt implements envs.Env. See the package doc of the game for the text.
func (e *Env) Prompt(role string) (envs.Prompt, error) {
	if err := e.check(role); err != nil {
		return envs.Prompt{}, err
	}
	var sys, user strings.Builder
	multi := len(e.roles) > 1
	s := e.spec
	switch {
	case e.cfg.Prompt == envs.PromptBrief:
		e.briefSystem(&sys, role, multi)
	case role == RoleTool:
		fmt.Fprintf(&sys, "You are the tool agent in a team of two solving a %s puzzle. You write a Python 3 program that solves it; your teammate, the plan agent, sees the program, its output and its action list, and gives the final answer.\n\n", s.Title)
		fmt.Fprintf(&sys, "Reply with one ```python code block. The program reads the board from standard input (the same text as the board below) and must print exactly one line of the form\n**Actions List**: ANSWER\nwhere ANSWER is %s. Use the standard library only; the program is stopped after %v. A breadth-first search or A* over states finds a shortest solution.", s.Answer, e.cfg.Tool.Timeout)
	case multi:
		fmt.Fprintf(&sys, "You are the plan agent in a team of two solving a %s puzzle. Your teammate, the tool agent, wrote a program to solve it; you see the program, its output and its action list. Check the actions against the rules and the board, fix them if needed, and give the final answer.\n\n", s.Title)
		fmt.Fprintf(&sys, "Think step by step, then end your reply with one line of the form\n#### ANSWER\nwhere ANSWER is %s.", s.Answer)
	default:
		fmt.Fprintf(&sys, "You are solving a %s puzzle.\n\nThink step by step, then end your reply with one line of the form\n#### ANSWER\nwhere ANSWER is %s.", s.Title, s.Answer)
	}
	if e.cfg.Prompt != envs.PromptBrief {
		user.WriteString(s.Rules + "\n\n")
	}
	fmt.Fprintf(&user, "Board (turn %d of %d):\n%s\n", e.turn+1, e.cfg.MaxTurns, e.game.Board())
	if len(e.history) > 0 {
		user.WriteString("\nEarlier turns:\n")
		for _, h := range e.history {
			user.WriteString("- " + h + "\n")
		}
	}
	if role == RolePlan && multi && e.tool.set {
		if e.cfg.Prompt == envs.PromptBrief {
			// Brief prompts leave the program out: its output and actions are
			// what the plan agent acts on.
			user.WriteString("\nThe tool agent's program printed:\n```\n" + strings.TrimRight(e.tool.output, "\n") + "\n```\n")
		} else {
			user.WriteString("\nThe tool agent's program:\n```python\n" + strings.TrimRight(e.tool.code, "\n") + "\n```\n")
			user.WriteString("Its output:\n```\n" + strings.TrimRight(e.tool.output, "\n") + "\n```\n")
		}
		if e.tool.actions != "" {
			user.WriteString("Its action list: " + e.tool.actions + "\n")
		} else {
			user.WriteString("Its action list: none (" + e.tool.verdict + ")\n")
		}
	}
	return envs.Prompt{System: sys.String(), User: user.String()}, nil
}

// briefSystem writes the system prompt of env.prompt: brief, one line for
// the role and one for the answer format.
func (e *Env) briefSystem(sys *strings.Builder, role string, multi bool) {
	s := e.spec
	switch {
	case role == RoleTool:
		fmt.Fprintf(sys, "%s, tool agent: write a Python 3 program that reads the board on stdin and prints the solution.\nReply with one ```python block printing **Actions List**: ANSWER, where ANSWER is %s.", s.Title, s.Answer)
	case multi:
		fmt.Fprintf(sys, "%s, plan agent: check the tool agent's actions and fix them if needed.\nEnd with #### ANSWER, where ANSWER is %s.", s.Title, s.Answer)
	default:
		fmt.Fprintf(sys, "%s: solve the puzzle.\nEnd with #### ANSWER, where ANSWER is %s.", s.Title, s.Answer)
	}
}

// GridSize returns env.size, or def when it is 0, checked against [lo, hi]
// (an error naming the key otherwise).
func GridSize(cfg envs.Config, name string, def, lo, hi int) (int, error) {
	size := cfg.Size
	if size == 0 {
		size = def
	}
	if size < lo || size > hi {
		return 0, config.Errorf("size", "%s supports sizes %d to %d, got %d", name, lo, hi, size)
	}
	return size, nil
}
