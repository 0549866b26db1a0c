package ollama_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/troupe-rl/troupe/generation"
	"github.com/troupe-rl/troupe/generation/builtin"
	"github.com/troupe-rl/troupe/generation/builtin/inproc"
	"github.com/troupe-rl/troupe/generation/generationtest"
	"github.com/troupe-rl/troupe/generation/ollama"
	"github.com/troupe-rl/troupe/internal/config"
)

const prompt = "<|im_start|>user\nFind the way from A to B.<|im_end|>\n<|im_start|>assistant\n"

func open(t *testing.T, s *standIn, urls ...string) *ollama.Backend {
	t.Helper()
	var gc generation.Config
	config.SetDefaults(&gc)
	gc.Backend, gc.Model, gc.Tokenizer = "ollama", s.Base, s.Dir
	gc.BaseURLs = append([]string{s.URL}, urls...)
	gc.Timeout = 5 * time.Second
	gc.MaxAttempts = 10
	b, err := generation.Open(context.Background(), gc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b.(*ollama.Backend)
}

// TestConformance runs the backend conformance suite against the stand-in.
func TestConformance(t *testing.T) {
	s := startStandIn(t)
	b := open(t, s)
	generationtest.Run(t, b, generationtest.Options{Prompt: prompt, AdapterDir: generationtest.WriteAdapter(t, s.Dir)})
	for _, r := range s.generateRequests() {
		if !r.Raw || r.Model == "" || r.Prompt == "" || !r.Logprobs {
			t.Fatalf("request %+v", r)
		}
	}
}

// TestRetokenized compares each Ollama sample with what the engine
// sampled for the same seed (the builtin backend on the same folder):
// the text is the same; the re-tokenized ids either line up with Ollama's
// tokens, and then ids and logprobs equal the engine's, or the logprobs
// are dropped.
func TestRetokenized(t *testing.T) {
	s := startStandIn(t)
	b := open(t, s)
	var gc generation.Config
	config.SetDefaults(&gc)
	gc.Model = s.Dir
	in, err := inproc.Open(gc, builtin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	ctx := context.Background()
	seed := int64(5)
	const n = 24
	got, err := b.Generate(ctx, &generation.Request{Prompt: prompt, N: n, Temperature: 1, TopP: 1, MaxTokens: 6, Seed: &seed})
	if err != nil {
		t.Fatal(err)
	}
	kept, dropped := 0, 0
	for i, smp := range got.Samples {
		sd := seed + int64(i)
		ref, err := in.Generate(ctx, &generation.Request{Prompt: prompt, N: 1, Temperature: 1, TopP: 1, MaxTokens: 6, Seed: &sd})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 && !reflect.DeepEqual(got.PromptIDs, ref.PromptIDs) {
			t.Errorf("prompt ids %v, engine used %v", got.PromptIDs, ref.PromptIDs)
		}
		want := ref.Samples[0]
		if !smp.Retokenized || smp.Text != want.Text || smp.FinishReason != want.FinishReason {
			t.Fatalf("sample %d: %+v, engine %+v", i, smp, want)
		}
		switch {
		case smp.Logprobs == nil:
			dropped++
		case reflect.DeepEqual(smp.TokenIDs, want.TokenIDs) && reflect.DeepEqual(smp.Logprobs, want.Logprobs):
			kept++
		default:
			t.Errorf("sample %d kept logprobs that are not the engine's:\nollama %v %v\nengine %v %v", i, smp.TokenIDs, smp.Logprobs, want.TokenIDs, want.Logprobs)
		}
	}
	t.Logf("%d of %d samples kept their logprobs (re-tokenization matched the sampled ids), %d dropped them", kept, n, dropped)
	if kept == 0 {
		t.Error("no sample kept its logprobs")
	}
}

func TestAlign(t *testing.T) {
	s := startStandIn(t)
	tok := s.tok
	ids := tok.Encode("hello world")
	lps := func(ids []int32) []api.Logprob {
		var out []api.Logprob
		for i, id := range ids {
			b := tok.TokenBytes(id)
			out = append(out, api.Logprob{TokenLogprob: api.TokenLogprob{Token: string(b), Logprob: -float64(i) - 0.5}})
		}
		return out
	}
	eos := tok.EOSIDs()[0]
	eosText, _ := tok.IDToken(eos)
	withEOS := append(lps(ids), api.Logprob{TokenLogprob: api.TokenLogprob{Token: eosText, Logprob: -0.25}})
	other := lps(ids)
	other[len(other)-1].Token += "x"
	withBytes := lps(ids)
	for i := range withBytes {
		for _, c := range []byte(withBytes[i].Token) {
			withBytes[i].Bytes = append(withBytes[i].Bytes, int(c))
		}
		withBytes[i].Token = "?" // bytes win over text
	}
	cases := []struct {
		name    string
		lps     []api.Logprob
		wantIDs []int32
		keep    bool
	}{
		{"aligned", lps(ids), ids, true},
		{"bytes", withBytes, ids, true},
		{"trailing eos", withEOS, append(append([]int32(nil), ids...), eos), true},
		{"fewer", lps(ids)[1:], ids, false},
		{"more", append(lps(ids), lps(ids)...), ids, false},
		{"other token", other, ids, false},
		{"none", nil, ids, false},
	}
	for _, c := range cases {
		gotIDs, gotLPs := ollama.Align(tok, append([]int32(nil), ids...), c.lps)
		if !reflect.DeepEqual(gotIDs, c.wantIDs) || (gotLPs != nil) != c.keep {
			t.Errorf("%s: ids %v logprobs %v, want ids %v keep %v", c.name, gotIDs, gotLPs, c.wantIDs, c.keep)
		}
		if c.keep && (len(gotLPs) != len(gotIDs) || gotLPs[0] != -0.5) {
			t.Errorf("%s: logprobs %v", c.name, gotLPs)
		}
	}
}

// TestRetries: 500, 429, an empty 503 and a 200 that is not JSON are
// retried (on a dead second endpoint too), and a 400 is not.
func TestRetries(t *testing.T) {
	s := startStandIn(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	b := open(t, s, dead)
	s.fail = func(n int) int { return map[int]int{1: 500, 2: 429, 3: 503, 4: -1}[n] }
	seed := int64(3)
	r, err := b.Generate(context.Background(), &generation.Request{Prompt: prompt, N: 1, Temperature: 1, MaxTokens: 4, Seed: &seed})
	if err != nil {
		t.Fatal(err)
	}
	if r.Attempts < 5 {
		t.Errorf("attempts %d, want ≥ 5 (four injected failures)", r.Attempts)
	}
	generationtest.CheckSample(t, r.Samples[0], 4)

	s.mu.Lock()
	s.n = 0
	s.mu.Unlock()
	s.fail = func(n int) int { return 400 }
	_, err = b.Generate(context.Background(), &generation.Request{Prompt: prompt, N: 1, MaxTokens: 4})
	var he *generation.HTTPError
	if !errors.As(err, &he) || he.Status != 400 || !strings.Contains(he.Body, "injected failure") {
		t.Fatalf("400: %v", err)
	}
	if got := len(s.generateRequests()); got == 0 {
		t.Fatal("no request reached the stand-in")
	}
	s.mu.Lock()
	tries := s.n
	s.mu.Unlock()
	if tries != 1 {
		t.Errorf("a 400 was tried %d times", tries)
	}
}

func digest(t *testing.T, path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// TestAdapterCreate checks the blob uploads and the create request, that
// requests naming the adapter go to the created model, and that a new
// version replaces (and deletes) the old model.
func TestAdapterCreate(t *testing.T) {
	s := startStandIn(t)
	b := open(t, s)
	ctx := context.Background()
	dir := generationtest.WriteAdapter(t, s.Dir)
	if err := b.LoadAdapter(ctx, "Solver/v1", dir); err != nil {
		t.Fatal(err)
	}
	if len(s.creates) != 1 {
		t.Fatalf("%d creates", len(s.creates))
	}
	c := s.creates[0]
	want := map[string]string{
		"adapter_config.json":       digest(t, filepath.Join(dir, "adapter_config.json")),
		"adapter_model.safetensors": digest(t, filepath.Join(dir, "adapter_model.safetensors")),
	}
	if c.From != s.Base || !reflect.DeepEqual(c.Adapters, want) || !strings.HasPrefix(c.Model, "troupe-solver-v1:") {
		t.Errorf("create %+v, want from %s adapters %v", c, s.Base, want)
	}
	for _, d := range want {
		if _, ok := s.blobs[d]; !ok {
			t.Errorf("blob %s not uploaded", d)
		}
	}
	if _, err := b.Generate(ctx, &generation.Request{Model: "Solver/v1", Prompt: prompt, MaxTokens: 2}); err != nil {
		t.Fatal(err)
	}
	reqs := s.generateRequests()
	if got := reqs[len(reqs)-1].Model; got != c.Model {
		t.Errorf("generate went to %q, want the created %q", got, c.Model)
	}

	// A new version: a new model, the old one deleted.
	data, _ := os.ReadFile(filepath.Join(dir, "adapter_config.json"))
	os.WriteFile(filepath.Join(dir, "adapter_config.json"), append(data, ' '), 0o644)
	if err := b.LoadAdapter(ctx, "Solver/v1", dir); err != nil {
		t.Fatal(err)
	}
	if len(s.creates) != 2 || s.creates[1].Model == c.Model || !reflect.DeepEqual(s.deletes, []string{c.Model}) {
		t.Errorf("replace: creates %+v, deletes %v", s.creates, s.deletes)
	}
	if err := b.UnloadAdapter(ctx, "Solver/v1"); err != nil {
		t.Fatal(err)
	}
	if len(s.models) != 0 {
		t.Errorf("models left after unload: %v", s.models)
	}
	if err := b.UnloadAdapter(ctx, "Solver/v1"); err == nil {
		t.Error("unloading twice succeeded")
	}
	if err := b.LoadAdapter(ctx, "x", t.TempDir()); err == nil || !strings.Contains(err.Error(), "adapter_config.json") {
		t.Errorf("empty folder: %v", err)
	}
}

// TestNoLoRA: an Ollama engine without LoRA (Qwen3) fails the create, and
// the error says what Ollama can and cannot do.
func TestNoLoRA(t *testing.T) {
	s := startStandIn(t)
	s.noLoRA = true
	b := open(t, s)
	err := b.LoadAdapter(context.Background(), "solver", generationtest.WriteAdapter(t, s.Dir))
	if !errors.Is(err, ollama.ErrNoLoRA) || !strings.Contains(err.Error(), "loras are not yet implemented") ||
		!strings.Contains(err.Error(), "evaluation") {
		t.Errorf("err = %v", err)
	}
}

func TestConfig(t *testing.T) {
	s := startStandIn(t)
	for name, gc := range map[string]generation.Config{
		"no tokenizer": {Backend: "ollama", Model: "m", BaseURLs: []string{s.URL}},
		"no urls":      {Backend: "ollama", Model: "m", Tokenizer: s.Dir},
		"bad url":      {Backend: "ollama", Model: "m", Tokenizer: s.Dir, BaseURLs: []string{"localhost:11434"}},
		"no model":     {Backend: "ollama", Tokenizer: s.Dir, BaseURLs: []string{s.URL}},
	} {
		if _, err := generation.Open(context.Background(), gc); err == nil || !strings.HasPrefix(err.Error(), "ollama: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
	b := open(t, s)
	if _, err := b.Generate(context.Background(), &generation.Request{PromptIDs: []int32{1, 2}}); err == nil {
		t.Error("a token-id prompt was accepted")
	}
}
