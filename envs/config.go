package envs

import (
	"time"

	"github.com/troupe-rl/troupe/internal/config"
)

// Config is the "env:" section of an experiment config. Sub-sections hold
// per-environment knobs and reward shaping; an environment reads only its
// own. Every default below is the PettingLLMs value unless it says otherwise.
type Config struct {
	// Name of a registered environment: sudoku, sokoban, planpath, … (required).
	Name string `yaml:"name"`
	// Size is the grid side where it applies (0 = the environment's default:
	// sudoku 4, sokoban 6, planpath 10).
	Size int `yaml:"size,omitempty"`
	// MaxTurns bounds the turns of an episode (default 4). A turn is one step
	// of every role in turn order.
	MaxTurns int `yaml:"max_turns"`
	// Alpha mixes rewards: reward = alpha·team + (1−alpha)·local (default 0.7).
	Alpha float64 `yaml:"alpha"`
	// Mode is multi (tool agent then plan agent) or single (the plan agent
	// alone). Default multi.
	Mode string `yaml:"mode"`
	// Prompt is the prompt style: full (default: the role, the rules and the
	// board, as PettingLLMs words them) or brief (the role and the answer
	// format in one line each, then the board, and for the plan agent the
	// tool's output and actions without its program: for tiny models trained
	// from scratch, such as the embedded demo's, where the rules are only
	// tokens to attend past; about a third of the full prompt's length).
	Prompt string `yaml:"prompt"`
	// ParsePenalty is the local reward of a completion with no usable answer
	// or tool action list (default -2).
	ParsePenalty float64 `yaml:"parse_penalty"`
	// MaxActions caps the length of one answer's action list; longer lists
	// are rejected as unparsable (default 400).
	MaxActions int `yaml:"max_actions"`

	Tool     ToolConfig     `yaml:"tool"`
	Sudoku   SudokuConfig   `yaml:"sudoku"`
	Sokoban  SokobanConfig  `yaml:"sokoban"`
	PlanPath PlanPathConfig `yaml:"planpath"`
}

// The modes Config.Mode accepts.
const (
	ModeMulti  = "multi"
	ModeSingle = "single"
)

// The prompt styles Config.Prompt accepts.
const (
	PromptFull  = "full"
	PromptBrief = "brief"
)

// DefaultConfig returns the defaults for environment name.
func DefaultConfig(name string) Config {
	var c Config
	config.SetDefaults(&c)
	c.Name = name
	return c
}

// SetDefaults fills the documented defaults.
func (c *Config) SetDefaults() {
	c.MaxTurns = 4
	c.Alpha = 0.7
	c.Mode = ModeMulti
	c.Prompt = PromptFull
	c.ParsePenalty = -2
	c.MaxActions = 400
}

// Validate checks the section.
func (c *Config) Validate() error {
	switch {
	case c.Name == "":
		return config.Errorf("name", "required (e.g. planpath)")
	case c.Size < 0:
		return config.Errorf("size", "must be ≥ 0, got %d", c.Size)
	case c.MaxTurns < 1:
		return config.Errorf("max_turns", "must be ≥ 1, got %d", c.MaxTurns)
	case !(c.Alpha >= 0 && c.Alpha <= 1):
		return config.Errorf("alpha", "must be in [0, 1], got %v", c.Alpha)
	case c.Prompt != PromptFull && c.Prompt != PromptBrief:
		return config.Errorf("prompt", "must be %q or %q, got %q", PromptFull, PromptBrief, c.Prompt)
	case c.Mode != ModeMulti && c.Mode != ModeSingle:
		return config.Errorf("mode", "must be multi or single, got %q", c.Mode)
	case c.MaxActions < 1:
		return config.Errorf("max_actions", "must be ≥ 1, got %d", c.MaxActions)
	}
	return nil
}

// ToolConfig configures the tool agent's program runs.
type ToolConfig struct {
	// Timeout is the wall-clock limit of one program (default 20s, as the paper).
	Timeout time.Duration `yaml:"timeout"`
	// MemoryMB limits a program's memory (default 512).
	MemoryMB int `yaml:"memory_mb"`
	// OutputBytes caps captured stdout/stderr (default 64 KiB).
	OutputBytes int64 `yaml:"output_bytes"`
	// ExcerptBytes is how much of the program's output is shown to the plan
	// agent and recorded in Info (default 2000).
	ExcerptBytes int `yaml:"excerpt_bytes"`
}

// SetDefaults fills the documented defaults.
func (c *ToolConfig) SetDefaults() {
	c.Timeout = 20 * time.Second
	c.MemoryMB = 512
	c.OutputBytes = 64 << 10
	c.ExcerptBytes = 2000
}

// Validate checks the section.
func (c *ToolConfig) Validate() error {
	switch {
	case c.Timeout <= 0:
		return config.Errorf("timeout", "must be > 0, got %v", c.Timeout)
	case c.MemoryMB < 16:
		return config.Errorf("memory_mb", "must be ≥ 16, got %d", c.MemoryMB)
	case c.OutputBytes < 256:
		return config.Errorf("output_bytes", "must be ≥ 256, got %d", c.OutputBytes)
	case c.ExcerptBytes < 0:
		return config.Errorf("excerpt_bytes", "must be ≥ 0, got %d", c.ExcerptBytes)
	}
	return nil
}

// Shaping is potential-based reward shaping λ·(γ·Φ(s′) − Φ(s)) added per move.
type Shaping struct {
	Lambda float64 `yaml:"lambda"`
	Gamma  float64 `yaml:"gamma"`
}

// Of returns the shaping term for a move from potential before to after.
func (s Shaping) Of(before, after float64) float64 {
	return s.Lambda * (s.Gamma*after - before)
}

// Validate checks the section.
func (s *Shaping) Validate() error {
	if !(s.Gamma >= 0 && s.Gamma <= 1) {
		return config.Errorf("gamma", "must be in [0, 1], got %v", s.Gamma)
	}
	return nil
}

// PlanPathConfig holds Plan-Path's knobs and rewards.
type PlanPathConfig struct {
	// WallProb is the probability that a cell is a wall (default 0.22).
	WallProb float64 `yaml:"wall_prob"`
	// MinDistance is the least BFS distance from start to goal (default 1);
	// raise it for harder instances.
	MinDistance int `yaml:"min_distance"`
	// Step is added per valid move (default -0.01).
	Step float64 `yaml:"step"`
	// Invalid is the reward of a move into a wall or off the grid; the agent
	// stays (default -0.1).
	Invalid float64 `yaml:"invalid"`
	// Goal is the bonus for reaching the goal (default 1.0).
	Goal float64 `yaml:"goal"`
	// Optimal is the extra bonus when the path taken is a shortest one (default 0.5).
	Optimal float64 `yaml:"optimal"`
	// Fail is added to the last step of an unsolved episode (default -1).
	Fail float64 `yaml:"fail"`
	// Shaping uses Φ = −Manhattan(position, goal) (default λ=1, γ=0.99).
	Shaping Shaping `yaml:"shaping"`
}

// SetDefaults fills the documented defaults.
func (c *PlanPathConfig) SetDefaults() {
	*c = PlanPathConfig{WallProb: 0.22, MinDistance: 1, Step: -0.01, Invalid: -0.1, Goal: 1, Optimal: 0.5, Fail: -1,
		Shaping: Shaping{Lambda: 1, Gamma: 0.99}}
}

// Validate checks the section.
func (c *PlanPathConfig) Validate() error {
	switch {
	case !(c.WallProb >= 0 && c.WallProb <= 0.6):
		return config.Errorf("wall_prob", "must be in [0, 0.6], got %v", c.WallProb)
	case c.MinDistance < 1:
		return config.Errorf("min_distance", "must be ≥ 1, got %d", c.MinDistance)
	}
	return nil
}

// SokobanConfig holds Sokoban's knobs and rewards.
type SokobanConfig struct {
	// Boxes is the number of boxes (default 1).
	Boxes int `yaml:"boxes"`
	// MinMoves is the least solver solution length (default 4); raise it for
	// harder instances.
	MinMoves int `yaml:"min_moves"`
	// Step is added per move (default -0.01).
	Step float64 `yaml:"step"`
	// Invalid is the reward of a move into a wall or an immovable box (default -0.05).
	Invalid float64 `yaml:"invalid"`
	// BoxOn is the reward for pushing a box onto a goal (default 1).
	BoxOn float64 `yaml:"box_on"`
	// BoxOff is the reward for pushing a box off a goal (default -0.5).
	BoxOff float64 `yaml:"box_off"`
	// Win is the bonus when every box is on a goal (default 10).
	Win float64 `yaml:"win"`
	// Fail is added to the last step of an unsolved episode (default -5).
	Fail float64 `yaml:"fail"`
	// Shaping uses Φ = −Σ over boxes of the Manhattan distance to the nearest
	// goal (default λ=0.1, γ=0.99).
	Shaping Shaping `yaml:"shaping"`
}

// SetDefaults fills the documented defaults.
func (c *SokobanConfig) SetDefaults() {
	*c = SokobanConfig{Boxes: 1, MinMoves: 4, Step: -0.01, Invalid: -0.05, BoxOn: 1, BoxOff: -0.5, Win: 10, Fail: -5,
		Shaping: Shaping{Lambda: 0.1, Gamma: 0.99}}
}

// Validate checks the section.
func (c *SokobanConfig) Validate() error {
	switch {
	case c.Boxes < 1 || c.Boxes > 4:
		return config.Errorf("boxes", "must be in [1, 4], got %d", c.Boxes)
	case c.MinMoves < 1 || c.MinMoves > 60:
		return config.Errorf("min_moves", "must be in [1, 60], got %d", c.MinMoves)
	}
	return nil
}

// SudokuConfig holds Sudoku's knobs and rewards.
type SudokuConfig struct {
	// Empty is the number of empty cells to aim for; 0 removes clues until no
	// more can go without losing uniqueness (default 0: minimal puzzles).
	Empty int `yaml:"empty"`
	// Step is added per placement and per full-grid answer (default -0.01).
	Step float64 `yaml:"step"`
	// Progress weighs the change in the filled fraction of empty cells (default 0.5).
	Progress float64 `yaml:"progress"`
	// Constraint weighs the change in complete, valid rows/columns/boxes (default 0.02).
	Constraint float64 `yaml:"constraint"`
	// Unique rewards a placement in a cell with a single candidate (default 0.2).
	Unique float64 `yaml:"unique"`
	// Few rewards a placement in a cell with two candidates (default 0.1).
	Few float64 `yaml:"few"`
	// MostConstrained rewards picking a cell with the fewest candidates (default 0.05).
	MostConstrained float64 `yaml:"most_constrained"`
	// InvalidPlacement is the reward of a placement that breaks a rule or
	// overwrites a clue; it is skipped (default -0.3).
	InvalidPlacement float64 `yaml:"invalid_placement"`
	// InvalidGrid is the reward of a full grid that breaks a rule or changes a
	// clue; the board is unchanged (default -0.5).
	InvalidGrid float64 `yaml:"invalid_grid"`
	// Malformed is the reward of a grid of the wrong shape or values (default -1).
	Malformed float64 `yaml:"malformed"`
	// Solved is the bonus for a solved board (default 2).
	Solved float64 `yaml:"solved"`
	// Efficient is the extra bonus for solving at turn 0 (default 0.5).
	Efficient float64 `yaml:"efficient"`
	// Fail is added to the last step of an unsolved episode (default 0; the
	// paper has none for Sudoku).
	Fail float64 `yaml:"fail"`
}

// SetDefaults fills the documented defaults.
func (c *SudokuConfig) SetDefaults() {
	*c = SudokuConfig{Step: -0.01, Progress: 0.5, Constraint: 0.02, Unique: 0.2, Few: 0.1, MostConstrained: 0.05,
		InvalidPlacement: -0.3, InvalidGrid: -0.5, Malformed: -1, Solved: 2, Efficient: 0.5}
}

// Validate checks the section.
func (c *SudokuConfig) Validate() error {
	if c.Empty < 0 {
		return config.Errorf("empty", "must be ≥ 0, got %d", c.Empty)
	}
	return nil
}
