// Package openai is the generation backend for OpenAI-compatible servers:
// vLLM in production, troupe's own `troupe serve`, or anything that speaks
// /v1/completions. It registers itself as "openai".
//
// It asks for what an RL loop needs and plain OpenAI clients drop: prompts
// as token ids, `return_token_ids` (the completion's and the prompt's ids),
// per-token logprobs of the sampled tokens, `top_k`, `seed`, and an explicit
// `temperature: 0` for greedy evaluation. (github.com/sashabaranov/go-openai
// rejects token-id prompts, omits temperature 0 and discards vLLM's
// token_ids fields, so the request path here is plain net/http + JSON; the
// project's tests use go-openai as a client of the embedded server.)
//
// LoRA hot-swap uses vLLM's runtime endpoints /v1/load_lora_adapter and
// /v1/unload_lora_adapter (vLLM needs VLLM_ALLOW_RUNTIME_LORA_UPDATING=True);
// replacing a name is unload-then-load on every endpoint, since vLLM refuses
// to load a name that exists. The adapter folder must be readable by the
// server at the same path.
//
// Logprob semantics: troupe's engine returns log-probabilities at the
// request temperature. Start vLLM with `--logprobs-mode processed_logprobs`
// to get the same; the default (raw) ignores temperature.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-rl/troupe/generation"
)

func init() {
	generation.Register("openai", func(ctx context.Context, cfg generation.Config) (generation.Backend, error) {
		b, err := New(cfg)
		if err != nil {
			return nil, err
		}
		if err := b.Ping(ctx); err != nil {
			b.Close()
			return nil, err
		}
		return b, nil
	})
}

// Backend talks to one or more OpenAI-compatible servers.
type Backend struct {
	cfg    generation.Config
	pool   *generation.Pool
	client *http.Client
	sem    chan struct{}
}

var (
	_ generation.Backend       = (*Backend)(nil)
	_ generation.AdapterLoader = (*Backend)(nil)
	_ generation.Tokenizer     = (*Backend)(nil)
)

// New returns a backend for cfg.BaseURLs (each like http://host:8000/v1).
func New(cfg generation.Config) (*Backend, error) {
	if len(cfg.BaseURLs) == 0 {
		return nil, fmt.Errorf("openai: generation.base_urls is empty")
	}
	urls := make([]string, len(cfg.BaseURLs))
	for i, u := range cfg.BaseURLs {
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return nil, fmt.Errorf("openai: base URL %q must start with http:// or https://", u)
		}
		urls[i] = strings.TrimRight(u, "/")
	}
	pool, err := generation.NewPool(urls, generation.PoolOptions{
		AttemptTimeout: cfg.Timeout,
		MaxAttempts:    cfg.MaxAttempts,
	})
	if err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	conc := max(cfg.MaxConcurrency, 1)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Keep a connection per request in flight: the default idle cap (100
	// in all) makes a busy client re-dial, which costs both sides CPU.
	tr.MaxIdleConns = 0
	tr.MaxIdleConnsPerHost = conc
	tr.MaxConnsPerHost = 0
	return &Backend{cfg: cfg, pool: pool, client: &http.Client{Transport: tr}, sem: make(chan struct{}, conc)}, nil
}

// UnreachableError says that no endpoint answered, or that one does not
// serve generation.model: a configuration error (wrong URL or name, server
// not started), reported before any work is done.
type UnreachableError struct {
	URLs []string
	Err  error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("openai: generation.base_urls %v: %v", e.URLs, e.Err)
}
func (e *UnreachableError) Unwrap() error  { return e.Err }
func (e *UnreachableError) BadInput() bool { return true }

// Ping checks that at least one endpoint answers GET /models (within 10 s
// each) and that those that answer serve generation.model; endpoints that
// do not answer are logged. It fails when none answers or the model is
// not served.
func (b *Backend) Ping(ctx context.Context) error {
	var errs []error
	var urls []string
	ok := 0
	for _, ep := range b.pool.Stats() {
		urls = append(urls, ep.URL)
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		models, err := b.models(pctx, ep.URL)
		cancel()
		if err != nil {
			slog.Warn("openai: endpoint does not answer", "url", ep.URL, "err", err)
			errs = append(errs, err)
			continue
		}
		if b.cfg.Model != "" && len(models) > 0 && !slices.Contains(models, b.cfg.Model) {
			return &UnreachableError{URLs: []string{ep.URL}, Err: fmt.Errorf("generation.model %q is not served there (served: %s)", b.cfg.Model, strings.Join(models, ", "))}
		}
		ok++
	}
	if ok == 0 {
		return &UnreachableError{URLs: urls, Err: fmt.Errorf("no server answers: %w", errors.Join(errs...))}
	}
	return nil
}

// models lists the model ids an endpoint serves (GET /models).
func (b *Backend) models(ctx context.Context, base string) ([]string, error) {
	data, err := b.get(ctx, base+"/models")
	if err != nil {
		return nil, err
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, &generation.MalformedError{Endpoint: base + "/models", Err: err}
	}
	ids := make([]string, len(list.Data))
	for i, m := range list.Data {
		ids[i] = m.ID
	}
	return ids, nil
}

func (b *Backend) get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if b.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+b.cfg.APIKey)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	return data, nil
}

// Pool exposes the endpoint pool (for stats).
func (b *Backend) Pool() *generation.Pool { return b.pool }

// Close releases idle connections.
func (b *Backend) Close() error {
	b.client.CloseIdleConnections()
	return nil
}

// completionRequest is the body of POST /v1/completions with vLLM extras.
type completionRequest struct {
	Model          string   `json:"model"`
	Prompt         any      `json:"prompt"`
	N              int      `json:"n"`
	MaxTokens      int      `json:"max_tokens"`
	Temperature    float64  `json:"temperature"` // never omitted: 0 means greedy
	TopP           float64  `json:"top_p"`
	TopK           int      `json:"top_k,omitempty"`
	Seed           *int64   `json:"seed,omitempty"`
	Stop           []string `json:"stop,omitempty"`
	Logprobs       int      `json:"logprobs"`
	ReturnTokenIDs bool     `json:"return_token_ids"`
}

// completionResponse is what we read back; unknown fields are ignored.
type completionResponse struct {
	Choices []struct {
		Index        int      `json:"index"`
		Text         string   `json:"text"`
		FinishReason *string  `json:"finish_reason"`
		TokenIDs     tokenIDs `json:"token_ids"`
		PromptIDs    tokenIDs `json:"prompt_token_ids"`
		Logprobs     *struct {
			TokenLogprobs logprobList `json:"token_logprobs"`
		} `json:"logprobs"`
	} `json:"choices"`
	PromptIDs tokenIDs `json:"prompt_token_ids"`
}

// tokenIDs is a JSON list of token ids decoded without reflection: the
// response echoes the whole prompt's ids, and encoding/json's reflective
// decoding of them was the client's largest cost per call.
type tokenIDs []int32

func (t *tokenIDs) UnmarshalJSON(b []byte) error {
	if ids, ok := parseIDs(b); ok {
		*t = ids
		return nil
	}
	var ids []int32 // null, or anything the fast path does not handle
	if err := json.Unmarshal(b, &ids); err != nil {
		return err
	}
	*t = ids
	return nil
}

// logprobList is a JSON list of numbers or nulls (NaN here), decoded
// without reflection or a pointer per element.
type logprobList []float64

func (l *logprobList) UnmarshalJSON(b []byte) error {
	if v, ok := parseNumbers(b); ok {
		*l = v
		return nil
	}
	var ptrs []*float64
	if err := json.Unmarshal(b, &ptrs); err != nil {
		return err
	}
	out := make([]float64, len(ptrs))
	for i, p := range ptrs {
		out[i] = math.NaN()
		if p != nil {
			out[i] = *p
		}
	}
	*l = out
	return nil
}

// parseNumbers parses a flat JSON array of numbers and nulls (null → NaN).
func parseNumbers(b []byte) ([]float64, bool) {
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return nil, false
	}
	body := bytes.TrimSpace(b[1 : len(b)-1])
	out := make([]float64, 0, bytes.Count(body, []byte{','})+1)
	if len(body) == 0 {
		return out, true
	}
	for len(body) > 0 {
		tok := body
		if k := bytes.IndexByte(body, ','); k >= 0 {
			tok, body = body[:k], body[k+1:]
			if len(bytes.TrimSpace(body)) == 0 {
				return nil, false // trailing comma
			}
		} else {
			body = nil
		}
		tok = bytes.TrimSpace(tok)
		if string(tok) == "null" {
			out = append(out, math.NaN())
			continue
		}
		if len(tok) == 0 || !(tok[0] == '-' || tok[0] >= '0' && tok[0] <= '9') || !json.Valid(tok) {
			return nil, false
		}
		v, err := strconv.ParseFloat(string(tok), 64)
		if err != nil {
			return nil, false
		}
		out = append(out, v)
	}
	return out, true
}

// parseIDs parses a JSON array of non-negative integers that fit int32.
func parseIDs(b []byte) ([]int32, bool) {
	i := 0
	space := func() {
		for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
			i++
		}
	}
	space()
	if i == len(b) || b[i] != '[' {
		return nil, false
	}
	i++
	space()
	out := make([]int32, 0, bytes.Count(b, []byte{','})+1)
	if i < len(b) && b[i] == ']' {
		i++
		space()
		return out, i == len(b)
	}
	for {
		start, v := i, int64(0)
		for i < len(b) && b[i] >= '0' && b[i] <= '9' && i-start < 11 {
			v = v*10 + int64(b[i]-'0')
			i++
		}
		if i == start || v > math.MaxInt32 || (b[start] == '0' && i-start > 1) {
			return nil, false
		}
		out = append(out, int32(v))
		space()
		if i == len(b) {
			return nil, false
		}
		switch b[i] {
		case ']':
			i++
			space()
			return out, i == len(b)
		case ',':
			i++
			space()
		default:
			return nil, false
		}
	}
}

// Generate sends one completions request (retried across endpoints on
// retryable failures) and returns its samples in index order.
func (b *Backend) Generate(ctx context.Context, req *generation.Request) (*generation.Response, error) {
	select {
	case b.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-b.sem }()

	body := completionRequest{
		Model: req.Model, N: max(req.N, 1), MaxTokens: req.MaxTokens,
		Temperature: req.Temperature, TopP: req.TopP, TopK: req.TopK, Seed: req.Seed,
		Stop: req.Stop, Logprobs: 1, ReturnTokenIDs: true,
	}
	if body.Model == "" {
		body.Model = b.cfg.Model
	}
	if body.TopP == 0 {
		body.TopP = 1
	}
	if req.PromptIDs != nil {
		body.Prompt = req.PromptIDs
	} else {
		body.Prompt = req.Prompt
	}
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	var resp *generation.Response
	attempts, err := b.pool.Do(ctx, func(ctx context.Context, base string) error {
		start := time.Now()
		var cr completionResponse
		if err := b.post(ctx, base, "/completions", payload, &cr); err != nil {
			return err
		}
		r, err := convert(base, &cr, body.N)
		if err != nil {
			return err
		}
		r.Latency = time.Since(start)
		resp = r
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("openai: model %q: %w", body.Model, err)
	}
	resp.Attempts = attempts
	return resp, nil
}

// convert checks a completions response and maps it to samples.
func convert(base string, cr *completionResponse, n int) (*generation.Response, error) {
	bad := func(format string, args ...any) error {
		return &generation.MalformedError{Endpoint: base, Err: fmt.Errorf(format, args...)}
	}
	if len(cr.Choices) != n {
		return nil, bad("asked for %d choices, got %d", n, len(cr.Choices))
	}
	sort.SliceStable(cr.Choices, func(i, j int) bool { return cr.Choices[i].Index < cr.Choices[j].Index })
	r := &generation.Response{Endpoint: base, PromptIDs: []int32(cr.PromptIDs), Samples: make([]generation.Sample, n)}
	for i, c := range cr.Choices {
		if c.Index != i {
			return nil, bad("choice indices are not 0..%d", n-1)
		}
		s := generation.Sample{Text: c.Text, TokenIDs: []int32(c.TokenIDs)}
		if c.FinishReason != nil {
			s.FinishReason = *c.FinishReason
		}
		if r.PromptIDs == nil && c.PromptIDs != nil {
			r.PromptIDs = []int32(c.PromptIDs)
		}
		if c.Logprobs != nil {
			s.Logprobs = make([]float32, len(c.Logprobs.TokenLogprobs))
			for j, lp := range c.Logprobs.TokenLogprobs {
				if math.IsNaN(lp) {
					return nil, bad("choice %d: token_logprobs[%d] is null", i, j)
				}
				s.Logprobs[j] = float32(lp)
			}
			if s.TokenIDs != nil && len(s.Logprobs) != len(s.TokenIDs) {
				return nil, bad("choice %d: %d token ids but %d logprobs", i, len(s.TokenIDs), len(s.Logprobs))
			}
		}
		r.Samples[i] = s
	}
	return r, nil
}

// post sends a JSON body and decodes a JSON answer into out (when non-nil).
func (b *Backend) post(ctx context.Context, base, path string, payload []byte, out any) error {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("openai: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	if b.cfg.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+b.cfg.APIKey)
	}
	hresp, err := b.client.Do(hreq)
	if err != nil {
		return err
	}
	defer hresp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(hresp.Body, 256<<20))
	if err != nil {
		return err
	}
	if hresp.StatusCode/100 != 2 {
		msg := strings.TrimSpace(string(data))
		var oe struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(data, &oe) == nil && oe.Error.Message != "" {
			msg = oe.Error.Message
		}
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		return &generation.HTTPError{Endpoint: base + path, Status: hresp.StatusCode, Body: msg,
			RetryAfter: generation.ParseRetryAfter(hresp.Header.Get("Retry-After"), time.Now())}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &generation.MalformedError{Endpoint: base + path, Err: err}
	}
	return nil
}

// serverRoot strips a trailing /v1 (vLLM serves /tokenize at the root).
func serverRoot(base string) string { return strings.TrimSuffix(base, "/v1") }

// LoadAdapter makes the PEFT adapter in dir servable as name on every
// endpoint (unload first, then load, as vLLM refuses existing names).
func (b *Backend) LoadAdapter(ctx context.Context, name, dir string) error {
	for _, ep := range b.pool.Stats() {
		_ = b.unloadOne(ctx, ep.URL, name) // absent is fine
		payload, _ := json.Marshal(map[string]string{"lora_name": name, "lora_path": dir})
		if err := b.post(ctx, ep.URL, "/load_lora_adapter", payload, nil); err != nil {
			return fmt.Errorf("openai: load adapter %q from %s on %s: %w", name, dir, ep.URL, err)
		}
	}
	return nil
}

// UnloadAdapter removes name from every endpoint.
func (b *Backend) UnloadAdapter(ctx context.Context, name string) error {
	var errs []error
	for _, ep := range b.pool.Stats() {
		if err := b.unloadOne(ctx, ep.URL, name); err != nil {
			errs = append(errs, fmt.Errorf("openai: unload adapter %q on %s: %w", name, ep.URL, err))
		}
	}
	return errors.Join(errs...)
}

func (b *Backend) unloadOne(ctx context.Context, base, name string) error {
	payload, _ := json.Marshal(map[string]string{"lora_name": name})
	return b.post(ctx, base, "/unload_lora_adapter", payload, nil)
}

// Tokenize uses the first endpoint's /tokenize (vLLM's shape).
func (b *Backend) Tokenize(ctx context.Context, text string) ([]int32, error) {
	payload, _ := json.Marshal(map[string]any{"model": b.cfg.Model, "prompt": text, "add_special_tokens": false})
	var out struct {
		Tokens []int32 `json:"tokens"`
	}
	_, err := b.pool.Do(ctx, func(ctx context.Context, base string) error {
		return b.post(ctx, serverRoot(base), "/tokenize", payload, &out)
	})
	if err != nil {
		return nil, fmt.Errorf("openai: tokenize: %w", err)
	}
	return out.Tokens, nil
}

// Detokenize uses /detokenize (vLLM's shape).
func (b *Backend) Detokenize(ctx context.Context, ids []int32) (string, error) {
	payload, _ := json.Marshal(map[string]any{"model": b.cfg.Model, "tokens": ids})
	var out struct {
		Prompt string `json:"prompt"`
	}
	_, err := b.pool.Do(ctx, func(ctx context.Context, base string) error {
		return b.post(ctx, serverRoot(base), "/detokenize", payload, &out)
	})
	if err != nil {
		return "", fmt.Errorf("openai: detokenize: %w", err)
	}
	return out.Prompt, nil
}
