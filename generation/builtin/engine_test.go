package builtin

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/troupe-rl/troupe/generation/builtin/kernels"
	"github.com/troupe-rl/troupe/internal/hf"
)

var archs = []string{"qwen3", "llama", "qwen2"}

// batchTol is how far a sequence's logprobs may move with the batch around
// it: not at all with the Go kernels (bitwise batch invariance); OpenBLAS
// picks sgemm code paths by matrix size, so rounding may differ there.
var batchTol = map[bool]float64{true: 1e-5, false: 0}[kernels.Variant() == "openblas"]

func newTestEngine(t *testing.T, cfg *hf.ModelConfig, w map[string]*hf.Tensor, opts Options) *Engine {
	t.Helper()
	e, err := New(cfg, w, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func seedp(s int64) *int64 { return &s }

func prompt(n int, vocab int, off int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32((i*31 + off*17 + 3) % vocab)
	}
	return p
}

// TestForwardMatchesReference runs the engine's batched forward over a
// prompt (every position's logits) and compares with the float64
// reference.
func TestForwardMatchesReference(t *testing.T) {
	for _, arch := range append(archs, "demo-size") {
		t.Run(arch, func(t *testing.T) {
			cfg := tinyConfig(arch)
			if arch == "demo-size" { // BenchmarkDecode's demo model
				if testing.Short() {
					t.Skip("short")
				}
				cfg = benchModels[0].cfg
			}
			w := randomWeights(cfg, 1)
			m, err := newModel(cfg, w, "test")
			if err != nil {
				t.Fatal(err)
			}
			p := newPool(2)
			defer p.close()
			f := newForwarder(m, p, cfg.MaxPositionEmbeddings)
			toks := prompt(min(40, cfg.MaxPositionEmbeddings), cfg.VocabSize, 0)
			kv := newSeqKV(cfg.NumHiddenLayers, nil)
			kv.reserve(len(toks), m.kvd, len(toks))
			rows := make([]fwdRow, len(toks))
			for i, tk := range toks {
				rows[i] = fwdRow{tok: tk, pos: i, kv: kv, logits: true}
			}
			got := f.forward(rows)
			want := refLogits(cfg, w, toks)
			var maxDiff float64
			for tt := range toks {
				for v := range cfg.VocabSize {
					maxDiff = math.Max(maxDiff, math.Abs(float64(got[tt*cfg.VocabSize+v])-want[tt][v]))
				}
			}
			t.Logf("%s: max |logit - reference| over %d positions × %d vocab = %.3g", arch, len(toks), cfg.VocabSize, maxDiff)
			if maxDiff > 1e-4 {
				t.Fatalf("max abs logit diff %g > 1e-4", maxDiff)
			}
		})
	}
}

// TestDecodeMatchesRecompute checks cached decoding against a full
// recompute: every returned logprob equals log softmax(ref(prompt+tokens)/T).
func TestDecodeMatchesRecompute(t *testing.T) {
	type tc struct {
		arch string
		temp float64
		topP float64
		topK int
		n    int
		max  int // tokens to decode; past 64 the cache regrows (more than once by 150)
	}
	cases := []tc{{"qwen3", 0, 0, 0, 1, 20}, {"qwen3", 0.8, 0.9, 0, 3, 20}, {"llama", 1.3, 0, 5, 2, 20}, {"qwen2", 0.5, 0.7, 20, 2, 20},
		{"qwen3", 0, 0, 0, 1, 150}, {"llama", 0.9, 0, 0, 2, 150}}
	for _, c := range cases {
		t.Run(c.arch, func(t *testing.T) {
			cfg := tinyConfig(c.arch)
			cfg.MaxPositionEmbeddings = max(cfg.MaxPositionEmbeddings, 9+c.max)
			w := randomWeights(cfg, 2)
			e := newTestEngine(t, cfg, w, Options{})
			pr := prompt(9, cfg.VocabSize, 1)
			res, err := e.Generate(context.Background(), &Request{Prompt: pr, N: c.n, MaxTokens: c.max, Temperature: c.temp, TopP: c.topP, TopK: c.topK, Seed: seedp(5)})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Samples) != c.n || res.PromptTokens != len(pr) {
				t.Fatalf("got %d samples, prompt %d", len(res.Samples), res.PromptTokens)
			}
			var maxDiff float64
			for _, s := range res.Samples {
				if len(s.Tokens) != c.max || s.FinishReason != "length" {
					t.Fatalf("sample has %d tokens, reason %q", len(s.Tokens), s.FinishReason)
				}
				full := append(slices.Clone(pr), s.Tokens...)
				ref := refLogits(cfg, w, full)
				for i, tok := range s.Tokens {
					lg := ref[len(pr)-1+i]
					maxDiff = math.Max(maxDiff, math.Abs(refLogprob(lg, tok, c.temp)-float64(s.Logprobs[i])))
					if c.temp == 0 {
						best := int32(0)
						for v := range lg {
							if lg[v] > lg[best] {
								best = int32(v)
							}
						}
						if best != tok && lg[best]-lg[tok] > 1e-4 {
							t.Fatalf("greedy token %d = %d, reference argmax %d", i, tok, best)
						}
					}
				}
			}
			t.Logf("%s T=%v: max |logprob - recomputed| = %.3g", c.arch, c.temp, maxDiff)
			if maxDiff > 1e-4 {
				t.Fatalf("logprob diff %g", maxDiff)
			}
		})
	}
}

// TestSeedIndependentOfBatch: a seeded request gives the same tokens and
// logprobs alone and while other requests share the batch.
func TestSeedIndependentOfBatch(t *testing.T) {
	cfg := tinyConfig("qwen3")
	cfg.MaxPositionEmbeddings = 128
	w := randomWeights(cfg, 3)
	e := newTestEngine(t, cfg, w, Options{MaxBatch: 8})
	req := func() *Request {
		return &Request{Prompt: prompt(7, cfg.VocabSize, 2), N: 2, MaxTokens: 16, Temperature: 1, TopP: 0.95, Seed: seedp(42)}
	}
	alone, err := e.Generate(context.Background(), req())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	started := make(chan struct{}, 8)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.Generate(context.Background(), &Request{Prompt: prompt(5+i, cfg.VocabSize, 10+i), N: 1 + i, MaxTokens: 60, Temperature: 0.9,
				OnToken: func(int, int32, float32) {
					select {
					case started <- struct{}{}:
					default:
					}
				}})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	<-started
	mixed, err := e.Generate(context.Background(), req())
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i := range alone.Samples {
		if !slices.Equal(alone.Samples[i].Tokens, mixed.Samples[i].Tokens) {
			t.Fatalf("sample %d: alone %v, in a batch %v", i, alone.Samples[i].Tokens, mixed.Samples[i].Tokens)
		}
	}
	sameSamples(t, "alone vs in a batch", alone, mixed, batchTol)
	if slices.Equal(alone.Samples[0].Tokens, alone.Samples[1].Tokens) {
		t.Errorf("samples 0 and 1 are identical; streams should differ")
	}
}

func TestStops(t *testing.T) {
	cfg := tinyConfig("qwen3")
	e := newTestEngine(t, cfg, randomWeights(cfg, 4), Options{})
	pr := prompt(6, cfg.VocabSize, 3)
	free, err := e.Generate(context.Background(), &Request{Prompt: pr, MaxTokens: 12})
	if err != nil {
		t.Fatal(err)
	}
	toks := free.Samples[0].Tokens
	stopTok := toks[4]
	first := slices.Index(toks, stopTok)
	res, err := e.Generate(context.Background(), &Request{Prompt: pr, MaxTokens: 12, StopTokens: []int32{stopTok}})
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Samples[0]; !slices.Equal(s.Tokens, toks[:first+1]) || s.FinishReason != "stop" {
		t.Fatalf("stop token: got %v (%s), want %v", s.Tokens, s.FinishReason, toks[:first+1])
	}
	var streamed []int32
	res, err = e.Generate(context.Background(), &Request{Prompt: pr, MaxTokens: 12,
		Stop:    func(_ int, ts []int32) bool { return len(ts) == 3 },
		OnToken: func(_ int, tok int32, _ float32) { streamed = append(streamed, tok) }})
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Samples[0]; !slices.Equal(s.Tokens, toks[:3]) || s.FinishReason != "stop" || !slices.Equal(streamed, toks[:3]) {
		t.Fatalf("Stop func: got %v (%s), streamed %v, want %v", s.Tokens, s.FinishReason, streamed, toks[:3])
	}
}

func TestRequestErrors(t *testing.T) {
	cfg := tinyConfig("qwen3")
	e := newTestEngine(t, cfg, randomWeights(cfg, 5), Options{MaxContext: 32})
	if e.ContextLength() != 32 || e.VocabSize() != cfg.VocabSize {
		t.Fatalf("ContextLength %d VocabSize %d", e.ContextLength(), e.VocabSize())
	}
	for _, tc := range []struct {
		name string
		req  *Request
		want error
	}{
		{"nil", nil, ErrBadRequest},
		{"empty prompt", &Request{MaxTokens: 1}, ErrBadRequest},
		{"no max_tokens", &Request{Prompt: []int32{1}}, ErrBadRequest},
		{"token out of range", &Request{Prompt: []int32{97}, MaxTokens: 1}, ErrBadRequest},
		{"negative temperature", &Request{Prompt: []int32{1}, MaxTokens: 1, Temperature: -1}, ErrBadRequest},
		{"top_p > 1", &Request{Prompt: []int32{1}, MaxTokens: 1, TopP: 1.5}, ErrBadRequest},
		{"context", &Request{Prompt: prompt(30, 97, 0), MaxTokens: 3}, ErrContextLength},
		{"context exactly", &Request{Prompt: prompt(30, 97, 0), MaxTokens: 2}, nil},
		{"unknown adapter", &Request{Prompt: []int32{1}, MaxTokens: 1, Adapter: "nope"}, ErrUnknownAdapter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Generate(context.Background(), tc.req)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

// blockFirst starts a request whose first token blocks the scheduler
// until release is closed.
func blockFirst(t *testing.T, e *Engine, release chan struct{}) (started chan struct{}, done chan error) {
	started, done = make(chan struct{}), make(chan error, 1)
	var once sync.Once
	go func() {
		_, err := e.Generate(context.Background(), &Request{Prompt: []int32{1, 2}, MaxTokens: 3, OnToken: func(int, int32, float32) {
			once.Do(func() { close(started); <-release })
		}})
		done <- err
	}()
	<-started
	return started, done
}

func TestQueueFull(t *testing.T) {
	cfg := tinyConfig("qwen3")
	e := newTestEngine(t, cfg, randomWeights(cfg, 6), Options{MaxBatch: 1, MaxQueue: 1})
	release := make(chan struct{})
	_, done := blockFirst(t, e, release)
	queued := make(chan error, 1)
	go func() {
		_, err := e.Generate(context.Background(), &Request{Prompt: []int32{3}, MaxTokens: 2})
		queued <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for len(e.queue) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	_, err := e.Generate(context.Background(), &Request{Prompt: []int32{4}, MaxTokens: 2})
	if !errors.Is(err, ErrQueueFull) {
		t.Fatalf("err = %v, want ErrQueueFull", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-queued; err != nil {
		t.Fatal(err)
	}
}

func TestCancel(t *testing.T) {
	cfg := tinyConfig("qwen3")
	cfg.MaxPositionEmbeddings = 4096
	e := newTestEngine(t, cfg, randomWeights(cfg, 7), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var n int
	_, err := e.Generate(ctx, &Request{Prompt: []int32{5, 6}, N: 3, MaxTokens: 4000, Temperature: 1,
		OnToken: func(int, int32, float32) {
			n++
			if n == 10 {
				cancel()
			}
		}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	// The engine goes on serving, and the cancelled sequences are gone.
	res, err := e.Generate(context.Background(), &Request{Prompt: []int32{5}, MaxTokens: 2})
	if err != nil || len(res.Samples[0].Tokens) != 2 {
		t.Fatalf("after cancel: %v %v", res, err)
	}
	// A request already cancelled fails at once.
	_, err = e.Generate(ctx, &Request{Prompt: []int32{5}, MaxTokens: 2})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestClose(t *testing.T) {
	cfg := tinyConfig("qwen3")
	e, err := New(cfg, randomWeights(cfg, 8), Options{})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	_, done := blockFirst(t, e, release)
	go func() { time.Sleep(20 * time.Millisecond); close(release) }()
	e.Close()
	if err := <-done; err != nil && !errors.Is(err, ErrClosed) {
		t.Fatalf("in flight: %v", err)
	}
	if _, err := e.Generate(context.Background(), &Request{Prompt: []int32{1}, MaxTokens: 1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
}

func TestOpen(t *testing.T) {
	cfg := tinyConfig("qwen3")
	w := randomWeights(cfg, 9)
	dir := t.TempDir()
	if err := hf.WriteModelConfig(dir, cfg); err != nil {
		t.Fatal(err)
	}
	if err := hf.WriteSafetensors(filepath.Join(dir, "model.safetensors"), w, nil, hf.DtypeF32); err != nil {
		t.Fatal(err)
	}
	e, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	mem := newTestEngine(t, cfg, w, Options{})
	r1, err1 := e.Generate(context.Background(), &Request{Prompt: []int32{1, 2, 3}, MaxTokens: 5})
	r2, err2 := mem.Generate(context.Background(), &Request{Prompt: []int32{1, 2, 3}, MaxTokens: 5})
	if err1 != nil || err2 != nil || !slices.Equal(r1.Samples[0].Tokens, r2.Samples[0].Tokens) {
		t.Fatalf("Open vs New: %v %v %v %v", r1, err1, r2, err2)
	}

	// A folder missing a tensor: the error names it and is BadInput.
	delete(w, hf.QNorm(1))
	bad := t.TempDir()
	hf.WriteModelConfig(bad, cfg)
	hf.WriteSafetensors(filepath.Join(bad, "model.safetensors"), w, nil, hf.DtypeF32)
	_, err = Open(bad, Options{})
	var bi interface{ BadInput() bool }
	if err == nil || !errors.As(err, &bi) || !bi.BadInput() || !contains(err.Error(), hf.QNorm(1)) {
		t.Fatalf("bad folder: %v", err)
	}
	if _, err := Open(t.TempDir(), Options{}); err == nil || !errors.As(err, &bi) || !contains(err.Error(), "config.json") {
		t.Fatalf("empty folder: %v", err)
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub))
}

// TestDecodeStepAllocs: a steady-state decode step allocates nothing
// (scratch, KV storage and token slices are reused or pre-sized).
func TestDecodeStepAllocs(t *testing.T) {
	cfg := tinyConfig("qwen3")
	e := newTestEngine(t, cfg, randomWeights(cfg, 10), Options{})
	j, err := e.newJob(context.Background(), &Request{Prompt: prompt(5, cfg.VocabSize, 0), N: 4, MaxTokens: 50, Temperature: 0.8, TopK: 10, TopP: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	// The scheduler goroutine is idle (nothing queued): drive it by hand.
	st := &schedState{samplers: make([]sampler, e.pool.n)}
	st.sampleFn = st.sampleRange
	e.prefill(j)
	for range j.req.N {
		st.active = append(st.active, e.startSeq(st, j))
	}
	e.step(st) // warm up scratch
	if n := testing.AllocsPerRun(20, func() { e.step(st) }); n != 0 {
		t.Fatalf("decode step allocates %v times", n)
	}
}

// TestMoreSamplesThanBatch: N > MaxBatch samples join as slots free up and
// match a run where they all fit.
func TestMoreSamplesThanBatch(t *testing.T) {
	cfg := tinyConfig("llama")
	w := randomWeights(cfg, 11)
	req := func() *Request {
		return &Request{Prompt: prompt(6, cfg.VocabSize, 5), N: 5, MaxTokens: 7, Temperature: 1.1, TopK: 30, Seed: seedp(3)}
	}
	small := newTestEngine(t, cfg, w, Options{MaxBatch: 2, Threads: 1})
	big := newTestEngine(t, cfg, w, Options{MaxBatch: 8, Threads: 2})
	a, b := gen(t, small, req()), gen(t, big, req())
	if len(a.Samples) != 5 {
		t.Fatalf("%d samples", len(a.Samples))
	}
	sameSamples(t, "MaxBatch 2 vs 8", a, b, batchTol)
}
