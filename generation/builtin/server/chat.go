package server

import (
	"net/http"
	"time"
)

type chatResponse struct {
	ID             string       `json:"id"`
	Object         string       `json:"object"`
	Created        int64        `json:"created"`
	Model          string       `json:"model"`
	Choices        []chatChoice `json:"choices"`
	Usage          *usage       `json:"usage,omitempty"`
	PromptTokenIDs []int32      `json:"prompt_token_ids,omitzero"`
}

type chatChoice struct {
	Index        int           `json:"index"`
	Message      *chatOut      `json:"message,omitempty"`
	Delta        *chatOut      `json:"delta,omitempty"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
	StopReason   any           `json:"stop_reason"`
	TokenIDs     []int32       `json:"token_ids,omitzero"`
}

type chatOut struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

// chatLogprobs is OpenAI's chat logprobs object; top_logprobs lists are
// empty because the engine computes only the sampled tokens' logprobs.
type chatLogprobs struct {
	Content []chatTokenLogprob `json:"content"`
}

type chatTokenLogprob struct {
	Token       string             `json:"token"`
	Logprob     float32            `json:"logprob"`
	Bytes       []int              `json:"bytes"`
	TopLogprobs []chatTokenLogprob `json:"top_logprobs"`
}

func toMessages(in []chatMessage) []Message {
	out := make([]Message, len(in))
	for i, m := range in {
		out[i] = Message{Role: m.Role, Content: string(m.Content), Name: m.Name, ReasoningContent: m.ReasoningContent,
			ToolCallID: m.ToolCallID, ToolCalls: m.ToolCalls}
	}
	return out
}

// renderChat renders messages with the model's template and tokenizes the
// result (the template writes any BOS itself, so none is added).
func renderChat(m *Model, msgs []chatMessage, addGen *bool, cont bool, tools []any, kwargs map[string]any) ([]int32, *apiError) {
	if len(msgs) == 0 {
		return nil, badRequest("messages", "messages must not be empty")
	}
	for i, msg := range msgs {
		switch msg.Role {
		case "system", "user", "assistant", "tool", "developer":
		default:
			return nil, badRequest("messages", "messages[%d].role %q is not one of system, user, assistant, tool, developer", i, msg.Role)
		}
	}
	o := RenderOptions{AddGenerationPrompt: addGen == nil || *addGen, ContinueFinalMessage: cont, Tools: tools, Kwargs: kwargs}
	if o.ContinueFinalMessage && o.AddGenerationPrompt && addGen != nil {
		return nil, badRequest("continue_final_message", "continue_final_message and add_generation_prompt cannot both be true")
	}
	if o.ContinueFinalMessage {
		o.AddGenerationPrompt = false
	}
	text, err := m.Template.Render(toMessages(msgs), o)
	if err != nil {
		return nil, badRequest("messages", "cannot render the chat template: %v", err)
	}
	return m.Tokenizer.Encode(text, false), nil
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request, m *Model) {
	var req chatRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	j, model, e := s.prepareChat(m, &req)
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
	f := &chatFormat{req: &req, job: j, tok: m.Tokenizer, id: newID("chatcmpl-"), created: time.Now().Unix(), model: model}
	if req.Stream {
		streamJobs(ctx, w, m, []job{j}, f)
		return
	}
	results, err := runJobs(ctx, m, []job{j})
	if err != nil {
		writeError(w, toAPIError(err, "messages"))
		return
	}
	resp := chatResponse{ID: f.id, Object: "chat.completion", Created: f.created, Model: model,
		Usage: &usage{PromptTokens: results[0].promptTokens}}
	for _, pc := range results[0].pieces {
		resp.Usage.CompletionTokens += len(pc.tokens)
		c := f.choice(pc, true)
		c.Message, c.Delta = c.Delta, nil
		resp.Choices = append(resp.Choices, c)
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
	if req.ReturnTokenIDs {
		resp.PromptTokenIDs = nonNil(j.prompt)
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) prepareChat(m *Model, req *chatRequest) (job, string, *apiError) {
	p, e := req.validate()
	if e != nil {
		return job{}, "", e
	}
	if req.MaxCompletionTokens != nil {
		if *req.MaxCompletionTokens < 1 {
			return job{}, "", badRequest("max_completion_tokens", "max_completion_tokens must be ≥ 1, got %d", *req.MaxCompletionTokens)
		}
		p.maxTokens = *req.MaxCompletionTokens
	}
	if req.TopLogprobs != nil {
		if *req.TopLogprobs < 0 || *req.TopLogprobs > maxLogprobs {
			return job{}, "", badRequest("top_logprobs", "top_logprobs must be in [0, %d], got %d", maxLogprobs, *req.TopLogprobs)
		}
		if req.Logprobs == nil || !*req.Logprobs {
			return job{}, "", badRequest("top_logprobs", "top_logprobs requires logprobs: true")
		}
	}
	adapter, e := m.resolveModel(req.Model)
	if e != nil {
		return job{}, "", e
	}
	ids, e := renderChat(m, req.Messages, req.AddGenerationPrompt, req.ContinueFinalMessage, req.Tools, req.ChatTemplateKwargs)
	if e != nil {
		return job{}, "", e
	}
	if e := checkPrompt(m, ids, &p, "messages", 0); e != nil {
		return job{}, "", e
	}
	model := req.Model
	if model == "" {
		model = m.Name
	}
	return job{prompt: ids, p: p, adapter: adapter}, model, nil
}

// chatFormat builds /v1/chat/completions choices and chunks.
type chatFormat struct {
	req     *chatRequest
	job     job
	tok     Tokenizer
	id      string
	created int64
	model   string
}

func (f *chatFormat) errorParam() string { return "messages" }

func (f *chatFormat) perToken() bool {
	return (f.req.Logprobs != nil && *f.req.Logprobs) || f.req.ReturnTokenIDs
}

// choice builds a choice with the output in Delta (the caller moves it to
// Message for a whole response).
func (f *chatFormat) choice(pc *piece, first bool) chatChoice {
	text := pc.text
	c := chatChoice{Index: pc.index, Delta: &chatOut{Content: &text}}
	if first {
		c.Delta.Role = "assistant"
	}
	if pc.finish != "" {
		c.FinishReason = &pc.finish
		c.StopReason = pc.stopReason
	}
	if f.req.Logprobs != nil && *f.req.Logprobs {
		lp := &chatLogprobs{Content: []chatTokenLogprob{}}
		for i, id := range pc.tokens {
			s := f.tok.Decode([]int32{id}, false)
			raw := []byte(s)
			if tb, ok := f.tok.(interface{ TokenBytes(int32) []byte }); ok {
				raw = tb.TokenBytes(id)
			}
			b := make([]int, len(raw))
			for k, c := range raw {
				b[k] = int(c)
			}
			var v float32
			if i < len(pc.logprobs) {
				v = jsonLogprob(pc.logprobs[i])
			}
			lp.Content = append(lp.Content, chatTokenLogprob{Token: s, Logprob: v, Bytes: b, TopLogprobs: []chatTokenLogprob{}})
		}
		c.Logprobs = lp
	}
	if f.req.ReturnTokenIDs {
		c.TokenIDs = nonNil(pc.tokens)
	}
	return c
}

func (f *chatFormat) chunk(pc *piece, _ int, first bool) any {
	resp := chatResponse{ID: f.id, Object: "chat.completion.chunk", Created: f.created, Model: f.model,
		Choices: []chatChoice{f.choice(pc, first)}}
	if first && f.req.ReturnTokenIDs {
		resp.PromptTokenIDs = nonNil(f.job.prompt)
	}
	return resp
}

func (f *chatFormat) usageChunk(u usage) any {
	if f.req.StreamOptions == nil || !f.req.StreamOptions.IncludeUsage {
		return nil
	}
	return chatResponse{ID: f.id, Object: "chat.completion.chunk", Created: f.created, Model: f.model,
		Choices: []chatChoice{}, Usage: &u}
}
