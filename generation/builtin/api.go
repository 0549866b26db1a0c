// Package builtin is troupe's embedded inference engine: a pure-Go forward
// pass of a Qwen3/Qwen2/Llama-style decoder (the model folder formats are
// in internal/hf) with a KV cache, continuous batched decoding across
// concurrent requests, seeded sampling, per-token logprobs, and LoRA
// adapters applied on the fly. It works on token ids only; text (tokenizer,
// stop strings, chat templates) is the caller's business — the HTTP server
// in generation/builtin/server adds it.
//
// # Semantics
//
// The forward pass follows Hugging Face's modeling code in float32:
// RMSNorm x·rsqrt(mean(x²)+eps)·w (the mean accumulated in float64),
// q/k/v projections y = x·Wᵀ (+ bias with attention_bias), Qwen3's per-head
// q_norm/k_norm before RoPE, RoPE in rotate_half form (element i pairs with
// i+head_dim/2) with angles pos·inv_freq computed in float64 from
// hf.ModelConfig.RopeInvFreq, grouped-query causal attention scaled by
// 1/√head_dim, SwiGLU MLP, final norm, lm_head or tied embeddings. Logits
// agree with a float64 reference to ~1e-5 (see the tests).
//
// # Concurrency and ownership
//
// An [Engine] is safe for concurrent use. One scheduler goroutine owns the
// batch, the KV caches and all scratch memory; a fixed pool of
// Options.Threads goroutines (the scheduler among them) runs the matrix
// kernels, attention and sampling. Each step the scheduler admits queued
// requests while the batch has room (prefilling a request's prompt once,
// in one batched forward, and sharing that KV prefix among its N samples),
// decodes one token for every running sample, and retires finished ones.
// Generate blocks its caller only. Request callbacks (Stop, OnToken) run on
// the scheduler goroutine, one at a time. The engine does not modify or
// keep a Request's slices after Generate returns; Sample slices belong to
// the caller. Adapters are immutable once loaded; a request holds the
// version it resolved when Generate was called.
//
// # Determinism
//
// With the Go kernels (the default build and GOEXPERIMENT=simd), each
// sequence's logits are bitwise independent of the other rows in the
// batch, of the thread count and of how the batch was split, so a seeded
// request returns the same tokens and logprobs alone or in any batch, on
// the same machine and build. The optional OpenBLAS kernels (build tag
// "openblas") pick code paths by matrix size, so there rows can move by a
// few ulps with the batch (logprobs within ~1e-6; a token can only change
// on an exact sampling tie). Different builds or CPUs may differ in the
// last bits.
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
	// Sample i uses a stream derived from (Seed, i). nil = random. See
	// "Determinism" in the package doc for the exact guarantee.
	Seed       *int64
	StopTokens []int32 // generation of a sample ends after emitting one of these (it is included)
	Adapter    string  // "" = base model; else a loaded adapter's name
	// Stop, if set, is called after each sampled token with the sample's
	// tokens so far; returning true finishes that sample with reason "stop"
	// (the server uses it for stop strings). It must be fast and must not
	// block; it is called from the decode loop.
	// tokens is the engine's buffer: read it during the call, do not keep it.
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
