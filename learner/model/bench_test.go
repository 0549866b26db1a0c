package model

import (
	"math/rand/v2"
	"os"
	"testing"

	"github.com/gomlx/compute/dtypes"

	"github.com/troupe-rl/troupe/internal/hf"
	"github.com/troupe-rl/troupe/learner/loss"
)

// benchShapes are BenchmarkLoRAStep's model sizes; scripts/bench.d/
// 40-learner-torch.sh runs the same shapes in PyTorch.
var benchShapes = []struct {
	name     string
	cfg      func() *hf.ModelConfig
	batch, S int
	large    bool
}{
	{"demo", func() *hf.ModelConfig { return TinyConfig(4, 256, 4, 2, 768, 1024) }, 8, 256, false},
	{"qwen3-0.6b", func() *hf.ModelConfig {
		c := TinyConfig(28, 1024, 16, 8, 3072, 151936)
		c.HeadDim = 128
		return c
	}, 1, 256, true},
}

// BenchmarkLoRAStep is one forward+backward of the PPO loss over a batch
// (prompt 32 + completion S−32 tokens per row) with LoRA r=16 on all seven
// modules, in float32 on the pure-Go backend; tokens/s counts every
// position of the batch. The 0.6B Qwen3-shaped case needs
// TROUPE_BENCH_LARGE=1.
func BenchmarkLoRAStep(b *testing.B) {
	for _, bs := range benchShapes {
		b.Run(bs.name, func(b *testing.B) {
			if bs.large && os.Getenv("TROUPE_BENCH_LARGE") != "1" {
				b.Skip("set TROUPE_BENCH_LARGE=1")
			}
			c := bs.cfg()
			m, err := New(c, RandomWeights(c, 1, 0.02), dtypes.Float32)
			if err != nil {
				b.Fatal(err)
			}
			lora, err := NewLoRA(c, LoRAConfig{Rank: 16, Alpha: 32}, 1)
			if err != nil {
				b.Fatal(err)
			}
			var lc loss.Config
			lc.SetDefaults()
			p, err := m.NewProgram(testBackend(b), lora, lc)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Finalize()
			rng := rand.New(rand.NewPCG(1, 1))
			seqs := make([]Sequence, bs.batch)
			for i := range seqs {
				s := &seqs[i]
				for range 32 {
					s.Prompt = append(s.Prompt, int32(rng.IntN(c.VocabSize)))
				}
				for range bs.S - 32 {
					s.Completion = append(s.Completion, int32(rng.IntN(c.VocabSize)))
					s.Logprobs = append(s.Logprobs, -7)
				}
				s.Advantage = rng.NormFloat64()
			}
			batch, err := Pack(seqs, bs.batch, bs.S)
			if err != nil {
				b.Fatal(err)
			}
			acc := make([][]float64, len(lora.Data))
			for i := range acc {
				acc[i] = make([]float64, len(lora.Data[i]))
			}
			invN := 1 / float64(batch.NumTokens)
			if _, err := p.Step(lora, batch, invN, acc); err != nil { // compile outside the timing
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := p.Step(lora, batch, invN, acc); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*bs.batch*bs.S)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
