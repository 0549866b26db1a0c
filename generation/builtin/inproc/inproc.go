// Package inproc is the "builtin" generation backend: troupe's embedded
// engine (package builtin) in the same process, with no HTTP in between.
// Config: backend: builtin, model: the model folder (config.json,
// model.safetensors, tokenizer.json).
//
// It has the semantics of the openai backend talking to `troupe serve` on
// the same folder, because it goes through the same code: requests are
// server.Model.Complete calls, which validate, encode text prompts, share
// one prefill among the N samples, match stop strings on the decoded text
// and return token ids and logprobs exactly as POST /v1/completions does
// (a conformance test checks token ids, text and logprobs are identical
// for the same seed). Adapters load into the engine (AdapterLoader) and
// tokenization uses the model's tokenizer (Tokenizer).
//
// Requests in flight are bounded by generation.max_concurrency; the
// engine's queue is sized to hold them all, so a full queue never fails a
// request. There is no retry: an in-process call fails only for a bad
// request or a closed engine.
package inproc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/troupe-rl/troupe/generation"
	"github.com/troupe-rl/troupe/generation/builtin"
	"github.com/troupe-rl/troupe/generation/builtin/server"
)

func init() {
	generation.Register("builtin", func(ctx context.Context, cfg generation.Config) (generation.Backend, error) {
		return Open(cfg, builtin.Options{})
	})
}

// Endpoint is what Response.Endpoint says for this backend.
const Endpoint = "builtin"

// Backend runs the embedded engine in process.
type Backend struct {
	model  *server.Model
	folder string // cfg.Model, accepted as a name for the base model
	sem    chan struct{}
}

var (
	_ generation.Backend       = (*Backend)(nil)
	_ generation.AdapterLoader = (*Backend)(nil)
	_ generation.Tokenizer     = (*Backend)(nil)
)

// Open loads cfg.Model (a model folder) into an engine configured by eo
// (its MaxQueue is raised to cfg.MaxConcurrency when below it).
func Open(cfg generation.Config, eo builtin.Options) (*Backend, error) {
	if cfg.Model == "" {
		return nil, errors.New("builtin: generation.model must name a model folder")
	}
	conc := max(cfg.MaxConcurrency, 1)
	eo.MaxQueue = max(eo.MaxQueue, conc)
	m, err := server.Load(cfg.Model, server.LoadOptions{Engine: eo})
	if err != nil {
		return nil, fmt.Errorf("builtin: %w", err)
	}
	return &Backend{model: m, folder: cfg.Model, sem: make(chan struct{}, conc)}, nil
}

// Model is the loaded model (engine, tokenizer, template).
func (b *Backend) Model() *server.Model { return b.model }

// Close stops the engine.
func (b *Backend) Close() error { return b.model.Close() }

// Generate runs one request on the engine.
func (b *Backend) Generate(ctx context.Context, req *generation.Request) (*generation.Response, error) {
	select {
	case b.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-b.sem }()
	name := req.Model
	if name == b.folder {
		name = ""
	}
	start := time.Now()
	c, err := b.model.Complete(ctx, &server.CompletionRequest{
		Model: name, PromptIDs: req.PromptIDs, Prompt: req.Prompt, N: req.N, MaxTokens: req.MaxTokens,
		Temperature: req.Temperature, TopP: req.TopP, TopK: req.TopK, Seed: req.Seed, Stop: req.Stop,
	})
	if err != nil {
		return nil, fmt.Errorf("builtin: model %q: %w", req.Model, err)
	}
	resp := &generation.Response{PromptIDs: c.PromptIDs, Endpoint: Endpoint, Latency: time.Since(start), Attempts: 1,
		Samples: make([]generation.Sample, len(c.Choices))}
	for i, ch := range c.Choices {
		resp.Samples[i] = generation.Sample{Text: ch.Text, TokenIDs: ch.TokenIDs, Logprobs: ch.Logprobs, FinishReason: ch.FinishReason}
	}
	return resp, nil
}

// LoadAdapter loads the PEFT adapter in dir under name, replacing one of
// that name (requests in flight keep the version they started with).
func (b *Backend) LoadAdapter(ctx context.Context, name, dir string) error {
	if err := b.model.Engine.LoadAdapter(ctx, name, dir); err != nil {
		return fmt.Errorf("builtin: load adapter %q from %s: %w", name, dir, err)
	}
	return nil
}

// UnloadAdapter removes the adapter loaded under name.
func (b *Backend) UnloadAdapter(ctx context.Context, name string) error {
	if err := b.model.Engine.UnloadAdapter(ctx, name); err != nil {
		return fmt.Errorf("builtin: unload adapter %q: %w", name, err)
	}
	return nil
}

// Tokenize encodes text with the model's tokenizer, adding no special
// tokens (as the openai backend's /tokenize call).
func (b *Backend) Tokenize(ctx context.Context, text string) ([]int32, error) {
	return b.model.Tokenizer.Encode(text, false), nil
}

// Detokenize decodes ids, special tokens included.
func (b *Backend) Detokenize(ctx context.Context, ids []int32) (string, error) {
	return b.model.Tokenizer.Decode(ids, false), nil
}
