package envs

import (
	"context"
	"fmt"
	"strings"
)

// OracleText is the completion an oracle writes for role given the
// solver's answer (Solver.Solve): the role named "tool" writes a one-line
// Python program that prints the action list (Oracle writes a general
// solver instead where the environment has one, see ProgramSolver); every other role answers
// after "####". It is text that goes through the same parse path as a
// model's: the supervised demonstrations of `troupe sft` and the oracle
// policy of envtest are both this text. It is kept short because every
// token of it is a token a tiny warm-started model must learn to write and
// the learner must train on.
func OracleText(role, answer string) string {
	if role == "tool" {
		return "```python\nprint(" + pyString("**Actions List**: "+answer) + ")\n```\n"
	}
	return "#### " + answer + "\n"
}

// pyString quotes s as a single-quoted Python string literal.
func pyString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`).Replace(s) + "'"
}

// Oracle returns OracleText for role from e's solver in its current state.
// It fails when e has no solver or the solver fails.
func Oracle(e Env, role string) (string, error) {
	s, ok := e.(Solver)
	if !ok {
		return "", fmt.Errorf("envs: %T has no solver", e)
	}
	if ps, ok := e.(ProgramSolver); ok && role == "tool" {
		if prog := ps.SolverProgram(); prog != "" {
			return "```python\n" + strings.TrimRight(prog, "\n") + "\n```\n", nil
		}
	}
	ans, err := s.Solve()
	if err != nil {
		return "", fmt.Errorf("envs: solver: %w", err)
	}
	return OracleText(role, ans), nil
}

// DemoStep is one step of an oracle episode: what role saw at turn and the
// oracle's completion, with the environment's outcome.
type DemoStep struct {
	Turn       int
	Role       string
	Prompt     Prompt
	Completion string
	Outcome    Outcome
}

// Demonstrate plays e (already Reset) to the end with the oracle through the
// ordinary Prompt → text → Step path and returns every step, for every role
// and turn the episode visits. It fails if e has no solver, a step fails,
// or the oracle episode does not end in success.
func Demonstrate(ctx context.Context, e Env) ([]DemoStep, error) {
	return DemonstrateDetour(ctx, e, Detour{})
}

// Detour starts a demonstration with mistakes, so that it shows how an
// episode goes on after a wrong answer: the prompts of later turns, with
// their history of earlier attempts, which an episode the oracle solves at
// once never reaches. In each of the first Turns turns the turn's last
// role (the one whose answer acts on the environment) answers Wrong(turn)
// instead of the oracle; the other roles of those turns are the oracle.
type Detour struct {
	Turns int
	// Wrong returns a wrong answer for the turn, in the answer format (for
	// example the oracle's answer to another instance).
	Wrong func(turn int) (string, error)
}

// DemonstrateDetour is Demonstrate after d's wrong answers. The steps that
// answered wrongly are not returned (they are not demonstrations); every
// step after them is the oracle's. When a wrong answer happens to end the
// episode, the result is the oracle steps before it.
func DemonstrateDetour(ctx context.Context, e Env, d Detour) ([]DemoStep, error) {
	var steps []DemoStep
	roles := e.Roles()
	last := ""
	if len(roles) > 0 {
		last = roles[len(roles)-1]
	}
	detoured := false
	for guard := 0; !e.Done(); guard++ {
		if guard > 10000 {
			return steps, fmt.Errorf("envs: demonstration did not end after %d steps", guard)
		}
		role, turn := e.Next()
		p, err := e.Prompt(role)
		if err != nil {
			return steps, fmt.Errorf("envs: demonstration: %w", err)
		}
		wrong := turn < d.Turns && role == last && d.Wrong != nil
		var text string
		if wrong {
			text, err = d.Wrong(turn)
		} else {
			text, err = Oracle(e, role)
		}
		if err != nil {
			return steps, err
		}
		out, err := e.Step(ctx, role, text)
		if err != nil {
			return steps, fmt.Errorf("envs: demonstration: %w", err)
		}
		if wrong {
			detoured = true
			continue
		}
		steps = append(steps, DemoStep{Turn: turn, Role: role, Prompt: p, Completion: text, Outcome: out})
	}
	if detoured && (len(steps) == 0 || steps[len(steps)-1].Turn < d.Turns) {
		return steps, nil
	}
	if len(steps) == 0 || !steps[len(steps)-1].Outcome.Success {
		return steps, fmt.Errorf("envs: the oracle did not solve task %s", e.Task().ID)
	}
	return steps, nil
}
