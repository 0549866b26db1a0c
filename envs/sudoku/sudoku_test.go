package sudoku_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/envs/envtest"
	"github.com/troupe-rl/troupe/envs/sudoku"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func deps(t testing.TB) envs.Deps { return envs.Deps{Runner: envtest.NewRunner(t)} }

func TestConformance(t *testing.T) {
	for _, mode := range []string{envs.ModeMulti, envs.ModeSingle} {
		for _, size := range []int{4, 6, 9} {
			t.Run(fmt.Sprintf("%s/%d", mode, size), func(t *testing.T) {
				cfg := envs.DefaultConfig("sudoku")
				cfg.Mode, cfg.Size = mode, size
				opt := envtest.Options{}
				if size != 4 {
					opt.Seeds, opt.Episodes = []int64{3, envs.ValidationSeedBase}, 1
				}
				envtest.Run(t, "sudoku", cfg, deps(t), opt)
			})
		}
	}
}

// puzzle is the test's own reading of the board, with box shape from the size.
type puzzle struct {
	n, br, bc int
	cells     [][]int
}

func readPuzzle(t *testing.T, text string) puzzle {
	t.Helper()
	lines := strings.Split(text, "\n")
	p := puzzle{n: len(lines)}
	p.br, p.bc = map[int][2]int{4: {2, 2}, 6: {2, 3}, 9: {3, 3}}[p.n][0], map[int][2]int{4: {2, 2}, 6: {2, 3}, 9: {3, 3}}[p.n][1]
	for _, l := range lines {
		var row []int
		for _, f := range strings.Fields(l) {
			v := 0
			if f != "." {
				var err error
				if v, err = strconv.Atoi(f); err != nil {
					t.Fatalf("bad cell %q:\n%s", f, text)
				}
			}
			row = append(row, v)
		}
		if len(row) != p.n {
			t.Fatalf("row has %d cells:\n%s", len(row), text)
		}
		p.cells = append(p.cells, row)
	}
	return p
}

func (p puzzle) ok(r, c, v int) bool {
	for k := 0; k < p.n; k++ {
		if p.cells[r][k] == v || p.cells[k][c] == v {
			return false
		}
	}
	r0, c0 := r-r%p.br, c-c%p.bc
	for i := r0; i < r0+p.br; i++ {
		for j := c0; j < c0+p.bc; j++ {
			if p.cells[i][j] == v {
				return false
			}
		}
	}
	return true
}

// solutions is an independent backtracking count (up to limit); the first
// solution found is copied into first.
func (p puzzle) solutions(limit int, first *[][]int) int {
	br, bc, best := -1, -1, p.n+1
	for r := range p.n {
		for c := range p.n {
			if p.cells[r][c] != 0 {
				continue
			}
			cnt := 0
			for v := 1; v <= p.n; v++ {
				if p.ok(r, c, v) {
					cnt++
				}
			}
			if cnt < best {
				br, bc, best = r, c, cnt
			}
		}
	}
	if br < 0 {
		if *first == nil {
			for _, row := range p.cells {
				*first = append(*first, append([]int(nil), row...))
			}
		}
		return 1
	}
	total := 0
	for v := 1; v <= p.n && total < limit; v++ {
		if p.ok(br, bc, v) {
			p.cells[br][bc] = v
			total += p.solutions(limit-total, first)
			p.cells[br][bc] = 0
		}
	}
	return total
}

func TestGeneratedInstancesAreUnique(t *testing.T) {
	cases := []struct{ size, n, empty int }{{4, 10000, 0}, {6, 1000, 0}, {9, 200, 0}, {9, 100, 40}}
	for _, tc := range cases {
		cfg := envs.DefaultConfig("sudoku")
		cfg.Mode, cfg.Size, cfg.Sudoku.Empty = envs.ModeSingle, tc.size, tc.empty
		e, err := envs.New("sudoku", cfg, envs.Deps{})
		if err != nil {
			t.Fatal(err)
		}
		for seed := range int64(envtest.Scale(tc.n)) {
			if err := e.Reset(seed); err != nil {
				t.Fatal(err)
			}
			task := e.Task()
			p := readPuzzle(t, task.Board)
			if p.n != tc.size {
				t.Fatalf("size %d", p.n)
			}
			empty := strings.Count(task.Board, ".")
			if empty != task.SolutionLen || empty == 0 || (tc.empty > 0 && empty != tc.empty) {
				t.Fatalf("size %d seed %d: %d empty cells, task says %d", tc.size, seed, empty, task.SolutionLen)
			}
			var first [][]int
			if n := p.solutions(2, &first); n != 1 {
				t.Fatalf("size %d seed %d: %d solutions:\n%s", tc.size, seed, n, task.Board)
			}
			var sol [][]int
			if err := json.Unmarshal([]byte(task.Solution), &sol); err != nil || fmt.Sprint(sol) != fmt.Sprint(first) {
				t.Fatalf("size %d seed %d: task solution %s differs from the independent one %v", tc.size, seed, task.Solution, first)
			}
		}
	}
}

func TestOracleAndRandomTeams(t *testing.T) { envtest.CheckTeams(t, "sudoku", deps(t)) }

func TestAnswers(t *testing.T) {
	cfg := envs.DefaultConfig("sudoku")
	cfg.Mode = envs.ModeSingle
	ctx := context.Background()
	e, _ := envs.New("sudoku", cfg, envs.Deps{})
	if err := e.Reset(11); err != nil {
		t.Fatal(err)
	}
	task := e.Task()
	var sol [][]int
	json.Unmarshal([]byte(task.Solution), &sol)
	p := readPuzzle(t, task.Board)
	var placements, quoted []string
	for r := range 4 {
		for c := range 4 {
			if p.cells[r][c] == 0 {
				placements = append(placements, fmt.Sprintf("[%d,%d,%d]", r, c, sol[r][c]))
				quoted = append(quoted, fmt.Sprintf("['%d', '%d', '%d']", r, c, sol[r][c]))
			}
		}
	}
	flat := strings.NewReplacer("[", "", "]", "").Replace(task.Solution)
	clue := strings.Replace(task.Solution, "[[", "[[9", 1)
	for _, tc := range []struct {
		name, text, verdict string
		solved              bool
		local               float64 // checked when ≠ 0
	}{
		{"grid", "#### " + task.Solution, "ok", true, 2 + 0.5 - 0.01 + 0.5 + 0.02*12},
		{"grid in fence", "#### ```json\n" + task.Solution + "\n```", "ok", true, 0},
		{"multi-line grid", "#### " + strings.ReplaceAll(task.Solution, "],", "],\n"), "ok", true, 0},
		{"placements", "#### [" + strings.Join(placements, ", ") + "]", "ok", true, 0},
		{"quoted placements", "#### [" + strings.Join(quoted, ", ") + "]", "ok", true, 0},
		{"flat grid", "#### [" + flat + "]", "ok", true, 0},
		{"malformed", "#### [[1,2],[3]]", "ok", false, -1},
		{"clue changed", "#### " + clue, "ok", false, 0},
		{"prose", "#### the grid above", "bad_answer", false, -2},
		{"no marker", task.Solution, "no_answer", false, -2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.Reset(11)
			out, err := e.Step(ctx, "plan", tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if out.Info["verdict"] != tc.verdict || out.Success != tc.solved {
				t.Fatalf("%+v", out)
			}
			if tc.local != 0 && fmt.Sprintf("%.4f", out.Local) != fmt.Sprintf("%.4f", tc.local) {
				t.Fatalf("local %v, want %v (%+v)", out.Local, tc.local, out.Info)
			}
		})
	}
}

func TestGolden(t *testing.T) {
	envtest.CheckGolden(t, "sudoku", 7, deps(t), "testdata/oracle.golden", *update)
}

func FuzzParseGrid(f *testing.F) {
	envtest.FuzzPlanAnswer(f, "sudoku", "#### [[1,2,3,4],[3,4,1,2],[2,1,4,3],[4,3,2,1]]", "#### [[0,1,2]]", "#### ['1','2']", "#### [1,2,3]", "#### [[[", "#### [[1,2,3,4,5,6,7,8,9,10]]", "#### [[-1,0,99]]")
}

func BenchmarkGenerate(b *testing.B) {
	for _, size := range []int{sudoku.DefaultSize, 6, 9} {
		b.Run(fmt.Sprintf("size%d", size), func(b *testing.B) {
			sc := envs.DefaultConfig("sudoku").Sudoku
			for i := 0; b.Loop(); i++ {
				sudoku.Generate(int64(i), size, sc)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "instances/s")
		})
	}
}
