package generation

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Request asks for N sampled completions of one prompt.
//
// A Request is read-only to the backend: Generate must not modify it or
// retain it after returning.
type Request struct {
	// Model selects the policy: a loaded adapter's name, or "" for the
	// backend's base model (Config.Model).
	Model string
	// PromptIDs is the prompt as token ids. When set it takes precedence
	// over Prompt; backends that cannot take ids (Ollama) use Prompt.
	PromptIDs []int32
	// Prompt is the prompt as text, already rendered with the chat template.
	Prompt string
	// N is the number of samples (default 1). Samples share one prefill
	// where the server supports it.
	N int
	// Sampling parameters. Temperature 0 means greedy and is always sent
	// explicitly (never dropped as a zero value).
	Temperature float64
	TopP        float64 // 0 = 1 (off)
	TopK        int     // 0 = off
	MaxTokens   int
	Stop        []string
	// Seed makes sampling reproducible on servers that honour it; sample i
	// of a request is reproducible given (Seed, i). nil = unseeded.
	Seed *int64
}

// Response holds one request's samples.
type Response struct {
	// PromptIDs are the prompt token ids the server actually used (nil when
	// the server did not say and the backend could not re-tokenize).
	PromptIDs []int32
	Samples   []Sample
	// Endpoint is the base URL (or "builtin") that served the request.
	Endpoint string
	// Latency is the wall time of the successful attempt.
	Latency time.Duration
	// Attempts counts HTTP attempts including retries (1 = no retry).
	Attempts int
}

// Sample is one completion.
type Sample struct {
	Text     string
	TokenIDs []int32
	// Logprobs[i] is the behaviour policy's log-probability of TokenIDs[i]
	// at the request temperature.
	Logprobs     []float32
	FinishReason string // "stop", "length", …
	// Retokenized is true when the server returned no token ids and the
	// backend tokenized Text itself (ids may then differ from what the
	// server sampled, and Logprobs may be nil).
	Retokenized bool
}

// Backend generates completions. Implementations are safe for concurrent
// use; Generate blocks until the request completes, fails, or ctx ends.
type Backend interface {
	Generate(ctx context.Context, req *Request) (*Response, error)
	Close() error
}

// AdapterLoader is implemented by backends that hot-swap LoRA adapters.
// LoadAdapter makes the PEFT adapter in dir servable under name, replacing
// an adapter already loaded under that name.
type AdapterLoader interface {
	LoadAdapter(ctx context.Context, name, dir string) error
	UnloadAdapter(ctx context.Context, name string) error
}

// Tokenizer is implemented by backends that can tokenize with the served
// model's tokenizer.
type Tokenizer interface {
	Tokenize(ctx context.Context, text string) ([]int32, error)
	Detokenize(ctx context.Context, ids []int32) (string, error)
}

// OpenFunc opens a backend from its config section.
type OpenFunc func(ctx context.Context, cfg Config) (Backend, error)

var (
	regMu    sync.RWMutex
	registry = map[string]OpenFunc{}
)

// Register makes a backend available by name (in an init function of its
// package). It panics if open is nil or the name is taken.
func Register(name string, open OpenFunc) {
	regMu.Lock()
	defer regMu.Unlock()
	if open == nil {
		panic("generation: Register open is nil")
	}
	if _, dup := registry[name]; dup {
		panic("generation: Register called twice for backend " + name)
	}
	registry[name] = open
}

// Backends lists the registered backend names.
func Backends() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Open opens the backend cfg.Backend names.
func Open(ctx context.Context, cfg Config) (Backend, error) {
	regMu.RLock()
	open, ok := registry[cfg.Backend]
	regMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("generation: unknown backend %q (forgotten import?; registered: %v)", cfg.Backend, Backends())
	}
	return open(ctx, cfg)
}
