// Package loss is the policy loss of the learner: a token-mean PPO clipped
// surrogate (or plain policy gradient) with truncated importance sampling
// against the train/inference mismatch and an optional KL penalty to the
// base model, as GoMLX graph functions over masked [batch, seq] tensors
// ([Build]), with a plain-Go reference of the same formulas ([Reference])
// that the tests hold the graph to.
//
// Per completion token, with θ the learner's log-probability of the token
// now (differentiable), b the behaviour log-probability the inference
// engine reported when it sampled the token, o the "old" log-probability
// the PPO ratio is taken against, A the sequence's advantage and m the
// token mask:
//
//	o       = stop_gradient(θ)      ratio_to: learner (default: one optimiser
//	                                step per rollout batch, so π_old is the
//	                                policy at the start of the step)
//	        = b                     ratio_to: behaviour (PPO ratio directly to
//	                                the rollout policy; no separate TIS)
//	ρ       = exp(θ − o)                                    PPO ratio
//	w       = min(exp(o − b), C)    (detached; 1 when C = 0 or ratio_to: behaviour)
//	ppo:  ℓ = w · max(−A·ρ, −A·clip(ρ, 1−ε_low, 1+ε_high))
//	      and, with dual clip c > 1 and A < 0, ℓ = min(ℓ, −A·c·w)
//	pg:   ℓ = w · (−A·ρ)                                    (REINFORCE with TIS)
//	sft:  ℓ = −A·θ                                          cross-entropy (supervised
//	                                                        fine-tuning), A the example's
//	                                                        weight (1: token mean); b, w unused
//	kl:   ℓ += β · (exp(r − θ) − (r − θ) − 1)               k3, r = base-model logprob
//	loss  = Σ m·ℓ / N                                       token mean
//
// N is the number of completion tokens in the whole batch (across
// micro-batches), so gradients of micro-batches add up to the gradient of
// the batch. This is verl's Token-TIS recipe ("Your Efficient RL Framework
// Secretly Brings You Off-Policy RL Training"): the PPO ratio is taken to
// the learner's own old policy, and the mismatch between the learner and
// the inference engine is corrected by a truncated importance weight.
//
// Metrics (all over masked tokens): the PPO ratio's mean and max, the
// fraction of tokens where the clip (or the dual clip) was active, the
// train/inference ratio exp(θ − b) mean and max and the fraction above C,
// and the mean k3 KL to the base model.
package loss

import (
	"fmt"
	"math"

	"github.com/troupe-rl/troupe/internal/config"
)

// Kinds of policy loss.
const (
	KindPPO = "ppo" // clipped surrogate
	KindPG  = "pg"  // plain policy gradient
	KindSFT = "sft" // cross-entropy on the completion tokens (supervised warm start)
)

// What the PPO ratio is taken against.
const (
	RatioToLearner   = "learner"
	RatioToBehaviour = "behaviour"
)

// Config is the "learner.loss" config section.
type Config struct {
	// Kind is ppo (clipped surrogate), pg (plain policy gradient) or sft
	// (cross-entropy, for supervised fine-tuning). Default ppo.
	Kind string `yaml:"kind"`
	// ClipLow and ClipHigh are ε_low and ε_high of the clip range
	// [1−ε_low, 1+ε_high]. Default 0.2 each.
	ClipLow  float64 `yaml:"clip_low"`
	ClipHigh float64 `yaml:"clip_high"`
	// DualClip is c of dual-clip PPO (caps the loss of negative-advantage
	// tokens at −A·c); 0 is off (the default), else > 1, typically 3.
	DualClip float64 `yaml:"dual_clip"`
	// RatioTo is learner (ratio to the learner's old policy, with TIS
	// against the behaviour policy) or behaviour (ratio directly to the
	// rollout logprobs). Default learner.
	RatioTo string `yaml:"ratio_to"`
	// TISCap is C, the truncation of the train/inference importance weight;
	// 0 turns TIS off. Default 2.
	TISCap float64 `yaml:"tis_cap"`
	// KLCoef is β of the k3 KL penalty to the base model (adapter
	// disabled); 0 (the default) skips the extra forward pass.
	KLCoef float64 `yaml:"kl_coef"`
}

// SetDefaults fills the documented defaults.
func (c *Config) SetDefaults() {
	*c = Config{Kind: KindPPO, ClipLow: 0.2, ClipHigh: 0.2, RatioTo: RatioToLearner, TISCap: 2}
}

// Validate checks the section.
func (c *Config) Validate() error {
	switch {
	case c.Kind != KindPPO && c.Kind != KindPG && c.Kind != KindSFT:
		return config.Errorf("kind", "must be ppo, pg or sft, got %q", c.Kind)
	case !(c.ClipLow > 0 && c.ClipLow < 1):
		return config.Errorf("clip_low", "must be in (0, 1), got %v", c.ClipLow)
	case !(c.ClipHigh > 0) || math.IsInf(c.ClipHigh, 0):
		return config.Errorf("clip_high", "must be > 0, got %v", c.ClipHigh)
	case c.DualClip != 0 && !(c.DualClip > 1):
		return config.Errorf("dual_clip", "must be 0 (off) or > 1, got %v", c.DualClip)
	case c.RatioTo != RatioToLearner && c.RatioTo != RatioToBehaviour:
		return config.Errorf("ratio_to", "must be learner or behaviour, got %q", c.RatioTo)
	case c.TISCap != 0 && !(c.TISCap >= 1):
		return config.Errorf("tis_cap", "must be 0 (off) or ≥ 1, got %v", c.TISCap)
	case !(c.KLCoef >= 0) || math.IsInf(c.KLCoef, 0):
		return config.Errorf("kl_coef", "must be ≥ 0, got %v", c.KLCoef)
	}
	return nil
}

// String summarises the config for logs.
func (c Config) String() string {
	return fmt.Sprintf("%s clip=[%g,%g] dual=%g ratio_to=%s tis=%g kl=%g",
		c.Kind, c.ClipLow, c.ClipHigh, c.DualClip, c.RatioTo, c.TISCap, c.KLCoef)
}

// tisActive reports whether the truncated importance weight applies.
func (c *Config) tisActive() bool {
	return c.TISCap > 0 && c.RatioTo == RatioToLearner && c.Kind != KindSFT
}

// Metrics are the loss's per-batch metrics (token means unless named).
type Metrics struct {
	Loss         float64 `json:"loss"`
	Tokens       int     `json:"tokens"`
	RatioMean    float64 `json:"ratio_mean"`
	RatioMax     float64 `json:"ratio_max"`
	ClipFrac     float64 `json:"clip_frac"`
	DualClipFrac float64 `json:"dual_clip_frac"`
	// MismatchMean/Max are exp(θ − b), the learner/inference ratio; TISFrac
	// the fraction of tokens above the cap C.
	MismatchMean float64 `json:"mismatch_ratio_mean"`
	MismatchMax  float64 `json:"mismatch_ratio_max"`
	TISFrac      float64 `json:"tis_frac"`
	KL           float64 `json:"kl"`
}

// Sums are the additive statistics of one micro-batch; Add merges them and
// Metrics turns them into means.
type Sums struct {
	Loss, Tokens, Ratio, RatioMax, Clipped, DualClipped, Mismatch, MismatchMax, Truncated, KL float64
}

// Add merges o into s.
func (s *Sums) Add(o Sums) {
	s.Loss += o.Loss
	s.Tokens += o.Tokens
	s.Ratio += o.Ratio
	s.RatioMax = math.Max(s.RatioMax, o.RatioMax)
	s.Clipped += o.Clipped
	s.DualClipped += o.DualClipped
	s.Mismatch += o.Mismatch
	s.MismatchMax = math.Max(s.MismatchMax, o.MismatchMax)
	s.Truncated += o.Truncated
	s.KL += o.KL
}

// Metrics divides the sums by the token count. Loss is Σℓ/N.
func (s Sums) Metrics() Metrics {
	n := s.Tokens
	if n == 0 {
		return Metrics{}
	}
	return Metrics{
		Loss: s.Loss / n, Tokens: int(n), RatioMean: s.Ratio / n, RatioMax: s.RatioMax,
		ClipFrac: s.Clipped / n, DualClipFrac: s.DualClipped / n,
		MismatchMean: s.Mismatch / n, MismatchMax: s.MismatchMax, TISFrac: s.Truncated / n, KL: s.KL / n,
	}
}

// Token is one completion token for [Reference].
type Token struct {
	Logp, Behaviour, Adv float64
	Ref                  float64 // base-model logprob, used when KLCoef > 0
	Old                  float64 // used when HasOld
	HasOld               bool
}

// Reference computes, in plain Go and float64, the sums of the package
// doc's formulas over tokens (all unmasked) and dLossSum/dLogp per token,
// where LossSum = Σℓ (not divided by N).
func Reference(c Config, tokens []Token) (Sums, []float64) {
	var s Sums
	grad := make([]float64, len(tokens))
	for i, t := range tokens {
		o := t.Logp // stop_gradient(θ)
		switch {
		case t.HasOld:
			o = t.Old
		case c.RatioTo == RatioToBehaviour:
			o = t.Behaviour
		}
		rho := math.Exp(t.Logp - o)
		drho := rho // dρ/dθ: o is data or stop_gradient(θ)
		w := 1.0
		mis := math.Exp(t.Logp - t.Behaviour)
		if c.tisActive() {
			w = math.Min(math.Exp(o-t.Behaviour), c.TISCap)
		}
		if c.TISCap > 0 && mis > c.TISCap {
			s.Truncated++
		}
		var l, dl float64
		switch c.Kind {
		case KindPG:
			l, dl = -t.Adv*rho, -t.Adv*drho
		case KindSFT:
			l, dl = -t.Adv*t.Logp, -t.Adv
		default:
			lo, hi := 1-c.ClipLow, 1+c.ClipHigh
			cr, dcr := rho, drho
			if rho < lo {
				cr, dcr = lo, 0
			} else if rho > hi {
				cr, dcr = hi, 0
			}
			pg1, pg2 := -t.Adv*rho, -t.Adv*cr
			l, dl = pg1, -t.Adv*drho
			if pg2 > pg1 {
				l, dl = pg2, -t.Adv*dcr
				s.Clipped++
			}
			if c.DualClip > 0 && t.Adv < 0 {
				if cap := -t.Adv * c.DualClip; l > cap {
					l, dl = cap, 0
					s.DualClipped++
				}
			}
		}
		l, dl = w*l, w*dl
		if c.KLCoef > 0 {
			d := t.Ref - t.Logp
			k3 := math.Exp(d) - d - 1
			l += c.KLCoef * k3
			dl += c.KLCoef * (1 - math.Exp(d))
			s.KL += k3
		}
		s.Loss += l
		grad[i] = dl
		s.Tokens++
		s.Ratio += rho
		s.RatioMax = math.Max(s.RatioMax, rho)
		s.Mismatch += mis
		s.MismatchMax = math.Max(s.MismatchMax, mis)
	}
	return s, grad
}
