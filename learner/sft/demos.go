package sft

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/generation/tokenizer"
	"github.com/troupe-rl/troupe/internal/hf"
)

// Encoder turns environment prompts into model tokens exactly as a rollout
// does: the chat template (rollout.NewRenderer of the experiment's
// generation config), then the model's tokenizer, as the embedded server
// encodes a prompt text (BOS only when the tokenizer adds one).
type Encoder struct {
	Render func(envs.Prompt) (string, error)
	Tok    *tokenizer.Tokenizer
	// EOS ends every target completion, so that the model learns to stop
	// (the chat template's end-of-turn token, e.g. <|im_end|>).
	EOS int32
	// Stop are the ids that end a generated completion (EOS included).
	Stop []int32
}

// NewEncoder builds an Encoder for the model folder dir (its tokenizer and
// config.json's eos ids) with render.
func NewEncoder(dir string, render func(envs.Prompt) (string, error)) (*Encoder, error) {
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("sft: %w", err)
	}
	cfg, err := hf.ReadModelConfig(dir)
	if err != nil {
		return nil, fmt.Errorf("sft: %w", err)
	}
	e := &Encoder{Render: render, Tok: tok, EOS: -1}
	if id, ok := tok.TokenID(tok.EOSToken()); ok && tok.EOSToken() != "" {
		e.EOS = id
	}
	for _, id := range cfg.EOSTokenIDs() {
		e.Stop = append(e.Stop, int32(id))
	}
	for _, id := range tok.EOSIDs() {
		e.Stop = append(e.Stop, id)
	}
	if e.EOS < 0 && len(e.Stop) > 0 {
		e.EOS = e.Stop[0]
	}
	if e.EOS < 0 {
		return nil, fmt.Errorf("sft: %s: the tokenizer names no eos_token", dir)
	}
	e.Stop = append(e.Stop, e.EOS)
	return e, nil
}

// PromptIDs renders and encodes p.
func (e *Encoder) PromptIDs(p envs.Prompt) (string, []int32, error) {
	text, err := e.Render(p)
	if err != nil {
		return "", nil, fmt.Errorf("sft: render: %w", err)
	}
	var ids []int32
	if e.Tok.AddBOS() {
		if bos, ok := e.Tok.BOSID(); ok {
			ids = append(ids, bos)
		}
	}
	return text, e.Tok.AppendEncode(ids, text), nil
}

// Demo is one demonstration: what Role saw at Turn of the episode of Seed,
// and the oracle's completion.
type Demo struct {
	Seed       int64
	Turn       int
	Role       string
	Prompt     envs.Prompt
	PromptText string // rendered by the chat template
	Completion string // the oracle's text (without the end-of-turn token)
	// PromptIDs encode PromptText; CompletionIDs encode Completion and end
	// with the EOS token.
	PromptIDs, CompletionIDs []int32
}

// Demonstrations plays every seed with the environment's oracle
// (envs.Demonstrate: the same Prompt → text → Step path as a rollout) and
// returns one Demo per role and turn visited, in seed order. A fraction
// detours of the seeds start with wrong answers (see episode). Episodes run
// concurrently (workers ≥ 1).
func Demonstrations(ctx context.Context, cfg envs.Config, deps envs.Deps, enc *Encoder, seeds []int64, detours float64, workers int) ([]Demo, error) {
	per, err := episodes(ctx, cfg, deps, seeds, detours, workers)
	if err != nil {
		return nil, err
	}
	var out []Demo
	for i, steps := range per {
		for _, s := range steps {
			text, ids, err := enc.PromptIDs(s.Prompt)
			if err != nil {
				return nil, err
			}
			out = append(out, Demo{Seed: seeds[i], Turn: s.Turn, Role: s.Role, Prompt: s.Prompt, PromptText: text, Completion: s.Completion,
				PromptIDs: ids, CompletionIDs: append(enc.Tok.Encode(s.Completion), enc.EOS)})
		}
	}
	return out, nil
}

// episodes plays every seed (episode) on workers goroutines and returns
// their steps in seed order.
func episodes(ctx context.Context, cfg envs.Config, deps envs.Deps, seeds []int64, detours float64, workers int) ([][]envs.DemoStep, error) {
	per := make([][]envs.DemoStep, len(seeds))
	errs := make([]error, len(seeds))
	var wg sync.WaitGroup
	next := make(chan int)
	for range max(1, workers) {
		wg.Go(func() {
			for i := range next {
				per[i], errs[i] = episode(ctx, cfg, deps, seeds[i], detours)
			}
		})
	}
	for i := range seeds {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return per, nil
}

// episode plays seed with the oracle. A fraction detours of the seeds
// (chosen by a hash of the seed) first answer 1 to max_turns−1 turns wrongly
// with the oracle's answers to other training seeds (envs.Detour): their
// later turns, and the history those turns' prompts show, are demonstrated
// too. A detour that leaves the instance unsolvable (a box pushed into a
// corner) falls back to the plain demonstration.
func episode(ctx context.Context, cfg envs.Config, deps envs.Deps, seed int64, detours float64) ([]envs.DemoStep, error) {
	newEnv := func(seed int64) (envs.Env, error) {
		e, err := envs.New(cfg.Name, cfg, deps)
		if err != nil {
			return nil, fmt.Errorf("sft: %w", err)
		}
		if err := e.Reset(seed); err != nil {
			return nil, fmt.Errorf("sft: seed %d: %w", seed, err)
		}
		return e, nil
	}
	e, err := newEnv(seed)
	if err != nil {
		return nil, err
	}
	h := splitmix(uint64(seed))
	if turns := detourTurns(h, detours, cfg.MaxTurns); turns > 0 {
		last := e.Roles()[len(e.Roles())-1]
		wrong := func(turn int) (string, error) {
			o, err := newEnv((seed + 1 + int64(turn)) % envs.ValidationSeedBase)
			if err != nil {
				return "", err
			}
			return envs.Oracle(o, last)
		}
		steps, err := envs.DemonstrateDetour(ctx, e, envs.Detour{Turns: turns, Wrong: wrong})
		if err == nil {
			return steps, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("sft: seed %d: %w", seed, ctx.Err())
		}
		if e, err = newEnv(seed); err != nil {
			return nil, err
		}
	}
	steps, err := envs.Demonstrate(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("sft: seed %d: %w", seed, err)
	}
	return steps, nil
}

// detourTurns is how many wrong turns the seed with hash h starts with: 0
// for a fraction 1−detours of the seeds, else 1 to maxTurns−1.
func detourTurns(h uint64, detours float64, maxTurns int) int {
	if maxTurns < 2 || float64(h>>11)/(1<<53) >= detours {
		return 0
	}
	return 1 + int(h%uint64(maxTurns-1))
}

// splitmix is SplitMix64's output function: a well-mixed hash of x.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// WriteCorpus writes the rendered prompt and the oracle completion of every
// demonstration of seeds (with detours as in Demonstrations) to w, one
// after the other: text to train a tiny model's tokenizer on (`troupe model
// init --corpus`), so that the environment's prompts take few tokens.
func WriteCorpus(ctx context.Context, w io.Writer, cfg envs.Config, deps envs.Deps, render func(envs.Prompt) (string, error), seeds []int64, detours float64) error {
	per, err := episodes(ctx, cfg, deps, seeds, detours, 4)
	if err != nil {
		return err
	}
	for _, steps := range per {
		for _, s := range steps {
			text, err := render(s.Prompt)
			if err != nil {
				return fmt.Errorf("sft: render: %w", err)
			}
			if _, err := io.WriteString(w, text+s.Completion+"\n"); err != nil {
				return fmt.Errorf("sft: corpus: %w", err)
			}
		}
	}
	return nil
}
