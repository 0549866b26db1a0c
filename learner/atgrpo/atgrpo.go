// Package atgrpo implements the grouping, reward mixing, filtering and
// advantage rules of AT-GRPO (agent- and turn-wise group-relative policy
// optimisation, PettingLLMs, arXiv:2510.11062) as pure functions over a
// small row type, [Sample]. It imports nothing of troupe; the learner maps
// trajectory rows onto Samples.
//
// Contract:
//
//   - Group key. In [Tree] mode a group is every sample with the same
//     (problem id, turn, role): the K branches that shared one parent state.
//     In [NoTree] mode (the GRPO baseline) a group is every sample of one
//     problem id. Distinct problem ids never share a group, whatever the
//     mode (the upstream code's env_idx // sample_num merged problems; that
//     bug is not reproduced).
//   - Reward. reward = α·team + (1−α)·local ([MixReward]); α=0 is pure
//     local reward, α=1 pure team reward.
//   - Advantage. For a group g with n ≥ 2 samples,
//     A = (r − mean_g) / (std_g + ε) with the unbiased (n−1) standard
//     deviation and ε = 1e-6 by default; with NoStdNorm, A = r − mean_g.
//     A group of one sample gets A = 0 (there is nothing to compare with).
//     A zero-variance group gets A = 0 (r − mean = 0 exactly).
//   - Filters run before advantages, on whole groups: DropZeroVariance
//     drops every group whose rewards are all equal (singletons included:
//     they carry no signal); DropLowestMean drops the ⌊f·G⌋ groups with the
//     lowest mean reward among the G groups that survive the first filter
//     (ties: the group that appears first is dropped first), singleton
//     groups counting as mean 0 as upstream.
//     Dropped samples have Keep=false and A=0.
//   - Order. Groups are listed in order of first appearance in the input;
//     outputs are indexed like the input. Nothing here is random, so the
//     same input always gives the same output.
//   - Stats describe the batch before filtering: row and group counts,
//     the fraction of zero-variance groups among groups of size ≥ 2, and
//     reward mean/std (unbiased) per role and per turn.
package atgrpo

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// Mode selects the group key.
type Mode string

const (
	// Tree groups by (problem id, turn, role): AT-GRPO.
	Tree Mode = "tree"
	// NoTree groups by problem id only: the GRPO baseline.
	NoTree Mode = "no_tree"
	// AgentWise groups by (problem id, role), pooling turns: the paper's
	// agent-wise-only ablation.
	AgentWise Mode = "agent"
	// TurnWise groups by (problem id, turn), pooling roles: the paper's
	// turn-wise-only ablation.
	TurnWise Mode = "turn"
)

// Modes lists the grouping modes.
var Modes = []Mode{Tree, NoTree, AgentWise, TurnWise}

// DefaultEpsilon is the ε in A = (r − mean)/(std + ε).
const DefaultEpsilon = 1e-6

// Sample is the part of one LLM call (one trajectory row) that AT-GRPO
// needs.
type Sample struct {
	ProblemID   string
	Turn        int
	Role        string
	LocalReward float64
	TeamReward  float64
}

// Key identifies a group. A coordinate the mode pools over is Turn -1 or
// Role "".
type Key struct {
	ProblemID string
	Turn      int
	Role      string
}

func (k Key) String() string {
	switch {
	case k.Turn < 0 && k.Role == "":
		return k.ProblemID
	case k.Turn < 0:
		return fmt.Sprintf("%s/%s", k.ProblemID, k.Role)
	case k.Role == "":
		return fmt.Sprintf("%s/t%d", k.ProblemID, k.Turn)
	}
	return fmt.Sprintf("%s/t%d/%s", k.ProblemID, k.Turn, k.Role)
}

// GroupKey returns the group key of s under mode ("" means Tree).
func GroupKey(mode Mode, s Sample) Key {
	switch mode {
	case NoTree:
		return Key{ProblemID: s.ProblemID, Turn: -1}
	case AgentWise:
		return Key{ProblemID: s.ProblemID, Turn: -1, Role: s.Role}
	case TurnWise:
		return Key{ProblemID: s.ProblemID, Turn: s.Turn}
	}
	return Key{ProblemID: s.ProblemID, Turn: s.Turn, Role: s.Role}
}

// MixReward returns α·team + (1−α)·local.
func MixReward(alpha, team, local float64) float64 {
	return alpha*team + (1-alpha)*local
}

// Options configure [Compute]. The zero value is AT-GRPO in tree mode with
// α = 0 (local reward only), std normalisation on, ε = 1e-6 and no filters.
type Options struct {
	Mode  Mode
	Alpha float64 // weight of the team reward, in [0, 1]
	// Epsilon is ε in the denominator; 0 means DefaultEpsilon.
	Epsilon float64
	// NoStdNorm skips the division by (std + ε): A = r − mean.
	NoStdNorm bool
	// DropZeroVariance drops groups whose rewards are all equal.
	DropZeroVariance bool
	// DropLowestMean is the fraction in [0, 1) of groups, lowest mean
	// reward first, to drop.
	DropLowestMean float64
}

// Validate checks the options.
func (o Options) Validate() error {
	switch {
	case o.Mode != "" && !slices.Contains(Modes, o.Mode):
		return fmt.Errorf("atgrpo: mode must be one of %v, got %q", Modes, o.Mode)
	case !(o.Alpha >= 0 && o.Alpha <= 1):
		return fmt.Errorf("atgrpo: alpha must be in [0, 1], got %v", o.Alpha)
	case o.Epsilon < 0 || math.IsNaN(o.Epsilon):
		return fmt.Errorf("atgrpo: epsilon must be ≥ 0, got %v", o.Epsilon)
	case !(o.DropLowestMean >= 0 && o.DropLowestMean < 1):
		return fmt.Errorf("atgrpo: drop_lowest_mean must be in [0, 1), got %v", o.DropLowestMean)
	}
	return nil
}

// Group is one group of samples.
type Group struct {
	Key     Key
	Indices []int   // into the input, ascending
	Mean    float64 // of the mixed rewards
	Std     float64 // unbiased; 0 for a singleton
	Kept    bool    // survived the filters
}

// ZeroVariance reports whether all the group's rewards are equal
// (singletons included).
func (g *Group) ZeroVariance() bool { return g.Std == 0 }

// Result is the output of [Compute], indexed like its input.
type Result struct {
	Rewards    []float64 // mixed rewards
	Advantages []float64 // 0 for dropped samples and singleton groups
	Keep       []bool    // false for samples of dropped groups
	Groups     []Group   // in order of first appearance
	Stats      Stats
}

// Stats summarises a batch (before filtering, except the Kept counts).
type Stats struct {
	Rows            int `json:"rows"`
	Groups          int `json:"groups"`
	SingletonGroups int `json:"singleton_groups"`
	// ZeroVarianceFrac is the fraction of groups of size ≥ 2 whose rewards
	// are all equal (0 when there are none).
	ZeroVarianceFrac float64               `json:"zero_variance_frac"`
	KeptGroups       int                   `json:"kept_groups"`
	KeptRows         int                   `json:"kept_rows"`
	Reward           RewardStat            `json:"reward"`
	ByRole           map[string]RewardStat `json:"by_role"`
	ByTurn           map[int]RewardStat    `json:"by_turn"`
}

// RewardStat is the count, mean and unbiased std of some rewards.
type RewardStat struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	Std  float64 `json:"std"`
}

// MeanStd returns the mean and the unbiased standard deviation of xs (std 0
// when len(xs) < 2; mean 0 when empty).
func MeanStd(xs []float64) (mean, std float64) {
	n := len(xs)
	if n == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(n)
	if n < 2 {
		return mean, 0
	}
	var ss float64
	for _, x := range xs {
		d := x - mean
		ss += d * d
	}
	return mean, math.Sqrt(ss / float64(n-1))
}

// Rewards returns the mixed reward of every sample.
func Rewards(alpha float64, samples []Sample) []float64 {
	r := make([]float64, len(samples))
	for i, s := range samples {
		r[i] = MixReward(alpha, s.TeamReward, s.LocalReward)
	}
	return r
}

// GroupBy partitions samples by key under mode, with each group's mean and
// unbiased std of rewards (indexed like samples). All groups are Kept.
func GroupBy(mode Mode, samples []Sample, rewards []float64) []Group {
	index := map[Key]int{}
	var groups []Group
	for i, s := range samples {
		k := GroupKey(mode, s)
		gi, ok := index[k]
		if !ok {
			gi = len(groups)
			index[k] = gi
			groups = append(groups, Group{Key: k, Kept: true})
		}
		groups[gi].Indices = append(groups[gi].Indices, i)
	}
	buf := []float64{}
	for gi := range groups {
		g := &groups[gi]
		buf = buf[:0]
		for _, i := range g.Indices {
			buf = append(buf, rewards[i])
		}
		g.Mean, g.Std = MeanStd(buf)
		if len(g.Indices) > 1 && allEqual(buf) {
			g.Std = 0 // exactly, whatever rounding did
		}
	}
	return groups
}

func allEqual(xs []float64) bool {
	for _, x := range xs[1:] {
		if x != xs[0] {
			return false
		}
	}
	return true
}

// Filter marks dropped groups (Kept=false) in place, as the package doc
// says: zero-variance groups first if dropZeroVar, then the
// ⌊frac·G⌋ lowest-mean of the G remaining groups.
func Filter(groups []Group, dropZeroVar bool, frac float64) {
	var live []int
	for gi := range groups {
		if dropZeroVar && groups[gi].ZeroVariance() {
			groups[gi].Kept = false
			continue
		}
		if groups[gi].Kept {
			live = append(live, gi)
		}
	}
	n := int(math.Floor(frac * float64(len(live))))
	if n <= 0 {
		return
	}
	mean := func(gi int) float64 {
		if len(groups[gi].Indices) == 1 {
			return 0
		}
		return groups[gi].Mean
	}
	sort.SliceStable(live, func(a, b int) bool { return mean(live[a]) < mean(live[b]) })
	for _, gi := range live[:n] {
		groups[gi].Kept = false
	}
}

// Advantage returns the advantage of reward r in a group with n samples,
// mean and std, as the package doc says.
func Advantage(r, mean, std float64, n int, eps float64, noStdNorm bool) float64 {
	if n < 2 {
		return 0
	}
	d := r - mean
	if d == 0 || noStdNorm {
		return d
	}
	return d / (std + eps)
}

// Compute mixes rewards, groups, filters and computes advantages and stats.
func Compute(samples []Sample, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	eps := o.Epsilon
	if eps == 0 {
		eps = DefaultEpsilon
	}
	mode := o.Mode
	if mode == "" {
		mode = Tree
	}
	res := &Result{
		Rewards:    Rewards(o.Alpha, samples),
		Advantages: make([]float64, len(samples)),
		Keep:       make([]bool, len(samples)),
	}
	res.Groups = GroupBy(mode, samples, res.Rewards)
	res.Stats = stats(samples, res.Rewards, res.Groups)
	Filter(res.Groups, o.DropZeroVariance, o.DropLowestMean)
	for gi := range res.Groups {
		g := &res.Groups[gi]
		if !g.Kept {
			continue
		}
		res.Stats.KeptGroups++
		res.Stats.KeptRows += len(g.Indices)
		for _, i := range g.Indices {
			res.Keep[i] = true
			res.Advantages[i] = Advantage(res.Rewards[i], g.Mean, g.Std, len(g.Indices), eps, o.NoStdNorm)
		}
	}
	return res, nil
}

func stats(samples []Sample, rewards []float64, groups []Group) Stats {
	st := Stats{Rows: len(samples), Groups: len(groups), ByRole: map[string]RewardStat{}, ByTurn: map[int]RewardStat{}}
	multi, zero := 0, 0
	for gi := range groups {
		if len(groups[gi].Indices) == 1 {
			st.SingletonGroups++
			continue
		}
		multi++
		if groups[gi].ZeroVariance() {
			zero++
		}
	}
	if multi > 0 {
		st.ZeroVarianceFrac = float64(zero) / float64(multi)
	}
	byRole := map[string][]float64{}
	byTurn := map[int][]float64{}
	for i, s := range samples {
		byRole[s.Role] = append(byRole[s.Role], rewards[i])
		byTurn[s.Turn] = append(byTurn[s.Turn], rewards[i])
	}
	st.Reward = rewardStat(rewards)
	for k, v := range byRole {
		st.ByRole[k] = rewardStat(v)
	}
	for k, v := range byTurn {
		st.ByTurn[k] = rewardStat(v)
	}
	return st
}

func rewardStat(xs []float64) RewardStat {
	m, s := MeanStd(xs)
	return RewardStat{N: len(xs), Mean: m, Std: s}
}
