package builtin

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/troupe-rl/troupe/internal/hf"
)

// Benchmark models. scripts/bench.d/30-engine-torch.sh runs the same
// shapes, prompt and generation lengths in PyTorch.
//
//   - demo: a plausible tiny model (4 layers, d=256, 4 heads / 2 kv heads,
//     head_dim 64, ff 768, vocab 1024, tied embeddings; ≈3.4M params).
//   - qwen3-0.6b: Qwen3-0.6B's shape (28 layers, d=1024, 16 heads / 8 kv,
//     head_dim 128, ff 3072, vocab 151936, tied; ≈0.6B params, 2.4 GB in
//     f32), random weights. Runs only with TROUPE_BENCH_LARGE=1.
var benchModels = []struct {
	name        string
	cfg         *hf.ModelConfig
	prompt, gen int
	large       bool
}{
	{"demo", &hf.ModelConfig{ModelType: "qwen3", VocabSize: 1024, HiddenSize: 256, IntermediateSize: 768,
		NumHiddenLayers: 4, NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 64, MaxPositionEmbeddings: 2048,
		RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true}, 32, 64, false},
	{"qwen3-0.6b", &hf.ModelConfig{ModelType: "qwen3", VocabSize: 151936, HiddenSize: 1024, IntermediateSize: 3072,
		NumHiddenLayers: 28, NumAttentionHeads: 16, NumKeyValueHeads: 8, HeadDim: 128, MaxPositionEmbeddings: 40960,
		RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true}, 32, 16, true},
}

// fastRandomWeights fills every tensor with uniform noise of the right
// scale, in parallel (NormFloat64 over 0.6B values would dominate the
// benchmark's set-up).
func fastRandomWeights(cfg *hf.ModelConfig) map[string]*hf.Tensor {
	w := map[string]*hf.Tensor{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	seed := uint64(1)
	for name, shape := range hf.ModelShapes(cfg) {
		t := hf.NewTensor(shape...)
		w[name] = t
		seed++
		wg.Add(1)
		sem <- struct{}{}
		go func(s uint64) {
			defer wg.Done()
			defer func() { <-sem }()
			scale, off := float32(0), float32(1)
			if len(shape) == 2 {
				scale, off = float32(math.Sqrt(3/float64(shape[1]))), 0
			}
			x := s*0x9E3779B97F4A7C15 | 1
			for i := range t.Data {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				u := float32(x>>40)/float32(1<<24)*2 - 1
				t.Data[i] = off + scale*u
			}
		}(seed)
	}
	wg.Wait()
	return w
}

func memAvailable() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return math.MaxInt64
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kb int64
		if n, _ := fmt.Sscanf(sc.Text(), "MemAvailable: %d kB", &kb); n == 1 {
			return kb << 10
		}
	}
	return math.MaxInt64
}

// BenchmarkDecode: one op is one request with N=batch samples sharing a
// prompt (so exactly `batch` sequences decode in lock-step): prefill of the
// prompt, then gen tokens per sample (T=1, seeded, no stop). Metrics:
// tokens/s = batch·(gen−1) / decode time (after every sample has its first
// token), ttft_ms = submit → first token (the prefill plus one sampling).
func BenchmarkDecode(b *testing.B) {
	for _, bm := range benchModels {
		b.Run(bm.name, func(b *testing.B) {
			if bm.large && os.Getenv("TROUPE_BENCH_LARGE") != "1" {
				b.Skip("set TROUPE_BENCH_LARGE=1 to run the 0.6B-parameter model")
			}
			params := int64(bm.cfg.VocabSize) * int64(bm.cfg.HiddenSize) * 2
			if bm.large && memAvailable() < 3*params*4 {
				b.Skipf("needs ~%d GiB free memory", 3*params*4>>30)
			}
			e, err := New(bm.cfg, fastRandomWeights(bm.cfg), Options{MaxBatch: 32})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			runtime.GC()
			pr := prompt(bm.prompt, bm.cfg.VocabSize, 0)
			for _, batch := range []int{1, 32} {
				b.Run(fmt.Sprintf("batch%d", batch), func(b *testing.B) {
					var ttft, decode time.Duration
					var toks int
					for i := 0; b.Loop(); i++ {
						var mu sync.Mutex
						firsts := 0
						var tFirst time.Time
						start := time.Now()
						_, err := e.Generate(context.Background(), &Request{Prompt: pr, N: batch, MaxTokens: bm.gen,
							Temperature: 1, Seed: seedp(int64(i)),
							OnToken: func(_ int, _ int32, _ float32) {
								mu.Lock()
								defer mu.Unlock()
								if firsts < batch {
									firsts++
									if firsts == 1 {
										ttft += time.Since(start)
									}
									if firsts == batch {
										tFirst = time.Now()
									}
								}
							}})
						if err != nil {
							b.Fatal(err)
						}
						decode += time.Since(tFirst)
						toks += batch * (bm.gen - 1)
					}
					b.ReportMetric(float64(toks)/decode.Seconds(), "tokens/s")
					b.ReportMetric(ttft.Seconds()*1e3/float64(b.N), "ttft_ms")
					b.ReportMetric(0, "ns/op")
				})
			}
		})
	}
}
