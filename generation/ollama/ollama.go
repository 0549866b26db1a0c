// Package ollama is the generation backend for Ollama servers, through
// Ollama's own Go client (github.com/ollama/ollama/api). It registers
// itself as "ollama". Ollama is for evaluation and baselines, not for
// training with LoRA hot-swap (see Adapters below).
//
// Requests go to POST /api/generate with raw: true (troupe's prompts are
// already rendered with the chat template, so Ollama's template must not
// be applied again), stream: false and logprobs: true. The options
// temperature, top_p, top_k and repeat_penalty are always sent (Ollama's
// own defaults — top_k 40, top_p 0.9, repeat_penalty 1.1 — are not
// troupe's, which are off; repeat_penalty goes as 1), num_predict, seed
// and stop when the request sets them. Ollama has no
// `n`: N samples are N requests, sample i seeded with seed+i when the
// request is seeded. Several base_urls (e.g. http://127.0.0.1:11434) are
// used through generation.Pool: each attempt goes to the least busy
// healthy endpoint, and Ollama's status errors become generation.HTTPError
// so that 429/5xx are retried and 4xx are not.
//
// # Token ids
//
// Ollama returns no token ids: its logprobs carry each token's text only,
// and /api/generate takes string prompts only. So the backend re-tokenizes
// with troupe's tokenizer of the same model (generation.tokenizer,
// required): the prompt as the server tokenizes a raw prompt (with BOS
// when the tokenizer adds one), the completion text as plain text. Rows
// are marked Retokenized. The ids can differ from what Ollama sampled
// (BPE of the decoded text need not be the sampled sequence), so logprobs
// are kept only when Ollama's tokens line up one to one with the
// re-tokenized completion — same count and same bytes at every position;
// a trailing end-of-sequence token that the text does not show is added to
// the ids — and are nil otherwise. Such rows are fine for evaluation;
// whether to train on them is the learner's choice.
//
// # Adapters
//
// Ollama cannot hot-swap LoRA adapters. An adapter is baked into a model
// at create time, so LoadAdapter uploads the PEFT folder's files as blobs
// (POST /api/blobs/sha256:…) and creates a new model per adapter version
// (POST /api/create {model, from: the base, adapters: {file: digest}}) on
// every endpoint; requests naming the adapter then go to that model, which
// Ollama loads on first use (a full model reload, not a swap). And Qwen3
// runs on Ollama's new engine, which answers "loras are not yet
// implemented": for Qwen3 the create or the first request fails, with an
// error wrapping ErrNoLoRA. Use vLLM or the builtin backend to train.
//
// Tests run against an httptest server that speaks Ollama's wire format
// for the endpoints used here, backed by troupe's embedded engine: a real
// Ollama server cannot be built in this project's environment (the module
// zip lacks llama.cpp's vendored sources), so this is the one place where
// a stand-in server is used instead of the real one.
package ollama

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/troupe-rl/troupe/generation"
	"github.com/troupe-rl/troupe/generation/tokenizer"
)

func init() {
	generation.Register("ollama", func(ctx context.Context, cfg generation.Config) (generation.Backend, error) {
		return New(cfg)
	})
}

// ErrNoLoRA is wrapped by adapter errors: Ollama bakes adapters into
// models and its new engine (Qwen3) has no LoRA at all.
var ErrNoLoRA = errors.New("ollama: LoRA adapters cannot be hot-swapped on Ollama (each adapter version becomes a new model via `ollama create`, reloaded on first use), and Qwen3 on Ollama's new engine answers \"loras are not yet implemented\"; use Ollama for evaluation and baselines, and vLLM or the builtin backend for training")

// Backend talks to one or more Ollama servers.
type Backend struct {
	cfg     generation.Config
	pool    *generation.Pool
	clients map[string]*api.Client // by base URL
	tok     *tokenizer.Tokenizer
	hc      *http.Client
	sem     chan struct{}

	mu       sync.RWMutex
	adapters map[string]string // adapter name → Ollama model created for its current version
}

var (
	_ generation.Backend       = (*Backend)(nil)
	_ generation.AdapterLoader = (*Backend)(nil)
	_ generation.Tokenizer     = (*Backend)(nil)
)

// New returns a backend for cfg.BaseURLs (each like http://host:11434).
// cfg.Model is the Ollama model name (e.g. qwen3:0.6b) and cfg.Tokenizer
// the same model's Hugging Face folder or tokenizer.json.
func New(cfg generation.Config) (*Backend, error) {
	if len(cfg.BaseURLs) == 0 {
		return nil, errors.New("ollama: generation.base_urls is empty (e.g. http://127.0.0.1:11434)")
	}
	if cfg.Model == "" {
		return nil, errors.New("ollama: generation.model must name the Ollama model (e.g. qwen3:0.6b)")
	}
	if cfg.Tokenizer == "" {
		return nil, errors.New("ollama: generation.tokenizer is required: Ollama returns no token ids, so completions are re-tokenized with the model's tokenizer")
	}
	tok, err := tokenizer.Load(cfg.Tokenizer)
	if err != nil {
		return nil, fmt.Errorf("ollama: generation.tokenizer: %w", err)
	}
	conc := max(cfg.MaxConcurrency, 1)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Keep a connection per request in flight: the default idle cap (100
	// in all) makes a busy client re-dial, which costs both sides CPU.
	tr.MaxIdleConns = 0
	tr.MaxIdleConnsPerHost = conc
	var rt http.RoundTripper = tr
	if cfg.APIKey != "" {
		rt = bearer{key: cfg.APIKey, next: tr}
	}
	b := &Backend{cfg: cfg, tok: tok, hc: &http.Client{Transport: rt}, sem: make(chan struct{}, conc),
		clients: map[string]*api.Client{}, adapters: map[string]string{}}
	urls := make([]string, len(cfg.BaseURLs))
	for i, raw := range cfg.BaseURLs {
		u, err := url.Parse(strings.TrimRight(raw, "/"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("ollama: base URL %q must look like http://host:11434", raw)
		}
		urls[i] = u.String()
		b.clients[urls[i]] = api.NewClient(u, b.hc)
	}
	b.pool, err = generation.NewPool(urls, generation.PoolOptions{AttemptTimeout: cfg.Timeout, MaxAttempts: cfg.MaxAttempts})
	if err != nil {
		return nil, fmt.Errorf("ollama: %w", err)
	}
	return b, nil
}

// bearer adds an Authorization header (for Ollama behind a proxy).
type bearer struct {
	key  string
	next http.RoundTripper
}

func (a bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+a.key)
	return a.next.RoundTrip(r)
}

// Pool exposes the endpoint pool (for stats).
func (b *Backend) Pool() *generation.Pool { return b.pool }

// Close releases idle connections.
func (b *Backend) Close() error {
	b.hc.CloseIdleConnections()
	return nil
}

// model maps a request's model to the Ollama model name.
func (b *Backend) model(name string) string {
	if name == "" {
		return b.cfg.Model
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if m, ok := b.adapters[name]; ok {
		return m
	}
	return name
}

// Generate sends N /api/generate requests (one per sample, concurrently,
// each retried across endpoints) and re-tokenizes the results.
func (b *Backend) Generate(ctx context.Context, req *generation.Request) (*generation.Response, error) {
	if req.PromptIDs != nil && req.Prompt == "" {
		return nil, errors.New("ollama: the request has only token ids, and Ollama takes text prompts only")
	}
	n := max(req.N, 1)
	model := b.model(req.Model)
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		s        generation.Sample
		endpoint string
		attempts int
		err      error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := &results[i]
			r.s, r.endpoint, r.attempts, r.err = b.sample(ctx, model, req, i)
			if r.err != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	resp := &generation.Response{Samples: make([]generation.Sample, n), Attempts: 1, Latency: time.Since(start),
		PromptIDs: b.encodePrompt(req.Prompt)}
	var errs []error
	for i, r := range results {
		if r.err != nil && (len(errs) == 0 || !errors.Is(r.err, context.Canceled)) {
			errs = append(errs, r.err)
		}
		resp.Samples[i] = r.s
		resp.Attempts += r.attempts - 1
		if i == 0 {
			resp.Endpoint = r.endpoint
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("ollama: model %q: %w", model, errors.Join(errs...))
	}
	return resp, nil
}

// sample runs request i of a Generate.
func (b *Backend) sample(ctx context.Context, model string, req *generation.Request, i int) (generation.Sample, string, int, error) {
	select {
	case b.sem <- struct{}{}:
	case <-ctx.Done():
		return generation.Sample{}, "", 0, ctx.Err()
	}
	defer func() { <-b.sem }()
	// Every sampling option is explicit: Ollama's defaults (top_k 40,
	// top_p 0.9, repeat_penalty 1.1) are not troupe's (off).
	topP := req.TopP
	if topP == 0 {
		topP = 1
	}
	opts := map[string]any{"temperature": req.Temperature, "top_p": topP, "top_k": req.TopK, "repeat_penalty": 1.0}
	if req.MaxTokens > 0 {
		opts["num_predict"] = req.MaxTokens
	}
	if req.Seed != nil {
		opts["seed"] = *req.Seed + int64(i)
	}
	if len(req.Stop) > 0 {
		opts["stop"] = req.Stop
	}
	stream := false
	gr := &api.GenerateRequest{Model: model, Prompt: req.Prompt, Raw: true, Stream: &stream, Options: opts, Logprobs: true}
	var out *api.GenerateResponse
	var endpoint string
	attempts, err := b.pool.Do(ctx, func(ctx context.Context, base string) error {
		out, endpoint = nil, base
		var final api.GenerateResponse
		done := false
		err := b.clients[base].Generate(ctx, gr, func(r api.GenerateResponse) error {
			if r.Done {
				final, done = r, true
			}
			return nil
		})
		if err != nil {
			return classify(ctx, base+"/api/generate", err)
		}
		if !done {
			return &generation.MalformedError{Endpoint: base + "/api/generate", Err: errors.New("the response ended without done: true")}
		}
		out = &final
		return nil
	})
	if err != nil {
		if isLoRAError(err) {
			err = fmt.Errorf("%w: %w", ErrNoLoRA, err)
		}
		return generation.Sample{}, endpoint, attempts, err
	}
	return b.convert(out), endpoint, attempts, nil
}

// classify maps the api client's errors to the kinds generation.Retryable
// knows: status errors to HTTPError, anything else that is not a
// transport or context error (a line that is not JSON, an error reported
// inside a 200 stream) to MalformedError.
func classify(ctx context.Context, endpoint string, err error) error {
	var se api.StatusError
	if errors.As(err, &se) {
		return &generation.HTTPError{Endpoint: endpoint, Status: se.StatusCode, Body: se.ErrorMessage}
	}
	var ae api.AuthorizationError
	if errors.As(err, &ae) {
		return &generation.HTTPError{Endpoint: endpoint, Status: ae.StatusCode, Body: "unauthorized"}
	}
	var ne net.Error
	var ue *url.Error
	if ctx.Err() != nil || errors.As(err, &ne) || errors.As(err, &ue) || generation.Retryable(err) {
		return err
	}
	return &generation.MalformedError{Endpoint: endpoint, Err: err}
}

// isLoRAError recognises Ollama's refusals of LoRA ("loras are not yet
// implemented" from the new engine; "… not supported" from converters).
func isLoRAError(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "loras are not yet implemented") ||
		strings.Contains(msg, "lora") && (strings.Contains(msg, "not supported") || strings.Contains(msg, "unsupported"))
}

// encodePrompt tokenizes a raw prompt as Ollama's runner does: special
// tokens written in the text are recognised, and BOS is added when the
// tokenizer adds one.
func (b *Backend) encodePrompt(text string) []int32 {
	if b.tok.AddBOS() {
		if bos, ok := b.tok.BOSID(); ok {
			return b.tok.AppendEncode([]int32{bos}, text)
		}
	}
	return b.tok.Encode(text)
}

// convert re-tokenizes one response.
func (b *Backend) convert(r *api.GenerateResponse) generation.Sample {
	s := generation.Sample{Text: r.Response, FinishReason: r.DoneReason, Retokenized: true}
	s.TokenIDs, s.Logprobs = Align(b.tok, b.tok.Encode(r.Response), r.Logprobs)
	return s
}

// Align matches Ollama's per-token logprobs to the re-tokenized completion
// ids. It returns the ids (with an end-of-sequence id appended when
// Ollama's last token is one that the text does not show) and the
// logprobs, or ids and nil when the tokens do not line up one to one.
func Align(tok *tokenizer.Tokenizer, ids []int32, lps []api.Logprob) ([]int32, []float32) {
	if len(lps) == len(ids)+1 {
		if id, ok := tok.TokenID(lps[len(lps)-1].Token); ok && tok.IsSpecial(id) {
			ids = append(ids, id)
		}
	}
	if len(lps) != len(ids) || len(ids) == 0 {
		return ids, nil
	}
	out := make([]float32, len(ids))
	for i, id := range ids {
		if !sameToken(tok, id, lps[i]) {
			return ids, nil
		}
		out[i] = float32(lps[i].Logprob)
	}
	return ids, out
}

// sameToken compares a token id with Ollama's description of a token: its
// bytes when Ollama gave them, else its text.
func sameToken(tok *tokenizer.Tokenizer, id int32, lp api.Logprob) bool {
	want := tok.TokenBytes(id)
	if tok.IsSpecial(id) {
		if s, ok := tok.IDToken(id); ok {
			want = []byte(s)
		}
	}
	if len(lp.Bytes) > 0 {
		if len(lp.Bytes) != len(want) {
			return false
		}
		for i, c := range lp.Bytes {
			if c != int(want[i]) {
				return false
			}
		}
		return true
	}
	return lp.Token == string(want)
}

// Tokenize encodes text with the configured tokenizer (no special tokens
// added).
func (b *Backend) Tokenize(ctx context.Context, text string) ([]int32, error) {
	return b.tok.Encode(text), nil
}

// Detokenize decodes ids with the configured tokenizer.
func (b *Backend) Detokenize(ctx context.Context, ids []int32) (string, error) {
	return b.tok.Decode(ids), nil
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// LoadAdapter makes the PEFT adapter in dir servable under name by
// creating a new Ollama model from the base with the adapter baked in, on
// every endpoint (see the package doc: this is not a hot-swap, and Qwen3
// on Ollama has no LoRA). The model is named troupe-NAME:DIGEST; the
// previous version's model is deleted once the new one exists.
func (b *Backend) LoadAdapter(ctx context.Context, name, dir string) error {
	files, err := adapterFiles(dir)
	if err != nil {
		return fmt.Errorf("ollama: load adapter %q: %w", name, err)
	}
	sum := sha256.New()
	for _, f := range files {
		sum.Write([]byte(f.digest))
	}
	model := "troupe-" + strings.ToLower(strings.Trim(unsafeName.ReplaceAllString(name, "-"), "-")) + ":" + hex.EncodeToString(sum.Sum(nil))[:12]
	adapters := map[string]string{}
	for _, f := range files {
		adapters[f.name] = f.digest
	}
	for _, ep := range b.pool.Stats() {
		c := b.clients[ep.URL]
		for _, f := range files {
			if err := uploadBlob(ctx, c, f); err != nil {
				return fmt.Errorf("ollama: load adapter %q: upload %s to %s: %w", name, f.path, ep.URL, err)
			}
		}
		stream := false
		err := c.Create(ctx, &api.CreateRequest{Model: model, From: b.cfg.Model, Adapters: adapters, Stream: &stream},
			func(api.ProgressResponse) error { return nil })
		if err != nil && isLoRAError(err) {
			return fmt.Errorf("ollama: load adapter %q from %s on %s: %w: %w", name, dir, ep.URL, ErrNoLoRA, err)
		}
		if err != nil {
			return fmt.Errorf("ollama: load adapter %q from %s on %s: create %s from %s: %w", name, dir, ep.URL, model, b.cfg.Model, err)
		}
	}
	b.mu.Lock()
	old := b.adapters[name]
	b.adapters[name] = model
	b.mu.Unlock()
	if old != "" && old != model {
		b.deleteModel(ctx, old) // best effort: a leftover model only costs disk
	}
	return nil
}

// UnloadAdapter deletes the adapter's model from every endpoint.
func (b *Backend) UnloadAdapter(ctx context.Context, name string) error {
	b.mu.Lock()
	model, ok := b.adapters[name]
	delete(b.adapters, name)
	b.mu.Unlock()
	if !ok {
		return fmt.Errorf("ollama: unload adapter %q: not loaded", name)
	}
	if err := b.deleteModel(ctx, model); err != nil {
		return fmt.Errorf("ollama: unload adapter %q: %w", name, err)
	}
	return nil
}

func (b *Backend) deleteModel(ctx context.Context, model string) error {
	var errs []error
	for _, ep := range b.pool.Stats() {
		if err := b.clients[ep.URL].Delete(ctx, &api.DeleteRequest{Model: model}); err != nil {
			errs = append(errs, fmt.Errorf("delete %s on %s: %w", model, ep.URL, err))
		}
	}
	return errors.Join(errs...)
}

type adapterFile struct {
	name, path, digest string
}

// adapterFiles lists the regular files of a PEFT folder with their
// sha256 digests ("sha256:HEX"); it needs adapter_config.json and
// adapter_model.safetensors.
func adapterFiles(dir string) ([]adapterFile, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []adapterFile
	for _, e := range ents {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		d, err := digestFile(p)
		if err != nil {
			return nil, err
		}
		files = append(files, adapterFile{name: e.Name(), path: p, digest: d})
	}
	for _, need := range []string{"adapter_config.json", "adapter_model.safetensors"} {
		if !containsName(files, need) {
			return nil, fmt.Errorf("%s: no %s (want a PEFT adapter folder)", dir, need)
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	return files, nil
}

func containsName(files []adapterFile, name string) bool {
	for _, f := range files {
		if f.name == name {
			return true
		}
	}
	return false
}

func digestFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func uploadBlob(ctx context.Context, c *api.Client, f adapterFile) error {
	r, err := os.Open(f.path)
	if err != nil {
		return err
	}
	defer r.Close()
	return c.CreateBlob(ctx, f.digest, r)
}
