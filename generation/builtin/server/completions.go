package server

import (
	"context"
	"math"
	"net/http"
	"slices"
	"time"
)

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type completionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *usage             `json:"usage,omitempty"`
}

type completionChoice struct {
	Index          int                 `json:"index"`
	Text           string              `json:"text"`
	Logprobs       *completionLogprobs `json:"logprobs"`
	FinishReason   *string             `json:"finish_reason"`
	StopReason     any                 `json:"stop_reason"`
	TokenIDs       []int32             `json:"token_ids,omitzero"`
	PromptTokenIDs []int32             `json:"prompt_token_ids,omitzero"`
}

// completionLogprobs is OpenAI's legacy completions logprobs object.
// top_logprobs is null: the engine computes only the sampled tokens'
// logprobs.
type completionLogprobs struct {
	TextOffset    []int                `json:"text_offset"`
	TokenLogprobs []float32            `json:"token_logprobs"`
	Tokens        []string             `json:"tokens"`
	TopLogprobs   []map[string]float32 `json:"top_logprobs"`
}

// jsonLogprob makes a logprob JSON-safe (vLLM writes -9999.0 for -inf).
func jsonLogprob(lp float32) float32 {
	if math.IsInf(float64(lp), 0) || math.IsNaN(float64(lp)) || lp < -9999 {
		return -9999
	}
	return lp
}

// prepared is a validated generation request: one job per prompt.
type prepared struct {
	jobs        []job
	promptTexts []string // for echo
	model       string
}

// resolveModel maps a request's "model" to an adapter name ("" = base).
func (m *Model) resolveModel(name string) (string, *apiError) {
	if name != "" && slices.Contains(m.Engine.Adapters(), name) {
		return name, nil
	}
	if name == "" || name == m.Name {
		return "", nil
	}
	return "", notFound("model_not_found", "The model `%s` does not exist.", name)
}

// checkPrompt validates prompt ids against the vocabulary and the context
// (filling the default max_tokens).
func checkPrompt(m *Model, ids []int32, p *params, param string, defaultMax int) *apiError {
	if len(ids) == 0 {
		return badRequest(param, "the prompt is empty (0 tokens)")
	}
	vocab := m.Engine.VocabSize()
	for _, id := range ids {
		if int(id) >= vocab {
			return badRequest(param, "token id %d is out of the vocabulary (size %d)", id, vocab)
		}
	}
	limit := m.Engine.ContextLength()
	if p.maxTokens == 0 {
		p.maxTokens = defaultMax
		if defaultMax == 0 || len(ids)+defaultMax > limit {
			p.maxTokens = limit - len(ids)
		}
		if p.maxTokens < 1 {
			return contextLength(param, len(ids), 1, limit)
		}
	}
	if len(ids)+p.maxTokens > limit {
		return contextLength(param, len(ids), p.maxTokens, limit)
	}
	return nil
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request, m *Model) {
	var req completionRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	pr, e := prepareCompletion(m, &req)
	if e != nil {
		writeError(w, e)
		return
	}
	release, e := s.acquire()
	if e != nil {
		writeError(w, e)
		return
	}
	defer release()
	ctx, cancel := s.requestContext(r)
	defer cancel()
	f := &completionFormat{req: &req, pr: pr, tok: m.Tokenizer, id: newID("cmpl-"), created: time.Now().Unix()}
	if req.Stream {
		streamJobs(ctx, w, m, pr.jobs, f)
		return
	}
	results, err := runJobs(ctx, m, pr.jobs)
	if err != nil {
		writeError(w, toAPIError(err, "prompt"))
		return
	}
	resp := completionResponse{ID: f.id, Object: "text_completion", Created: f.created, Model: pr.model, Usage: &usage{}}
	for ji, jr := range results {
		resp.Usage.PromptTokens += jr.promptTokens
		for _, pc := range jr.pieces {
			resp.Usage.CompletionTokens += len(pc.tokens)
			resp.Choices = append(resp.Choices, f.choice(pc, ji, true))
		}
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
	writeJSON(w, http.StatusOK, resp)
}

func prepareCompletion(m *Model, req *completionRequest) (*prepared, *apiError) {
	p, e := req.validate()
	if e != nil {
		return nil, e
	}
	adapter, e := m.resolveModel(req.Model)
	if e != nil {
		return nil, e
	}
	if req.Logprobs != nil && (*req.Logprobs < -1 || *req.Logprobs > maxLogprobs) {
		return nil, badRequest("logprobs", "logprobs must be in [0, %d] (or -1), got %d", maxLogprobs, *req.Logprobs)
	}
	if req.Echo && req.Logprobs != nil {
		return nil, badRequest("echo", "echo with logprobs is not supported: the engine does not compute prompt logprobs")
	}
	if req.Suffix != "" {
		return nil, badRequest("suffix", "suffix is not supported")
	}
	switch n := req.Prompt.count(); {
	case n == 0:
		return nil, badRequest("prompt", "prompt is required")
	case n > maxPrompts:
		return nil, badRequest("prompt", "at most %d prompts per request, got %d", maxPrompts, n)
	}
	pr := &prepared{model: req.Model}
	if pr.model == "" {
		pr.model = m.Name
	}
	var prompts [][]int32
	for _, t := range req.Prompt.Texts {
		prompts = append(prompts, m.Tokenizer.Encode(t, true))
		pr.promptTexts = append(pr.promptTexts, t)
	}
	for _, ids := range req.Prompt.IDs {
		prompts = append(prompts, ids)
		if req.Echo {
			pr.promptTexts = append(pr.promptTexts, m.Tokenizer.Decode(ids, false))
		}
	}
	for i, ids := range prompts {
		jp := p
		if e := checkPrompt(m, ids, &jp, "prompt", 16); e != nil {
			return nil, e
		}
		pr.jobs = append(pr.jobs, job{prompt: ids, p: jp, adapter: adapter, first: i * p.n})
	}
	return pr, nil
}

// jobResult is one job's outcome.
type jobResult struct {
	pieces       []*piece
	promptTokens int
}

// runJobs runs jobs concurrently (the engine batches them) and waits.
func runJobs(ctx context.Context, m *Model, jobs []job) ([]jobResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]jobResult, len(jobs))
	errs := make(chan error, len(jobs))
	for i, j := range jobs {
		go func() {
			pcs, np, err := generate(ctx, m, j, nil)
			out[i] = jobResult{pcs, np}
			if err != nil {
				cancel()
			}
			errs <- err
		}()
	}
	var first error
	for range jobs {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return out, first
}

// streamFormat turns pieces into the endpoint's stream chunks.
type streamFormat interface {
	// chunk is the event for a piece; first marks the choice's first piece.
	chunk(pc *piece, job int, first bool) any
	// usageChunk is the final usage event (nil = none).
	usageChunk(u usage) any
	// errorParam names the field to blame in errors.
	errorParam() string
	// perToken reports whether chunks show tokens (logprobs or token ids),
	// so that a chunk without text is still worth sending.
	perToken() bool
}

// streamJobs runs jobs and writes their pieces as SSE events.
func streamJobs(ctx context.Context, w http.ResponseWriter, m *Model, jobs []job, f streamFormat) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q := newPieceQueue(len(jobs))
	jobOf := map[int]int{} // choice index → job
	var u usage
	for ji, j := range jobs {
		for i := 0; i < j.p.n; i++ {
			jobOf[j.first+i] = ji
		}
		go func() {
			final, np, err := generate(ctx, m, j, q.push)
			if err == nil {
				q.mu.Lock()
				u.PromptTokens += np
				q.mu.Unlock()
			}
			q.finish(final, err)
		}()
	}
	sse := &sseWriter{w: w}
	seen := map[int]bool{}
	for {
		items, err, done := q.next(ctx)
		if err != nil {
			cancel()
			sse.fail(toAPIError(err, f.errorParam()))
			// Let the producers see the cancellation before returning.
			for !done {
				_, _, done = q.next(context.Background())
			}
			return
		}
		for _, pc := range items {
			u.CompletionTokens += len(pc.tokens)
			if pc.text == "" && pc.finish == "" && (!f.perToken() || len(pc.tokens) == 0) && seen[pc.index] {
				continue
			}
			if err := sse.send(f.chunk(pc, jobOf[pc.index], !seen[pc.index])); err != nil {
				cancel()
				for !done {
					_, _, done = q.next(context.Background())
				}
				return
			}
			seen[pc.index] = true
		}
		if done {
			break
		}
	}
	q.mu.Lock()
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	q.mu.Unlock()
	if c := f.usageChunk(u); c != nil {
		sse.send(c)
	}
	sse.done()
}

// completionFormat builds /v1/completions choices and chunks.
type completionFormat struct {
	req     *completionRequest
	pr      *prepared
	tok     Tokenizer
	id      string
	created int64
	offsets map[int]int // streamed text length per choice, for text_offset
}

func (f *completionFormat) errorParam() string { return "prompt" }

func (f *completionFormat) perToken() bool { return f.req.Logprobs != nil || f.req.ReturnTokenIDs }

func (f *completionFormat) choice(pc *piece, job int, first bool) completionChoice {
	c := completionChoice{Index: pc.index, Text: pc.text}
	if first && f.req.Echo {
		c.Text = f.pr.promptTexts[job] + c.Text
	}
	if pc.finish != "" {
		c.FinishReason = &pc.finish
		c.StopReason = pc.stopReason
	}
	if f.req.Logprobs != nil {
		if f.offsets == nil {
			f.offsets = map[int]int{}
		}
		off := f.offsets[pc.index]
		lp := &completionLogprobs{TextOffset: []int{}, TokenLogprobs: []float32{}, Tokens: []string{}}
		for i, id := range pc.tokens {
			s := f.tok.Decode([]int32{id}, false)
			lp.Tokens = append(lp.Tokens, s)
			if i < len(pc.logprobs) {
				lp.TokenLogprobs = append(lp.TokenLogprobs, jsonLogprob(pc.logprobs[i]))
			}
			lp.TextOffset = append(lp.TextOffset, off)
			off += len(s)
		}
		f.offsets[pc.index] = off
		c.Logprobs = lp
	}
	if f.req.ReturnTokenIDs {
		c.TokenIDs = nonNil(pc.tokens)
		if first {
			c.PromptTokenIDs = nonNil(f.pr.jobs[job].prompt)
		}
	}
	return c
}

func (f *completionFormat) chunk(pc *piece, job int, first bool) any {
	return completionResponse{ID: f.id, Object: "text_completion", Created: f.created, Model: f.pr.model,
		Choices: []completionChoice{f.choice(pc, job, first)}}
}

func (f *completionFormat) usageChunk(u usage) any {
	if f.req.StreamOptions == nil || !f.req.StreamOptions.IncludeUsage {
		return nil
	}
	return completionResponse{ID: f.id, Object: "text_completion", Created: f.created, Model: f.pr.model,
		Choices: []completionChoice{}, Usage: &u}
}

// stopReason is vLLM's stop_reason: the stop string or stop token id that
// ended the sample, nil for EOS or length.
func stopReason(stopStr string, finish string, tokens, stopIDs []int32) any {
	if stopStr != "" {
		return stopStr
	}
	if finish == "stop" && len(tokens) > 0 {
		if last := tokens[len(tokens)-1]; slices.Contains(stopIDs, last) {
			return last
		}
	}
	return nil
}

func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}
