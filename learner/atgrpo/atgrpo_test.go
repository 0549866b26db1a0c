package atgrpo

import (
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*(1+math.Abs(b)) }

func TestGroupKey(t *testing.T) {
	s := Sample{ProblemID: "p1", Turn: 2, Role: "coder"}
	tests := []struct {
		mode Mode
		want Key
	}{
		{Tree, Key{"p1", 2, "coder"}},
		{"", Key{"p1", 2, "coder"}},
		{NoTree, Key{"p1", -1, ""}},
		{AgentWise, Key{"p1", -1, "coder"}},
		{TurnWise, Key{"p1", 2, ""}},
	}
	for _, tc := range tests {
		if got := GroupKey(tc.mode, s); got != tc.want {
			t.Errorf("GroupKey(%q) = %v, want %v", tc.mode, got, tc.want)
		}
	}
}

// TestAblationGroupings: agent-wise grouping pools a role's turns, turn-wise
// pools a turn's roles, and neither ever merges two problems.
func TestAblationGroupings(t *testing.T) {
	samples := []Sample{
		{ProblemID: "a", Turn: 0, Role: "tool"}, {ProblemID: "a", Turn: 1, Role: "tool"},
		{ProblemID: "a", Turn: 0, Role: "plan"}, {ProblemID: "a", Turn: 1, Role: "plan"},
		{ProblemID: "b", Turn: 0, Role: "tool"}, {ProblemID: "b", Turn: 1, Role: "tool"},
	}
	count := func(mode Mode) map[string]int {
		out := map[string]int{}
		for _, s := range samples {
			out[GroupKey(mode, s).String()]++
		}
		return out
	}
	want := map[Mode]map[string]int{
		AgentWise: {"a/tool": 2, "a/plan": 2, "b/tool": 2},
		TurnWise:  {"a/t0": 2, "a/t1": 2, "b/t0": 1, "b/t1": 1},
		Tree:      {"a/t0/tool": 1, "a/t1/tool": 1, "a/t0/plan": 1, "a/t1/plan": 1, "b/t0/tool": 1, "b/t1/tool": 1},
		NoTree:    {"a": 4, "b": 2},
	}
	for mode, w := range want {
		got := count(mode)
		if len(got) != len(w) {
			t.Errorf("%s: groups %v, want %v", mode, got, w)
			continue
		}
		for k, n := range w {
			if got[k] != n {
				t.Errorf("%s: groups %v, want %v", mode, got, w)
			}
		}
	}
	if err := (Options{Mode: "both"}).Validate(); err == nil {
		t.Error("unknown mode accepted")
	}
}

func TestMixReward(t *testing.T) {
	tests := []struct {
		name             string
		alpha, team, loc float64
		want             float64
	}{
		{"alpha0 is local", 0, 5, 2, 2},
		{"alpha1 is team", 1, 5, 2, 5},
		{"alpha0.7", 0.7, 1, 0, 0.7},
		{"alpha0.5", 0.5, 1, 3, 2},
	}
	for _, tc := range tests {
		if got := MixReward(tc.alpha, tc.team, tc.loc); !near(got, tc.want) {
			t.Errorf("%s: got %v want %v", tc.name, got, tc.want)
		}
	}
}

func TestMeanStdUnbiased(t *testing.T) {
	tests := []struct {
		xs        []float64
		mean, std float64
	}{
		{nil, 0, 0},
		{[]float64{3}, 3, 0},
		{[]float64{1, 0}, 0.5, math.Sqrt(0.5)},             // population std would be 0.5
		{[]float64{1, 2, 3, 4}, 2.5, math.Sqrt(5.0 / 3.0)}, // population: sqrt(1.25)
		{[]float64{2, 2, 2}, 2, 0},
	}
	for _, tc := range tests {
		m, s := MeanStd(tc.xs)
		if !near(m, tc.mean) || !near(s, tc.std) {
			t.Errorf("MeanStd(%v) = %v, %v; want %v, %v", tc.xs, m, s, tc.mean, tc.std)
		}
	}
}

func TestAdvantage(t *testing.T) {
	tests := []struct {
		name         string
		r, mean, std float64
		n            int
		noStd        bool
		want         float64
	}{
		{"singleton", 1, 1, 0, 1, false, 0},
		{"singleton no std", 5, 0, 0, 1, true, 0},
		{"zero variance", 1, 1, 0, 4, false, 0},
		{"normalised", 1, 0.5, math.Sqrt(0.5), 2, false, 0.5 / (math.Sqrt(0.5) + 1e-6)},
		{"no std norm", 1, 0.25, 0.5, 4, true, 0.75},
	}
	for _, tc := range tests {
		if got := Advantage(tc.r, tc.mean, tc.std, tc.n, 1e-6, tc.noStd); !near(got, tc.want) {
			t.Errorf("%s: got %v want %v", tc.name, got, tc.want)
		}
	}
}

func TestCompute(t *testing.T) {
	sq := math.Sqrt
	tests := []struct {
		name    string
		samples []Sample
		opt     Options
		adv     []float64
		keep    []bool
		groups  int
	}{
		{
			name: "two problems never share a group (tree)",
			samples: []Sample{
				{ProblemID: "a", LocalReward: 1}, {ProblemID: "b", LocalReward: 0},
				{ProblemID: "a", LocalReward: 0}, {ProblemID: "b", LocalReward: 1},
			},
			adv:    []float64{0.5 / (sq(0.5) + 1e-6), -0.5 / (sq(0.5) + 1e-6), -0.5 / (sq(0.5) + 1e-6), 0.5 / (sq(0.5) + 1e-6)},
			keep:   []bool{true, true, true, true},
			groups: 2,
		},
		{
			name: "two problems never share a group (no_tree)",
			samples: []Sample{
				{ProblemID: "a", LocalReward: 1}, {ProblemID: "b", LocalReward: 1},
			},
			opt:    Options{Mode: NoTree},
			adv:    []float64{0, 0}, // two singletons, not one zero-variance pair
			keep:   []bool{true, true},
			groups: 2,
		},
		{
			name: "turns and roles split groups in tree mode",
			samples: []Sample{
				{ProblemID: "a", Turn: 0, Role: "x", LocalReward: 1},
				{ProblemID: "a", Turn: 1, Role: "x", LocalReward: 0},
				{ProblemID: "a", Turn: 0, Role: "y", LocalReward: 0},
			},
			adv:    []float64{0, 0, 0},
			keep:   []bool{true, true, true},
			groups: 3,
		},
		{
			name: "no_tree merges turns and roles of one problem",
			samples: []Sample{
				{ProblemID: "a", Turn: 0, Role: "x", LocalReward: 1},
				{ProblemID: "a", Turn: 1, Role: "y", LocalReward: 0},
			},
			opt:    Options{Mode: NoTree, NoStdNorm: true},
			adv:    []float64{0.5, -0.5},
			keep:   []bool{true, true},
			groups: 1,
		},
		{
			name:    "singleton group gets zero",
			samples: []Sample{{ProblemID: "a", LocalReward: 7}},
			adv:     []float64{0},
			keep:    []bool{true},
			groups:  1,
		},
		{
			name: "alpha 1 uses team reward only",
			samples: []Sample{
				{ProblemID: "a", LocalReward: 100, TeamReward: 1}, {ProblemID: "a", LocalReward: -100, TeamReward: 0},
			},
			opt:    Options{Alpha: 1, NoStdNorm: true},
			adv:    []float64{0.5, -0.5},
			keep:   []bool{true, true},
			groups: 1,
		},
		{
			name: "alpha 0 uses local reward only",
			samples: []Sample{
				{ProblemID: "a", LocalReward: 1, TeamReward: 100}, {ProblemID: "a", LocalReward: 0, TeamReward: -100},
			},
			opt:    Options{Alpha: 0, NoStdNorm: true},
			adv:    []float64{0.5, -0.5},
			keep:   []bool{true, true},
			groups: 1,
		},
		{
			name: "unbiased std in the advantage",
			samples: []Sample{
				{ProblemID: "a", LocalReward: 1}, {ProblemID: "a", LocalReward: 2},
				{ProblemID: "a", LocalReward: 3}, {ProblemID: "a", LocalReward: 4},
			},
			adv: []float64{-1.5 / (sq(5.0/3) + 1e-6), -0.5 / (sq(5.0/3) + 1e-6),
				0.5 / (sq(5.0/3) + 1e-6), 1.5 / (sq(5.0/3) + 1e-6)},
			keep:   []bool{true, true, true, true},
			groups: 1,
		},
		{
			name: "drop zero variance (singletons too)",
			samples: []Sample{
				{ProblemID: "a", LocalReward: 1}, {ProblemID: "a", LocalReward: 1},
				{ProblemID: "b", LocalReward: 1}, {ProblemID: "b", LocalReward: 0},
				{ProblemID: "c", LocalReward: 1},
			},
			opt:    Options{DropZeroVariance: true, NoStdNorm: true},
			adv:    []float64{0, 0, 0.5, -0.5, 0},
			keep:   []bool{false, false, true, true, false},
			groups: 3,
		},
		{
			name: "drop lowest half by mean",
			samples: []Sample{
				{ProblemID: "a", LocalReward: 0}, {ProblemID: "a", LocalReward: 1}, // mean .5
				{ProblemID: "b", LocalReward: 2}, {ProblemID: "b", LocalReward: 3}, // mean 2.5
				{ProblemID: "c", LocalReward: 0}, {ProblemID: "c", LocalReward: 0}, // mean 0
				{ProblemID: "d", LocalReward: 5}, {ProblemID: "d", LocalReward: 4}, // mean 4.5
			},
			opt:    Options{DropLowestMean: 0.5, NoStdNorm: true},
			adv:    []float64{0, 0, -0.5, 0.5, 0, 0, 0.5, -0.5},
			keep:   []bool{false, false, true, true, false, false, true, true},
			groups: 4,
		},
		{
			name: "lowest mean: singleton counts as 0, floor of fraction",
			samples: []Sample{
				{ProblemID: "a", LocalReward: 9}, // singleton, mean counts as 0
				{ProblemID: "b", LocalReward: 1}, {ProblemID: "b", LocalReward: 2},
				{ProblemID: "c", LocalReward: 3}, {ProblemID: "c", LocalReward: 4},
			},
			opt:    Options{DropLowestMean: 0.5, NoStdNorm: true}, // floor(1.5) = 1 group
			adv:    []float64{0, -0.5, 0.5, -0.5, 0.5},
			keep:   []bool{false, true, true, true, true},
			groups: 3,
		},
		{
			name: "filters compose: zero variance then lowest mean of the rest",
			samples: []Sample{
				{ProblemID: "a", LocalReward: 0}, {ProblemID: "a", LocalReward: 0},
				{ProblemID: "b", LocalReward: 0}, {ProblemID: "b", LocalReward: 1},
				{ProblemID: "c", LocalReward: 2}, {ProblemID: "c", LocalReward: 3},
			},
			opt:    Options{DropZeroVariance: true, DropLowestMean: 0.5, NoStdNorm: true},
			adv:    []float64{0, 0, 0, 0, -0.5, 0.5},
			keep:   []bool{false, false, false, false, true, true},
			groups: 3,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Compute(tc.samples, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Groups) != tc.groups {
				t.Errorf("groups = %d, want %d", len(res.Groups), tc.groups)
			}
			for i := range tc.adv {
				if !near(res.Advantages[i], tc.adv[i]) || res.Keep[i] != tc.keep[i] {
					t.Errorf("row %d: adv %v keep %v, want %v %v", i, res.Advantages[i], res.Keep[i], tc.adv[i], tc.keep[i])
				}
			}
			// No group mixes problems.
			for _, g := range res.Groups {
				for _, i := range g.Indices {
					if tc.samples[i].ProblemID != g.Key.ProblemID {
						t.Errorf("group %v holds row %d of problem %s", g.Key, i, tc.samples[i].ProblemID)
					}
				}
			}
		})
	}
}

func TestComputeEpsilonAndValidate(t *testing.T) {
	s := []Sample{{ProblemID: "a", LocalReward: 1}, {ProblemID: "a", LocalReward: 0}}
	res, err := Compute(s, Options{Epsilon: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if want := 0.5 / (math.Sqrt(0.5) + 0.5); !near(res.Advantages[0], want) {
		t.Errorf("eps 0.5: %v want %v", res.Advantages[0], want)
	}
	for _, bad := range []Options{{Alpha: -0.1}, {Alpha: 1.1}, {Mode: "x"}, {DropLowestMean: 1}, {Epsilon: -1}, {Alpha: math.NaN()}} {
		if _, err := Compute(s, bad); err == nil {
			t.Errorf("Compute(%+v): want error", bad)
		}
	}
}

func TestStats(t *testing.T) {
	s := []Sample{
		{ProblemID: "a", Turn: 0, Role: "x", LocalReward: 1},
		{ProblemID: "a", Turn: 0, Role: "x", LocalReward: 1}, // zero-variance group
		{ProblemID: "b", Turn: 0, Role: "x", LocalReward: 0},
		{ProblemID: "b", Turn: 0, Role: "x", LocalReward: 1}, // varied group
		{ProblemID: "b", Turn: 1, Role: "y", LocalReward: 3}, // singleton
	}
	res, err := Compute(s, Options{DropZeroVariance: true})
	if err != nil {
		t.Fatal(err)
	}
	st := res.Stats
	if st.Rows != 5 || st.Groups != 3 || st.SingletonGroups != 1 || st.KeptGroups != 1 || st.KeptRows != 2 {
		t.Errorf("counts: %+v", st)
	}
	if !near(st.ZeroVarianceFrac, 0.5) {
		t.Errorf("zero-variance frac %v, want 0.5", st.ZeroVarianceFrac)
	}
	if x := st.ByRole["x"]; x.N != 4 || !near(x.Mean, 0.75) || !near(x.Std, 0.5) {
		t.Errorf("role x: %+v", x)
	}
	if y := st.ByTurn[1]; y.N != 1 || y.Mean != 3 || y.Std != 0 {
		t.Errorf("turn 1: %+v", y)
	}
	if r := st.Reward; r.N != 5 || !near(r.Mean, 1.2) {
		t.Errorf("all: %+v", r)
	}
}

func TestDeterministicOrder(t *testing.T) {
	s := []Sample{{ProblemID: "z"}, {ProblemID: "a"}, {ProblemID: "z"}, {ProblemID: "m"}}
	for range 5 {
		res, _ := Compute(s, Options{})
		if res.Groups[0].Key.ProblemID != "z" || res.Groups[1].Key.ProblemID != "a" || res.Groups[2].Key.ProblemID != "m" {
			t.Fatalf("order: %+v", res.Groups)
		}
	}
}
