package loss

import (
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // GoMLX's graph DSL reads best unqualified.
)

// Inputs are the [batch, seq] tensors of [Build], all of one float dtype.
// Logp must depend on the trainable parameters; the rest are data. Ref is
// needed only when KLCoef > 0, Old only to override o (see the package doc).
// Advantages may be [batch] (one per sequence) or [batch, seq].
type Inputs struct {
	Logp, Behaviour, Advantages, Mask *Node
	Ref, Old                          *Node
}

// GraphSums are the scalar nodes of a micro-batch's [Sums].
type GraphSums struct {
	Loss, Tokens, Ratio, RatioMax, Clipped, DualClipped, Mismatch, MismatchMax, Truncated, KL *Node
}

// List returns the nodes in [Sums] field order (for Exec outputs).
func (s GraphSums) List() []*Node {
	return []*Node{s.Loss, s.Tokens, s.Ratio, s.RatioMax, s.Clipped, s.DualClipped, s.Mismatch, s.MismatchMax, s.Truncated, s.KL}
}

// SumsFromValues is the inverse of List on the host side.
func SumsFromValues(v []float64) Sums {
	return Sums{Loss: v[0], Tokens: v[1], Ratio: v[2], RatioMax: v[3], Clipped: v[4], DualClipped: v[5],
		Mismatch: v[6], MismatchMax: v[7], Truncated: v[8], KL: v[9]}
}

// NumSums is len(GraphSums.List()).
const NumSums = 10

// Graph builds the package doc's loss over masked tokens: Loss is Σ m·ℓ
// (divide by the batch's token count outside; see the package doc), and
// the other sums are the metrics' numerators (maxima for the *Max fields).
func Build(c Config, in Inputs) GraphSums {
	logp := in.Logp
	g := logp.Graph()
	dt := logp.DType()
	k := func(v float64) *Node { return ConstAsDType(g, dt, v) }
	mask := in.Mask
	adv := in.Advantages
	if adv.Rank() == 1 {
		adv = BroadcastToDims(InsertAxes(adv, 1), logp.Shape().Dimensions...)
	}
	zero := ZerosLike(logp)
	masked := func(x *Node) *Node { return Where(GreaterThan(mask, zero), x, zero) }
	sum := func(x *Node) *Node { return ReduceAllSum(masked(x)) }

	var old *Node
	switch {
	case in.Old != nil:
		old = in.Old
	case c.RatioTo == RatioToBehaviour:
		old = in.Behaviour
	default:
		old = StopGradient(logp)
	}
	rho := Exp(Sub(logp, old))
	mis := StopGradient(Exp(Sub(logp, in.Behaviour)))
	w := k(1)
	if c.tisActive() {
		w = StopGradient(Min(Exp(Sub(old, in.Behaviour)), k(c.TISCap)))
	}
	var l *Node
	clipped, dual := zero, zero
	negA := Neg(adv)
	switch c.Kind {
	case KindPG:
		l = Mul(negA, rho)
	case KindSFT:
		l = Mul(negA, logp)
	default:
		pg1 := Mul(negA, rho)
		pg2 := Mul(negA, ClipScalar(rho, 1-c.ClipLow, 1+c.ClipHigh))
		isClipped := GreaterThan(pg2, pg1)
		l = Where(isClipped, pg2, pg1)
		clipped = Where(isClipped, OnesLike(logp), zero)
		if c.DualClip > 0 {
			capv := Mul(negA, k(c.DualClip))
			isDual := LogicalAnd(LessThan(adv, zero), GreaterThan(l, capv))
			l = Where(isDual, StopGradient(capv), l)
			dual = Where(isDual, OnesLike(logp), zero)
		}
	}
	l = Mul(w, l)
	kl := zero
	if c.KLCoef > 0 {
		d := Sub(in.Ref, logp)
		kl = Sub(Sub(Exp(d), d), OnesLike(d))
		l = Add(l, Mul(k(c.KLCoef), kl))
	}
	truncated := zero
	if c.TISCap > 0 {
		truncated = Where(GreaterThan(mis, k(c.TISCap)), OnesLike(logp), zero)
	}
	return GraphSums{
		Loss:        sum(l),
		Tokens:      sum(OnesLike(logp)),
		Ratio:       StopGradient(sum(rho)),
		RatioMax:    StopGradient(ReduceAllMax(masked(rho))),
		Clipped:     sum(clipped),
		DualClipped: sum(dual),
		Mismatch:    sum(mis),
		MismatchMax: ReduceAllMax(masked(mis)),
		Truncated:   sum(truncated),
		KL:          StopGradient(sum(kl)),
	}
}
