// Package envtest helps test environments: a conformance suite every
// envs.Env must pass ([Run]), an episode driver ([Play]) with oracle and
// random-text policies, transcripts for golden files, and [NewRunner], the
// real sandbox as the tool agents' runner.
//
// The suite checks the contract of package envs: determinism given a seed,
// clone independence (stepping a clone never changes the original), no panic
// and no error on any completion text (random bytes, broken code, broken
// answers), JSON-serialisable Info and finite rewards, termination by
// max_turns with errors for steps out of turn or after the end.
package envtest

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/troupe-rl/troupe/envs"
)

// Policy writes a completion for role given its prompt. Policies used by the
// suite must be deterministic.
type Policy func(e envs.Env, role string, p envs.Prompt) string

// StepRecord is one step of an episode.
type StepRecord struct {
	Turn       int          `json:"turn"`
	Role       string       `json:"role"`
	Prompt     envs.Prompt  `json:"prompt"`
	Completion string       `json:"completion"`
	Outcome    envs.Outcome `json:"outcome"`
}

// Play runs e (already Reset) to the end with policy and returns every step.
func Play(ctx context.Context, e envs.Env, policy Policy) ([]StepRecord, error) {
	var steps []StepRecord
	for guard := 0; !e.Done(); guard++ {
		if guard > 10000 {
			return steps, fmt.Errorf("envtest: episode did not end after %d steps", guard)
		}
		role, turn := e.Next()
		p, err := e.Prompt(role)
		if err != nil {
			return steps, err
		}
		text := policy(e, role, p)
		out, err := e.Step(ctx, role, text)
		if err != nil {
			return steps, err
		}
		steps = append(steps, StepRecord{Turn: turn, Role: role, Prompt: p, Completion: text, Outcome: out})
	}
	return steps, nil
}

// Oracle is a policy driven by the environment's solver (envs.Solver): it
// writes envs.OracleText (see envs.Oracle), text that goes through the same
// parse path as a model's.
func Oracle(e envs.Env, role string, _ envs.Prompt) string {
	text, err := envs.Oracle(e, role)
	if err != nil {
		return "oracle failed: " + err.Error()
	}
	return text
}

// OracleText is what Oracle writes for role given the solver's answer
// (envs.OracleText).
func OracleText(role, answer string) string { return envs.OracleText(role, answer) }

// Random returns a policy writing seeded random text of the kinds that break
// parsers: random bytes, random letters, code fences with junk, "####" with
// junk, plausible but wrong move lists. It is deterministic given seed.
func Random(seed uint64) Policy {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	return func(envs.Env, string, envs.Prompt) string { return RandomText(r) }
}

// RandomText returns one random completion.
func RandomText(r *rand.Rand) string {
	randBytes := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return string(b)
	}
	letters := func(n int, alphabet string) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	moves := func() string {
		var parts []string
		for range r.IntN(8) {
			parts = append(parts, `"`+letters(1, "UDLRX")+`"`)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	switch r.IntN(9) {
	case 0:
		return randBytes(r.IntN(200))
	case 1:
		return letters(r.IntN(300), "abc UDLR[]\"',#`\n0123456789")
	case 2:
		return "```python\n" + letters(r.IntN(80), "abc ()[]:=\n'\"") + "\n```"
	case 3:
		return "#### " + letters(r.IntN(40), "[]{},'\"UDLR0123456789 ")
	case 4:
		return "#### " + moves()
	case 5:
		return "```python\nprint('**Actions List**: " + strings.ReplaceAll(moves(), "'", "") + "')\n```"
	case 6:
		return "####"
	case 7:
		return "#### [[" + letters(r.IntN(30), "0123456789,[] ") + "]]"
	default:
		return ""
	}
}

// Options tune Run.
type Options struct {
	// Seeds are the seeds the suite plays (default 3 training seeds and one
	// validation seed).
	Seeds []int64
	// Episodes is the number of random-text episodes per seed (default 2).
	Episodes int
}

// Run checks that the environment registered as name, built from cfg and
// deps, honours the envs contract. It calls t.Run for each property.
func Run(t *testing.T, name string, cfg envs.Config, deps envs.Deps, opt Options) {
	t.Helper()
	if len(opt.Seeds) == 0 {
		opt.Seeds = []int64{0, 1, 12345, envs.ValidationSeedBase}
	}
	if opt.Episodes == 0 {
		opt.Episodes = 2
	}
	ctx := context.Background()
	mk := func(t *testing.T, seed int64) envs.Env {
		t.Helper()
		e, err := envs.New(name, cfg, deps)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Reset(seed); err != nil {
			t.Fatal(err)
		}
		return e
	}
	play := func(t *testing.T, e envs.Env, p Policy) []StepRecord {
		t.Helper()
		steps, err := Play(ctx, e, p)
		if err != nil {
			t.Fatal(err)
		}
		return steps
	}

	t.Run("Registry", func(t *testing.T) {
		found := false
		for _, n := range envs.Names() {
			found = found || n == name
		}
		if !found {
			t.Fatalf("%q not in envs.Names() = %v", name, envs.Names())
		}
		e, err := envs.New(name, cfg, deps)
		if err != nil {
			t.Fatal(err)
		}
		if len(e.Roles()) == 0 {
			t.Fatal("no roles")
		}
		if _, err := e.Prompt(e.Roles()[0]); err == nil {
			t.Error("Prompt before Reset: want an error")
		}
		if _, err := e.Step(ctx, e.Roles()[0], "x"); err == nil {
			t.Error("Step before Reset: want an error")
		}
	})

	t.Run("Determinism", func(t *testing.T) {
		for _, seed := range opt.Seeds {
			a, b := mk(t, seed), mk(t, seed)
			if !reflect.DeepEqual(a.Task(), b.Task()) {
				t.Fatalf("seed %d: Task differs between two Resets:\n%+v\n%+v", seed, a.Task(), b.Task())
			}
			if a.Task().Seed != seed || a.Task().Split != envs.Split(seed) || a.Task().ID == "" {
				t.Errorf("seed %d: bad Task %+v", seed, a.Task())
			}
			sa := play(t, a, mixed(seed))
			sb := play(t, b, mixed(seed))
			if ja, jb := mustJSON(t, sa), mustJSON(t, sb); ja != jb {
				t.Fatalf("seed %d: same completions gave different episodes:\n%s\n%s", seed, ja, jb)
			}
			// Reset after play gives the fresh instance again.
			if err := a.Reset(seed); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a.Task(), b.Task()) || a.Done() {
				t.Fatalf("seed %d: Reset after an episode does not restore the instance", seed)
			}
		}
	})

	t.Run("CloneIndependence", func(t *testing.T) {
		for _, seed := range opt.Seeds {
			e := mk(t, seed)
			role, _ := e.Next()
			before, err := e.Prompt(role)
			if err != nil {
				t.Fatal(err)
			}
			c := e.Clone()
			play(t, c, Random(uint64(seed)))
			after, err := e.Prompt(role)
			if err != nil {
				t.Fatal(err)
			}
			if before != after || e.Done() {
				t.Fatalf("seed %d: stepping a clone changed the original", seed)
			}
			// The original, stepped by the same policy as a fresh env, behaves
			// like the fresh env; and a mid-episode clone continues identically.
			fresh := mk(t, seed)
			want := play(t, fresh, mixed(seed))
			pol := mixed(seed)
			var got []StepRecord
			var mid envs.Env
			for !e.Done() {
				role, turn := e.Next()
				p, _ := e.Prompt(role)
				text := pol(e, role, p)
				out, err := e.Step(ctx, role, text)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, StepRecord{Turn: turn, Role: role, Prompt: p, Completion: text, Outcome: out})
				if mid == nil && len(got) == 1 && !e.Done() {
					mid = e.Clone()
				}
			}
			if mustJSON(t, got) != mustJSON(t, want) {
				t.Fatalf("seed %d: original after clone play differs from a fresh env", seed)
			}
			if mid != nil {
				rest := play(t, mid, replay(want[1:]))
				if mustJSON(t, rest) != mustJSON(t, want[1:]) {
					t.Fatalf("seed %d: a mid-episode clone does not continue like the original", seed)
				}
			}
		}
	})

	t.Run("AnyText", func(t *testing.T) {
		for _, seed := range opt.Seeds {
			for ep := range opt.Episodes {
				e := mk(t, seed)
				steps := play(t, e, Random(uint64(seed)*131+uint64(ep)))
				for _, s := range steps {
					checkOutcome(t, s)
				}
			}
		}
	})

	t.Run("Termination", func(t *testing.T) {
		e := mk(t, opt.Seeds[0])
		roles := e.Roles()
		if len(roles) > 1 {
			if _, err := e.Step(ctx, roles[1], "x"); err == nil {
				t.Error("Step out of turn: want an error")
			}
			if _, err := e.Prompt(roles[1]); err == nil {
				t.Error("Prompt out of turn: want an error")
			}
		}
		steps := play(t, e, func(envs.Env, string, envs.Prompt) string { return "I give up." })
		if want := cfg.MaxTurns * len(roles); len(steps) != want {
			t.Errorf("a no-answer episode took %d steps, want max_turns×roles = %d", len(steps), want)
		}
		last := steps[len(steps)-1]
		if !last.Outcome.Done || last.Outcome.Success {
			t.Errorf("last outcome %+v: want done, not success", last.Outcome)
		}
		for i, s := range steps {
			if s.Outcome.Done != (i == len(steps)-1) {
				t.Errorf("step %d: done=%v", i, s.Outcome.Done)
			}
			if v := s.Outcome.Info["verdict"]; v == "ok" || v == nil {
				t.Errorf("step %d: verdict %v for a reply with no answer", i, v)
			}
			if s.Outcome.Local >= 0 {
				t.Errorf("step %d: local reward %v for a reply with no answer, want a penalty", i, s.Outcome.Local)
			}
		}
		if r, _ := e.Next(); r != "" {
			t.Errorf("Next after the end = %q, want \"\"", r)
		}
		if _, err := e.Step(ctx, roles[0], "x"); err == nil {
			t.Error("Step after the end: want an error")
		}
		if _, err := e.Prompt(roles[0]); err == nil {
			t.Error("Prompt after the end: want an error")
		}
	})

	if _, ok := mk(t, opt.Seeds[0]).(envs.Solver); ok {
		t.Run("Oracle", func(t *testing.T) {
			for _, seed := range opt.Seeds {
				e := mk(t, seed)
				steps := play(t, e, Oracle)
				last := steps[len(steps)-1].Outcome
				if !last.Success || !last.Done {
					t.Fatalf("seed %d: oracle did not solve: %s", seed, mustJSON(t, steps))
				}
			}
		})
	}
}

// mixed is a deterministic policy: oracle text on odd calls, random text on
// even ones, so episodes mix good and bad steps.
func mixed(seed int64) Policy {
	rp := Random(uint64(seed) + 7)
	n := 0
	return func(e envs.Env, role string, p envs.Prompt) string {
		n++
		if n%2 == 0 {
			return Oracle(e, role, p)
		}
		return rp(e, role, p)
	}
}

func replay(steps []StepRecord) Policy {
	i := 0
	return func(envs.Env, string, envs.Prompt) string {
		if i >= len(steps) {
			return ""
		}
		i++
		return steps[i-1].Completion
	}
}

func checkOutcome(t *testing.T, s StepRecord) {
	t.Helper()
	o := s.Outcome
	for _, x := range []float64{o.Local, o.Team, o.Reward} {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			t.Fatalf("non-finite reward in %+v", o)
		}
	}
	if _, err := json.Marshal(o.Info); err != nil {
		t.Fatalf("Info is not JSON-serialisable: %v", err)
	}
	if _, ok := o.Info["verdict"].(string); !ok {
		t.Fatalf("Info has no verdict: %v", o.Info)
	}
	if o.Success && !o.Done {
		t.Fatalf("success without done: %+v", o)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Transcript renders an episode as plain text for golden files: every step's
// prompt, completion and outcome.
func Transcript(task envs.Task, steps []StepRecord) string {
	var b strings.Builder
	tj, _ := json.MarshalIndent(task, "", "  ")
	fmt.Fprintf(&b, "### task\n%s\n", tj)
	for _, s := range steps {
		fmt.Fprintf(&b, "\n### turn %d, role %s\n", s.Turn, s.Role)
		if s.Prompt.System != "" {
			fmt.Fprintf(&b, "--- system\n%s\n", s.Prompt.System)
		}
		fmt.Fprintf(&b, "--- user\n%s\n--- completion\n%s\n", s.Prompt.User, strings.TrimRight(s.Completion, "\n"))
		oj, _ := json.MarshalIndent(s.Outcome, "", "  ")
		fmt.Fprintf(&b, "--- outcome\n%s\n", oj)
	}
	return b.String()
}

// Golden compares got with the file at path, or rewrites the file when
// update is true (tests pass their own -update flag).
func Golden(t *testing.T, path, got string, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the output (run with -update to accept):\n%s", path, firstDiff(string(want), got))
	}
}

func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < max(len(la), len(lb)); i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  want %q\n  got  %q", i+1, x, y)
		}
	}
	return ""
}

// SuccessRate plays one episode per seed with the policy made by mk and
// returns the fraction that ended in success.
func SuccessRate(t testing.TB, name string, cfg envs.Config, deps envs.Deps, seeds []int64, mk func(seed int64) Policy) float64 {
	t.Helper()
	ok := 0
	for _, seed := range seeds {
		e, err := envs.New(name, cfg, deps)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Reset(seed); err != nil {
			t.Fatal(err)
		}
		steps, err := Play(context.Background(), e, mk(seed))
		if err != nil {
			t.Fatal(err)
		}
		if steps[len(steps)-1].Outcome.Success {
			ok++
		}
	}
	return float64(ok) / float64(len(seeds))
}

// Seeds returns n consecutive seeds starting at from.
func Seeds(from int64, n int) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = from + int64(i)
	}
	return s
}

// Scale returns n for a test's instance or seed count, or n/10 (at least 1)
// in -race builds: the race detector checks concurrency, not coverage, and
// `make test` runs the environments' tests a second time without it at full
// size.
func Scale(n int) int {
	if raceEnabled {
		return max(1, n/10)
	}
	return n
}

// CheckTeams is the wiring check every environment runs: an oracle team
// (the solver's answers as text, through prompts and Step) solves every
// seed in multi-agent and single-agent mode, and a random-text team stays
// near 0 %.
func CheckTeams(t *testing.T, name string, deps envs.Deps) {
	t.Helper()
	for _, tc := range []struct {
		mode                     string
		oracleSeeds, randomSeeds int
	}{{envs.ModeMulti, 200, 25}, {envs.ModeSingle, 200, 200}} {
		t.Run(tc.mode, func(t *testing.T) {
			cfg := envs.DefaultConfig(name)
			cfg.Mode = tc.mode
			if got := SuccessRate(t, name, cfg, deps, Seeds(0, Scale(tc.oracleSeeds)),
				func(int64) Policy { return Oracle }); got != 1 {
				t.Errorf("oracle success %.3f, want 1", got)
			}
			n := Scale(tc.randomSeeds)
			got := SuccessRate(t, name, cfg, deps, envs.ValidationSeeds(n),
				func(s int64) Policy { return Random(uint64(s)) })
			t.Logf("%s: random-text success %.3f over %d seeds", tc.mode, got, n)
			if got > 0.1 {
				t.Errorf("random-text success %.3f, want near 0", got)
			}
		})
	}
}

// CheckGolden plays the oracle on seed with the default config and compares
// the transcript with the golden file at path (rewritten when update).
func CheckGolden(t *testing.T, name string, seed int64, deps envs.Deps, path string, update bool) {
	t.Helper()
	CheckGoldenConfig(t, envs.DefaultConfig(name), seed, deps, path, update)
}

// CheckGoldenConfig is CheckGolden with a given config (cfg.Name names
// the environment).
func CheckGoldenConfig(t *testing.T, cfg envs.Config, seed int64, deps envs.Deps, path string, update bool) {
	t.Helper()
	e, err := envs.New(cfg.Name, cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Reset(seed); err != nil {
		t.Fatal(err)
	}
	task := e.Task()
	steps, err := Play(context.Background(), e, Oracle)
	if err != nil {
		t.Fatal(err)
	}
	Golden(t, path, Transcript(task, steps), update)
}

// FuzzPlanAnswer fuzzes the plan agent's answer parsing of environment
// name through Step (single-agent mode, seed 1): any text must give an
// Outcome that encodes as JSON, never an error or a panic.
func FuzzPlanAnswer(f *testing.F, name string, seeds ...string) {
	for _, s := range seeds {
		f.Add(s)
	}
	cfg := envs.DefaultConfig(name)
	cfg.Mode = envs.ModeSingle
	e, err := envs.New(name, cfg, envs.Deps{})
	if err != nil {
		f.Fatal(err)
	}
	if err := e.Reset(1); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := e.Clone().Step(context.Background(), "plan", s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := json.Marshal(out); err != nil {
			t.Fatal(err)
		}
	})
}
