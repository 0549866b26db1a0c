// Package generation is everything that produces tokens: the Backend
// contract (one prompt in, N sampled completions with token ids and
// logprobs out), a registry of backends by name in the style of
// database/sql drivers, and the sub-packages that implement it (openai,
// ollama, builtin) or drive it (rollout, chat).
//
// Backends register by name (Register, in their package's init) and are
// opened from the experiment config's generation section (Open). Optional
// capabilities — LoRA hot-swap (AdapterLoader), tokenization (Tokenizer) —
// are found by type assertion. Pool spreads requests over several
// endpoints with retries and health tracking.
package generation

import (
	"time"

	"github.com/troupe-rl/troupe/internal/config"
)

// Config is the "generation:" section of an experiment config.
type Config struct {
	// Backend names a registered backend: openai, ollama or builtin (default openai).
	Backend string `yaml:"backend"`
	// BaseURLs are the servers' base URLs (e.g. http://127.0.0.1:8000/v1);
	// requests go to the endpoint with the fewest outstanding requests.
	BaseURLs []string `yaml:"base_urls,omitempty"`
	// Model is the served base model name, or a model folder for builtin.
	Model string `yaml:"model"`
	// APIKey is sent as a bearer token when set.
	APIKey string `yaml:"api_key,omitempty"`
	// Timeout bounds one request (default 2m).
	Timeout time.Duration `yaml:"timeout"`
	// MaxConcurrency bounds requests in flight (default 64).
	MaxConcurrency int `yaml:"max_concurrency"`
	// MaxAttempts bounds tries per request on retryable failures (429, 5xx,
	// connection errors, malformed responses), the first included (default 6).
	MaxAttempts int `yaml:"max_attempts"`
	// Tokenizer is a model folder (or tokenizer.json) whose tokenizer and
	// chat_template the client side uses: prompts are rendered with it, and
	// backends that return no token ids (Ollama) re-tokenize with it.
	// Optional for openai/builtin.
	Tokenizer string `yaml:"tokenizer,omitempty"`
	// ChatTemplate picks the prompt format: auto (the tokenizer's own
	// chat_template, else chatml), or qwen3, chatml, llama3, plain. Default auto.
	ChatTemplate string `yaml:"chat_template"`
	// EnableThinking is passed to chat templates that know it (Qwen3);
	// default false: answers come without a reasoning block.
	EnableThinking bool `yaml:"enable_thinking"`
	// Train and Eval are the sampling settings for training rollouts and evaluation.
	Train Sampling `yaml:"train"`
	Eval  Sampling `yaml:"eval"`
}

// Sampling holds sampling parameters for one phase.
type Sampling struct {
	Temperature float64 `yaml:"temperature"` // default 1.0 (train), 0.6 (eval)
	TopP        float64 `yaml:"top_p"`       // default 1.0
	TopK        int     `yaml:"top_k"`       // 0 = off
	MaxTokens   int     `yaml:"max_tokens"`  // default 256
}

// SetDefaults fills the documented defaults.
func (c *Config) SetDefaults() {
	c.Backend = "openai"
	c.ChatTemplate = "auto"
	c.Timeout = 2 * time.Minute
	c.MaxConcurrency = 64
	c.MaxAttempts = 6
	c.Train = Sampling{Temperature: 1.0, TopP: 1.0, MaxTokens: 256}
	c.Eval = Sampling{Temperature: 0.6, TopP: 1.0, MaxTokens: 256}
}

// Validate checks the section.
func (c *Config) Validate() error {
	switch {
	case c.Backend == "":
		return config.Errorf("backend", "required: openai, ollama or builtin")
	case c.Timeout <= 0:
		return config.Errorf("timeout", "must be > 0, got %v", c.Timeout)
	case c.MaxConcurrency < 1:
		return config.Errorf("max_concurrency", "must be ≥ 1, got %d", c.MaxConcurrency)
	case c.MaxAttempts < 1:
		return config.Errorf("max_attempts", "must be ≥ 1, got %d", c.MaxAttempts)
	}
	return nil
}

// Validate checks one phase's sampling parameters.
func (s *Sampling) Validate() error {
	switch {
	case !(s.Temperature >= 0 && s.Temperature <= 10):
		return config.Errorf("temperature", "must be in [0, 10], got %v", s.Temperature)
	case !(s.TopP > 0 && s.TopP <= 1):
		return config.Errorf("top_p", "must be in (0, 1], got %v", s.TopP)
	case s.TopK < 0:
		return config.Errorf("top_k", "must be ≥ 0, got %d", s.TopK)
	case s.MaxTokens < 1:
		return config.Errorf("max_tokens", "must be ≥ 1, got %d", s.MaxTokens)
	}
	return nil
}
