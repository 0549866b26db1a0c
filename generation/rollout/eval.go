package rollout

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/troupe-rl/troupe/learner/trajectory"
)

// EvalResult is the outcome of an evaluation: no_tree episodes on fixed
// validation seeds, Samples per problem.
type EvalResult struct {
	Problems int `json:"problems"`
	Samples  int `json:"samples"`
	Episodes int `json:"episodes"`
	Failed   int `json:"failed"` // episodes lost to infrastructure errors (not counted as unsolved)
	// PassAt1 is the success rate averaged over problems of each
	// problem's fraction of solved samples.
	PassAt1 float64 `json:"pass_at_1"`
	// ByTurn[t] is the fraction of episodes solved at or before turn t.
	ByTurn []float64 `json:"success_by_turn"`
	// ByRole[r] is the fraction of episodes whose solving step was role r's.
	ByRole map[string]float64 `json:"success_by_role"`
	// RewardMean is the mean mixed reward over all rows.
	RewardMean float64       `json:"reward_mean"`
	Wall       time.Duration `json:"wall_ns"`
	Summary    *Summary      `json:"-"`
}

// Evaluate plays every seed Samples times in no_tree mode (whatever
// d.Config.Mode says) and scores the episodes. rows, if non-nil, receives
// every episode's rows (to keep them in an eval shard).
func (d *Driver) Evaluate(ctx context.Context, iteration int64, seeds []int64, samples int, rows func([]trajectory.Step) error) (*EvalResult, error) {
	ed := *d
	ed.Config.Mode = ModeNoTree
	ed.Config.Branches = samples
	type epStat struct {
		problem     string
		success     bool
		solvedTurn  int
		solvedRole  string
		rewardSum   float64
		rewardCount int
	}
	var mu sync.Mutex
	eps := map[string]*epStat{}
	var maxTurn int
	start := time.Now()
	sum, err := ed.Run(ctx, iteration, seeds, func(steps []trajectory.Step) error {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range steps {
			e := eps[s.EpisodeID]
			if e == nil {
				e = &epStat{problem: s.ProblemID, solvedTurn: -1}
				eps[s.EpisodeID] = e
			}
			e.rewardSum += s.Reward
			e.rewardCount++
			maxTurn = max(maxTurn, int(s.Turn))
			if s.Success && !e.success {
				e.success, e.solvedTurn, e.solvedRole = true, int(s.Turn), s.Role
			}
		}
		if rows != nil {
			return rows(steps)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	res := &EvalResult{Problems: len(seeds), Samples: samples, Episodes: len(eps), Failed: len(sum.Failed),
		ByTurn: make([]float64, max(d.Env.MaxTurns, maxTurn+1)), ByRole: map[string]float64{}, Summary: sum}
	perProblem := map[string][2]int{} // solved, played
	var rewardSum float64
	var rewardN int
	for _, e := range eps {
		pp := perProblem[e.problem]
		pp[1]++
		if e.success {
			pp[0]++
			for t := e.solvedTurn; t < len(res.ByTurn); t++ {
				res.ByTurn[t]++
			}
			res.ByRole[e.solvedRole]++
		}
		perProblem[e.problem] = pp
		rewardSum += e.rewardSum
		rewardN += e.rewardCount
	}
	if n := float64(len(eps)); n > 0 {
		for t := range res.ByTurn {
			res.ByTurn[t] /= n
		}
		for r := range res.ByRole {
			res.ByRole[r] /= n
		}
	}
	problems := make([]string, 0, len(perProblem))
	for p := range perProblem {
		problems = append(problems, p)
	}
	sort.Strings(problems)
	for _, p := range problems {
		pp := perProblem[p]
		res.PassAt1 += float64(pp[0]) / float64(pp[1])
	}
	if len(problems) > 0 {
		res.PassAt1 /= float64(len(problems))
	}
	if rewardN > 0 {
		res.RewardMean = rewardSum / float64(rewardN)
	}
	res.Wall = time.Since(start)
	return res, nil
}

// String is a one-line summary.
func (r *EvalResult) String() string {
	return fmt.Sprintf("pass@1 %.1f%% over %d problems × %d samples (%d failed), reward %.3f, by turn %v",
		100*r.PassAt1, r.Problems, r.Samples, r.Failed, r.RewardMean, fmtFracs(r.ByTurn))
}

func fmtFracs(xs []float64) string {
	s := "["
	for i, x := range xs {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%.2f", x)
	}
	return s + "]"
}
