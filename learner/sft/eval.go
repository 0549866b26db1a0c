package sft

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/generation/builtin"
)

// EvalResult is greedy success on a set of seeds.
type EvalResult struct {
	Episodes    int     `json:"episodes"`
	Successes   int     `json:"successes"`
	SuccessRate float64 `json:"success_rate"`
	// ParseOK is the fraction of completions the environment understood
	// (verdict "ok").
	ParseOK float64 `json:"parse_ok"`
	// Reward is the mean mixed reward per step.
	Reward  float64 `json:"reward"`
	Steps   int     `json:"steps"`
	Seconds float64 `json:"seconds"`
	// Sample is the first episode's last completion (for eyeballing).
	Sample string `json:"sample,omitempty"`
}

// Evaluate plays every seed to the end with greedy completions from the
// embedded engine eng (adapter "" = the engine's model) through the
// environment's Prompt → text → Step path, and reports the success rate.
// Episodes run concurrently so that the engine batches their requests.
func Evaluate(ctx context.Context, eng *builtin.Engine, adapter string, cfg envs.Config, deps envs.Deps, enc *Encoder, seeds []int64, maxTokens int) (*EvalResult, error) {
	start := time.Now()
	type ep struct {
		success   bool
		steps, ok int
		reward    float64
		last      string
		err       error
	}
	res := make([]ep, len(seeds))
	var wg sync.WaitGroup
	for i, seed := range seeds {
		wg.Go(func() {
			r := &res[i]
			e, err := envs.New(cfg.Name, cfg, deps)
			if err == nil {
				err = e.Reset(seed)
			}
			for err == nil && !e.Done() {
				role, _ := e.Next()
				var p envs.Prompt
				if p, err = e.Prompt(role); err != nil {
					break
				}
				var ids []int32
				if _, ids, err = enc.PromptIDs(p); err != nil {
					break
				}
				var g *builtin.Result
				g, err = eng.Generate(ctx, &builtin.Request{Prompt: ids, MaxTokens: maxTokens, Temperature: 0, StopTokens: enc.Stop, Adapter: adapter})
				if err != nil {
					break
				}
				r.last = enc.Tok.DecodeSkipSpecial(g.Samples[0].Tokens)
				var out envs.Outcome
				if out, err = e.Step(ctx, role, r.last); err != nil {
					break
				}
				r.steps++
				r.reward += out.Reward
				if out.Info["verdict"] == "ok" {
					r.ok++
				}
				r.success = out.Success
			}
			if err != nil {
				r.err = fmt.Errorf("sft: eval seed %d: %w", seed, err)
			}
		})
	}
	wg.Wait()
	out := &EvalResult{Episodes: len(seeds)}
	var reward float64
	ok := 0
	for i, r := range res {
		if r.err != nil {
			return nil, r.err
		}
		if r.success {
			out.Successes++
		}
		out.Steps += r.steps
		ok += r.ok
		reward += r.reward
		if i == 0 {
			out.Sample = r.last
		}
	}
	if out.Episodes > 0 {
		out.SuccessRate = float64(out.Successes) / float64(out.Episodes)
	}
	if out.Steps > 0 {
		out.ParseOK = float64(ok) / float64(out.Steps)
		out.Reward = reward / float64(out.Steps)
	}
	out.Seconds = time.Since(start).Seconds()
	return out, nil
}
