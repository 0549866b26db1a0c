// Package reporttest writes small synthetic run folders (metrics.jsonl,
// config.yaml and a trajectory shard per iteration) for the tests of
// package report and of troupe's report and replay commands.
package reporttest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/troupe-rl/troupe/internal/report"
	"github.com/troupe-rl/troupe/learner/atgrpo"
	"github.com/troupe-rl/troupe/learner/loss"
	"github.com/troupe-rl/troupe/learner/trajectory"
)

// Roles of the synthetic team.
var Roles = []string{"planner", "executor"}

// Spec shapes a synthetic run.
type Spec struct {
	Name       string
	Iterations int     // shards (train + eval rows each)
	Steps      int     // learner steps in metrics.jsonl
	Problems   int     // train episodes per iteration
	Branches   int     // K
	Turns      int     // max turns
	Skill      float64 // success probability gain per iteration (differs between runs)
	Seed       uint64
}

// Default is a small run that exercises every plot.
func Default(name string) Spec {
	return Spec{Name: name, Iterations: 3, Steps: 12, Problems: 3, Branches: 2, Turns: 2, Skill: 0.2, Seed: 1}
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// WriteRun writes a run folder for spec under parent and returns its path.
func WriteRun(tb testing.TB, parent string, spec Spec) string {
	tb.Helper()
	dir := filepath.Join(parent, spec.Name)
	tdir := filepath.Join(dir, "trajectories")
	if err := os.MkdirAll(tdir, 0o755); err != nil {
		tb.Fatal(err)
	}
	cfg := fmt.Sprintf("name: %s\nseed: 1\niterations: %d\nenv:\n  name: planpath\n  alpha: 0.7\ngeneration:\n  backend: openai\n  base_urls: [http://127.0.0.1:8000/v1]\n  model: tiny\nrollout:\n  mode: tree\n  branches: %d\n  problems: %d\nlearner:\n  policies: per-role\n  lr: 1e-4\n",
		spec.Name, spec.Iterations, spec.Branches, spec.Problems)
	if err := os.WriteFile(filepath.Join(dir, report.ConfigName), []byte(cfg), 0o644); err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(spec.Seed, 7))
	for it := range spec.Iterations {
		w, err := trajectory.Create(tdir, int64(it), &trajectory.WriterOptions{Tag: "rollout"})
		if err != nil {
			tb.Fatal(err)
		}
		p := math.Min(0.9, 0.15+spec.Skill*float64(it))
		var rows []trajectory.Step
		for e := range spec.Problems {
			rows = append(rows, Episode(rng, spec, int64(it), fmt.Sprintf("it%d-train-%d", it, e), fmt.Sprintf("p%d", e), trajectory.SplitTrain, p)...)
		}
		rows = append(rows, Episode(rng, spec, int64(it), fmt.Sprintf("it%d-eval-0", it), "v0", trajectory.SplitEval, p)...)
		if err := w.Write(rows...); err != nil {
			tb.Fatal(err)
		}
		if _, err := w.Commit(); err != nil {
			tb.Fatal(err)
		}
	}
	mp := filepath.Join(dir, report.MetricsName)
	for s := 1; s <= spec.Steps; s++ {
		x := float64(s) / float64(spec.Steps)
		rec := report.TrainRecord{Step: s, Time: t0.Add(time.Duration(s) * time.Minute), Rows: 24, Tokens: 800 + 10*s, Loss: 0.1 - 0.05*x + 0.01*rng.Float64(),
			Groups: atgrpo.Stats{Rows: 24, Groups: 6, ZeroVarianceFrac: 0.6 - 0.4*x, KeptGroups: 5, KeptRows: 20,
				Reward: atgrpo.RewardStat{N: 24, Mean: 0.2 + 0.5*x, Std: 0.3},
				ByRole: map[string]atgrpo.RewardStat{"planner": {N: 12, Mean: 0.25 + 0.5*x, Std: 0.2}, "executor": {N: 12, Mean: 0.15 + 0.45*x, Std: 0.25}},
				ByTurn: map[int]atgrpo.RewardStat{0: {N: 12, Mean: 0.1 + 0.4*x, Std: 0.2}, 1: {N: 12, Mean: 0.3 + 0.5*x, Std: 0.15}}},
			Policies: map[string]report.PolicyRecord{}, Seconds: 2 + rng.Float64(), TokensPerSec: 400 + 20*rng.Float64(), PaddedPerSec: 900}
		for i, r := range Roles {
			rec.Policies[r] = report.PolicyRecord{Metrics: loss.Metrics{Loss: rec.Loss, Tokens: 400, RatioMean: 1 + 0.01*rng.Float64(), RatioMax: 1.3 + 0.2*rng.Float64(),
				ClipFrac: 0.05 + 0.05*x, KL: 0.001 * float64(s) * float64(i+1)}, Entropy: 2.0 - 0.8*x + 0.2*float64(i), GradNorm: 0.5 + 0.3*rng.Float64(), LR: 1e-4 * math.Min(1, float64(s)/3), Rows: 12}
		}
		if err := report.AppendRecord(mp, rec); err != nil {
			tb.Fatal(err)
		}
		if s%(max(spec.Steps/spec.Iterations, 1)) == 0 || s == 1 {
			sr := math.Min(0.95, 0.1+spec.Skill*float64(s)/2)
			ev := report.EvalRecord{Iteration: int64(s - 1), Step: s, Time: rec.Time, SuccessRate: sr,
				SuccessByRole: map[string]float64{"planner": sr * 0.3, "executor": sr * 0.7},
				SuccessByTurn: map[int]float64{0: sr * 0.4, 1: sr}, RewardMean: sr * 0.9, RewardStd: 0.3, FormatOKRate: 0.7 + 0.2*x,
				CompletionTokens: 30 + 5*x, Problems: 8, Samples: 16, WallSeconds: 12.5}
			if err := report.AppendEval(dir, ev); err != nil {
				tb.Fatal(err)
			}
			ph := report.PhaseRecord{Iteration: int64(s - 1), Step: s, Time: rec.Time, Seconds: map[string]float64{"rollout": 20 + rng.Float64()*5, "learn": rec.Seconds, "sync": 0.4, "eval": 12.5}}
			if err := report.AppendPhases(dir, ph); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return dir
}

var verdicts = []string{"no_actions", "bad_actions", "no_answer"}

// Episode returns the rows of one tree-sampled episode: per turn, each
// role samples K branches, the best is chosen; the episode succeeds at the
// executor's step with probability p.
func Episode(rng *rand.Rand, spec Spec, it int64, id, problem, split string, p float64) []trajectory.Step {
	var rows []trajectory.Step
	success := false
	for turn := range spec.Turns {
		for _, role := range Roles {
			best, bestR := 0, math.Inf(-1)
			start := len(rows)
			for b := range spec.Branches {
				ok := rng.Float64() < 0.75
				verdict := "ok"
				text := fmt.Sprintf("<plan>move %s then %s</plan>", []string{"up", "down", "left", "right"}[rng.IntN(4)], []string{"up", "down", "left", "right"}[rng.IntN(4)])
				if role == "executor" {
					text = fmt.Sprintf("```python\nprint(%d)\n```", rng.IntN(100))
				}
				if !ok {
					verdict = verdicts[rng.IntN(len(verdicts))]
					text = "I am not sure what to do here."
				}
				local := 0.0
				if ok {
					local = 0.5 + 0.5*rng.Float64()
				}
				solved := !success && role == "executor" && ok && rng.Float64() < p
				team := 0.0
				if solved {
					team = 1
				}
				r := 0.7*team + 0.3*local
				if r > bestR {
					best, bestR = b, r
				}
				finish := "stop"
				ntok := 8 + rng.IntN(24)
				if rng.Float64() < 0.1 {
					finish = "length"
					ntok = 64
				}
				ids := make([]int32, ntok)
				for i := range ids {
					ids[i] = int32(i + 1)
				}
				rows = append(rows, trajectory.Step{RunID: spec.Name, Iteration: it, EpisodeID: id, ProblemID: problem, Env: "planpath", Split: split,
					Branch: int32(b), Turn: int32(turn), Role: role, Policy: role, Backend: "openai", Model: "tiny",
					PromptText:     fmt.Sprintf("<|im_start|>system\nYou are the %s.<|im_end|>\n<|im_start|>user\nGrid %s, turn %d.<|im_end|>\n<|im_start|>assistant\n", role, problem, turn),
					CompletionText: text, PromptIDs: []int32{1, 2, 3}, CompletionIDs: ids, FinishReason: finish, Temperature: 1, TopP: 1,
					RewardLocal: local, RewardTeam: team, Reward: r, Success: solved, GroupKey: fmt.Sprintf("%s/%d/%s", problem, turn, role),
					LatencyMS: 100, CreatedAt: t0.Add(time.Duration(it) * time.Hour),
					Info: fmt.Sprintf(`{"verdict":%q,"moves":%d}`, verdict, rng.IntN(5))})
			}
			rows[start+best].Chosen = true
			if rows[start+best].Success {
				success = true
			} else {
				for i := start; i < len(rows); i++ { // only the chosen branch may carry success forward
					rows[i].Success = false
				}
			}
			if success {
				for i := start; i < len(rows); i++ {
					rows[i].Done = true
				}
				return rows
			}
		}
	}
	for i := range rows[len(rows)-spec.Branches:] {
		rows[len(rows)-spec.Branches+i].Done = true
	}
	return rows
}
