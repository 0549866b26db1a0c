// Package rollout drives episodes: it steps environments, asks a
// generation.Backend for completions, and turns every LLM call into a
// trajectory row (learner/trajectory.Step).
//
// # Modes
//
//   - tree (AT-GRPO): for each problem one shared state; at every step the
//     acting role samples K completions of the same prompt in one request
//     (N=K, one prefill), each branch steps its own Clone of the state,
//     rewards are computed, and the best branch (argmax mixed reward, ties to
//     the lowest index) becomes the shared state. All K rows are kept; the
//     kept one is marked Chosen. Group key: problem/turn/role.
//   - no_tree (the GRPO baseline and the evaluation path): K independent
//     episodes per problem, one sample per call. Group key: problem.
//
// Single-agent mode is the environment's business (envs.Config.Mode): the
// driver just follows the roles the environment names.
//
// # Failure and accounting
//
// An episode whose LLM call fails for good (after the backend's retries), or
// whose environment reports an infrastructure error, is failed as a whole:
// its rows are dropped and it is listed by name in Summary.Failed. Rows of an
// episode reach the sink together, after the episode ends, so a shard never
// holds half an episode. The sink is called from one goroutine at a time.
package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/sourcegraph/conc/pool"

	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/generation"
	"github.com/troupe-rl/troupe/internal/config"
	"github.com/troupe-rl/troupe/learner/trajectory"
)

// Config is the "rollout:" section of an experiment config.
type Config struct {
	// Mode is tree (AT-GRPO tree sampling) or no_tree (K independent
	// rollouts per problem, the GRPO baseline). Default tree.
	Mode string `yaml:"mode"`
	// Branches is K, the samples per agent-turn (tree) or per problem (no_tree). Default 4.
	Branches int `yaml:"branches"`
	// Problems is B, the problems per iteration. Default 16.
	Problems int `yaml:"problems"`
	// Concurrency bounds the episodes (tree: problems; no_tree: branches)
	// in flight. Default 32.
	Concurrency int `yaml:"concurrency"`
}

// The modes.
const (
	ModeTree   = "tree"
	ModeNoTree = "no_tree"
)

// SetDefaults fills the documented defaults.
func (c *Config) SetDefaults() {
	c.Mode = ModeTree
	c.Branches = 4
	c.Problems = 16
	c.Concurrency = 32
}

// Validate checks the section.
func (c *Config) Validate() error {
	switch {
	case c.Mode != ModeTree && c.Mode != ModeNoTree:
		return config.Errorf("mode", "must be tree or no_tree, got %q", c.Mode)
	case c.Branches < 1:
		return config.Errorf("branches", "must be ≥ 1, got %d", c.Branches)
	case c.Problems < 1:
		return config.Errorf("problems", "must be ≥ 1, got %d", c.Problems)
	case c.Concurrency < 1:
		return config.Errorf("concurrency", "must be ≥ 1, got %d", c.Concurrency)
	}
	return nil
}

// Policy is what serves one role: the adapter (model) name sent to the
// backend ("" = base model) and the version recorded in rows.
type Policy struct {
	Name    string // adapter name, or "" for the base model
	Version int64  // learner step of the adapter; 0 for the base model
}

// Driver runs episodes. Its fields are set once, before the first Run.
type Driver struct {
	Backend     generation.Backend
	BackendName string // recorded in rows (e.g. "openai")
	Model       string // base model name recorded in rows
	Env         envs.Config
	Deps        envs.Deps
	// Render turns an environment prompt into the text sent to the model
	// (the chat template). Required.
	Render func(envs.Prompt) (string, error)
	// Policies maps role → policy; roles not in the map use the base model.
	Policies map[string]Policy
	// Sampling applies to every role unless RoleSampling has the role.
	Sampling     generation.Sampling
	RoleSampling map[string]generation.Sampling
	Config       Config
	RunID        string
	// Seed seeds the sampling seeds sent with requests (with iteration,
	// problem, turn and role), so a re-run sends the same seeds.
	Seed int64
	Log  *slog.Logger
	// Progress, if set, is called after every episode (from one goroutine
	// at a time).
	Progress func(Progress)
}

// Progress is a running count during Run.
type Progress struct {
	Episodes, EpisodesTotal int
	Calls                   int
	Elapsed                 time.Duration
}

// Failure names an episode that could not be completed.
type Failure struct {
	EpisodeID string `json:"episode_id"`
	ProblemID string `json:"problem_id"`
	Err       string `json:"error"`
}

// Summary describes one Run.
type Summary struct {
	Episodes   int       `json:"episodes"`
	Successes  int       `json:"successes"`
	Failed     []Failure `json:"failed,omitempty"`
	Rows       int       `json:"rows"`
	Calls      int       `json:"llm_calls"`
	PromptToks int       `json:"prompt_tokens"`
	OutToks    int       `json:"completion_tokens"`
	// Reward statistics by "role/turn".
	Reward  map[string]Stat `json:"reward"`
	Latency Percentiles     `json:"latency_ms"`
	Wall    time.Duration   `json:"wall_ns"`
	// RetriedCalls counts calls that needed more than one attempt.
	RetriedCalls int `json:"retried_calls"`
}

// SuccessRate is Successes/Episodes (0 when there were none).
func (s *Summary) SuccessRate() float64 {
	if s.Episodes == 0 {
		return 0
	}
	return float64(s.Successes) / float64(s.Episodes)
}

// Stat is a mean and standard deviation over N values.
type Stat struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	Std  float64 `json:"std"`
}

// Percentiles of a latency distribution, in milliseconds.
type Percentiles struct {
	P50, P90, P99, Max float64
}

// Run plays the problems with the given seeds (one episode tree per seed in
// tree mode, K episodes per seed in no_tree mode) and passes each finished
// episode's rows to sink. It returns an error only for a failure of the
// sink or of ctx; failed episodes are reported in the Summary.
func (d *Driver) Run(ctx context.Context, iteration int64, seeds []int64, sink func([]trajectory.Step) error) (*Summary, error) {
	if d.Render == nil || d.Backend == nil {
		return nil, errors.New("rollout: Driver needs Backend and Render")
	}
	log := d.Log
	if log == nil {
		log = slog.Default()
	}
	start := time.Now()
	type job struct {
		seed   int64
		branch int // -1 in tree mode
	}
	var jobs []job
	for _, s := range seeds {
		if d.Config.Mode == ModeNoTree {
			for k := 0; k < d.Config.Branches; k++ {
				jobs = append(jobs, job{s, k})
			}
		} else {
			jobs = append(jobs, job{s, -1})
		}
	}
	var (
		mu        sync.Mutex
		sum       = &Summary{Reward: map[string]Stat{}}
		acc       = map[string]*welford{}
		latencies []float64
		sinkErr   error
	)
	p := pool.New().WithContext(ctx).WithCancelOnError().WithMaxGoroutines(d.Config.Concurrency)
	for _, j := range jobs {
		p.Go(func(ctx context.Context) error {
			ep, err := d.episode(ctx, iteration, j.seed, j.branch)
			mu.Lock()
			defer mu.Unlock()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			sum.Episodes++
			sum.Calls += ep.calls
			sum.RetriedCalls += ep.retried
			if err != nil {
				sum.Failed = append(sum.Failed, Failure{EpisodeID: ep.id, ProblemID: ep.problem, Err: err.Error()})
				log.Warn("rollout: episode failed", "episode_id", ep.id, "err", err)
			} else {
				if ep.success {
					sum.Successes++
				}
				for _, r := range ep.rows {
					k := fmt.Sprintf("%s/%d", r.Role, r.Turn)
					if acc[k] == nil {
						acc[k] = &welford{}
					}
					acc[k].add(r.Reward)
					sum.PromptToks += len(r.PromptIDs)
					sum.OutToks += len(r.CompletionIDs)
					latencies = append(latencies, r.LatencyMS)
				}
				sum.Rows += len(ep.rows)
				if sinkErr == nil && len(ep.rows) > 0 {
					sinkErr = sink(ep.rows)
				}
			}
			if d.Progress != nil {
				d.Progress(Progress{Episodes: sum.Episodes, EpisodesTotal: len(jobs), Calls: sum.Calls, Elapsed: time.Since(start)})
			}
			if sinkErr != nil {
				return fmt.Errorf("rollout: writing rows: %w", sinkErr)
			}
			return nil
		})
	}
	err := p.Wait()
	for k, w := range acc {
		sum.Reward[k] = w.stat()
	}
	sum.Latency = percentiles(latencies)
	sum.Wall = time.Since(start)
	sort.Slice(sum.Failed, func(i, j int) bool { return sum.Failed[i].EpisodeID < sum.Failed[j].EpisodeID })
	if err != nil {
		return sum, err
	}
	return sum, nil
}

// episodeResult is one finished (or failed) episode.
type episodeResult struct {
	id, problem string
	rows        []trajectory.Step
	success     bool
	calls       int
	retried     int
}

// episode plays one problem: a whole tree (branch < 0) or one no_tree branch.
func (d *Driver) episode(ctx context.Context, iteration, seed int64, branch int) (*episodeResult, error) {
	res := &episodeResult{id: fmt.Sprintf("%s/i%d/s%d", d.RunID, iteration, seed)}
	if branch >= 0 {
		res.id += fmt.Sprintf("/b%d", branch)
	}
	env, err := envs.New(d.Env.Name, d.Env, d.Deps)
	if err != nil {
		return res, err
	}
	if err := env.Reset(seed); err != nil {
		return res, err
	}
	task := env.Task()
	res.problem = task.ID
	split := task.Split
	if split == "" {
		split = envs.Split(seed)
	}
	k := d.Config.Branches
	tree := branch < 0
	if !tree {
		k = 1
	}
	for !env.Done() {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		role, turn := env.Next()
		prompt, err := env.Prompt(role)
		if err != nil {
			return res, err
		}
		text, err := d.Render(prompt)
		if err != nil {
			return res, fmt.Errorf("rollout: rendering the prompt of %s at turn %d: %w", role, turn, err)
		}
		pol := d.Policies[role]
		samp := d.Sampling
		if s, ok := d.RoleSampling[role]; ok {
			samp = s
		}
		reqSeed := d.requestSeed(iteration, task.ID, turn, role, branch)
		req := &generation.Request{
			Model: pol.Name, Prompt: text, N: k,
			Temperature: samp.Temperature, TopP: samp.TopP, TopK: samp.TopK, MaxTokens: samp.MaxTokens,
			Seed: &reqSeed,
		}
		resp, err := d.Backend.Generate(ctx, req)
		res.calls++
		if err != nil {
			return res, fmt.Errorf("rollout: %s turn %d: %w", role, turn, err)
		}
		if resp.Attempts > 1 {
			res.retried++
		}
		if len(resp.Samples) != k {
			return res, fmt.Errorf("rollout: %s turn %d: asked for %d samples, got %d", role, turn, k, len(resp.Samples))
		}
		// Each branch steps its own copy; tree sampling never steps the
		// shared state itself.
		copies := make([]envs.Env, k)
		outs := make([]envs.Outcome, k)
		errs := make([]error, k)
		var wg sync.WaitGroup
		for b := 0; b < k; b++ {
			copies[b] = env.Clone()
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[b], errs[b] = copies[b].Step(ctx, role, resp.Samples[b].Text)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return res, fmt.Errorf("rollout: stepping %s at turn %d: %w", role, turn, err)
		}
		best := 0
		for b := 1; b < k; b++ {
			if outs[b].Reward > outs[best].Reward {
				best = b
			}
		}
		groupKey := fmt.Sprintf("%s/t%d/%s", task.ID, turn, role)
		if !tree {
			groupKey = task.ID
		}
		now := time.Now().UTC()
		for b := 0; b < k; b++ {
			s := resp.Samples[b]
			info, _ := json.Marshal(outs[b].Info)
			polName := pol.Name
			if polName == "" {
				polName = "base"
			}
			br := int32(b)
			if !tree {
				br = int32(branch)
			}
			res.rows = append(res.rows, trajectory.Step{
				RunID: d.RunID, Iteration: iteration, PolicyVersion: pol.Version,
				EpisodeID: res.id, ProblemID: task.ID, Env: d.Env.Name, Split: split,
				Branch: br, Chosen: b == best, Turn: int32(turn), Role: role, Policy: polName,
				Backend: d.BackendName, Model: d.Model,
				PromptText: text, CompletionText: s.Text,
				PromptIDs: resp.PromptIDs, CompletionIDs: s.TokenIDs, Logprobs: s.Logprobs,
				Retokenized: s.Retokenized, FinishReason: s.FinishReason,
				Temperature: samp.Temperature, TopP: samp.TopP, TopK: int32(samp.TopK), Seed: reqSeed,
				RewardLocal: outs[b].Local, RewardTeam: outs[b].Team, Reward: outs[b].Reward,
				Done: outs[b].Done, Success: outs[b].Success, GroupKey: groupKey,
				LatencyMS: float64(resp.Latency.Microseconds()) / 1000, CreatedAt: now, Info: string(info),
			})
		}
		env = copies[best]
		res.success = outs[best].Success
	}
	return res, nil
}

// requestSeed derives the sampling seed of one call from the driver seed
// and the call's coordinates, so that a re-run sends the same seeds.
func (d *Driver) requestSeed(iteration int64, problem string, turn int, role string, branch int) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d|%d|%s|%d|%s|%d", d.Seed, iteration, problem, turn, role, branch)
	return int64(h.Sum64() & math.MaxInt32) // servers take 32-bit seeds
}

// welford accumulates a running mean and unbiased variance.
type welford struct {
	n    int
	mean float64
	m2   float64
}

func (w *welford) add(x float64) {
	w.n++
	d := x - w.mean
	w.mean += d / float64(w.n)
	w.m2 += d * (x - w.mean)
}

func (w *welford) stat() Stat {
	s := Stat{N: w.n, Mean: w.mean}
	if w.n > 1 {
		s.Std = math.Sqrt(w.m2 / float64(w.n-1))
	}
	return s
}

func percentiles(xs []float64) Percentiles {
	if len(xs) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	at := func(q float64) float64 { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return Percentiles{P50: at(0.5), P90: at(0.9), P99: at(0.99), Max: s[len(s)-1]}
}
