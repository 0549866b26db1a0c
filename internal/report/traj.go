package report

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/troupe-rl/troupe/learner/trajectory"
)

// Episode is the rows of one episode, ordered by turn, then role order of
// appearance, then branch.
type Episode struct {
	ID        string
	ProblemID string
	Env       string
	Split     string
	Iteration int64
	Success   bool
	Steps     []trajectory.Step
}

// Path returns the steps tree sampling kept (chosen rows), in order. When
// an episode has no chosen flags (a writer that never set them, or K = 1
// with a single branch), the branch-0 rows stand in.
func (e *Episode) Path() []trajectory.Step {
	var out []trajectory.Step
	for _, s := range e.Steps {
		if s.Chosen {
			out = append(out, s)
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, s := range e.Steps {
		if s.Branch == 0 {
			out = append(out, s)
		}
	}
	return out
}

// SolvedBy returns the first chosen step after which the env reported
// success.
func (e *Episode) SolvedBy() (trajectory.Step, bool) {
	for _, s := range e.Path() {
		if s.Success {
			return s, true
		}
	}
	return trajectory.Step{}, false
}

// Turns returns the number of turns the episode took.
func (e *Episode) Turns() int {
	t := int32(-1)
	for _, s := range e.Steps {
		t = max(t, s.Turn)
	}
	return int(t) + 1
}

// GroupEpisodes groups rows by episode id. Episodes come out sorted by
// iteration, then id; a row's episode succeeds when any of its chosen
// steps (see [Episode.Path]) reports success.
func GroupEpisodes(rows []trajectory.Step) []*Episode {
	byID := map[string]*Episode{}
	var order []*Episode
	for _, r := range rows {
		ep := byID[r.EpisodeID]
		if ep == nil {
			ep = &Episode{ID: r.EpisodeID, ProblemID: r.ProblemID, Env: r.Env, Split: r.Split, Iteration: r.Iteration}
			byID[r.EpisodeID] = ep
			order = append(order, ep)
		}
		ep.Steps = append(ep.Steps, r)
	}
	for _, ep := range order {
		roleOrder := map[string]int{}
		for _, s := range ep.Steps {
			if _, ok := roleOrder[s.Role]; !ok {
				roleOrder[s.Role] = len(roleOrder)
			}
		}
		sort.SliceStable(ep.Steps, func(i, j int) bool {
			a, b := ep.Steps[i], ep.Steps[j]
			if a.Turn != b.Turn {
				return a.Turn < b.Turn
			}
			if ra, rb := roleOrder[a.Role], roleOrder[b.Role]; ra != rb {
				return ra < rb
			}
			return a.Branch < b.Branch
		})
		for _, s := range ep.Path() {
			if s.Success {
				ep.Success = true
			}
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].Iteration != order[j].Iteration {
			return order[i].Iteration < order[j].Iteration
		}
		return order[i].ID < order[j].ID
	})
	return order
}

// ShardPaths returns the shard files PATH names: PATH itself when it is a
// file, else every committed shard (iter-NNNNNN-TAG.parquet) in the folder,
// ordered by iteration then name. A missing path or a folder without shards
// is an *Error with BadInput true.
func ShardPaths(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fileErr(path, err)
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, fileErr(path, err)
	}
	type shard struct {
		it   int64
		name string
	}
	var shards []shard
	for _, e := range ents {
		if it, _, ok := trajectory.ParseShardName(e.Name()); ok && e.Type().IsRegular() {
			shards = append(shards, shard{it, e.Name()})
		}
	}
	if len(shards) == 0 {
		// A run folder: look in its trajectories/.
		if sub := filepath.Join(path, "trajectories"); isDir(sub) {
			return ShardPaths(sub)
		}
		return nil, &Error{Path: path, Err: errors.New("no trajectory shards (iter-NNNNNN-TAG.parquet) in this folder"), Bad: true}
	}
	slices.SortFunc(shards, func(a, b shard) int {
		if a.it != b.it {
			return int(a.it - b.it)
		}
		return strings.Compare(a.name, b.name)
	})
	out := make([]string, len(shards))
	for i, s := range shards {
		out[i] = filepath.Join(path, s.name)
	}
	return out, nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// ReadSteps reads the rows of the shards with opts (nil = every column).
func ReadSteps(ctx context.Context, paths []string, opts *trajectory.ReadOptions) ([]trajectory.Step, error) {
	var all []trajectory.Step
	for _, p := range paths {
		rows, err := trajectory.ReadFile(ctx, p, opts)
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		all = append(all, rows...)
	}
	return all, nil
}

// statsColumns are what [Summarize] needs: no prompt texts or ids.
var statsColumns = []string{
	trajectory.ColIteration, trajectory.ColEpisodeID, trajectory.ColProblemID, trajectory.ColEnv,
	trajectory.ColSplit, trajectory.ColBranch, trajectory.ColChosen, trajectory.ColTurn, trajectory.ColRole,
	trajectory.ColCompletionIDs, trajectory.ColFinishReason, trajectory.ColRewardLocal,
	trajectory.ColRewardTeam, trajectory.ColReward, trajectory.ColDone, trajectory.ColSuccess, trajectory.ColInfo,
}

// Mean is a running mean.
type Mean struct {
	N   int
	Sum float64
}

// Add adds x.
func (m *Mean) Add(x float64) { m.N++; m.Sum += x }

// Value returns the mean (0 when empty).
func (m Mean) Value() float64 {
	if m.N == 0 {
		return 0
	}
	return m.Sum / float64(m.N)
}

// Summary aggregates a set of episodes: every row counts for the per-row
// statistics (reward, length, verdicts, finish reasons), each episode once
// for success.
type Summary struct {
	Episodes  int
	Successes int
	Rows      int
	// Reward (mixed), RewardLocal, RewardTeam over all rows; by role and
	// turn the mixed reward.
	Reward, RewardLocal, RewardTeam Mean
	RewardByRole                    map[string]*Mean
	RewardByTurn                    map[int]*Mean
	// CompletionTokens is the completion length in tokens (rows with token
	// ids), CompletionChars in bytes of text (rows with text).
	CompletionTokens Mean
	CompletionChars  Mean
	TokensByRole     map[string]*Mean
	// FinishReasons and Verdicts count rows.
	FinishReasons map[string]int
	Verdicts      map[string]int
	// BadByRole is the fraction of a role's rows whose verdict is not ok.
	BadByRole map[string]*Mean
}

// SuccessRate is Successes / Episodes (0 when empty).
func (s *Summary) SuccessRate() float64 {
	if s.Episodes == 0 {
		return 0
	}
	return float64(s.Successes) / float64(s.Episodes)
}

// FormatFailRate is the fraction of rows whose verdict is not ok.
func (s *Summary) FormatFailRate() float64 {
	if s.Rows == 0 {
		return 0
	}
	return 1 - float64(s.Verdicts["ok"])/float64(s.Rows)
}

// Summarize computes a Summary of eps (all their rows).
func Summarize(eps []*Episode) *Summary {
	s := &Summary{RewardByRole: map[string]*Mean{}, RewardByTurn: map[int]*Mean{}, TokensByRole: map[string]*Mean{},
		FinishReasons: map[string]int{}, Verdicts: map[string]int{}, BadByRole: map[string]*Mean{}}
	get := func(m map[string]*Mean, k string) *Mean {
		if m[k] == nil {
			m[k] = &Mean{}
		}
		return m[k]
	}
	for _, ep := range eps {
		s.Episodes++
		if ep.Success {
			s.Successes++
		}
		for _, r := range ep.Steps {
			s.Rows++
			s.Reward.Add(r.Reward)
			s.RewardLocal.Add(r.RewardLocal)
			s.RewardTeam.Add(r.RewardTeam)
			get(s.RewardByRole, r.Role).Add(r.Reward)
			if s.RewardByTurn[int(r.Turn)] == nil {
				s.RewardByTurn[int(r.Turn)] = &Mean{}
			}
			s.RewardByTurn[int(r.Turn)].Add(r.Reward)
			if n := len(r.CompletionIDs); n > 0 {
				s.CompletionTokens.Add(float64(n))
				get(s.TokensByRole, r.Role).Add(float64(n))
			}
			if r.CompletionText != "" {
				s.CompletionChars.Add(float64(len(r.CompletionText)))
			}
			fr := r.FinishReason
			if fr == "" {
				fr = "(none)"
			}
			s.FinishReasons[fr]++
			v := Verdict(r.Info)
			s.Verdicts[v]++
			bad := 0.0
			if v != "ok" {
				bad = 1
			}
			get(s.BadByRole, r.Role).Add(bad)
		}
	}
	return s
}

// sortedKeys returns m's keys in order.
func sortedKeys[K interface{ ~int | ~string }, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
