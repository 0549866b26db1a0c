// Package generationtest is the conformance suite every generation.Backend
// passes: sample shape (N samples, finish reasons, token ids and logprobs
// of equal length, the token limit), reproducibility under a seed, greedy
// decoding, stop strings cutting the text, cancellation, and the optional
// Tokenizer and AdapterLoader capabilities. Backend tests call Run with a
// backend opened on a tiny model (servertest's, or the same folder).
package generationtest

import (
	"context"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/troupe-rl/troupe/generation"
	"github.com/troupe-rl/troupe/internal/hf"
)

// Options tune Run.
type Options struct {
	// Prompt is a rendered text prompt (required).
	Prompt string
	// MaxTokens per sample (default 8).
	MaxTokens int
	// AdapterDir, when set and the backend is an AdapterLoader, is loaded,
	// generated from and unloaded (WriteAdapter makes one).
	AdapterDir string
}

// Run runs the suite as subtests of t.
func Run(t *testing.T, b generation.Backend, o Options) {
	t.Helper()
	if o.MaxTokens == 0 {
		o.MaxTokens = 8
	}
	ctx := context.Background()
	seed := int64(1234)
	sampled := &generation.Request{Prompt: o.Prompt, N: 3, Temperature: 1, TopP: 1, MaxTokens: o.MaxTokens, Seed: &seed}

	t.Run("shape", func(t *testing.T) {
		r := generate(t, b, sampled)
		if len(r.Samples) != 3 {
			t.Fatalf("N=3 gave %d samples", len(r.Samples))
		}
		if len(r.PromptIDs) == 0 || r.Attempts < 1 || r.Endpoint == "" {
			t.Errorf("prompt ids %d, attempts %d, endpoint %q", len(r.PromptIDs), r.Attempts, r.Endpoint)
		}
		for i, s := range r.Samples {
			CheckSample(t, s, o.MaxTokens)
			if t.Failed() {
				t.Fatalf("sample %d: %+v", i, s)
			}
		}
	})

	t.Run("seeded", func(t *testing.T) {
		a, c := generate(t, b, sampled), generate(t, b, sampled)
		if !reflect.DeepEqual(a.Samples, c.Samples) {
			t.Errorf("the same seed gave different samples:\n%+v\n%+v", a.Samples, c.Samples)
		}
	})

	greedy := &generation.Request{Prompt: o.Prompt, N: 2, Temperature: 0, MaxTokens: 12}
	t.Run("greedy", func(t *testing.T) {
		r := generate(t, b, greedy)
		if len(r.Samples) != 2 || !reflect.DeepEqual(r.Samples[0], r.Samples[1]) {
			t.Errorf("greedy samples differ: %+v", r.Samples)
		}
	})

	t.Run("stop", func(t *testing.T) {
		one := *sampled
		one.N, one.MaxTokens = 1, 12
		full := generate(t, b, &one).Samples[0].Text
		// The first printable ASCII character after the first one.
		stop := ""
		for i, r := range full {
			if i > 0 && r > ' ' && r < utf8.RuneSelf {
				stop = string(r)
				break
			}
		}
		if stop == "" {
			t.Skipf("no stop string to pick in %q", full)
		}
		want := full[:strings.Index(full, stop)]
		one.Stop = []string{stop}
		s := generate(t, b, &one).Samples[0]
		if s.Text != want || s.FinishReason != "stop" {
			t.Errorf("stop %q on %q: got %q (%s), want %q (stop)", stop, full, s.Text, s.FinishReason, want)
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := b.Generate(cctx, sampled); err == nil {
			t.Error("Generate with a cancelled context succeeded")
		}
	})

	if tk, ok := b.(generation.Tokenizer); ok {
		t.Run("tokenizer", func(t *testing.T) {
			const text = "hello world, 42 times"
			ids, err := tk.Tokenize(ctx, text)
			if err != nil || len(ids) == 0 {
				t.Fatalf("Tokenize: %v, %d ids", err, len(ids))
			}
			back, err := tk.Detokenize(ctx, ids)
			if err != nil || back != text {
				t.Errorf("Detokenize(Tokenize(%q)) = %q, %v", text, back, err)
			}
		})
	}

	if al, ok := b.(generation.AdapterLoader); ok && o.AdapterDir != "" {
		t.Run("adapter", func(t *testing.T) {
			const name = "conformance-adapter"
			if err := al.LoadAdapter(ctx, name, o.AdapterDir); err != nil {
				t.Fatalf("LoadAdapter: %v", err)
			}
			req := *sampled
			req.Model, req.N = name, 1
			CheckSample(t, generate(t, b, &req).Samples[0], o.MaxTokens)
			if err := al.LoadAdapter(ctx, name, o.AdapterDir); err != nil {
				t.Errorf("LoadAdapter again under the same name (replace): %v", err)
			}
			if err := al.UnloadAdapter(ctx, name); err != nil {
				t.Errorf("UnloadAdapter: %v", err)
			}
		})
	}
}

// CheckSample checks one sample's invariants. Retokenized samples may
// have nil logprobs and more ids than the limit (re-tokenized text).
func CheckSample(t testing.TB, s generation.Sample, maxTokens int) {
	t.Helper()
	if s.FinishReason != "stop" && s.FinishReason != "length" {
		t.Errorf("finish reason %q, want stop or length", s.FinishReason)
	}
	if !s.Retokenized {
		if len(s.TokenIDs) < 1 || len(s.TokenIDs) > maxTokens {
			t.Errorf("%d token ids, want 1..%d", len(s.TokenIDs), maxTokens)
		}
		if s.FinishReason == "length" && len(s.TokenIDs) != maxTokens {
			t.Errorf("finish length after %d tokens, limit %d", len(s.TokenIDs), maxTokens)
		}
		if s.Logprobs == nil {
			t.Error("no logprobs")
		}
	}
	if s.Logprobs != nil && len(s.Logprobs) != len(s.TokenIDs) {
		t.Errorf("%d logprobs for %d token ids", len(s.Logprobs), len(s.TokenIDs))
	}
	for i, lp := range s.Logprobs {
		if !(lp <= 0) || math.IsInf(float64(lp), 0) {
			t.Errorf("logprob[%d] = %v", i, lp)
		}
	}
}

func generate(t testing.TB, b generation.Backend, req *generation.Request) *generation.Response {
	t.Helper()
	r, err := b.Generate(context.Background(), req)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return r
}

// WriteAdapter writes a small PEFT LoRA adapter (rank 4 on q, v and down,
// non-zero B so it changes the outputs) for the model in modelDir and
// returns its folder.
func WriteAdapter(t testing.TB, modelDir string) string {
	t.Helper()
	c, err := hf.ReadModelConfig(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	mods := []string{hf.ModQ, hf.ModV, hf.ModDown}
	a := &hf.Adapter{Config: hf.NewAdapterConfig(4, 8, mods, filepath.Base(modelDir)), Modules: map[string]hf.LoRAPair{}}
	shapes := hf.LinearShapes(c)
	for l := 0; l < c.NumHiddenLayers; l++ {
		for _, mod := range mods {
			out, in := shapes[mod][0], shapes[mod][1]
			A, B := hf.NewTensor(4, in), hf.NewTensor(out, 4)
			for i := range A.Data {
				A.Data[i] = float32(math.Sin(float64(i))) * 0.5
			}
			for i := range B.Data {
				B.Data[i] = 0.2 * float32(math.Cos(float64(i)))
			}
			a.Modules[hf.ModulePath(l, mod)] = hf.LoRAPair{A: A, B: B}
		}
	}
	dir := filepath.Join(t.TempDir(), "adapter")
	if err := hf.WriteAdapter(dir, a); err != nil {
		t.Fatal(err)
	}
	return dir
}
