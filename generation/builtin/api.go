// Package builtin is troupe's embedded inference engine: a pure-Go forward
// pass of a Qwen3/Llama-style decoder (the model folder formats are in
// internal/hf) with a KV cache, continuous batched decoding across
// concurrent requests, seeded sampling, per-token logprobs, and LoRA
// adapters applied on the fly. It works on token ids only; text (tokenizer,
// stop strings, chat templates) is the caller's business — the HTTP server
// in generation/builtin/server adds it.
package builtin

import "errors"

// Errors returned by the engine. Callers map them to HTTP statuses.
var (
	ErrContextLength  = errors.New("builtin: prompt plus max_tokens exceeds the model's context length")
	ErrUnknownAdapter = errors.New("builtin: unknown adapter")
	ErrQueueFull      = errors.New("builtin: request queue is full")
	ErrClosed         = errors.New("builtin: engine is closed")
	ErrBadRequest     = errors.New("builtin: bad request")
)

// Options configure an engine.
type Options struct {
	// MaxBatch bounds the sequences decoded together (default 32).
	MaxBatch int
	// MaxQueue bounds requests waiting to join the batch (default 256);
	// beyond it Generate fails with ErrQueueFull.
	MaxQueue int
	// MaxContext caps the context length below the model's
	// max_position_embeddings (0 = the model's).
	MaxContext int
	// Threads bounds the goroutines used by the matrix kernels (0 = GOMAXPROCS).
	Threads int
}

// Request is one generation request: a prompt (token ids) and N samples
// that share one prefill.
type Request struct {
	Prompt      []int32
	N           int     // samples (default 1)
	MaxTokens   int     // tokens to generate per sample (required > 0)
	Temperature float64 // 0 = greedy
	TopP        float64 // 0 or 1 = off
	TopK        int     // 0 = off
	// Seed makes sampling reproducible: the same seed, prompt and
	// parameters give the same tokens whatever else is in the batch.
	// Sample i uses a stream derived from (Seed, i). nil = random.
	Seed       *int64
	StopTokens []int32 // generation of a sample ends after emitting one of these (it is included)
	Adapter    string  // "" = base model; else a loaded adapter's name
	// Stop, if set, is called after each sampled token with the sample's
	// tokens so far; returning true finishes that sample with reason "stop"
	// (the server uses it for stop strings). It must be fast and must not
	// block; it is called from the decode loop.
	Stop func(sample int, tokens []int32) bool
	// OnToken, if set, receives every token as it is sampled (streaming).
	// Like Stop it runs in the decode loop and must not block for long.
	OnToken func(sample int, token int32, logprob float32)
}

// Sample is one completed sample.
type Sample struct {
	Tokens []int32
	// Logprobs[i] is log p(Tokens[i]) under softmax(logits/T) with T the
	// request temperature (T=0 → T=1), no top-k/top-p truncation: what the
	// learner recomputes.
	Logprobs     []float32
	FinishReason string // "stop" (stop token or Stop func) or "length"
}

// Result is a request's outcome.
type Result struct {
	Samples      []Sample
	PromptTokens int
}
