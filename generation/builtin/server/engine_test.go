package server

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/troupe-rl/troupe/generation/builtin"
	"github.com/troupe-rl/troupe/generation/builtin/modelgen"
	"github.com/troupe-rl/troupe/internal/hf"
)

// The real-engine tests share one tiny generated model.
var (
	tinyOnce sync.Once
	tinyDir  string
	tinyErr  error
)

func tinyModelDir(t *testing.T) string {
	t.Helper()
	tinyOnce.Do(func() {
		root, err := os.MkdirTemp("", "troupe-server-test-")
		if err != nil {
			tinyErr = err
			return
		}
		tinyDir = filepath.Join(root, "tiny-qwen3")
		_, tinyErr = modelgen.Write(tinyDir, modelgen.Options{Seed: 7, Layers: 2, Dim: 64, Heads: 4, KVHeads: 2, Vocab: 384, MaxPositions: 512, InitStd: 0.1})
	})
	if tinyErr != nil {
		t.Fatal(tinyErr)
	}
	return tinyDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if tinyDir != "" {
		os.RemoveAll(filepath.Dir(tinyDir))
	}
	os.Exit(code)
}

func loadTiny(t *testing.T, o LoadOptions) *Model {
	t.Helper()
	if o.Engine.Threads == 0 {
		o.Engine.Threads = 2
	}
	m, err := Load(tinyModelDir(t), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func TestEngineEndToEnd(t *testing.T) {
	m := loadTiny(t, LoadOptions{})
	if m.Name != "tiny-qwen3" {
		t.Errorf("served name %q", m.Name)
	}
	h := newHarness(t, m, Options{})
	ctx := context.Background()
	c := h.client()

	comp, err := c.CreateCompletion(ctx, openai.CompletionRequest{Model: "tiny-qwen3", Prompt: "The answer is", MaxTokens: 16, N: 2, Seed: ptr(3), Temperature: 1, LogProbs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(comp.Choices) != 2 || comp.Usage.CompletionTokens == 0 {
		t.Fatalf("completion %+v", comp)
	}
	for _, ch := range comp.Choices {
		for _, lp := range ch.LogProbs.TokenLogprobs {
			if lp > 0 || math.IsNaN(float64(lp)) || lp <= -9999 {
				t.Errorf("logprob %v", lp)
			}
		}
	}
	chat, err := c.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "tiny-qwen3", MaxTokens: 12, Seed: ptr(1),
		Messages: []openai.ChatCompletionMessage{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "What is 2+2?"}}})
	if err != nil {
		t.Fatal(err)
	}
	if chat.Choices[0].Message.Role != "assistant" || chat.Usage.PromptTokens < 10 {
		t.Errorf("chat %+v", chat)
	}

	// Streaming equals non-streaming for the same seed, on both endpoints,
	// with stop strings (which this random model hits sometimes).
	for _, stop := range [][]string{nil, {"e"}, {" t", "a"}} {
		body := map[string]any{"prompt": []string{"Question: What is 3 * 14?", "def solve"}, "max_tokens": 24, "n": 2, "seed": 5,
			"temperature": 1.2, "logprobs": 0, "return_token_ids": true, "stop": stop}
		var whole completionOut
		h.postOK("/v1/completions", body, &whole)
		body["stream"] = true
		got, _ := mergeCompletionStream(t, h.stream("/v1/completions", body))
		for _, ch := range whole.Choices {
			g := got[ch.Index]
			if g == nil || g.text != ch.Text || !equalInts(g.tokens, ch.TokenIDs) || !equalF(g.logprobs, ch.Logprobs.TokenLogprobs) || g.finish != *ch.FinishReason {
				t.Errorf("stop %q choice %d: stream %+v, whole %q %v %s", stop, ch.Index, g, ch.Text, ch.TokenIDs, *ch.FinishReason)
				continue
			}
			full := m.Tokenizer.Decode(ch.TokenIDs, true)
			if s, ok := ch.StopReason.(string); ok {
				if !strings.HasPrefix(full, ch.Text+s) || strings.Contains(ch.Text, s) {
					t.Errorf("stop %q: text %q, full decode %q", s, ch.Text, full)
				}
			} else if full != ch.Text {
				t.Errorf("token ids decode to %q, text %q", full, ch.Text)
			}
			if want := m.Tokenizer.Encode(map[int]string{0: "Question: What is 3 * 14?", 1: "def solve"}[ch.Index/2], true); !equalInts(ch.PromptTokenIDs, want) {
				t.Errorf("prompt_token_ids %v, want %v", ch.PromptTokenIDs, want)
			}
		}
	}
	creq := openai.ChatCompletionRequest{Model: "tiny-qwen3", MaxTokens: 20, Seed: ptr(9), Temperature: 0.9, N: 2,
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "Tell me a story."}}}
	cw, err := c.CreateChatCompletion(ctx, creq)
	if err != nil {
		t.Fatal(err)
	}
	creq.Stream = true
	cs, err := c.CreateChatCompletionStream(ctx, creq)
	if err != nil {
		t.Fatal(err)
	}
	texts := map[int]string{}
	for {
		r, err := cs.Recv()
		if err != nil {
			break
		}
		for _, ch := range r.Choices {
			texts[ch.Index] += ch.Delta.Content
		}
	}
	cs.Close()
	for _, ch := range cw.Choices {
		if texts[ch.Index] != ch.Message.Content {
			t.Errorf("chat stream %q, whole %q", texts[ch.Index], ch.Message.Content)
		}
	}
}

// TestEngineLogprobsRecompute checks greedy logprobs against a
// teacher-forced recomputation: feeding prompt+tokens[:k] as a token-id
// prompt must give tokens[k] again with the same logprob.
func TestEngineLogprobsRecompute(t *testing.T) {
	m := loadTiny(t, LoadOptions{})
	h := newHarness(t, m, Options{})
	var out completionOut
	h.postOK("/v1/completions", map[string]any{"prompt": "Sudoku: fill the grid", "max_tokens": 8, "temperature": 0, "logprobs": 0, "return_token_ids": true, "ignore_eos": true}, &out)
	ch := out.Choices[0]
	prompt := ch.PromptTokenIDs
	var maxDiff float64
	for k, tok := range ch.TokenIDs {
		var one completionOut
		ids := append(append([]int32(nil), prompt...), ch.TokenIDs[:k]...)
		h.postOK("/v1/completions", map[string]any{"prompt": ids, "max_tokens": 1, "temperature": 0, "logprobs": 0, "return_token_ids": true, "ignore_eos": true}, &one)
		if got := one.Choices[0].TokenIDs[0]; got != tok {
			t.Fatalf("position %d: recomputed greedy token %d, generated %d", k, got, tok)
		}
		maxDiff = math.Max(maxDiff, math.Abs(float64(one.Choices[0].Logprobs.TokenLogprobs[0]-ch.Logprobs.TokenLogprobs[k])))
	}
	t.Logf("max |logprob(decode) - logprob(prefill)| over %d tokens: %.2e", len(ch.TokenIDs), maxDiff)
	if maxDiff > 1e-3 {
		t.Errorf("logprobs differ by %v between decoding and recomputation", maxDiff)
	}
}

func writeAdapter(t *testing.T, dir string, c *hf.ModelConfig, bScale float32) {
	t.Helper()
	a := &hf.Adapter{Config: hf.NewAdapterConfig(4, 8, []string{hf.ModQ, hf.ModV, hf.ModDown}, "tiny-qwen3"), Modules: map[string]hf.LoRAPair{}}
	shapes := hf.LinearShapes(c)
	for l := 0; l < c.NumHiddenLayers; l++ {
		for _, mod := range []string{hf.ModQ, hf.ModV, hf.ModDown} {
			out, in := shapes[mod][0], shapes[mod][1]
			A, B := hf.NewTensor(4, in), hf.NewTensor(out, 4)
			for i := range A.Data {
				A.Data[i] = float32(math.Sin(float64(i))) * 0.5
			}
			for i := range B.Data {
				B.Data[i] = bScale * float32(math.Cos(float64(i)))
			}
			a.Modules[hf.ModulePath(l, mod)] = hf.LoRAPair{A: A, B: B}
		}
	}
	if err := hf.WriteAdapter(dir, a); err != nil {
		t.Fatal(err)
	}
}

func TestEngineAdapters(t *testing.T) {
	m := loadTiny(t, LoadOptions{Name: "base"})
	h := newHarness(t, m, Options{})
	cfg, err := hf.ReadModelConfig(tinyModelDir(t))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	zero, live := filepath.Join(root, "zero"), filepath.Join(root, "live")
	writeAdapter(t, zero, cfg, 0)
	writeAdapter(t, live, cfg, 0.5)
	for name, dir := range map[string]string{"zero": zero, "live": live} {
		if st, body := h.post("/v1/load_lora_adapter", map[string]any{"lora_name": name, "lora_path": dir}); st != 200 {
			t.Fatalf("load %s: %d %s", name, st, body)
		}
	}
	gen := func(model string) (string, []int32) {
		var out completionOut
		h.postOK("/v1/completions", map[string]any{"model": model, "prompt": "The quick brown fox", "max_tokens": 12, "temperature": 0, "return_token_ids": true, "ignore_eos": true}, &out)
		return out.Choices[0].Text, out.Choices[0].TokenIDs
	}
	_, base := gen("base")
	_, z := gen("zero")
	_, l := gen("live")
	if !equalInts(base, z) {
		t.Errorf("B=0 adapter changed the output: %v vs %v", z, base)
	}
	if equalInts(base, l) {
		t.Errorf("adapter with B≠0 left the output unchanged: %v", l)
	}
	// Reloading the same name fails (vLLM), in place succeeds.
	if st, _ := h.post("/v1/load_lora_adapter", map[string]any{"lora_name": "live", "lora_path": zero}); st != 400 {
		t.Errorf("reload without load_inplace: %d", st)
	}
	if st, body := h.post("/v1/load_lora_adapter", map[string]any{"lora_name": "live", "lora_path": zero, "load_inplace": true}); st != 200 {
		t.Errorf("load_inplace: %d %s", st, body)
	}
	if _, l2 := gen("live"); !equalInts(base, l2) {
		t.Errorf("in-place reload with B=0 should give the base output")
	}
	// A broken adapter folder is a 400 naming the problem.
	bad := filepath.Join(root, "bad")
	os.MkdirAll(bad, 0o755)
	os.WriteFile(filepath.Join(bad, "adapter_config.json"), []byte(`{"peft_type":"LORA","r":4}`), 0o644)
	if st, body := h.post("/v1/load_lora_adapter", map[string]any{"lora_name": "bad", "lora_path": bad}); st != 400 {
		t.Errorf("broken adapter: %d %s", st, body)
	}
	for _, name := range []string{"zero", "live"} {
		if st, body := h.post("/v1/unload_lora_adapter", map[string]any{"lora_name": name}); st != 200 {
			t.Errorf("unload %s: %d %s", name, st, body)
		}
	}
	if st, _ := h.post("/v1/completions", map[string]any{"model": "live", "prompt": "x"}); st != 404 {
		t.Errorf("unloaded adapter: %d", st)
	}
}

// gatedEngine holds every Generate until the gate opens.
type gatedEngine struct {
	Engine
	gate    chan struct{}
	started chan struct{}
}

func (g *gatedEngine) Generate(ctx context.Context, req *builtin.Request) (*builtin.Result, error) {
	g.started <- struct{}{}
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Engine.Generate(ctx, req)
}

func TestEngineErrors(t *testing.T) {
	m := loadTiny(t, LoadOptions{})
	g := &gatedEngine{Engine: m.Engine, gate: make(chan struct{}), started: make(chan struct{}, 4)}
	gm := *m
	gm.Engine = g
	h := newHarness(t, &gm, Options{MaxConcurrent: 1, APIKey: "k", MaxBodyBytes: 1 << 12})
	cases := []struct {
		body   any
		status int
		code   string
	}{
		{map[string]any{"prompt": "x", "max_tokens": 600}, 400, "context_length_exceeded"},
		{map[string]any{"prompt": []int{384}}, 400, ""},
		{map[string]any{"prompt": "x", "model": "nope"}, 404, "model_not_found"},
		{map[string]any{"prompt": strings.Repeat("x", 5000)}, 413, "request_too_large"},
	}
	for _, c := range cases {
		st, body := h.post("/v1/completions", c.body)
		if st != c.status || (c.code != "" && *apiErr(t, body).Code != c.code) {
			t.Errorf("%v: %d %s", c.body, st, body)
		}
	}
	done := make(chan int, 1)
	go func() {
		st, _ := h.post("/v1/completions", map[string]any{"prompt": "x", "max_tokens": 2})
		done <- st
	}()
	<-g.started
	if st, body := h.post("/v1/completions", map[string]any{"prompt": "x", "max_tokens": 2}); st != 429 {
		t.Errorf("queue full: %d %s", st, body)
	}
	close(g.gate)
	if st := <-done; st != 200 {
		t.Errorf("held request: %d", st)
	}
	h.key = ""
	if st, _ := h.post("/v1/completions", map[string]any{"prompt": "x"}); st != 401 {
		t.Errorf("no key: %d", st)
	}
}

// TestEngineChatTemplate checks that chat prompts are the model's own
// chat_template (Qwen3's, from tokenizer_config.json) and that
// chat_template_kwargs reach it.
func TestEngineChatTemplate(t *testing.T) {
	m := loadTiny(t, LoadOptions{})
	h := newHarness(t, m, Options{})
	msgs := []map[string]string{{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}}
	want := map[bool]string{
		true:  "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n",
		false: "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
	}
	for _, thinking := range []bool{true, false} {
		var out chatOutRaw
		h.postOK("/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 3, "return_token_ids": true,
			"chat_template_kwargs": map[string]any{"enable_thinking": thinking}}, &out)
		if got := m.Tokenizer.Decode(out.PromptTokenIDs, false); got != want[thinking] {
			t.Errorf("enable_thinking=%v: prompt %q, want %q", thinking, got, want[thinking])
		}
		var tk struct{ Tokens []int32 }
		h.postOK("/tokenize", map[string]any{"messages": msgs, "chat_template_kwargs": map[string]any{"enable_thinking": thinking}}, &tk)
		if !equalInts(tk.Tokens, out.PromptTokenIDs) {
			t.Errorf("/tokenize (chat) %v, chat prompt_token_ids %v", tk.Tokens, out.PromptTokenIDs)
		}
	}
	var out chatOutRaw
	h.postOK("/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}, {"role": "assistant", "content": "The answer"}},
		"continue_final_message": true, "add_generation_prompt": false, "max_tokens": 2, "return_token_ids": true}, &out)
	// (Qwen3's template writes an empty think block into the last assistant turn.)
	if got := m.Tokenizer.Decode(out.PromptTokenIDs, false); !strings.HasSuffix(got, "The answer") || !strings.Contains(got, "<|im_start|>assistant\n") {
		t.Errorf("continue_final_message prompt %q", got)
	}
	if st, body := h.post("/v1/chat/completions", map[string]any{"messages": msgs, "chat_template_kwargs": map[string]any{"enable_thinking": "no"}}); st != 400 {
		t.Errorf("bad enable_thinking: %d %s", st, body)
	}
}
