package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
)

// Limits on request parameters.
const (
	maxN        = 64 // samples per prompt
	maxPrompts  = 64 // prompts per completions request
	maxStops    = 16
	maxStopLen  = 256
	maxLogprobs = 20 // like vLLM's --max-logprobs default
)

// fieldError is a JSON value of the wrong shape for a union-typed field.
type fieldError struct {
	field, msg string
}

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

// prompt is /v1/completions' prompt: a string, a list of strings, a list of
// token ids or a list of token-id lists. Exactly one of Texts and IDs is set.
type prompt struct {
	Texts []string
	IDs   [][]int32
}

func (p *prompt) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	fe := func(msg string) error { return &fieldError{"prompt", msg} }
	if len(b) == 0 || string(b) == "null" {
		return fe("required")
	}
	switch b[0] {
	case '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return fe("invalid string")
		}
		p.Texts = []string{s}
		return nil
	case '[':
	default:
		return fe("must be a string, a list of strings, a list of token ids or a list of token-id lists")
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fe("invalid list")
	}
	if len(raw) == 0 {
		return fe("must not be empty")
	}
	first := bytes.TrimSpace(raw[0])
	switch {
	case len(first) > 0 && first[0] == '"':
		var ss []string
		if err := json.Unmarshal(b, &ss); err != nil {
			return fe("a list of prompts must hold only strings")
		}
		p.Texts = ss
	case len(first) > 0 && first[0] == '[':
		var ids [][]int64
		if err := json.Unmarshal(b, &ids); err != nil {
			return fe("a list of token-id lists must hold only lists of integers")
		}
		for i, l := range ids {
			if len(l) == 0 {
				return fe(fmt.Sprintf("token-id list %d is empty", i))
			}
			c, err := toInt32s(l)
			if err != nil {
				return fe(err.Error())
			}
			p.IDs = append(p.IDs, c)
		}
	default:
		var ids []int64
		if err := json.Unmarshal(b, &ids); err != nil {
			return fe("a list of token ids must hold only integers")
		}
		c, err := toInt32s(ids)
		if err != nil {
			return fe(err.Error())
		}
		p.IDs = [][]int32{c}
	}
	return nil
}

func toInt32s(ids []int64) ([]int32, error) {
	out := make([]int32, len(ids))
	for i, id := range ids {
		if id < 0 || id > math.MaxInt32 {
			return nil, fmt.Errorf("token id %d out of range", id)
		}
		out[i] = int32(id)
	}
	return out, nil
}

func (p *prompt) count() int { return len(p.Texts) + len(p.IDs) }

// stopList is "stop": null, a string or a list of strings.
type stopList []string

func (s *stopList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		*s = nil
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return &fieldError{"stop", "invalid string"}
		}
		*s = stopList{one}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return &fieldError{"stop", "must be a string or a list of strings"}
	}
	*s = list
	return nil
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// samplingFields are the request fields shared by completions and chat.
type samplingFields struct {
	Model            string         `json:"model"`
	N                *int           `json:"n"`
	MaxTokens        *int           `json:"max_tokens"`
	Temperature      *float64       `json:"temperature"`
	TopP             *float64       `json:"top_p"`
	TopK             *int           `json:"top_k"`
	Seed             *int64         `json:"seed"`
	Stop             stopList       `json:"stop"`
	StopTokenIDs     []int64        `json:"stop_token_ids"`
	IgnoreEOS        bool           `json:"ignore_eos"`
	ReturnTokenIDs   bool           `json:"return_token_ids"`
	Stream           bool           `json:"stream"`
	StreamOptions    *streamOptions `json:"stream_options"`
	PresencePenalty  *float64       `json:"presence_penalty"`
	FrequencyPenalty *float64       `json:"frequency_penalty"`
	BestOf           *int           `json:"best_of"`
	LogitBias        map[string]any `json:"logit_bias"`
	User             string         `json:"user"`
}

// completionRequest is the body of POST /v1/completions.
type completionRequest struct {
	samplingFields
	Prompt   prompt `json:"prompt"`
	Logprobs *int   `json:"logprobs"`
	Echo     bool   `json:"echo"`
	Suffix   string `json:"suffix"`
}

// chatRequest is the body of POST /v1/chat/completions.
type chatRequest struct {
	samplingFields
	Messages             []chatMessage  `json:"messages"`
	MaxCompletionTokens  *int           `json:"max_completion_tokens"`
	Logprobs             *bool          `json:"logprobs"`
	TopLogprobs          *int           `json:"top_logprobs"`
	ChatTemplateKwargs   map[string]any `json:"chat_template_kwargs"`
	AddGenerationPrompt  *bool          `json:"add_generation_prompt"`
	ContinueFinalMessage bool           `json:"continue_final_message"`
	Tools                []any          `json:"tools"`
}

// chatMessage is one message; content may be a string, null or a list of
// {"type":"text","text":...} parts (joined).
type chatMessage struct {
	Role             string      `json:"role"`
	Content          chatContent `json:"content"`
	Name             string      `json:"name,omitempty"`
	ReasoningContent string      `json:"reasoning_content,omitempty"`
	ToolCallID       string      `json:"tool_call_id,omitempty"`
	ToolCalls        []any       `json:"tool_calls,omitempty"`
}

type chatContent string

func (c *chatContent) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		*c = ""
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return &fieldError{"messages.content", "invalid string"}
		}
		*c = chatContent(s)
		return nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return &fieldError{"messages.content", "must be a string or a list of content parts"}
	}
	var sb strings.Builder
	for _, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return &fieldError{"messages.content", fmt.Sprintf("content part type %q is not supported (only text)", p.Type)}
		}
		sb.WriteString(*p.Text)
	}
	*c = chatContent(sb.String())
	return nil
}

// adapterLoadRequest is vLLM's LoadLoRAAdapterRequest.
type adapterLoadRequest struct {
	LoRAName    string `json:"lora_name"`
	LoRAPath    string `json:"lora_path"`
	LoadInplace bool   `json:"load_inplace"`
}

// adapterUnloadRequest is vLLM's UnloadLoRAAdapterRequest.
type adapterUnloadRequest struct {
	LoRAName  string `json:"lora_name"`
	LoRAIntID *int   `json:"lora_int_id"`
}

// tokenizeRequest is vLLM's TokenizeCompletionRequest or
// TokenizeChatRequest (when messages is present).
type tokenizeRequest struct {
	Model                string         `json:"model"`
	Prompt               *string        `json:"prompt"`
	Messages             []chatMessage  `json:"messages"`
	AddSpecialTokens     *bool          `json:"add_special_tokens"`
	AddGenerationPrompt  *bool          `json:"add_generation_prompt"`
	ContinueFinalMessage bool           `json:"continue_final_message"`
	ChatTemplateKwargs   map[string]any `json:"chat_template_kwargs"`
	ReturnTokenStrs      bool           `json:"return_token_strs"`
}

type detokenizeRequest struct {
	Model  string  `json:"model"`
	Tokens []int64 `json:"tokens"`
}

// decodeBody reads a JSON object from r's body into v, mapping every
// failure to a 4xx apiError that names the field at fault.
func decodeBody(r *http.Request, v any) *apiError {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
				Message: fmt.Sprintf("request body exceeds the limit of %d bytes", mbe.Limit)}
		}
		return badRequest("", "cannot read the request body: %v", err)
	}
	return decodeJSON(data, v)
}

func decodeJSON(data []byte, v any) *apiError {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return badRequest("", "the request body is empty; send a JSON object")
	}
	if trimmed[0] != '{' {
		return badRequest("", "the request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(v); err != nil {
		var fe *fieldError
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &fe):
			return badRequest(fe.field, "invalid %s", fe.Error())
		case errors.As(err, &te):
			field := strings.ReplaceAll(te.Field, "samplingFields.", "")
			if field == "" {
				field = "(body)"
			}
			return badRequest(field, "invalid value for %s: expected %s, got JSON %s", field, te.Type, te.Value)
		case errors.As(err, &se):
			return badRequest("", "invalid JSON at byte %d: %v", se.Offset, err)
		}
		return badRequest("", "invalid JSON: %v", err)
	}
	if dec.More() {
		return badRequest("", "invalid JSON: data after the top-level object")
	}
	return nil
}

// params are validated sampling settings.
type params struct {
	n           int
	maxTokens   int // 0 = not given
	temperature float64
	topP        float64
	topK        int
	seed        *int64
	stop        []string
	stopIDs     []int32
	ignoreEOS   bool
}

func (f *samplingFields) validate() (params, *apiError) {
	p := params{n: 1, temperature: 1, topP: 1}
	if f.N != nil {
		if *f.N < 1 || *f.N > maxN {
			return p, badRequest("n", "n must be in [1, %d], got %d", maxN, *f.N)
		}
		p.n = *f.N
	}
	if f.MaxTokens != nil {
		if *f.MaxTokens < 1 {
			return p, badRequest("max_tokens", "max_tokens must be ≥ 1, got %d", *f.MaxTokens)
		}
		p.maxTokens = *f.MaxTokens
	}
	if f.Temperature != nil {
		if t := *f.Temperature; !(t >= 0 && t <= 100) {
			return p, badRequest("temperature", "temperature must be in [0, 100], got %v", t)
		}
		p.temperature = *f.Temperature
	}
	if f.TopP != nil {
		if t := *f.TopP; !(t > 0 && t <= 1) {
			return p, badRequest("top_p", "top_p must be in (0, 1], got %v", t)
		}
		p.topP = *f.TopP
	}
	if f.TopK != nil {
		switch k := *f.TopK; {
		case k == -1 || k == 0: // vLLM: -1 (and 0) mean off
		case k > 0:
			p.topK = k
		default:
			return p, badRequest("top_k", "top_k must be -1 (off), 0 (off) or ≥ 1, got %d", k)
		}
	}
	p.seed = f.Seed
	if len(f.Stop) > maxStops {
		return p, badRequest("stop", "at most %d stop strings, got %d", maxStops, len(f.Stop))
	}
	for _, s := range f.Stop {
		if s == "" {
			return p, badRequest("stop", "stop strings must not be empty")
		}
		if len(s) > maxStopLen {
			return p, badRequest("stop", "stop strings must be at most %d bytes", maxStopLen)
		}
	}
	p.stop = f.Stop
	for _, id := range f.StopTokenIDs {
		if id < 0 || id > math.MaxInt32 {
			return p, badRequest("stop_token_ids", "token id %d out of range", id)
		}
		p.stopIDs = append(p.stopIDs, int32(id))
	}
	p.ignoreEOS = f.IgnoreEOS
	if f.PresencePenalty != nil && *f.PresencePenalty != 0 {
		return p, badRequest("presence_penalty", "presence_penalty is not supported by the embedded engine (only 0)")
	}
	if f.FrequencyPenalty != nil && *f.FrequencyPenalty != 0 {
		return p, badRequest("frequency_penalty", "frequency_penalty is not supported by the embedded engine (only 0)")
	}
	if f.BestOf != nil && *f.BestOf != 1 && (f.N == nil || *f.BestOf != *f.N) {
		return p, badRequest("best_of", "best_of is not supported (only equal to n)")
	}
	if len(f.LogitBias) > 0 {
		return p, badRequest("logit_bias", "logit_bias is not supported by the embedded engine")
	}
	if f.StreamOptions != nil && !f.Stream {
		return p, badRequest("stream_options", "stream_options is only allowed with stream: true")
	}
	return p, nil
}
