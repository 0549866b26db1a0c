// Package sokoban is the Sokoban environment: push every box onto a goal.
// Registered as "sokoban".
//
// # Instances
//
// A size×size room (default 6) walled on its border, with a few inner walls,
// env.sokoban.boxes boxes (default 1) and as many goals. The seeded
// generator (Generate) places walls, goals, boxes and the player at random
// and keeps the first level that its breadth-first solver solves within a
// bound of solverLimit states, in at least env.sokoban.min_moves moves
// (default 4); the solver's (move-optimal) length is the task's SolutionLen.
// Unlike PettingLLMs' reverse-play generator, every level is checked by a
// complete solver, so every instance is solvable.
//
// # Board and answers
//
// The board is the standard text format, one line per row, row 0 on top:
// '#' wall, ' ' floor, '.' goal, '$' box, '*' box on a goal, '@' player,
// '+' player on a goal; then a line "Player at (r, c).". Answers are a list
// of moves U, D, L, R (as in package planpath: ["U","R"], ['u'], [up],
// "U, R" or "UR"). Moving into a box pushes it if the cell behind it is free;
// a move into a wall or an immovable box fails and the player stays. Moves
// after the puzzle is solved are ignored.
//
// # Rewards (per move, env.sokoban.*)
//
// step −0.01 per valid move, invalid −0.05; box onto a goal +1, box off a
// goal −0.5; all boxes on goals +10; shaping λ(γΦ(s′)−Φ(s)) with Φ = −Σ over
// boxes of the Manhattan distance to the nearest goal, λ=0.1, γ=0.99; fail
// −5 on the last turn of an unsolved episode.
package sokoban

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/envs/internal/parse"
	"github.com/troupe-rl/troupe/envs/internal/rng"
	"github.com/troupe-rl/troupe/envs/internal/stateful"
)

// DefaultSize is the room side when env.size is 0.
const DefaultSize = 6

// solverLimit bounds the states the solver visits per level.
const solverLimit = 200_000

// generatorTries bounds the random levels tried per seed.
const generatorTries = 5000

func init() { envs.Register("sokoban", New) }

// New is the registered factory.
func New(cfg envs.Config, deps envs.Deps) (envs.Env, error) {
	size, err := stateful.GridSize(cfg, "sokoban", DefaultSize, 5, 12)
	if err != nil {
		return nil, err
	}
	sc := cfg.Sokoban
	spec := &stateful.Spec{
		Name:    "sokoban",
		Title:   "Sokoban",
		Variant: fmt.Sprintf("%dx%d-b%d-m%d", size, size, sc.Boxes, sc.MinMoves),
		Size:    size,
		Rules: fmt.Sprintf("Sokoban on a %d×%d board: push every box onto a goal. Rows are numbered from 0 at the top, columns from 0 at the left. "+
			"Legend: '#' wall, ' ' floor, '.' goal, '$' box, '*' box on a goal, '@' the player, '+' the player on a goal. "+
			"Moves: U (up, row−1), D (down, row+1), L (left, column−1), R (right, column+1). Walking into a box pushes it one cell further if that cell is floor or a goal; "+
			"boxes cannot be pulled and two boxes cannot be pushed at once. A move that is blocked fails and the player stays.", size, size),
		Answer: `a JSON list of moves such as ["U","R","R"]`,
		Fail:   sc.Fail,
		Generate: func(seed int64) (stateful.Game, int, string, error) {
			g, sol, err := Generate(seed, size, sc)
			if err != nil {
				return nil, 0, "", err
			}
			return g, len(sol), parse.FormatMoves(sol), nil
		},
	}
	return stateful.New(spec, cfg, deps)
}

// Game is one Sokoban level and its state.
type Game struct {
	N      int
	Wall   []bool // N*N, row-major
	Goal   []bool
	Boxes  []int // cell indices, sorted
	Player int
	cfg    envs.SokobanConfig
}

// Generate builds the level for seed (deterministic) and returns it with the
// solver's solution.
func Generate(seed int64, n int, sc envs.SokobanConfig) (*Game, []parse.Move, error) {
	r := rng.New(seed, 0x736f6b6f62616e) // "sokoban"
	g := &Game{N: n, Wall: make([]bool, n*n), Goal: make([]bool, n*n), cfg: sc}
	for range generatorTries {
		var free []int
		for i := range g.Wall {
			row, col := i/n, i%n
			g.Wall[i] = row == 0 || col == 0 || row == n-1 || col == n-1 || r.Float64() < 0.1
			g.Goal[i] = false
			if !g.Wall[i] {
				free = append(free, i)
			}
		}
		if len(free) < 2*sc.Boxes+1 {
			continue
		}
		r.Shuffle(len(free), func(i, j int) { free[i], free[j] = free[j], free[i] })
		for _, c := range free[:sc.Boxes] {
			g.Goal[c] = true
		}
		// Boxes and player from a second draw so boxes may start on goals.
		rest := slices.Clone(free)
		r.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
		g.Boxes = slices.Clone(rest[:sc.Boxes])
		slices.Sort(g.Boxes)
		g.Player = rest[sc.Boxes]
		if g.Solved() {
			continue
		}
		sol := g.solve(solverLimit)
		if sol != nil && len(sol) >= sc.MinMoves {
			return g, sol, nil
		}
	}
	return nil, nil, fmt.Errorf("sokoban: no solvable %d×%d level with %d boxes and ≥ %d moves in %d tries", n, n, sc.Boxes, sc.MinMoves, generatorTries)
}

var order = []parse.Move{parse.Up, parse.Down, parse.Left, parse.Right}

// key packs a state: the player in the low byte, then the sorted boxes.
func key(player int, boxes []int) uint64 {
	k := uint64(player)
	for i, b := range boxes {
		k |= uint64(b+1) << (8 * (i + 1))
	}
	return k
}

type parent struct {
	prev uint64
	move parse.Move
}

// solve returns a move-optimal solution from the current state by BFS, nil
// if there is none within limit states (or the level is already solved).
func (g *Game) solve(limit int) []parse.Move {
	if g.Solved() {
		return nil
	}
	start := key(g.Player, g.Boxes)
	seen := map[uint64]parent{start: {}}
	type node struct {
		player int
		boxes  []int
	}
	q := []node{{g.Player, g.Boxes}}
	dead := g.deadCells()
	for len(q) > 0 && len(seen) < limit {
		cur := q[0]
		q = q[1:]
		ck := key(cur.player, cur.boxes)
		for _, m := range order {
			np, nb, pushed, ok := g.move(cur.player, cur.boxes, m)
			if !ok || pushed && hasDead(nb, dead) {
				continue
			}
			nk := key(np, nb)
			if _, ok := seen[nk]; ok {
				continue
			}
			seen[nk] = parent{prev: ck, move: m}
			if g.allOnGoals(nb) {
				var path []parse.Move
				for k := nk; k != start; k = seen[k].prev {
					path = append(path, seen[k].move)
				}
				slices.Reverse(path)
				return path
			}
			q = append(q, node{np, nb})
		}
	}
	return nil
}

// deadCells marks non-goal corner cells: a box there can never move again.
func (g *Game) deadCells() []bool {
	n := g.N
	d := make([]bool, n*n)
	for i := range d {
		if g.Wall[i] || g.Goal[i] {
			continue
		}
		up, down := g.Wall[i-n], g.Wall[i+n]
		left, right := g.Wall[i-1], g.Wall[i+1]
		d[i] = (up || down) && (left || right)
	}
	return d
}

func hasDead(boxes []int, dead []bool) bool {
	for _, b := range boxes {
		if dead[b] {
			return true
		}
	}
	return false
}

func (g *Game) allOnGoals(boxes []int) bool {
	for _, b := range boxes {
		if !g.Goal[b] {
			return false
		}
	}
	return true
}

// move applies m from (player, boxes). It returns the new player cell and
// boxes (the same slice when no box moved, a new sorted one after a push),
// whether a box was pushed, and whether the move is legal. The border is all
// walls, so there are no bounds checks.
func (g *Game) move(player int, boxes []int, m parse.Move) (np int, nb []int, pushed, ok bool) {
	dr, dc := m.Delta()
	d := dr*g.N + dc
	to := player + d
	if g.Wall[to] {
		return player, boxes, false, false
	}
	bi := slices.Index(boxes, to)
	if bi < 0 {
		return to, boxes, false, true
	}
	beyond := to + d
	if g.Wall[beyond] || slices.Contains(boxes, beyond) {
		return player, boxes, false, false
	}
	nb = slices.Clone(boxes)
	nb[bi] = beyond
	slices.Sort(nb)
	return to, nb, true, true
}

// Board implements stateful.Game.
func (g *Game) Board() string {
	var b strings.Builder
	for i := range g.Wall {
		box := slices.Contains(g.Boxes, i)
		switch {
		case g.Wall[i]:
			b.WriteByte('#')
		case box && g.Goal[i]:
			b.WriteByte('*')
		case box:
			b.WriteByte('$')
		case i == g.Player && g.Goal[i]:
			b.WriteByte('+')
		case i == g.Player:
			b.WriteByte('@')
		case g.Goal[i]:
			b.WriteByte('.')
		default:
			b.WriteByte(' ')
		}
		if i%g.N == g.N-1 {
			b.WriteByte('\n')
		}
	}
	fmt.Fprintf(&b, "Player at (%d, %d).", g.Player/g.N, g.Player%g.N)
	return b.String()
}

// Parse implements stateful.Game.
func (g *Game) Parse(v parse.Value, max int) (any, error) { return parse.MoveAction(v, max) }

func (g *Game) potential(boxes []int) float64 {
	sum := 0
	for _, b := range boxes {
		best := 1 << 30
		for c, isGoal := range g.Goal {
			if isGoal {
				best = min(best, abs(b/g.N-c/g.N)+abs(b%g.N-c%g.N))
			}
		}
		sum += best
	}
	return -float64(sum)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Apply implements stateful.Game.
func (g *Game) Apply(a any, turn int) (float64, map[string]any) {
	ms := a.([]parse.Move)
	sc := g.cfg
	var rew float64
	applied, invalid, ignored, pushes := 0, 0, 0, 0
	for _, m := range ms {
		if g.Solved() {
			ignored++
			continue
		}
		np, nb, pushed, ok := g.move(g.Player, g.Boxes, m)
		if !ok {
			rew += sc.Invalid
			invalid++
			continue
		}
		rew += sc.Step
		applied++
		if pushed {
			pushes++
			from, to := np, np+(np-g.Player)
			switch {
			case g.Goal[to] && !g.Goal[from]:
				rew += sc.BoxOn
			case g.Goal[from] && !g.Goal[to]:
				rew += sc.BoxOff
			}
			rew += sc.Shaping.Of(g.potential(g.Boxes), g.potential(nb))
		}
		g.Player, g.Boxes = np, nb
		if g.Solved() {
			rew += sc.Win
		}
	}
	sum := fmt.Sprintf("%d moves made (%d pushes), %d failed", applied, pushes, invalid)
	if ignored > 0 {
		sum += fmt.Sprintf(", %d ignored after solving", ignored)
	}
	onGoal := 0
	for _, b := range g.Boxes {
		if g.Goal[b] {
			onGoal++
		}
	}
	if g.Solved() {
		sum += "; every box is on a goal"
	} else {
		sum += fmt.Sprintf("; %d of %d boxes on goals", onGoal, len(g.Boxes))
	}
	return rew, map[string]any{
		"action": parse.FormatMoves(ms), "moves": applied, "pushes": pushes, "invalid": invalid, "ignored": ignored,
		"boxes_on_goals": onGoal, "player": []int{g.Player / g.N, g.Player % g.N}, "summary": sum,
	}
}

// Solved implements stateful.Game.
func (g *Game) Solved() bool { return g.allOnGoals(g.Boxes) }

// Clone implements stateful.Game.
func (g *Game) Clone() stateful.Game {
	c := *g
	c.Boxes = slices.Clone(g.Boxes)
	// Wall and Goal never change after generation; sharing them is safe.
	return &c
}

// Solve implements stateful.Game.
func (g *Game) Solve() (string, error) {
	if g.Solved() {
		return "", errors.New("sokoban: already solved")
	}
	sol := g.solve(solverLimit)
	if sol == nil {
		return "", errors.New("sokoban: no solution from this state (a box is stuck)")
	}
	return parse.FormatMoves(sol), nil
}
