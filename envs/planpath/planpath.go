// Package planpath is the Plan-Path environment: move an agent across a grid
// with walls from its start to a goal. Registered as "planpath".
//
// # Instances
//
// A size×size grid (default 10) whose cells are walls with probability
// env.planpath.wall_prob (default 0.22); start and goal are distinct free
// cells with a path between them at least env.planpath.min_distance long.
// Instances come from a seeded generator (see Generate) that retries until
// BFS finds such a path, and falls back to an open grid with opposite
// corners; the BFS shortest length is recorded as the task's SolutionLen.
//
// # Board and answers
//
// The board is one line per row, row 0 on top, '#' wall, '.' free, 'A' the
// agent, 'G' the goal, followed by a line "Agent at (r, c); goal at (r, c).".
// Answers are a list of moves: U (row−1), D (row+1), L (column−1),
// R (column+1), as ["U","R"], ['u','r'], [up, right], "U, R" or "UR".
// A move into a wall or off the grid fails and the agent stays; moves after
// the goal is reached are ignored.
//
// # Rewards (per move, env.planpath.*)
//
// step −0.01 for a valid move, invalid −0.1; shaping λ(γΦ(s′)−Φ(s)) with
// Φ = −Manhattan(agent, goal), λ=1, γ=0.99; goal +1, and +0.5 more when
// the valid moves taken so far equal the shortest length; fail −1 on the
// last turn of an unsolved episode. See package stateful for the roles.
package planpath

import (
	"errors"
	"fmt"
	"strings"

	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/envs/internal/parse"
	"github.com/troupe-rl/troupe/envs/internal/rng"
	"github.com/troupe-rl/troupe/envs/internal/stateful"
	"github.com/troupe-rl/troupe/internal/config"
)

// DefaultSize is the grid side when env.size is 0.
const DefaultSize = 10

func init() { envs.Register("planpath", New) }

// New is the registered factory.
func New(cfg envs.Config, deps envs.Deps) (envs.Env, error) {
	size, err := stateful.GridSize(cfg, "planpath", DefaultSize, 2, 40)
	if err != nil {
		return nil, err
	}
	pc := cfg.PlanPath
	if pc.MinDistance > 2*(size-1) {
		return nil, config.Errorf("planpath.min_distance", "at most %d on a %d×%d grid, got %d", 2*(size-1), size, size, pc.MinDistance)
	}
	spec := &stateful.Spec{
		Name:    "planpath",
		Title:   "Plan-Path",
		Variant: fmt.Sprintf("%dx%d-w%g-d%d", size, size, pc.WallProb, pc.MinDistance),
		Size:    size,
		Rules: fmt.Sprintf("Plan-Path: move the agent A to the goal G on a %d×%d grid. Rows are numbered from 0 at the top, columns from 0 at the left. "+
			"'#' is a wall, '.' a free cell. Moves: U (up, row−1), D (down, row+1), L (left, column−1), R (right, column+1). "+
			"A move into a wall or off the grid fails and the agent stays. Reach G in as few moves as possible.", size, size),
		Answer:  `a JSON list of moves such as ["U","R","R"]`,
		Fail:    pc.Fail,
		Program: Program,
		Generate: func(seed int64) (stateful.Game, int, string, error) {
			g := Generate(seed, size, pc)
			return g, g.Shortest, parse.FormatMoves(g.Path()), nil
		},
	}
	return stateful.New(spec, cfg, deps)
}

// Program is the tool agent's demonstration (envs.ProgramSolver): a
// breadth-first search over the board read from standard input (the rows
// are the words made of ".#AG"; cells are numbered row by row), trying moves
// in the order U, D, L, R as Game.Path does. It is terse because a tiny
// warm-started model writes every token of it.
const Program = `import sys,json
g=[r for r in sys.stdin.read().split()if set(r)<=set(".#AG")]
n=len(g)
s=t=0
for i in range(n*n):
 if g[i//n][i%n]=="A":s=i
 if g[i//n][i%n]=="G":t=i
p={s:""}
q=[s]
for u in q:
 for m,d in("U",-n),("D",n),("L",-1),("R",1):
  v=u+d
  if 0<=v<n*n and(d*d>1 or v//n==u//n)and g[v//n][v%n]!="#"and v not in p:
   p[v]=p[u]+m
   q.append(v)
print("**Actions List**:",json.dumps(list(p[t])))
`

// Game is one Plan-Path instance and its state.
type Game struct {
	N        int
	Wall     []bool // N*N, row-major
	Start    int    // cell index
	Goal     int
	Pos      int
	Shortest int // BFS length from Start
	Steps    int // valid moves taken
	cfg      envs.PlanPathConfig
}

// Generate builds the instance for seed (deterministic).
func Generate(seed int64, n int, pc envs.PlanPathConfig) *Game {
	r := rng.New(seed, 0x706c616e70617468) // "planpath"
	g := &Game{N: n, Wall: make([]bool, n*n), cfg: pc}
	for range 2000 {
		for i := range g.Wall {
			g.Wall[i] = r.Float64() < pc.WallProb
		}
		s, t := r.IntN(n*n), r.IntN(n*n)
		if s == t || g.Wall[s] || g.Wall[t] {
			continue
		}
		if d := len(g.bfs(s, t)); d >= pc.MinDistance {
			g.Start, g.Goal, g.Pos, g.Shortest = s, t, s, d
			return g
		}
	}
	clear(g.Wall)
	g.Start, g.Goal, g.Pos, g.Shortest = 0, n*n-1, 0, 2*(n-1)
	return g
}

var order = []parse.Move{parse.Up, parse.Down, parse.Left, parse.Right}

// bfs returns a shortest move list from a to b, nil if none (or a == b).
func (g *Game) bfs(a, b int) []parse.Move {
	if a == b {
		return nil
	}
	n := g.N
	prev := make([]int32, n*n)
	for i := range prev {
		prev[i] = -1
	}
	prev[a] = int32(a)
	q := []int{a}
	for len(q) > 0 {
		c := q[0]
		q = q[1:]
		for _, m := range order {
			nx, ok := g.step(c, m)
			if !ok || prev[nx] >= 0 {
				continue
			}
			prev[nx] = int32(c)
			if nx == b {
				var path []parse.Move
				for x := b; x != a; x = int(prev[x]) {
					path = append(path, moveBetween(n, int(prev[x]), x))
				}
				for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
					path[i], path[j] = path[j], path[i]
				}
				return path
			}
			q = append(q, nx)
		}
	}
	return nil
}

func moveBetween(n, from, to int) parse.Move {
	switch to - from {
	case -n:
		return parse.Up
	case n:
		return parse.Down
	case -1:
		return parse.Left
	}
	return parse.Right
}

// step returns the cell reached from c by m, and whether the move is legal.
func (g *Game) step(c int, m parse.Move) (int, bool) {
	dr, dc := m.Delta()
	r, col := c/g.N+dr, c%g.N+dc
	if r < 0 || r >= g.N || col < 0 || col >= g.N || g.Wall[r*g.N+col] {
		return c, false
	}
	return r*g.N + col, true
}

// Path is the solver's shortest move list from the current position.
func (g *Game) Path() []parse.Move { return g.bfs(g.Pos, g.Goal) }

// Board implements stateful.Game.
func (g *Game) Board() string {
	var b strings.Builder
	for r := 0; r < g.N; r++ {
		for c := 0; c < g.N; c++ {
			i := r*g.N + c
			switch {
			case i == g.Pos:
				b.WriteByte('A')
			case i == g.Goal:
				b.WriteByte('G')
			case g.Wall[i]:
				b.WriteByte('#')
			default:
				b.WriteByte('.')
			}
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "Agent at (%d, %d); goal at (%d, %d).", g.Pos/g.N, g.Pos%g.N, g.Goal/g.N, g.Goal%g.N)
	return b.String()
}

// Parse implements stateful.Game.
func (g *Game) Parse(v parse.Value, max int) (any, error) { return parse.MoveAction(v, max) }

func (g *Game) manhattan(c int) float64 {
	dr, dc := c/g.N-g.Goal/g.N, c%g.N-g.Goal%g.N
	return float64(abs(dr) + abs(dc))
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
	pc := g.cfg
	var rew float64
	applied, invalid, ignored := 0, 0, 0
	optimal := false
	for _, m := range ms {
		if g.Pos == g.Goal {
			ignored++
			continue
		}
		nx, ok := g.step(g.Pos, m)
		if !ok {
			rew += pc.Invalid
			invalid++
			continue
		}
		rew += pc.Step + pc.Shaping.Of(-g.manhattan(g.Pos), -g.manhattan(nx))
		g.Pos = nx
		g.Steps++
		applied++
		if g.Pos == g.Goal {
			rew += pc.Goal
			if g.Steps == g.Shortest {
				rew += pc.Optimal
				optimal = true
			}
		}
	}
	sum := fmt.Sprintf("%d moves made, %d failed", applied, invalid)
	if ignored > 0 {
		sum += fmt.Sprintf(", %d ignored after the goal", ignored)
	}
	if g.Pos == g.Goal {
		sum += "; the agent reached the goal"
	} else {
		sum += fmt.Sprintf("; the agent is at (%d, %d)", g.Pos/g.N, g.Pos%g.N)
	}
	return rew, map[string]any{
		"action": parse.FormatMoves(ms), "moves": applied, "invalid": invalid, "ignored": ignored,
		"position": []int{g.Pos / g.N, g.Pos % g.N}, "at_goal": g.Pos == g.Goal, "optimal": optimal, "summary": sum,
	}
}

// Solved implements stateful.Game.
func (g *Game) Solved() bool { return g.Pos == g.Goal }

// Clone implements stateful.Game.
func (g *Game) Clone() stateful.Game {
	c := *g
	c.Wall = append([]bool(nil), g.Wall...)
	return &c
}

// Solve implements stateful.Game.
func (g *Game) Solve() (string, error) {
	if g.Pos == g.Goal {
		return "", errors.New("planpath: already at the goal")
	}
	p := g.Path()
	if p == nil {
		return "", errors.New("planpath: goal unreachable")
	}
	return parse.FormatMoves(p), nil
}
