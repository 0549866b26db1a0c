package loss

import (
	"math"
	"math/rand/v2"
	"os"
	"testing"

	. "github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/troupe-rl/troupe/internal/config"
	"github.com/troupe-rl/troupe/learner/internal/gomlxtest"
)

func TestMain(m *testing.M) { os.Exit(gomlxtest.Main(m)) }

func defaults() Config {
	var c Config
	c.SetDefaults()
	return c
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
		key  string
	}{
		{"defaults", func(*Config) {}, ""},
		{"kind", func(c *Config) { c.Kind = "dpo" }, "kind"},
		{"clip_low", func(c *Config) { c.ClipLow = 1 }, "clip_low"},
		{"clip_high", func(c *Config) { c.ClipHigh = 0 }, "clip_high"},
		{"dual", func(c *Config) { c.DualClip = 0.5 }, "dual_clip"},
		{"ratio_to", func(c *Config) { c.RatioTo = "x" }, "ratio_to"},
		{"tis", func(c *Config) { c.TISCap = 0.5 }, "tis_cap"},
		{"kl", func(c *Config) { c.KLCoef = -1 }, "kl_coef"},
	}
	for _, tc := range tests {
		c := defaults()
		tc.mod(&c)
		err := c.Validate()
		if tc.key == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		fe, ok := err.(*config.FieldError)
		if !ok || fe.Field != tc.key {
			t.Errorf("%s: got %v, want an error naming %s", tc.name, err, tc.key)
		}
	}
}

// TestGraphMatchesReference runs the graph on random masked inputs in
// float64 and compares every sum and dLoss/dLogp with Reference.
func TestGraphMatchesReference(t *testing.T) {
	backend := gomlxtest.Backend(t)
	const B, S = 6, 9
	cases := []struct {
		name   string
		mod    func(*Config)
		hasOld bool
	}{
		{"ppo defaults", func(*Config) {}, false},
		{"ppo with old, dual clip, kl", func(c *Config) { c.DualClip = 3; c.KLCoef = 0.1 }, true},
		{"ppo asymmetric clip no tis", func(c *Config) { c.ClipHigh = 0.28; c.TISCap = 0 }, true},
		{"ppo ratio to behaviour", func(c *Config) { c.RatioTo = RatioToBehaviour; c.DualClip = 3 }, false},
		{"pg", func(c *Config) { c.Kind = KindPG; c.KLCoef = 0.05 }, false},
		{"pg ratio to behaviour", func(c *Config) { c.Kind = KindPG; c.RatioTo = RatioToBehaviour }, false},
		{"sft", func(c *Config) { c.Kind = KindSFT }, false},
	}
	for ci, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := defaults()
			tc.mod(&c)
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(uint64(ci), 7))
			n := B * S
			logp, beh, old, ref, mask := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
			adv := make([]float64, B)
			for b := range B {
				adv[b] = rng.NormFloat64()
			}
			var toks []Token
			var idx []int
			for i := range n {
				logp[i] = -rng.Float64() * 3
				beh[i] = logp[i] + rng.NormFloat64()*0.5 // wide mismatch: exercise clip and truncation
				old[i] = logp[i] + rng.NormFloat64()*0.3
				ref[i] = logp[i] + rng.NormFloat64()*0.2
				if rng.Float64() < 0.75 {
					mask[i] = 1
					toks = append(toks, Token{Logp: logp[i], Behaviour: beh[i], Adv: adv[i/S], Ref: ref[i], Old: old[i], HasOld: tc.hasOld})
					idx = append(idx, i)
				}
			}
			exec, err := NewExec(backend, func(in []*Node) []*Node {
				li := Inputs{Logp: in[0], Behaviour: in[1], Advantages: in[2], Mask: in[3], Ref: in[4]}
				if tc.hasOld {
					li.Old = in[5]
				}
				s := Build(c, li)
				grad := Gradient(s.Loss, in[0])[0]
				return append(s.List(), grad)
			})
			if err != nil {
				t.Fatal(err)
			}
			tt := func(x []float64) *tensors.Tensor { return tensors.FromFlatDataAndDimensions(x, B, S) }
			out, err := exec.Exec(tt(logp), tt(beh), tensors.FromFlatDataAndDimensions(adv, B), tt(mask), tt(ref), tt(old))
			if err != nil {
				t.Fatal(err)
			}
			vals := make([]float64, NumSums)
			for i := range NumSums {
				vals[i] = out[i].Value().(float64)
			}
			got := SumsFromValues(vals)
			want, wgrad := Reference(c, toks)
			check := func(name string, g, w float64) {
				if math.Abs(g-w) > 1e-10*(1+math.Abs(w)) {
					t.Errorf("%s: graph %v, reference %v", name, g, w)
				}
			}
			check("loss", got.Loss, want.Loss)
			check("tokens", got.Tokens, want.Tokens)
			check("ratio", got.Ratio, want.Ratio)
			check("ratio max", got.RatioMax, want.RatioMax)
			check("clipped", got.Clipped, want.Clipped)
			check("dual clipped", got.DualClipped, want.DualClipped)
			check("mismatch", got.Mismatch, want.Mismatch)
			check("mismatch max", got.MismatchMax, want.MismatchMax)
			check("truncated", got.Truncated, want.Truncated)
			check("kl", got.KL, want.KL)
			g := out[NumSums].Value().([][]float64)
			for k, i := range idx {
				check("grad", g[i/S][i%S], wgrad[k])
			}
			for i := range n {
				if mask[i] == 0 && g[i/S][i%S] != 0 {
					t.Errorf("masked token %d has gradient %v", i, g[i/S][i%S])
				}
			}
			if c.Kind == KindPPO && want.Clipped == 0 && (tc.hasOld || c.RatioTo == RatioToBehaviour) {
				t.Errorf("test inputs never clip; widen them")
			}
			if c.TISCap > 0 && want.Truncated == 0 {
				t.Errorf("test inputs never truncate; widen them")
			}
		})
	}
}

// TestReferenceHandCases pins the reference itself to hand-computed values.
func TestReferenceHandCases(t *testing.T) {
	c := defaults()
	tests := []struct {
		name     string
		c        func(*Config)
		tok      Token
		loss, dl float64
		clipped  float64
	}{
		// On-policy (o = θ), no mismatch: ℓ = −A, dℓ/dθ = −A.
		{"on policy", nil, Token{Logp: -1, Behaviour: -1, Adv: 2}, -2, -2, 0},
		// Mismatch ratio e^1 > C=2: weight 2.
		{"tis truncates", nil, Token{Logp: -1, Behaviour: -2, Adv: 1}, -2, -2, 0},
		// Mismatch ratio e^-1 < 2: weight e^-1.
		{"tis weight", nil, Token{Logp: -2, Behaviour: -1, Adv: 1}, -math.Exp(-1), -math.Exp(-1), 0},
		// Ratio to old e^0.5 > 1.2 with A>0: clipped at 1.2, zero gradient.
		{"clip high", func(c *Config) { c.TISCap = 0 }, Token{Logp: -1, Behaviour: -1, Adv: 1, Old: -1.5, HasOld: true}, -1.2, 0, 1},
		// Ratio e^2 with A<0, dual clip 3: loss capped at 3.
		{"dual clip", func(c *Config) { c.TISCap = 0; c.DualClip = 3 }, Token{Logp: 0, Behaviour: 0, Adv: -1, Old: -2, HasOld: true}, 3, 0, 0},
		// KL k3 with r − θ = 1: e − 2.
		{"kl", func(c *Config) { c.KLCoef = 1 }, Token{Logp: -1, Behaviour: -1, Adv: 0, Ref: 0}, math.E - 2, 1 - math.E, 0},
	}
	for _, tc := range tests {
		cc := c
		if tc.c != nil {
			tc.c(&cc)
		}
		s, g := Reference(cc, []Token{tc.tok})
		if math.Abs(s.Loss-tc.loss) > 1e-12 || math.Abs(g[0]-tc.dl) > 1e-12 || s.Clipped != tc.clipped {
			t.Errorf("%s: loss %v grad %v clipped %v; want %v %v %v", tc.name, s.Loss, g[0], s.Clipped, tc.loss, tc.dl, tc.clipped)
		}
	}
}

func TestSumsMetrics(t *testing.T) {
	var s Sums
	s.Add(Sums{Loss: 2, Tokens: 2, Ratio: 2, RatioMax: 1.5, Clipped: 1})
	s.Add(Sums{Loss: 4, Tokens: 2, Ratio: 2, RatioMax: 1.1, KL: 0.4})
	m := s.Metrics()
	if m.Loss != 1.5 || m.Tokens != 4 || m.RatioMean != 1 || m.RatioMax != 1.5 || m.ClipFrac != 0.25 || m.KL != 0.1 {
		t.Errorf("%+v", m)
	}
}
