package learner

import (
	"math"
)

// AdamW is decoupled-weight-decay Adam (as torch.optim.AdamW) over a
// LoRA's parameter slices, on the host, with float32 state so that
// checkpoints restore it bit for bit.
//
// One step: p ← p·(1 − lr·wd); m ← β1·m + (1−β1)·g; v ← β2·v + (1−β2)·g²;
// p ← p − lr·(m/(1−β1ᵗ)) / (√(v/(1−β2ᵗ)) + eps).
type AdamW struct {
	Beta1, Beta2, Eps, WeightDecay float64
	T                              int         // steps taken
	M, V                           [][]float32 // shaped like the parameters
}

// NewAdamW returns an optimiser with zero state for params.
func NewAdamW(params [][]float32, beta1, beta2, eps, wd float64) *AdamW {
	o := &AdamW{Beta1: beta1, Beta2: beta2, Eps: eps, WeightDecay: wd}
	for _, p := range params {
		o.M = append(o.M, make([]float32, len(p)))
		o.V = append(o.V, make([]float32, len(p)))
	}
	return o
}

// Step updates params in place with gradients grads (already clipped) at
// learning rate lr.
func (o *AdamW) Step(params [][]float32, grads [][]float64, lr float64) {
	o.T++
	bc1 := 1 - math.Pow(o.Beta1, float64(o.T))
	bc2 := 1 - math.Pow(o.Beta2, float64(o.T))
	decay := 1 - lr*o.WeightDecay
	for i, p := range params {
		m, v, g := o.M[i], o.V[i], grads[i]
		for j := range p {
			gj := g[j]
			mj := o.Beta1*float64(m[j]) + (1-o.Beta1)*gj
			vj := o.Beta2*float64(v[j]) + (1-o.Beta2)*gj*gj
			m[j], v[j] = float32(mj), float32(vj)
			pj := float64(p[j]) * decay
			pj -= lr * (mj / bc1) / (math.Sqrt(vj/bc2) + o.Eps)
			p[j] = float32(pj)
		}
	}
}

// GlobalNorm is √(Σ g²) over all gradients.
func GlobalNorm(grads [][]float64) float64 {
	var s float64
	for _, g := range grads {
		for _, x := range g {
			s += x * x
		}
	}
	return math.Sqrt(s)
}

// ClipGlobalNorm scales grads so that their global norm is at most max
// (max ≤ 0: no clipping) and returns the norm before clipping.
func ClipGlobalNorm(grads [][]float64, max float64) float64 {
	n := GlobalNorm(grads)
	if max > 0 && n > max {
		s := max / (n + 1e-6)
		for _, g := range grads {
			for j := range g {
				g[j] *= s
			}
		}
	}
	return n
}

// LRAt is the learning rate at optimiser step t (1-based): linear warmup
// from lr/warmup to lr over warmup steps, then cosine decay to
// lr·minRatio at step total (constant after; total ≤ warmup: no decay).
func LRAt(t int, lr float64, warmup, total int, minRatio float64) float64 {
	if warmup > 0 && t <= warmup {
		return lr * float64(t) / float64(warmup)
	}
	if total <= warmup {
		return lr
	}
	if t >= total {
		return lr * minRatio
	}
	prog := float64(t-warmup) / float64(total-warmup)
	return lr * (minRatio + (1-minRatio)*0.5*(1+math.Cos(math.Pi*prog)))
}
