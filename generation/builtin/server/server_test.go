package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// harness is a server over real HTTP on a loopback port.
type harness struct {
	t   *testing.T
	srv *Server
	hs  *httptest.Server
	key string
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newHarness(t *testing.T, m *Model, opts Options) *harness {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	s := New(opts)
	if m != nil {
		s.SetModel(m)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return &harness{t: t, srv: s, hs: hs, key: opts.APIKey}
}

func fakeModel(e Engine) *Model {
	return &Model{Engine: e, Tokenizer: byteTokenizer{}, Template: chatmlTemplate{}, Name: "tiny", Root: "/models/tiny", EOS: []int32{fakeEOS}}
}

func (h *harness) client() *openai.Client {
	cfg := openai.DefaultConfig(h.key)
	cfg.BaseURL = h.hs.URL + "/v1"
	return openai.NewClientWithConfig(cfg)
}

// post sends body (a value or raw []byte) and returns the status and body.
func (h *harness) post(path string, body any) (int, []byte) {
	h.t.Helper()
	var data []byte
	switch b := body.(type) {
	case []byte:
		data = b
	case string:
		data = []byte(b)
	default:
		var err error
		if data, err = json.Marshal(body); err != nil {
			h.t.Fatal(err)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, h.hs.URL+path, bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	if h.key != "" {
		req.Header.Set("Authorization", "Bearer "+h.key)
	}
	resp, err := h.hs.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// postOK posts and decodes a 200 response into v.
func (h *harness) postOK(path string, body any, v any) {
	h.t.Helper()
	st, out := h.post(path, body)
	if st != http.StatusOK {
		h.t.Fatalf("POST %s: status %d: %s", path, st, out)
	}
	if v != nil {
		if err := json.Unmarshal(out, v); err != nil {
			h.t.Fatalf("POST %s: %v: %s", path, err, out)
		}
	}
}

// stream posts a streaming request and returns the data events (without [DONE]).
func (h *harness) stream(path string, body any) []json.RawMessage {
	h.t.Helper()
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, h.hs.URL+path, bytes.NewReader(data))
	if h.key != "" {
		req.Header.Set("Authorization", "Bearer "+h.key)
	}
	resp, err := h.hs.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		h.t.Fatalf("stream %s: status %d: %s", path, resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		h.t.Fatalf("Content-Type %q", ct)
	}
	var events []json.RawMessage
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	done := false
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			h.t.Fatalf("not an SSE data line: %q", line)
		}
		if d == "[DONE]" {
			done = true
			continue
		}
		if done {
			h.t.Fatalf("event after [DONE]: %s", d)
		}
		events = append(events, json.RawMessage(d))
	}
	if !done {
		h.t.Fatalf("stream did not end with data: [DONE]")
	}
	return events
}

// apiErr decodes an OpenAI error body.
func apiErr(t *testing.T, body []byte) errorDetail {
	t.Helper()
	var eb struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &eb); err != nil || eb.Error.Message == "" {
		t.Fatalf("not an OpenAI error body (%v): %s", err, body)
	}
	return errorDetail(eb.Error)
}

func ptr[T any](v T) *T { return &v }

func TestCompletionsWithClient(t *testing.T) {
	h := newHarness(t, fakeModel(newFakeEngine()), Options{})
	ctx := context.Background()
	resp, err := h.client().CreateCompletion(ctx, openai.CompletionRequest{
		Model: "tiny", Prompt: "hello", MaxTokens: 12, N: 3, Seed: ptr(7), Temperature: 0.8, LogProbs: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 3 || resp.Object != "text_completion" || resp.Model != "tiny" {
		t.Fatalf("response %+v", resp)
	}
	for i, c := range resp.Choices {
		if c.Index != i || (c.FinishReason != "stop" && c.FinishReason != "length") {
			t.Errorf("choice %d: %+v", i, c)
		}
		if len(c.LogProbs.Tokens) != len(c.LogProbs.TokenLogprobs) || len(c.LogProbs.Tokens) == 0 {
			t.Errorf("choice %d logprobs: %+v", i, c.LogProbs)
		}
		for _, lp := range c.LogProbs.TokenLogprobs {
			if lp > 0 {
				t.Errorf("logprob %v > 0", lp)
			}
		}
	}
	if resp.Usage.PromptTokens != 5 || resp.Usage.TotalTokens != resp.Usage.PromptTokens+resp.Usage.CompletionTokens {
		t.Errorf("usage %+v", resp.Usage)
	}
	// Same seed → same text.
	again, err := h.client().CreateCompletion(ctx, openai.CompletionRequest{Model: "tiny", Prompt: "hello", MaxTokens: 12, N: 3, Seed: ptr(7), Temperature: 0.8})
	if err != nil {
		t.Fatal(err)
	}
	for i := range again.Choices {
		if again.Choices[i].Text != resp.Choices[i].Text {
			t.Errorf("choice %d: %q vs %q with the same seed", i, again.Choices[i].Text, resp.Choices[i].Text)
		}
	}
	// Chat.
	chat, err := h.client().CreateChatCompletion(ctx, openai.ChatCompletionRequest{
		Model: "tiny", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}, MaxTokens: 10, Seed: ptr(1), LogProbs: true, TopLogProbs: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(chat.Choices) != 1 || chat.Choices[0].Message.Role != "assistant" || chat.Choices[0].LogProbs == nil {
		t.Fatalf("chat %+v", chat)
	}
	if n := len(chat.Choices[0].LogProbs.Content); n != chat.Usage.CompletionTokens {
		t.Errorf("%d logprob entries for %d tokens", n, chat.Usage.CompletionTokens)
	}
	// /v1/models lists the base model.
	models, err := h.client().ListModels(ctx)
	if err != nil || len(models.Models) != 1 || models.Models[0].ID != "tiny" {
		t.Fatalf("models %+v %v", models, err)
	}
}

// completionOut is the raw completions response with vLLM's extras.
type completionOut struct {
	Choices []struct {
		Index        int     `json:"index"`
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
		StopReason   any     `json:"stop_reason"`
		Logprobs     *struct {
			Tokens        []string             `json:"tokens"`
			TokenLogprobs []float32            `json:"token_logprobs"`
			TextOffset    []int                `json:"text_offset"`
			TopLogprobs   []map[string]float32 `json:"top_logprobs"`
		} `json:"logprobs"`
		TokenIDs       []int32 `json:"token_ids"`
		PromptTokenIDs []int32 `json:"prompt_token_ids"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

type chatOutRaw struct {
	Choices []struct {
		Index   int `json:"index"`
		Message *struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"message"`
		Delta *struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
		StopReason   any     `json:"stop_reason"`
		Logprobs     *struct {
			Content []struct {
				Token       string  `json:"token"`
				Logprob     float32 `json:"logprob"`
				Bytes       []int   `json:"bytes"`
				TopLogprobs []any   `json:"top_logprobs"`
			} `json:"content"`
		} `json:"logprobs"`
		TokenIDs []int32 `json:"token_ids"`
	} `json:"choices"`
	PromptTokenIDs []int32 `json:"prompt_token_ids"`
	Usage          *usage  `json:"usage"`
}

// merged is one choice reassembled from a stream or read whole.
type merged struct {
	text     string
	tokens   []int32
	logprobs []float32
	finish   string
	stop     any
	prompt   []int32
}

func mergeCompletionStream(t *testing.T, events []json.RawMessage) (map[int]*merged, *usage) {
	out := map[int]*merged{}
	var u *usage
	for _, ev := range events {
		var c completionOut
		if err := json.Unmarshal(ev, &c); err != nil {
			t.Fatal(err)
		}
		if c.Usage != nil {
			u = c.Usage
		}
		for _, ch := range c.Choices {
			m := out[ch.Index]
			if m == nil {
				m = &merged{}
				out[ch.Index] = m
			}
			if m.finish != "" {
				t.Fatalf("choice %d: chunk after finish_reason", ch.Index)
			}
			m.text += ch.Text
			m.tokens = append(m.tokens, ch.TokenIDs...)
			if ch.Logprobs != nil {
				m.logprobs = append(m.logprobs, ch.Logprobs.TokenLogprobs...)
			}
			if ch.PromptTokenIDs != nil {
				m.prompt = ch.PromptTokenIDs
			}
			if ch.FinishReason != nil {
				m.finish, m.stop = *ch.FinishReason, ch.StopReason
			}
		}
	}
	return out, u
}

func TestStreamEqualsNonStream(t *testing.T) {
	h := newHarness(t, fakeModel(newFakeEngine()), Options{})
	for _, stop := range [][]string{nil, {"e"}, {"é", "zz"}, {"a b", "q"}} {
		body := map[string]any{
			"model": "tiny", "prompt": []string{"abc", "xyz"}, "max_tokens": 40, "n": 2, "seed": 3,
			"temperature": 1, "logprobs": 0, "return_token_ids": true, "stop": stop,
		}
		var whole completionOut
		h.postOK("/v1/completions", body, &whole)
		body["stream"] = true
		body["stream_options"] = map[string]bool{"include_usage": true}
		got, u := mergeCompletionStream(t, h.stream("/v1/completions", body))
		if len(got) != 4 || len(whole.Choices) != 4 {
			t.Fatalf("stop %q: %d streamed choices, %d whole", stop, len(got), len(whole.Choices))
		}
		if u == nil || *u != *whole.Usage {
			t.Errorf("stop %q: streamed usage %+v, whole %+v", stop, u, whole.Usage)
		}
		for _, c := range whole.Choices {
			g := got[c.Index]
			if g.text != c.Text || !equalInts(g.tokens, c.TokenIDs) || !equalF(g.logprobs, c.Logprobs.TokenLogprobs) || g.finish != *c.FinishReason {
				t.Errorf("stop %q choice %d:\nstream %q %v %s\nwhole  %q %v %s", stop, c.Index, g.text, g.tokens, g.finish, c.Text, c.TokenIDs, *c.FinishReason)
			}
			if !equalInts(g.prompt, c.PromptTokenIDs) || len(c.PromptTokenIDs) != 3 {
				t.Errorf("prompt ids %v vs %v", g.prompt, c.PromptTokenIDs)
			}
			for _, s := range stop {
				if strings.Contains(c.Text, s) {
					t.Errorf("text %q contains stop string %q", c.Text, s)
				}
			}
			if c.StopReason != nil && *c.FinishReason != "stop" {
				t.Errorf("stop_reason %v with finish %s", c.StopReason, *c.FinishReason)
			}
			if s, ok := c.StopReason.(string); ok {
				// The text up to the stop string, plus it, is a prefix of the full decode.
				full := byteTokenizer{}.Decode(c.TokenIDs, true)
				if !strings.HasPrefix(full, c.Text+s) {
					t.Errorf("full decode %q does not start with text+stop %q", full, c.Text+s)
				}
			} else if full := (byteTokenizer{}).Decode(c.TokenIDs, true); full != c.Text {
				t.Errorf("token ids decode to %q, text is %q", full, c.Text)
			}
		}
	}
	// go-openai's streaming clients see the same text.
	ctx := context.Background()
	req := openai.CompletionRequest{Model: "tiny", Prompt: "hello", MaxTokens: 30, Seed: ptr(11), Temperature: 0.9, Stop: []string{"k"}}
	whole, err := h.client().CreateCompletion(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	req.Stream = true
	st, err := h.client().CreateCompletionStream(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range r.Choices {
			sb.WriteString(c.Text)
		}
	}
	st.Close()
	if sb.String() != whole.Choices[0].Text {
		t.Errorf("go-openai stream %q, whole %q", sb.String(), whole.Choices[0].Text)
	}
	creq := openai.ChatCompletionRequest{Model: "tiny", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hey"}},
		MaxTokens: 30, Seed: ptr(5), Temperature: 0.7, N: 2, Stop: []string{"x", "y"}}
	cw, err := h.client().CreateChatCompletion(ctx, creq)
	if err != nil {
		t.Fatal(err)
	}
	creq.Stream = true
	cs, err := h.client().CreateChatCompletionStream(ctx, creq)
	if err != nil {
		t.Fatal(err)
	}
	texts := map[int]string{}
	finish := map[int]openai.FinishReason{}
	for {
		r, err := cs.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range r.Choices {
			texts[c.Index] += c.Delta.Content
			if c.FinishReason != "" {
				finish[c.Index] = c.FinishReason
			}
		}
	}
	cs.Close()
	for _, c := range cw.Choices {
		if texts[c.Index] != c.Message.Content || finish[c.Index] != c.FinishReason {
			t.Errorf("chat choice %d: stream %q (%s), whole %q (%s)", c.Index, texts[c.Index], finish[c.Index], c.Message.Content, c.FinishReason)
		}
	}
}

func TestChatExtras(t *testing.T) {
	h := newHarness(t, fakeModel(newFakeEngine()), Options{})
	body := map[string]any{
		"model": "tiny", "messages": []map[string]any{{"role": "system", "content": "be brief"}, {"role": "user", "content": []map[string]string{{"type": "text", "text": "hi"}}}},
		"max_completion_tokens": 20, "seed": 9, "logprobs": true, "top_logprobs": 0, "return_token_ids": true,
		"chat_template_kwargs": map[string]any{"enable_thinking": false}, "top_k": 5,
	}
	var whole chatOutRaw
	h.postOK("/v1/chat/completions", body, &whole)
	want := byteTokenizer{}.Encode("<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n", false)
	if !equalInts(whole.PromptTokenIDs, want) {
		t.Errorf("prompt_token_ids %v, want %v", whole.PromptTokenIDs, want)
	}
	c := whole.Choices[0]
	if len(c.TokenIDs) != len(c.Logprobs.Content) || len(c.TokenIDs) != whole.Usage.CompletionTokens || whole.Usage.PromptTokens != len(want) {
		t.Fatalf("token_ids %d, logprobs %d, usage %+v", len(c.TokenIDs), len(c.Logprobs.Content), whole.Usage)
	}
	for i, lp := range c.Logprobs.Content {
		if lp.TopLogprobs == nil || lp.Logprob > 0 || string(byteSlice(lp.Bytes)) != lp.Token {
			t.Errorf("logprob entry %d: %+v", i, lp)
		}
	}
	body["stream"] = true
	var text string
	var toks []int32
	var lps []float32
	var prompt []int32
	for i, ev := range h.stream("/v1/chat/completions", body) {
		var ch chatOutRaw
		if err := json.Unmarshal(ev, &ch); err != nil {
			t.Fatal(err)
		}
		if i == 0 && (ch.Choices[0].Delta == nil || ch.Choices[0].Delta.Role != "assistant") {
			t.Errorf("first chunk has no role: %s", ev)
		}
		if ch.PromptTokenIDs != nil {
			prompt = ch.PromptTokenIDs
		}
		for _, cc := range ch.Choices {
			if cc.Delta.Content != nil {
				text += *cc.Delta.Content
			}
			toks = append(toks, cc.TokenIDs...)
			if cc.Logprobs != nil {
				for _, lp := range cc.Logprobs.Content {
					lps = append(lps, lp.Logprob)
				}
			}
		}
	}
	if text != *c.Message.Content || !equalInts(toks, c.TokenIDs) || !equalInts(prompt, whole.PromptTokenIDs) || len(lps) != len(c.Logprobs.Content) {
		t.Errorf("stream %q %v, whole %q %v", text, toks, *c.Message.Content, c.TokenIDs)
	}
	for i := range lps {
		if lps[i] != c.Logprobs.Content[i].Logprob {
			t.Errorf("logprob %d: stream %v whole %v", i, lps[i], c.Logprobs.Content[i].Logprob)
		}
	}
}

func byteSlice(b []int) []byte {
	out := make([]byte, len(b))
	for i, v := range b {
		out[i] = byte(v)
	}
	return out
}

func TestTokenIDPromptsAndEcho(t *testing.T) {
	h := newHarness(t, fakeModel(newFakeEngine()), Options{})
	var out completionOut
	h.postOK("/v1/completions", map[string]any{"prompt": []int{104, 105}, "max_tokens": 5, "seed": 1, "echo": true, "return_token_ids": true, "temperature": 0}, &out)
	c := out.Choices[0]
	if !strings.HasPrefix(c.Text, "hi") || !equalInts(c.PromptTokenIDs, []int32{104, 105}) || len(c.TokenIDs) != 5 {
		t.Errorf("echo: %+v", c)
	}
	if got := (byteTokenizer{}).Decode(c.TokenIDs, true); "hi"+got != c.Text {
		t.Errorf("token ids decode to %q, text %q", got, c.Text)
	}
	h.postOK("/v1/completions", map[string]any{"prompt": [][]int{{104}, {105, 106}}, "max_tokens": 3, "n": 2}, &out)
	if len(out.Choices) != 4 || out.Usage.PromptTokens != 3 {
		t.Errorf("two id prompts × n=2: %d choices, usage %+v", len(out.Choices), out.Usage)
	}
	for i, c := range out.Choices {
		if c.Index != i {
			t.Errorf("choice %d has index %d", i, c.Index)
		}
	}
}

func TestTokenizeDetokenize(t *testing.T) {
	h := newHarness(t, fakeModel(newFakeEngine()), Options{})
	var tk struct {
		Count       int      `json:"count"`
		MaxModelLen int      `json:"max_model_len"`
		Tokens      []int32  `json:"tokens"`
		TokenStrs   []string `json:"token_strs"`
	}
	h.postOK("/tokenize", map[string]any{"model": "tiny", "prompt": "hé<|im_end|>", "return_token_strs": true}, &tk)
	if tk.Count != 4 || tk.MaxModelLen != 256 || !equalInts(tk.Tokens, []int32{'h', 0xC3, 0xA9, fakeEOS}) || tk.TokenStrs[3] != "<|im_end|>" {
		t.Errorf("tokenize: %+v", tk)
	}
	h.postOK("/tokenize", map[string]any{"messages": []map[string]string{{"role": "user", "content": "x"}}}, &tk)
	if want := (byteTokenizer{}).Encode("<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n", false); !equalInts(tk.Tokens, want) {
		t.Errorf("chat tokenize %v, want %v", tk.Tokens, want)
	}
	var dt struct {
		Prompt string `json:"prompt"`
	}
	h.postOK("/detokenize", map[string]any{"tokens": []int{'h', 0xC3, 0xA9}}, &dt)
	if dt.Prompt != "hé" {
		t.Errorf("detokenize %q", dt.Prompt)
	}
	st, body := h.post("/detokenize", map[string]any{"tokens": []int{9999}})
	if st != 400 || *apiErr(t, body).Param != "tokens" {
		t.Errorf("out-of-vocab detokenize: %d %s", st, body)
	}
}

func TestAdapters(t *testing.T) {
	eng := newFakeEngine()
	h := newHarness(t, fakeModel(eng), Options{})
	dir := t.TempDir()
	st, body := h.post("/v1/load_lora_adapter", map[string]any{"lora_name": "solver", "lora_path": dir})
	if st != 200 || string(body) != "Success: LoRA adapter 'solver' added successfully." {
		t.Fatalf("load: %d %q", st, body)
	}
	st, body = h.post("/v1/load_lora_adapter", map[string]any{"lora_name": "solver", "lora_path": dir})
	if st != 400 || !strings.Contains(apiErr(t, body).Message, "already been loaded") {
		t.Errorf("second load: %d %s", st, body)
	}
	if st, body = h.post("/v1/load_lora_adapter", map[string]any{"lora_name": "solver", "lora_path": dir, "load_inplace": true}); st != 200 {
		t.Errorf("load_inplace: %d %s", st, body)
	}
	if st, body = h.post("/v1/load_lora_adapter", map[string]any{"lora_name": "x"}); st != 400 {
		t.Errorf("load without path: %d %s", st, body)
	}
	if st, body = h.post("/v1/load_lora_adapter", map[string]any{"lora_name": "x", "lora_path": dir + "/missing"}); st != 404 {
		t.Errorf("load from a missing folder: %d %s", st, body)
	}
	var models modelList
	req, _ := http.NewRequest("GET", h.hs.URL+"/v1/models", nil)
	resp, err := h.hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if len(models.Data) != 2 || models.Data[1].ID != "solver" || *models.Data[1].Parent != "tiny" || models.Data[1].Root != dir {
		t.Errorf("models: %+v", models)
	}
	var base, tuned completionOut
	h.postOK("/v1/completions", map[string]any{"model": "tiny", "prompt": "p", "max_tokens": 20, "seed": 1}, &base)
	h.postOK("/v1/completions", map[string]any{"model": "solver", "prompt": "p", "max_tokens": 20, "seed": 1}, &tuned)
	if base.Choices[0].Text == tuned.Choices[0].Text {
		t.Errorf("the fake adapter should change the output")
	}
	st, body = h.post("/v1/unload_lora_adapter", map[string]any{"lora_name": "solver"})
	if st != 200 || string(body) != "Success: LoRA adapter 'solver' removed successfully." {
		t.Errorf("unload: %d %q", st, body)
	}
	if st, body = h.post("/v1/unload_lora_adapter", map[string]any{"lora_name": "solver"}); st != 404 {
		t.Errorf("second unload: %d %s", st, body)
	}
	if st, body = h.post("/v1/completions", map[string]any{"model": "solver", "prompt": "p"}); st != 404 || *apiErr(t, body).Code != "model_not_found" {
		t.Errorf("unloaded adapter: %d %s", st, body)
	}
}

func TestErrorStatuses(t *testing.T) {
	h := newHarness(t, fakeModel(newFakeEngine()), Options{MaxBodyBytes: 4096})
	big := `{"prompt":"` + strings.Repeat("x", 5000) + `"}`
	cases := []struct {
		name, path string
		body       any
		status     int
		param      string
		code       string
	}{
		{"bad JSON", "/v1/completions", `{"prompt":`, 400, "", ""},
		{"not an object", "/v1/completions", `[1,2]`, 400, "", ""},
		{"empty body", "/v1/completions", ``, 400, "", ""},
		{"trailing data", "/v1/completions", `{"prompt":"a"} {}`, 400, "", ""},
		{"no prompt", "/v1/completions", `{"max_tokens":3}`, 400, "prompt", ""},
		{"prompt of bools", "/v1/completions", `{"prompt":[true]}`, 400, "prompt", ""},
		{"mixed prompt list", "/v1/completions", `{"prompt":["a",1]}`, 400, "prompt", ""},
		{"negative token id", "/v1/completions", `{"prompt":[-1]}`, 400, "prompt", ""},
		{"token id out of vocab", "/v1/completions", `{"prompt":[100000]}`, 400, "prompt", ""},
		{"empty prompt", "/v1/completions", `{"prompt":""}`, 400, "prompt", ""},
		{"n as string", "/v1/completions", `{"prompt":"a","n":"2"}`, 400, "n", ""},
		{"n zero", "/v1/completions", `{"prompt":"a","n":0}`, 400, "n", ""},
		{"max_tokens zero", "/v1/completions", `{"prompt":"a","max_tokens":0}`, 400, "max_tokens", ""},
		{"temperature negative", "/v1/completions", `{"prompt":"a","temperature":-1}`, 400, "temperature", ""},
		{"top_p zero", "/v1/completions", `{"prompt":"a","top_p":0}`, 400, "top_p", ""},
		{"top_k -2", "/v1/completions", `{"prompt":"a","top_k":-2}`, 400, "top_k", ""},
		{"stop number", "/v1/completions", `{"prompt":"a","stop":5}`, 400, "stop", ""},
		{"stop empty", "/v1/completions", `{"prompt":"a","stop":[""]}`, 400, "stop", ""},
		{"logprobs too many", "/v1/completions", `{"prompt":"a","logprobs":50}`, 400, "logprobs", ""},
		{"echo with logprobs", "/v1/completions", `{"prompt":"a","logprobs":1,"echo":true}`, 400, "echo", ""},
		{"presence penalty", "/v1/completions", `{"prompt":"a","presence_penalty":1}`, 400, "presence_penalty", ""},
		{"context length", "/v1/completions", `{"prompt":"a","max_tokens":1000}`, 400, "prompt", "context_length_exceeded"},
		{"unknown model", "/v1/completions", `{"model":"nope","prompt":"a"}`, 404, "", "model_not_found"},
		{"too large", "/v1/completions", big, 413, "", "request_too_large"},
		{"chat no messages", "/v1/chat/completions", `{"messages":[]}`, 400, "messages", ""},
		{"chat bad role", "/v1/chat/completions", `{"messages":[{"role":"robot","content":"x"}]}`, 400, "messages", ""},
		{"chat image part", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, 400, "messages.content", ""},
		{"chat top_logprobs without logprobs", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"top_logprobs":2}`, 400, "top_logprobs", ""},
		{"chat context length", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":1000}`, 400, "messages", "context_length_exceeded"},
		{"chat unknown model", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, 404, "", "model_not_found"},
		{"unknown endpoint", "/v1/embeddings", `{}`, 404, "", "not_found"},
		{"tokenize nothing", "/tokenize", `{}`, 400, "prompt", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, body := h.post(c.path, c.body)
			if st != c.status {
				t.Fatalf("status %d, want %d: %s", st, c.status, body)
			}
			e := apiErr(t, body)
			if c.param != "" && (e.Param == nil || *e.Param != c.param) {
				t.Errorf("param %v, want %q (%s)", e.Param, c.param, e.Message)
			}
			if c.code != "" && (e.Code == nil || *e.Code != c.code) {
				t.Errorf("code %v, want %q (%s)", e.Code, c.code, e.Message)
			}
		})
	}
}

func TestAuth(t *testing.T) {
	h := newHarness(t, fakeModel(newFakeEngine()), Options{APIKey: "sekret"})
	if _, err := h.client().CreateCompletion(context.Background(), openai.CompletionRequest{Prompt: "a", MaxTokens: 2}); err != nil {
		t.Fatalf("with the key: %v", err)
	}
	h.key = "wrong"
	st, body := h.post("/v1/completions", `{"prompt":"a"}`)
	if st != 401 || *apiErr(t, body).Code != "invalid_api_key" {
		t.Errorf("wrong key: %d %s", st, body)
	}
	_, err := h.client().ListModels(context.Background())
	var ae *openai.APIError
	if !errors.As(err, &ae) || ae.HTTPStatusCode != 401 {
		t.Errorf("go-openai with a wrong key: %v", err)
	}
	resp, err := http.Get(h.hs.URL + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("/health needs no key: %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestQueueFull(t *testing.T) {
	t.Run("server limit", func(t *testing.T) {
		eng := newFakeEngine()
		eng.gate = make(chan struct{})
		eng.started = make(chan struct{}, 8)
		h := newHarness(t, fakeModel(eng), Options{MaxConcurrent: 2})
		results := make(chan int, 2)
		for range 2 {
			go func() {
				st, _ := h.post("/v1/completions", `{"prompt":"a","max_tokens":2}`)
				results <- st
			}()
		}
		<-eng.started
		<-eng.started
		st, body := h.post("/v1/completions", `{"prompt":"a","max_tokens":2}`)
		if st != 429 || *apiErr(t, body).Code != "queue_full" {
			t.Errorf("third request: %d %s", st, body)
		}
		// Streaming requests are refused with a status too.
		st, _ = h.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"stream":true}`)
		if st != 429 {
			t.Errorf("streaming third request: %d", st)
		}
		close(eng.gate)
		for range 2 {
			if st := <-results; st != 200 {
				t.Errorf("held request: %d", st)
			}
		}
	})
	t.Run("engine queue", func(t *testing.T) {
		eng := newFakeEngine()
		eng.gate = make(chan struct{})
		eng.started = make(chan struct{}, 8)
		eng.maxQueue = 1
		h := newHarness(t, fakeModel(eng), Options{})
		done := make(chan int, 1)
		go func() {
			st, _ := h.post("/v1/completions", `{"prompt":"a","max_tokens":2}`)
			done <- st
		}()
		<-eng.started
		for _, stream := range []bool{false, true} {
			st, body := h.post("/v1/completions", map[string]any{"prompt": "a", "max_tokens": 2, "stream": stream})
			if st != 429 {
				t.Errorf("stream=%v: %d %s", stream, st, body)
			}
		}
		close(eng.gate)
		if st := <-done; st != 200 {
			t.Errorf("held request: %d", st)
		}
	})
}

func TestUnavailable(t *testing.T) {
	h := newHarness(t, nil, Options{})
	for _, p := range []string{"/v1/completions", "/v1/chat/completions", "/tokenize", "/v1/load_lora_adapter"} {
		if st, body := h.post(p, `{}`); st != 503 {
			t.Errorf("%s while loading: %d %s", p, st, body)
		}
	}
	resp, _ := http.Get(h.hs.URL + "/health")
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("/health while loading: %d", resp.StatusCode)
	}
	resp.Body.Close()
	h.srv.SetModel(fakeModel(newFakeEngine()))
	resp, _ = http.Get(h.hs.URL + "/health")
	if resp.StatusCode != 200 {
		t.Errorf("/health when ready: %d", resp.StatusCode)
	}
	resp.Body.Close()
	h.srv.BeginShutdown()
	if st, body := h.post("/v1/completions", `{"prompt":"a"}`); st != 503 || !strings.Contains(apiErr(t, body).Message, "shutting down") {
		t.Errorf("while shutting down: %d %s", st, body)
	}
}

// TestGracefulShutdown runs Serve on a real listener: a request in flight
// finishes after shutdown begins; requests during the drain get 503 or a
// refused connection; Serve returns and closes the model.
func TestGracefulShutdown(t *testing.T) {
	eng := newFakeEngine()
	eng.gate = make(chan struct{})
	eng.started = make(chan struct{}, 4)
	closed := make(chan struct{})
	m := fakeModel(eng)
	m.Close = func() error { close(closed); return nil }
	s := New(Options{Logger: quietLogger(), ShutdownTimeout: 5 * time.Second})
	s.SetModel(m)
	ln, err := listenLoopback()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String()
	inflight := make(chan int, 1)
	go func() {
		resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"a","max_tokens":3}`))
		if err != nil {
			inflight <- -1
			return
		}
		resp.Body.Close()
		inflight <- resp.StatusCode
	}()
	<-eng.started
	cancel()
	for !s.draining.Load() {
		time.Sleep(time.Millisecond)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/completions", strings.NewReader(`{"prompt":"a"}`)))
	if rec.Code != 503 {
		t.Errorf("during drain: %d", rec.Code)
	}
	close(eng.gate)
	if st := <-inflight; st != 200 {
		t.Errorf("in-flight request: %d", st)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Error("model not closed")
	}
}

func TestShutdownDeadlineCutsOff(t *testing.T) {
	eng := newFakeEngine()
	eng.gate = make(chan struct{}) // never opened
	eng.started = make(chan struct{}, 4)
	s := New(Options{Logger: quietLogger(), ShutdownTimeout: 200 * time.Millisecond})
	s.SetModel(fakeModel(eng))
	ln, err := listenLoopback()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	go http.Post("http://"+ln.Addr().String()+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"a","max_tokens":3}`))
	<-eng.started
	cancel()
	select {
	case <-served:
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after the shutdown deadline")
	}
}

func equalInts(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equalF(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func FuzzCompletionRequest(f *testing.F) {
	for _, s := range []string{
		`{"prompt":"hi","max_tokens":3}`, `{"prompt":[1,2,3],"n":2,"stop":["a"]}`, `{"prompt":[[1],[2]],"logprobs":1}`,
		`{"prompt":["a","b"],"echo":true,"return_token_ids":true}`, `{"prompt":"x","stream":true,"max_tokens":2}`,
		`{"prompt":"x","seed":-5,"temperature":0,"top_k":-1,"top_p":0.5}`, `{`, `null`, `{"prompt":1e400}`,
	} {
		f.Add([]byte(s))
	}
	eng := newFakeEngine()
	eng.ctxLen = 64
	s := New(Options{Logger: quietLogger(), MaxBodyBytes: 1 << 16})
	s.SetModel(fakeModel(eng))
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/completions", bytes.NewReader(body)))
		if rec.Code >= 500 || (rec.Code != 200 && rec.Code < 400) {
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body.Bytes())
		}
		if rec.Code != 200 {
			apiErr(t, rec.Body.Bytes())
		}
	})
}
