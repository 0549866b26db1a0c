package builtin

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/troupe-rl/troupe/internal/hf"
)

func writeAdapter(t *testing.T, a *hf.Adapter) string {
	t.Helper()
	dir := t.TempDir()
	if err := hf.WriteAdapter(dir, a); err != nil {
		t.Fatal(err)
	}
	return dir
}

func gen(t *testing.T, e *Engine, req *Request) *Result {
	t.Helper()
	res, err := e.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func loraReq(adapter string, n int) *Request {
	return &Request{Prompt: prompt(8, 97, 4), N: n, MaxTokens: 12, Temperature: 0.9, Seed: seedp(9), Adapter: adapter}
}

// sameSamples fails unless a and b have the same tokens and logprobs
// within tol (0 = bitwise).
func sameSamples(t *testing.T, what string, a, b *Result, tol float64) float64 {
	t.Helper()
	var maxDiff float64
	for i := range a.Samples {
		if !slices.Equal(a.Samples[i].Tokens, b.Samples[i].Tokens) {
			t.Fatalf("%s: sample %d tokens %v vs %v", what, i, a.Samples[i].Tokens, b.Samples[i].Tokens)
		}
		for k, lp := range a.Samples[i].Logprobs {
			maxDiff = math.Max(maxDiff, math.Abs(float64(lp-b.Samples[i].Logprobs[k])))
		}
	}
	if maxDiff > tol {
		t.Fatalf("%s: logprobs differ by %g > %g", what, maxDiff, tol)
	}
	return maxDiff
}

func TestLoRA(t *testing.T) {
	for _, arch := range archs {
		t.Run(arch, func(t *testing.T) {
			cfg := tinyConfig(arch)
			w := randomWeights(cfg, 20)
			e := newTestEngine(t, cfg, w, Options{})
			ctx := context.Background()
			zero := randomAdapter(cfg, 1, 4, hf.AllModules, true)
			known := randomAdapter(cfg, 2, 4, hf.AllModules, false)
			if err := e.LoadAdapter(ctx, "zero", writeAdapter(t, zero)); err != nil {
				t.Fatal(err)
			}
			if err := e.LoadAdapter(ctx, "known", writeAdapter(t, known)); err != nil {
				t.Fatal(err)
			}
			if got := e.Adapters(); !slices.Equal(got, []string{"known", "zero"}) {
				t.Fatalf("Adapters() = %v", got)
			}
			base := gen(t, e, loraReq("", 2))
			sameSamples(t, "B=0 adapter vs base", base, gen(t, e, loraReq("zero", 2)), 0)

			merged := newTestEngine(t, cfg, mergeLoRA(cfg, w, known), Options{})
			want := gen(t, merged, loraReq("", 2))
			got := gen(t, e, loraReq("known", 2))
			d := sameSamples(t, "on-the-fly LoRA vs merged weights", got, want, 1e-4)
			t.Logf("%s: max |logprob(LoRA on the fly) - logprob(merged W+sBA)| = %.3g", arch, d)
			if slices.Equal(got.Samples[0].Logprobs, base.Samples[0].Logprobs) {
				t.Fatal("the known adapter changed nothing")
			}

			// Base, two adapters, all in one batch: each equals its solo run.
			var wg sync.WaitGroup
			results := make([]*Result, 3)
			for i, name := range []string{"", "known", "zero"} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i] = gen(t, e, loraReq(name, 3))
				}()
			}
			wg.Wait()
			sameSamples(t, "mixed batch base", results[0], gen(t, e, loraReq("", 3)), batchTol)
			sameSamples(t, "mixed batch known", results[1], gen(t, e, loraReq("known", 3)), batchTol)
			sameSamples(t, "mixed batch zero", results[2], gen(t, e, loraReq("", 3)), batchTol)

			if err := e.UnloadAdapter(ctx, "known"); err != nil {
				t.Fatal(err)
			}
			if err := e.UnloadAdapter(ctx, "known"); !errors.Is(err, ErrUnknownAdapter) {
				t.Fatalf("second unload: %v", err)
			}
			if _, err := e.Generate(ctx, loraReq("known", 1)); !errors.Is(err, ErrUnknownAdapter) {
				t.Fatalf("after unload: %v", err)
			}
		})
	}
}

// TestAdapterReplaceInFlight replaces and unloads adapters while a request
// that uses them decodes: it finishes with the version it started with.
func TestAdapterReplaceInFlight(t *testing.T) {
	cfg := tinyConfig("qwen3")
	w := randomWeights(cfg, 21)
	ctx := context.Background()
	v1 := randomAdapter(cfg, 3, 2, []string{hf.ModQ, hf.ModV, hf.ModDown}, false)
	v2 := randomAdapter(cfg, 4, 8, []string{hf.ModK, hf.ModUp}, false)
	d1, d2 := writeAdapter(t, v1), writeAdapter(t, v2)

	e1 := newTestEngine(t, cfg, mergeLoRA(cfg, w, v1), Options{})
	wantV1 := gen(t, e1, loraReq("", 2))
	e2 := newTestEngine(t, cfg, mergeLoRA(cfg, w, v2), Options{})
	wantV2 := gen(t, e2, loraReq("", 2))

	e := newTestEngine(t, cfg, w, Options{})
	if err := e.LoadAdapter(ctx, "a", d1); err != nil {
		t.Fatal(err)
	}
	if err := e.LoadAdapter(ctx, "b", d1); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	reqA := loraReq("a", 2)
	reqA.OnToken = func(_ int, _ int32, _ float32) {
		once.Do(func() {
			if err := e.LoadAdapter(ctx, "a", d2); err != nil {
				t.Error(err)
			}
			if err := e.UnloadAdapter(ctx, "b"); err != nil {
				t.Error(err)
			}
		})
	}
	var wg sync.WaitGroup
	var gotB *Result
	wg.Add(1)
	go func() {
		defer wg.Done()
		gotB, _ = e.Generate(ctx, loraReq("b", 2))
	}()
	gotA := gen(t, e, reqA)
	wg.Wait()
	sameSamples(t, "replaced in flight", gotA, wantV1, 1e-4)
	if gotB != nil { // b may have been unloaded before it was queued
		sameSamples(t, "unloaded in flight", gotB, wantV1, 1e-4)
	}
	sameSamples(t, "after replace", gen(t, e, loraReq("a", 2)), wantV2, 1e-4)
}
