// Package sudoku is the Sudoku environment. Registered as "sudoku".
//
// # Instances
//
// Sizes 4 (2×2 boxes, the default), 6 (boxes of 2 rows × 3 columns) and 9
// (3×3 boxes). The seeded generator (Generate) shuffles a valid solution
// grid (digits, rows within bands, bands, columns within stacks, stacks)
// and then empties cells in random order, keeping a removal only when the
// backtracking solver still finds exactly one solution; it stops at
// env.sudoku.empty empty cells, or when no clue can go (0, the default:
// minimal puzzles). Every puzzle has a unique solution. The number of empty
// cells is the task's SolutionLen. (PettingLLMs read puzzles from a file
// that was often missing and never checked solvability.)
//
// # Board and answers
//
// The board is one line per row, row 0 on top, values separated by spaces,
// '.' for an empty cell. Answers are either the full grid as a list of rows,
// [[1,2,3,4],[3,4,1,2],…] (a flat list of size² numbers also works), or a
// list of placements [[row, column, value], …] with rows and columns
// numbered from 0. Numbers may be quoted. A grid may keep 0 for cells left
// empty; placements may overwrite earlier placements but not clues.
//
// # Rewards (env.sudoku.*)
//
// Full grid: step −0.01 plus 0.5·Δ(filled fraction of the empty cells) plus
// 0.02·Δ(complete, valid rows/columns/boxes); a grid that changes a clue or
// repeats a value in a row, column or box scores −0.5 and leaves the board
// unchanged; a grid of the wrong shape or with values outside 0..size scores
// −1. Placements: each −0.01, +0.2 in a cell with one candidate or +0.1 with
// two, +0.05 for a cell with the fewest candidates, and −0.3 (skipped) for one
// that breaks a rule or overwrites a clue; then the same progress terms.
// Solved: +2, and +0.5 more at turn 0.
package sudoku

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/envs/internal/parse"
	"github.com/troupe-rl/troupe/envs/internal/rng"
	"github.com/troupe-rl/troupe/envs/internal/stateful"
	"github.com/troupe-rl/troupe/internal/config"
)

// DefaultSize is the grid side when env.size is 0.
const DefaultSize = 4

// Boxes returns the box shape (rows, columns) for a supported size.
func Boxes(n int) (br, bc int, ok bool) {
	switch n {
	case 4:
		return 2, 2, true
	case 6:
		return 2, 3, true
	case 9:
		return 3, 3, true
	}
	return 0, 0, false
}

func init() { envs.Register("sudoku", New) }

// New is the registered factory.
func New(cfg envs.Config, deps envs.Deps) (envs.Env, error) {
	n := cfg.Size
	if n == 0 {
		n = DefaultSize
	}
	br, bc, ok := Boxes(n)
	if !ok {
		return nil, config.Errorf("size", "sudoku supports sizes 4, 6 and 9, got %d", n)
	}
	sc := cfg.Sudoku
	if sc.Empty >= n*n {
		return nil, config.Errorf("sudoku.empty", "must be < %d on a %d×%d grid, got %d", n*n, n, n, sc.Empty)
	}
	spec := &stateful.Spec{
		Name:    "sudoku",
		Title:   "Sudoku",
		Variant: fmt.Sprintf("%dx%d-e%d", n, n, sc.Empty),
		Size:    n,
		Rules: fmt.Sprintf("Sudoku on a %d×%d grid with boxes of %d rows × %d columns: fill every empty cell ('.') with a number from 1 to %d so that each row, each column and each box contains every number exactly once. "+
			"The given numbers cannot change. Rows are numbered from 0 at the top, columns from 0 at the left.", n, n, br, bc, n),
		Answer: fmt.Sprintf("the completed grid as a JSON list of %d rows of %d numbers, such as %s, or a JSON list of placements [[row, column, value], …] with rows and columns numbered from 0", n, n, exampleGrid(n)),
		Fail:   sc.Fail,
		Generate: func(seed int64) (stateful.Game, int, string, error) {
			g := Generate(seed, n, sc)
			return g, g.Empty, formatGrid(g.N, g.Solution), nil
		},
	}
	return stateful.New(spec, cfg, deps)
}

func exampleGrid(n int) string {
	if n == 4 {
		return "[[1,2,3,4],[3,4,1,2],[2,1,4,3],[4,3,2,1]]"
	}
	return "[[1,2,…],[…],…]"
}

// Game is one Sudoku puzzle and its state.
type Game struct {
	N, BR, BC int
	Given     []int // clues, 0 = empty; row-major
	Cells     []int // current board
	Solution  []int
	Empty     int // empty cells in the puzzle
	cfg       envs.SudokuConfig
}

// Generate builds the puzzle for seed (deterministic).
func Generate(seed int64, n int, sc envs.SudokuConfig) *Game {
	br, bc, _ := Boxes(n)
	r := rng.New(seed, 0x7375646f6b75) // "sudoku"
	digits := r.Perm(n)
	rows := bandPerm(r, n, br) // n/br bands of br rows
	cols := bandPerm(r, n, bc) // n/bc stacks of bc columns
	sol := make([]int, n*n)
	for i := range sol {
		rr, cc := rows[i/n], cols[i%n]
		sol[i] = digits[(bc*(rr%br)+rr/br+cc)%n] + 1
	}
	cells := append([]int(nil), sol...)
	s := newSolver(n, br, bc)
	empty := 0
	for _, i := range r.Perm(n * n) {
		if sc.Empty > 0 && empty >= sc.Empty {
			break
		}
		v := cells[i]
		cells[i] = 0
		if s.count(cells, 2, nil) != 1 {
			cells[i] = v
			continue
		}
		empty++
	}
	return &Game{N: n, BR: br, BC: bc, Given: cells, Cells: append([]int(nil), cells...), Solution: sol, Empty: empty, cfg: sc}
}

// bandPerm permutes n lines grouped in bands of size k: the bands, and the
// lines within each band.
func bandPerm(r *rng.Rand, n, k int) []int {
	bands := r.Perm(n / k)
	out := make([]int, 0, n)
	for _, b := range bands {
		for _, j := range r.Perm(k) {
			out = append(out, b*k+j)
		}
	}
	return out
}

// solver is a bitmask backtracking solver with the fewest-candidates rule.
type solver struct {
	n, br, bc        int
	full             uint32
	row, col, box    []uint32
	found, limit     int
	cells, firstSeen []int
}

func newSolver(n, br, bc int) *solver {
	return &solver{n: n, br: br, bc: bc, full: 1<<n - 1, row: make([]uint32, n), col: make([]uint32, n), box: make([]uint32, n)}
}

func (s *solver) boxOf(i int) int { return (i/s.n/s.br)*(s.n/s.bc) + (i%s.n)/s.bc }

// count returns the number of solutions of cells, up to limit, and writes
// the first into first when it is non-nil. Cells holding values that break a
// rule make the count 0. cells is left unchanged.
func (s *solver) count(cells []int, limit int, first []int) int {
	clear(s.row)
	clear(s.col)
	clear(s.box)
	for i, v := range cells {
		if v == 0 {
			continue
		}
		bit := uint32(1) << (v - 1)
		r, c, b := i/s.n, i%s.n, s.boxOf(i)
		if s.row[r]&bit != 0 || s.col[c]&bit != 0 || s.box[b]&bit != 0 {
			return 0
		}
		s.row[r] |= bit
		s.col[c] |= bit
		s.box[b] |= bit
	}
	s.found, s.limit, s.firstSeen = 0, limit, first
	s.cells = append(s.cells[:0], cells...)
	s.rec()
	return s.found
}

func (s *solver) rec() {
	best, bestMask, bestCnt := -1, uint32(0), 99
	for i, v := range s.cells {
		if v != 0 {
			continue
		}
		m := s.full &^ (s.row[i/s.n] | s.col[i%s.n] | s.box[s.boxOf(i)])
		cnt := bits.OnesCount32(m)
		if cnt == 0 {
			return
		}
		if cnt < bestCnt {
			best, bestMask, bestCnt = i, m, cnt
			if cnt == 1 {
				break
			}
		}
	}
	if best < 0 {
		if s.found == 0 && s.firstSeen != nil {
			copy(s.firstSeen, s.cells)
		}
		s.found++
		return
	}
	r, c, b := best/s.n, best%s.n, s.boxOf(best)
	for m := bestMask; m != 0; m &= m - 1 {
		bit := m & -m
		s.cells[best] = bits.TrailingZeros32(bit) + 1
		s.row[r] |= bit
		s.col[c] |= bit
		s.box[b] |= bit
		s.rec()
		s.row[r] &^= bit
		s.col[c] &^= bit
		s.box[b] &^= bit
		s.cells[best] = 0
		if s.found >= s.limit {
			return
		}
	}
}

// Board implements stateful.Game.
func (g *Game) Board() string {
	var b strings.Builder
	for i, v := range g.Cells {
		if i%g.N > 0 {
			b.WriteByte(' ')
		}
		if v == 0 {
			b.WriteByte('.')
		} else {
			b.WriteString(strconv.Itoa(v))
		}
		if i%g.N == g.N-1 && i < len(g.Cells)-1 {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func formatGrid(n int, cells []int) string {
	var b strings.Builder
	b.WriteByte('[')
	for r := 0; r < n; r++ {
		if r > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('[')
		for c := 0; c < n; c++ {
			if c > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(cells[r*n+c]))
		}
		b.WriteByte(']')
	}
	b.WriteByte(']')
	return b.String()
}

// Actions Parse returns.
type (
	gridAction      []int // n*n values
	placementAction [][3]int
	malformedAction string // why
)

// Parse implements stateful.Game.
func (g *Game) Parse(v parse.Value, max int) (any, error) {
	if v.Kind == parse.ListKind && len(v.Items) > 0 && v.Items[0].Kind != parse.ListKind {
		// A flat list: one placement [r, c, v] or a grid of n*n numbers.
		v = parse.Value{Kind: parse.ListKind, Items: []parse.Value{v}}
		ints, err := parse.Ints(v)
		if err != nil {
			return nil, err
		}
		switch len(ints[0]) {
		case 3:
			return placementAction{{ints[0][0], ints[0][1], ints[0][2]}}, nil
		case g.N * g.N:
			return gridAction(ints[0]), nil
		}
		return malformedAction(fmt.Sprintf("a flat list of %d numbers is neither a placement nor a %d×%d grid", len(ints[0]), g.N, g.N)), nil
	}
	ints, err := parse.Ints(v)
	if err != nil {
		return nil, err
	}
	if len(ints) == 0 {
		return nil, errors.New("empty list")
	}
	if len(ints) > max {
		return nil, fmt.Errorf("more than %d items", max)
	}
	triples := true
	for _, r := range ints {
		triples = triples && len(r) == 3
	}
	if triples && !(len(ints) == g.N && g.N == 3) {
		p := make(placementAction, len(ints))
		for i, r := range ints {
			p[i] = [3]int{r[0], r[1], r[2]}
		}
		return p, nil
	}
	if len(ints) != g.N {
		return malformedAction(fmt.Sprintf("%d rows, want %d", len(ints), g.N)), nil
	}
	grid := make(gridAction, 0, g.N*g.N)
	for i, r := range ints {
		if len(r) != g.N {
			return malformedAction(fmt.Sprintf("row %d has %d values, want %d", i, len(r), g.N)), nil
		}
		grid = append(grid, r...)
	}
	return grid, nil
}

func (g *Game) mask(cells []int, i int) uint32 {
	n := g.N
	var m uint32
	r, c := i/n, i%n
	b0r, b0c := r/g.BR*g.BR, c/g.BC*g.BC
	for k := 0; k < n; k++ {
		for _, j := range []int{r*n + k, k*n + c, (b0r+k/g.BC)*n + b0c + k%g.BC} {
			if j != i && cells[j] != 0 {
				m |= 1 << (cells[j] - 1)
			}
		}
	}
	return m
}

// candidates returns the values cell i may take given the other cells.
func (g *Game) candidates(cells []int, i int) int {
	return bits.OnesCount32(uint32(1<<g.N-1) &^ g.mask(cells, i))
}

// conflicts reports whether any filled cell repeats a value in its units.
func (g *Game) conflicts(cells []int) bool {
	for i, v := range cells {
		if v != 0 && g.mask(cells, i)&(1<<(v-1)) != 0 {
			return true
		}
	}
	return false
}

// progress returns the filled cells and the complete, valid units.
func (g *Game) progress(cells []int) (filled, units int) {
	n := g.N
	for _, v := range cells {
		if v != 0 {
			filled++
		}
	}
	full := uint32(1<<n - 1)
	for k := 0; k < n; k++ {
		var rm, cm, bm uint32
		rc, rr, rb := 0, 0, 0
		b0r, b0c := k/(n/g.BC)*g.BR, k%(n/g.BC)*g.BC
		for j := 0; j < n; j++ {
			if v := cells[k*n+j]; v != 0 {
				rm |= 1 << (v - 1)
				rr++
			}
			if v := cells[j*n+k]; v != 0 {
				cm |= 1 << (v - 1)
				rc++
			}
			if v := cells[(b0r+j/g.BC)*n+b0c+j%g.BC]; v != 0 {
				bm |= 1 << (v - 1)
				rb++
			}
		}
		for _, u := range [][2]uint32{{rm, uint32(rr)}, {cm, uint32(rc)}, {bm, uint32(rb)}} {
			if u[0] == full && u[1] == uint32(n) {
				units++
			}
		}
	}
	return filled, units
}

// Apply implements stateful.Game.
func (g *Game) Apply(a any, turn int) (float64, map[string]any) {
	sc := g.cfg
	f0, u0 := g.progress(g.Cells)
	info := map[string]any{}
	var rew float64
	var sum string
	switch a := a.(type) {
	case malformedAction:
		info["action"] = "malformed grid"
		info["rejected"] = string(a)
		return sc.Malformed, mergeSummary(info, "malformed grid ("+string(a)+"); the board did not change")
	case gridAction:
		info["action"] = formatGrid(g.N, a)
		for i, v := range a {
			if v < 0 || v > g.N {
				info["rejected"] = fmt.Sprintf("value %d at (%d, %d) is not in 0..%d", v, i/g.N, i%g.N, g.N)
				return sc.Malformed, mergeSummary(info, "malformed grid ("+info["rejected"].(string)+"); the board did not change")
			}
			if g.Given[i] != 0 && v != g.Given[i] {
				info["rejected"] = fmt.Sprintf("the clue %d at (%d, %d) was changed to %d", g.Given[i], i/g.N, i%g.N, v)
				return sc.InvalidGrid, mergeSummary(info, "invalid grid ("+info["rejected"].(string)+"); the board did not change")
			}
		}
		if g.conflicts(a) {
			info["rejected"] = "a value repeats in a row, column or box"
			return sc.InvalidGrid, mergeSummary(info, "invalid grid (a value repeats in a row, column or box); the board did not change")
		}
		copy(g.Cells, a)
		rew = sc.Step
		sum = "grid accepted"
	case placementAction:
		parts := make([]string, len(a))
		made, bad := 0, 0
		for k, p := range a {
			parts[k] = fmt.Sprintf("[%d,%d,%d]", p[0], p[1], p[2])
			r, c, v := p[0], p[1], p[2]
			if g.Solved() {
				continue
			}
			i := r*g.N + c
			if r < 0 || r >= g.N || c < 0 || c >= g.N || v < 1 || v > g.N || g.Given[i] != 0 || g.mask(g.Cells, i)&(1<<(v-1)) != 0 {
				rew += sc.InvalidPlacement
				bad++
				continue
			}
			cand := g.candidates(g.Cells, i)
			fewest := cand
			for j, x := range g.Cells {
				if x == 0 && j != i {
					fewest = min(fewest, g.candidates(g.Cells, j))
				}
			}
			rew += sc.Step
			switch cand {
			case 1:
				rew += sc.Unique
			case 2:
				rew += sc.Few
			}
			if cand == fewest {
				rew += sc.MostConstrained
			}
			g.Cells[i] = v
			made++
		}
		info["action"] = "[" + strings.Join(parts, ",") + "]"
		info["placed"], info["rejected_placements"] = made, bad
		sum = fmt.Sprintf("%d placements made, %d rejected", made, bad)
	}
	f1, u1 := g.progress(g.Cells)
	if g.Empty > 0 {
		rew += sc.Progress * float64(f1-f0) / float64(g.Empty)
	}
	rew += sc.Constraint * float64(u1-u0)
	solved := g.Solved()
	if solved {
		rew += sc.Solved
		if turn == 0 {
			rew += sc.Efficient
		}
		sum += "; the puzzle is solved"
	} else {
		sum += fmt.Sprintf("; %d of %d empty cells filled", f1-(g.N*g.N-g.Empty), g.Empty)
	}
	info["filled"] = f1 - (g.N*g.N - g.Empty)
	info["solved"] = solved
	return rew, mergeSummary(info, sum)
}

func mergeSummary(info map[string]any, sum string) map[string]any {
	info["summary"] = sum
	return info
}

// Solved implements stateful.Game.
func (g *Game) Solved() bool {
	for _, v := range g.Cells {
		if v == 0 {
			return false
		}
	}
	return !g.conflicts(g.Cells)
}

// Clone implements stateful.Game.
func (g *Game) Clone() stateful.Game {
	c := *g
	c.Cells = append([]int(nil), g.Cells...)
	// Given and Solution never change after generation; sharing them is safe.
	return &c
}

// Solve implements stateful.Game: the unique solution as a full grid.
func (g *Game) Solve() (string, error) {
	return formatGrid(g.N, g.Solution), nil
}
