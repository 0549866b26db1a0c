package model

import (
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"

	"github.com/troupe-rl/troupe/internal/hf"
	"github.com/troupe-rl/troupe/learner/internal/gomlxtest"
	"github.com/troupe-rl/troupe/learner/loss"
)

func TestMain(m *testing.M) { os.Exit(gomlxtest.Main(m)) }

func testBackend(t testing.TB) compute.Backend { return gomlxtest.Backend(t) }

// testConfigs covers Qwen3 (q/k norm, tied, GQA) and a Qwen2-style model
// with attention biases, untied head and llama3 rope scaling.
func testConfigs() map[string]*hf.ModelConfig {
	q3 := TinyConfig(2, 32, 4, 2, 48, 50)
	q2 := TinyConfig(2, 24, 3, 1, 40, 37)
	q2.ModelType, q2.Architectures = "qwen2", []string{"Qwen2ForCausalLM"}
	q2.AttentionBias, q2.TieWordEmbeddings = true, false
	q2.RopeTheta = 10000
	q2.RopeScaling = &hf.RopeScaling{RopeType: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8}
	return map[string]*hf.ModelConfig{"qwen3": q3, "qwen2-bias-llama3rope": q2}
}

func randomSeqs(rng *rand.Rand, c *hf.ModelConfig, n int) []Sequence {
	var out []Sequence
	for i := range n {
		s := Sequence{Temperature: []float64{1, 0.7, 1.3}[i%3], Advantage: rng.NormFloat64()}
		for range 1 + rng.IntN(6) {
			s.Prompt = append(s.Prompt, int32(rng.IntN(c.VocabSize)))
		}
		for range 1 + rng.IntN(6) {
			s.Completion = append(s.Completion, int32(rng.IntN(c.VocabSize)))
			s.Logprobs = append(s.Logprobs, float32(-rng.Float64()*4))
		}
		out = append(out, s)
	}
	return out
}

// randomLoRA returns an adapter with non-zero B so that LoRA matters.
func randomLoRA(t testing.TB, c *hf.ModelConfig, targets []string, seed uint64) *LoRA {
	l, err := NewLoRA(c, LoRAConfig{Rank: 3, Alpha: 6, Targets: targets}, seed)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	for i := 1; i < len(l.Data); i += 2 {
		for j := range l.Data[i] {
			l.Data[i][j] = float32(0.1 * rng.NormFloat64())
		}
	}
	return l
}

func pgLoss() loss.Config {
	var c loss.Config
	c.SetDefaults()
	c.Kind, c.RatioTo, c.TISCap = loss.KindPG, loss.RatioToBehaviour, 0
	return c
}

func TestLogprobsMatchReference(t *testing.T) {
	backend := testBackend(t)
	for name, c := range testConfigs() {
		for _, dt := range []dtypes.DType{dtypes.Float64, dtypes.Float32} {
			t.Run(name+"/"+dt.String(), func(t *testing.T) {
				w := RandomWeights(c, 1, 0.2)
				m, err := New(c, w, dt)
				if err != nil {
					t.Fatal(err)
				}
				lora := randomLoRA(t, c, nil, 2)
				p, err := m.NewProgram(backend, lora, pgLoss())
				if err != nil {
					t.Fatal(err)
				}
				defer p.Finalize()
				rng := rand.New(rand.NewPCG(3, 3))
				seqs := randomSeqs(rng, c, 5)
				b, err := Pack(seqs, 8, 16)
				if err != nil {
					t.Fatal(err)
				}
				for _, disable := range []bool{false, true} {
					got, err := p.Logprobs(lora, b, disable)
					if err != nil {
						t.Fatal(err)
					}
					ref := &refModel{c: c, w: w, lora: lora}
					if disable {
						ref.lora = nil
					}
					tol := 1e-10
					if dt == dtypes.Float32 {
						tol = 1e-4
					}
					maxDiff := 0.0
					comp := CompletionLogprobs(seqs, b.S, got)
					for r, s := range seqs {
						want, _ := ref.forward(append(append([]int32{}, s.Prompt...), s.Completion...), s.Temperature)
						for j := range s.Completion {
							d := math.Abs(comp[r][j] - want[len(s.Prompt)+j-1])
							maxDiff = math.Max(maxDiff, d)
						}
					}
					if maxDiff > tol {
						t.Errorf("disable=%v: max |graph − reference| = %g > %g", disable, maxDiff, tol)
					}
					t.Logf("disable=%v: max |graph − reference| = %.3g", disable, maxDiff)
				}
			})
		}
	}
}

func TestFreshAdapterIsBase(t *testing.T) {
	backend := testBackend(t)
	c := testConfigs()["qwen3"]
	m, err := New(c, RandomWeights(c, 1, 0.2), dtypes.Float32)
	if err != nil {
		t.Fatal(err)
	}
	lora, err := NewLoRA(c, LoRAConfig{Rank: 4, Alpha: 8}, 1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.NewProgram(backend, lora, pgLoss())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Pack(randomSeqs(rand.New(rand.NewPCG(1, 1)), c, 3), 4, 16)
	on, _ := p.Logprobs(lora, b, false)
	off, _ := p.Logprobs(lora, b, true)
	for i := range on {
		if on[i] != off[i] {
			t.Fatalf("position %d: fresh adapter %v, base %v", i, on[i], off[i])
		}
	}
}

// TestPaddingInvariance: a row's logprobs do not depend on its neighbours
// or on how much padding follows it.
func TestPaddingInvariance(t *testing.T) {
	backend := testBackend(t)
	c := testConfigs()["qwen3"]
	m, _ := New(c, RandomWeights(c, 1, 0.2), dtypes.Float32)
	lora := randomLoRA(t, c, nil, 5)
	p, _ := m.NewProgram(backend, lora, pgLoss())
	seqs := randomSeqs(rand.New(rand.NewPCG(4, 4)), c, 4)
	alone, _ := Pack(seqs[:1], 1, seqs[0].Len())
	batch, _ := Pack(seqs, 4, 32)
	a, _ := p.Logprobs(lora, alone, false)
	bb, _ := p.Logprobs(lora, batch, false)
	ca := CompletionLogprobs(seqs[:1], alone.S, a)[0]
	sc, err := p.Score(lora, seqs[:1], false)
	if err != nil || len(sc[0]) != len(ca) || sc[0][0] != ca[0] {
		t.Errorf("Score: %v %v vs %v", err, sc, ca)
	}
	cb := CompletionLogprobs(seqs, batch.S, bb)[0]
	for j := range ca {
		if d := math.Abs(ca[j] - cb[j]); d > 1e-5 {
			t.Errorf("token %d: alone %v, batched %v", j, ca[j], cb[j])
		}
	}
}

// TestLoRAGradFiniteDiff checks dLoss/dθ for LoRA parameters against
// central finite differences in float64, through the real training graph
// (PG loss to the behaviour policy plus the k3 KL to the base model, which
// are smooth in θ).
func TestLoRAGradFiniteDiff(t *testing.T) {
	backend := testBackend(t)
	for name, c := range testConfigs() {
		t.Run(name, func(t *testing.T) {
			m, err := New(c, RandomWeights(c, 7, 0.2), dtypes.Float64)
			if err != nil {
				t.Fatal(err)
			}
			lora := randomLoRA(t, c, nil, 8)
			lc := pgLoss()
			lc.KLCoef = 0.3
			p, err := m.NewProgram(backend, lora, lc)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Finalize()
			seqs := randomSeqs(rand.New(rand.NewPCG(9, 9)), c, 3)
			b, _ := Pack(seqs, 4, 16)
			invN := 1 / float64(b.NumTokens)
			lossAt := func(l *LoRA) (float64, [][]float64) {
				acc := make([][]float64, len(l.Data))
				for i := range acc {
					acc[i] = make([]float64, len(l.Data[i]))
				}
				res, err := p.Step(l, b, invN, acc)
				if err != nil {
					t.Fatal(err)
				}
				return res.Loss, acc
			}
			_, grad := lossAt(lora)
			rng := rand.New(rand.NewPCG(10, 10))
			maxRel := 0.0
			checked := 0
			for range gomlxtest.Scale(40, 8) {
				pi := rng.IntN(len(lora.Data))
				ei := rng.IntN(len(lora.Data[pi]))
				x := lora.Data[pi][ei]
				const h = 1e-5
				plus, minus := lora.Clone(), lora.Clone()
				plus.Data[pi][ei] = x + h
				minus.Data[pi][ei] = x - h
				lp, _ := lossAt(plus)
				lm, _ := lossAt(minus)
				fd := (lp - lm) / (float64(plus.Data[pi][ei]) - float64(minus.Data[pi][ei]))
				g := grad[pi][ei]
				den := math.Max(math.Max(math.Abs(fd), math.Abs(g)), 1e-6)
				rel := math.Abs(fd-g) / den
				if rel > maxRel {
					maxRel = rel
				}
				if rel > 1e-6 {
					t.Errorf("param %d (%s %s) elem %d: autodiff %.10g, finite difference %.10g (rel %.3g)",
						pi, lora.Modules[pi/2], "AB"[pi%2:pi%2+1], ei, g, fd, rel)
				}
				checked++
			}
			t.Logf("%d LoRA coordinates: max relative error %.3g", checked, maxRel)
		})
	}
}
