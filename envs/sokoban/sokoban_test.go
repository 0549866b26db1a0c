package sokoban_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/envs/envtest"
	"github.com/troupe-rl/troupe/envs/sokoban"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func deps(t testing.TB) envs.Deps { return envs.Deps{Runner: envtest.NewRunner(t)} }

func TestConformance(t *testing.T) {
	for _, mode := range []string{envs.ModeMulti, envs.ModeSingle} {
		t.Run(mode, func(t *testing.T) {
			cfg := envs.DefaultConfig("sokoban")
			cfg.Mode = mode
			envtest.Run(t, "sokoban", cfg, deps(t), envtest.Options{})
		})
	}
}

// level is the test's own reading of the rendered board.
type level struct {
	n      int
	wall   []bool
	goal   []bool
	boxes  []int
	player int
}

func readLevel(t *testing.T, text string) level {
	t.Helper()
	lines := strings.Split(text, "\n")
	lines = lines[:len(lines)-1] // "Player at"
	l := level{n: len(lines), player: -1}
	for r, s := range lines {
		if len(s) != l.n {
			t.Fatalf("row %d: %d cells on a %d-row board:\n%s", r, len(s), l.n, text)
		}
		for c, ch := range s {
			i := r*l.n + c
			l.wall = append(l.wall, ch == '#')
			l.goal = append(l.goal, ch == '.' || ch == '*' || ch == '+')
			if ch == '$' || ch == '*' {
				l.boxes = append(l.boxes, i)
			}
			if ch == '@' || ch == '+' {
				l.player = i
			}
		}
	}
	if l.player < 0 || len(l.boxes) == 0 {
		t.Fatalf("no player or no box:\n%s", text)
	}
	return l
}

func (l level) solvedBy(boxes []int) bool {
	for _, b := range boxes {
		if !l.goal[b] {
			return false
		}
	}
	return true
}

// step moves from (p, boxes) by d, or reports false; the outer ring is wall.
func (l level) step(p int, boxes []int, d int) (int, []int, bool) {
	to := p + d
	if to < 0 || to >= len(l.wall) || l.wall[to] {
		return 0, nil, false
	}
	if i := slices.Index(boxes, to); i >= 0 {
		b := to + d
		if b < 0 || b >= len(l.wall) || l.wall[b] || slices.Contains(boxes, b) {
			return 0, nil, false
		}
		nb := slices.Clone(boxes)
		nb[i] = b
		slices.Sort(nb)
		return to, nb, true
	}
	return to, boxes, true
}

// shortest is an independent plain BFS (no pruning) over (player, boxes),
// returning the fewest moves to solve, -1 if unsolvable.
func (l level) shortest() int {
	type st struct {
		p int
		b []int
	}
	k := func(s st) string {
		key := []byte{byte(s.p)}
		for _, b := range s.b {
			key = append(key, byte(b))
		}
		return string(key)
	}
	start := st{l.player, slices.Sorted(slices.Values(l.boxes))}
	dist := map[string]int{k(start): 0}
	q := []st{start}
	for len(q) > 0 {
		s := q[0]
		q = q[1:]
		if l.solvedBy(s.b) {
			return dist[k(s)]
		}
		for _, d := range []int{-l.n, l.n, -1, 1} {
			p, b, ok := l.step(s.p, s.b, d)
			if !ok {
				continue
			}
			ns := st{p, b}
			if _, seen := dist[k(ns)]; !seen {
				dist[k(ns)] = dist[k(s)] + 1
				q = append(q, ns)
			}
		}
	}
	return -1
}

func (l level) play(moves []string) bool {
	p, b := l.player, l.boxes
	for _, m := range moves {
		d := map[string]int{"U": -l.n, "D": l.n, "L": -1, "R": 1}[m]
		var ok bool
		if p, b, ok = l.step(p, b, d); !ok {
			return false
		}
	}
	return l.solvedBy(b)
}

func TestGeneratedInstancesAreSolvable(t *testing.T) {
	cases := []struct{ size, boxes, n int }{{6, 1, 10000}, {7, 2, 300}, {8, 2, 100}}
	if testing.Short() {
		cases[0].n = 1000
	}
	for _, tc := range cases {
		cfg := envs.DefaultConfig("sokoban")
		cfg.Mode, cfg.Size, cfg.Sokoban.Boxes = envs.ModeSingle, tc.size, tc.boxes
		e, err := envs.New("sokoban", cfg, envs.Deps{})
		if err != nil {
			t.Fatal(err)
		}
		for seed := range int64(envtest.Scale(tc.n)) {
			if err := e.Reset(seed); err != nil {
				t.Fatal(err)
			}
			task := e.Task()
			l := readLevel(t, task.Board)
			if len(l.boxes) != tc.boxes {
				t.Fatalf("seed %d: %d boxes, want %d", seed, len(l.boxes), tc.boxes)
			}
			if d := l.shortest(); d < cfg.Sokoban.MinMoves || d != task.SolutionLen {
				t.Fatalf("size %d seed %d: independent BFS says %d moves, task says %d:\n%s", tc.size, seed, d, task.SolutionLen, task.Board)
			}
			var moves []string
			if err := json.Unmarshal([]byte(task.Solution), &moves); err != nil || !l.play(moves) {
				t.Fatalf("seed %d: solution %s does not solve the level (%v)", seed, task.Solution, err)
			}
		}
	}
}

func TestOracleAndRandomTeams(t *testing.T) { envtest.CheckTeams(t, "sokoban", deps(t)) }

func TestRewards(t *testing.T) {
	cfg := envs.DefaultConfig("sokoban")
	cfg.Mode = envs.ModeSingle
	ctx := context.Background()
	e, _ := envs.New("sokoban", cfg, envs.Deps{})
	if err := e.Reset(5); err != nil {
		t.Fatal(err)
	}
	out, err := e.Step(ctx, "plan", "Let me push it.\n#### "+e.Task().Solution+" done")
	if err != nil {
		t.Fatal(err)
	}
	// Win +10 and box on goal +1 dominate the move costs.
	if !out.Success || out.Local < 10 || out.Team != out.Local {
		t.Fatalf("oracle step %+v", out)
	}
	// Walking into the outer wall for ever: invalid moves, then the fail penalty.
	if err := e.Reset(5); err != nil {
		t.Fatal(err)
	}
	var last envs.Outcome
	for !e.Done() {
		last, _ = e.Step(ctx, "plan", `#### ["U","U","U","U","U","U","U"]`)
	}
	if last.Success || last.Local > -5 {
		t.Fatalf("failing episode's last step %+v", last)
	}
}

func TestGolden(t *testing.T) {
	envtest.CheckGolden(t, "sokoban", 7, deps(t), "testdata/oracle.golden", *update)
}

func FuzzParseAnswer(f *testing.F) {
	envtest.FuzzPlanAnswer(f, "sokoban", "#### [\"U\",\"R\"]", "#### ['u', 'r']", "#### up, right", "#### RRDD", "####\n```json\n[\"L\"]\n```", "####", "#### (((")
}

func BenchmarkGenerate(b *testing.B) {
	for _, tc := range []struct{ size, boxes int }{{sokoban.DefaultSize, 1}, {7, 2}, {8, 3}} {
		b.Run(fmt.Sprintf("size%d-boxes%d", tc.size, tc.boxes), func(b *testing.B) {
			sc := envs.DefaultConfig("sokoban").Sokoban
			sc.Boxes = tc.boxes
			for i := 0; b.Loop(); i++ {
				if _, _, err := sokoban.Generate(int64(i), tc.size, sc); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "instances/s")
		})
	}
}
