package planpath_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/envs/envtest"
	"github.com/troupe-rl/troupe/envs/planpath"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func deps(t testing.TB) envs.Deps { return envs.Deps{Runner: envtest.NewRunner(t)} }

func TestConformance(t *testing.T) {
	for _, mode := range []string{envs.ModeMulti, envs.ModeSingle} {
		t.Run(mode, func(t *testing.T) {
			cfg := envs.DefaultConfig("planpath")
			cfg.Mode = mode
			envtest.Run(t, "planpath", cfg, deps(t), envtest.Options{})
		})
	}
}

// board is the test's own reading of the rendered board.
type board struct {
	n          int
	open       []bool
	start, end int
}

func readBoard(t *testing.T, text string) board {
	t.Helper()
	lines := strings.Split(text, "\n")
	lines = lines[:len(lines)-1] // the "Agent at" line
	b := board{n: len(lines), start: -1, end: -1}
	for r, l := range lines {
		if len(l) != b.n {
			t.Fatalf("row %d has %d cells on a %d-row board:\n%s", r, len(l), b.n, text)
		}
		for c, ch := range l {
			i := r*b.n + c
			b.open = append(b.open, ch != '#')
			switch ch {
			case 'A':
				b.start = i
			case 'G':
				b.end = i
			}
		}
	}
	if b.start < 0 || b.end < 0 {
		t.Fatalf("no A or G:\n%s", text)
	}
	return b
}

// shortest is an independent BFS: distance from start to end, -1 if none.
func (b board) shortest() int {
	dist := map[int]int{b.start: 0}
	q := []int{b.start}
	for len(q) > 0 {
		c := q[0]
		q = q[1:]
		if c == b.end {
			return dist[c]
		}
		r, col := c/b.n, c%b.n
		for _, d := range [][2]int{{-1, 0}, {1, 0}, {0, -1}, {0, 1}} {
			nr, nc := r+d[0], col+d[1]
			nx := nr*b.n + nc
			if nr < 0 || nr >= b.n || nc < 0 || nc >= b.n || !b.open[nx] {
				continue
			}
			if _, seen := dist[nx]; !seen {
				dist[nx] = dist[c] + 1
				q = append(q, nx)
			}
		}
	}
	return -1
}

// walk follows moves on the board and reports whether they end on the goal
// using only legal moves.
func (b board) walk(moves []string) bool {
	p := b.start
	for _, m := range moves {
		r, c := p/b.n, p%b.n
		switch m {
		case "U":
			r--
		case "D":
			r++
		case "L":
			c--
		case "R":
			c++
		}
		if r < 0 || r >= b.n || c < 0 || c >= b.n || !b.open[r*b.n+c] {
			return false
		}
		p = r*b.n + c
	}
	return p == b.end
}

func TestGeneratedInstancesAreSolvable(t *testing.T) {
	cases := []struct {
		size, n int
		wall    float64
	}{{10, 10000, 0.22}, {6, 1000, 0.22}, {20, 500, 0.3}, {10, 500, 0.5}}
	for _, tc := range cases {
		cfg := envs.DefaultConfig("planpath")
		cfg.Mode, cfg.Size, cfg.PlanPath.WallProb = envs.ModeSingle, tc.size, tc.wall
		e, err := envs.New("planpath", cfg, envs.Deps{})
		if err != nil {
			t.Fatal(err)
		}
		for seed := range int64(envtest.Scale(tc.n)) {
			if err := e.Reset(seed); err != nil {
				t.Fatal(err)
			}
			task := e.Task()
			b := readBoard(t, task.Board)
			if d := b.shortest(); d < 1 || d != task.SolutionLen {
				t.Fatalf("size %d seed %d: independent BFS says %d, task says %d:\n%s", tc.size, seed, d, task.SolutionLen, task.Board)
			}
			var moves []string
			if err := json.Unmarshal([]byte(task.Solution), &moves); err != nil || len(moves) != task.SolutionLen || !b.walk(moves) {
				t.Fatalf("size %d seed %d: solution %s does not reach the goal (%v)", tc.size, seed, task.Solution, err)
			}
		}
	}
}

func TestSeedsDisjointAndDeterministic(t *testing.T) {
	cfg := envs.DefaultConfig("planpath")
	cfg.Mode = envs.ModeSingle
	e, _ := envs.New("planpath", cfg, envs.Deps{})
	seen := map[string]bool{}
	for _, s := range append(envtest.Seeds(0, 100), envs.ValidationSeeds(100)...) {
		if err := e.Reset(s); err != nil {
			t.Fatal(err)
		}
		if seen[e.Task().ID] {
			t.Fatalf("duplicate id %s", e.Task().ID)
		}
		seen[e.Task().ID] = true
	}
	if envs.Split(envs.ValidationSeeds(1)[0]) != "eval" || envs.Split(99) != "train" {
		t.Fatal("split")
	}
}

func TestOracleAndRandomTeams(t *testing.T) { envtest.CheckTeams(t, "planpath", deps(t)) }

func TestRewards(t *testing.T) {
	cfg := envs.DefaultConfig("planpath")
	cfg.Mode = envs.ModeSingle
	ctx := context.Background()
	e, _ := envs.New("planpath", cfg, envs.Deps{})
	if err := e.Reset(3); err != nil {
		t.Fatal(err)
	}
	sol := e.Task().Solution
	out, err := e.Step(ctx, "plan", "#### "+sol)
	if err != nil {
		t.Fatal(err)
	}
	// Each move: -0.01 + (0.99·(d-1) − d)·… ; optimal path: goal 1 + optimal 0.5.
	if !out.Success || out.Info["optimal"] != true || out.Local < 1.5 {
		t.Fatalf("oracle step %+v", out)
	}
	if out.Reward != envs.Mix(cfg.Alpha, out.Team, out.Local) {
		t.Fatalf("reward %v is not the mix of %v and %v", out.Reward, out.Team, out.Local)
	}
	for _, tc := range []struct {
		text    string
		verdict string
		local   float64
	}{
		{"no answer", "no_answer", -2},
		{"#### [\"X\"]", "bad_answer", -2},
		{"#### []", "bad_answer", -2},
	} {
		e.Reset(3)
		out, _ := e.Step(ctx, "plan", tc.text)
		if out.Info["verdict"] != tc.verdict || out.Local != tc.local || out.Done {
			t.Errorf("%q: %+v", tc.text, out)
		}
	}
}

func TestGolden(t *testing.T) {
	envtest.CheckGolden(t, "planpath", 7, deps(t), "testdata/oracle.golden", *update)
}

// TestGoldenBrief pins env.prompt: brief (the demo's prompts) on a 4×4
// grid, in both modes.
func TestGoldenBrief(t *testing.T) {
	for _, mode := range []string{envs.ModeMulti, envs.ModeSingle} {
		cfg := envs.DefaultConfig("planpath")
		cfg.Size, cfg.Prompt, cfg.Mode = 4, envs.PromptBrief, mode
		envtest.CheckGoldenConfig(t, cfg, 7, deps(t), "testdata/brief-"+mode+".golden", *update)
	}
}

func FuzzParseAnswer(f *testing.F) {
	envtest.FuzzPlanAnswer(f, "planpath", "#### [\"U\",\"R\"]", "#### ['u', 'r']", "#### up, right", "#### RRDD", "```\n#### [U]\n```", "####", "#### [[[[", "#### [\"U\"]] trailing")
}

func BenchmarkGenerate(b *testing.B) {
	for _, size := range []int{planpath.DefaultSize, 20} {
		b.Run(fmt.Sprintf("size%d", size), func(b *testing.B) {
			pc := envs.DefaultConfig("planpath").PlanPath
			for i := 0; b.Loop(); i++ {
				planpath.Generate(int64(i), size, pc)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "instances/s")
		})
	}
}
