package server

import (
	"context"
	"fmt"
)

// CompletionRequest is a /v1/completions request for one prompt, made in
// process (Model.Complete): the same validation, prompt encoding, stop
// string handling and defaults as the HTTP endpoint, without JSON. The
// in-process generation backend (generation/builtin/inproc) uses it, so a
// request gives the same tokens, text and logprobs whether it goes through
// HTTP or not.
type CompletionRequest struct {
	// Model is the served model name, a loaded adapter's name, or "" for
	// the base model.
	Model string
	// PromptIDs, when set, is the prompt as token ids; otherwise Prompt is
	// encoded as the endpoint encodes a text prompt (with the tokenizer's
	// BOS when it adds one).
	PromptIDs []int32
	Prompt    string
	// N is the number of samples (0 = 1); they share one prefill.
	N int
	// MaxTokens is the per-sample limit (0 = the endpoint's default, 16).
	MaxTokens   int
	Temperature float64 // 0 = greedy; always taken as given
	TopP        float64 // 0 = 1 (off)
	TopK        int     // 0 = off
	Seed        *int64
	Stop        []string
}

// Completion is the outcome of a CompletionRequest.
type Completion struct {
	PromptIDs []int32
	Choices   []Choice
}

// Choice is one sample: the text cut before the first stop string, every
// generated token id (those after the cut included, as on the wire) and
// their logprobs.
type Choice struct {
	Text         string
	TokenIDs     []int32
	Logprobs     []float32
	FinishReason string
	// StopReason is the stop string or stop token id that ended the
	// sample, or nil (vLLM's stop_reason).
	StopReason any
}

// Complete runs req on the model as POST /v1/completions would (without
// streaming). Invalid requests give an error whose StatusCode is the HTTP
// status the endpoint would answer and whose BadInput is true for 4xx
// other than 429; engine failures come back wrapped (errors.Is works with
// builtin's errors).
func (m *Model) Complete(ctx context.Context, req *CompletionRequest) (*Completion, error) {
	cr := completionRequest{samplingFields: samplingFields{Model: req.Model, Seed: req.Seed, Stop: req.Stop}}
	n := max(req.N, 1)
	temp, topP, topK := req.Temperature, req.TopP, req.TopK
	if topP == 0 {
		topP = 1
	}
	cr.N, cr.Temperature, cr.TopP, cr.TopK = &n, &temp, &topP, &topK
	if req.MaxTokens != 0 {
		cr.MaxTokens = &req.MaxTokens
	}
	if req.PromptIDs != nil {
		cr.Prompt.IDs = [][]int32{req.PromptIDs}
	} else {
		cr.Prompt.Texts = []string{req.Prompt}
	}
	pr, e := prepareCompletion(m, &cr)
	if e != nil {
		return nil, e
	}
	results, err := runJobs(ctx, m, pr.jobs)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	out := &Completion{PromptIDs: pr.jobs[0].prompt}
	for _, pc := range results[0].pieces {
		out.Choices = append(out.Choices, Choice{Text: pc.text, TokenIDs: pc.tokens, Logprobs: pc.logprobs,
			FinishReason: pc.finish, StopReason: pc.stopReason})
	}
	return out, nil
}

// StatusCode is the HTTP status the error is answered with.
func (e *apiError) StatusCode() int { return e.Status }

// BadInput reports whether the request itself is at fault (a 4xx other
// than 429): sending it again will not help.
func (e *apiError) BadInput() bool { return e.Status/100 == 4 && e.Status != 429 }
