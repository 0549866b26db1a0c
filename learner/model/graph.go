package model

import (
	"math"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // GoMLX's graph DSL reads best unqualified.

	"github.com/troupe-rl/troupe/internal/hf"
)

// Nodes are the graph-side weights: base weights by HF name, and the LoRA
// factors by module path (nil maps or a zero Scale disable LoRA).
type Nodes struct {
	Base  map[string]*Node
	A, B  map[string]*Node
	Scale float64
}

// Inputs are a micro-batch's token-level graph inputs.
type Inputs struct {
	Tokens  *Node // [B, S] int32, right-padded
	KeyMask *Node // [B, S] float, 1 for real tokens
	Cos     *Node // [S, head_dim]
	Sin     *Node // [S, head_dim]
}

// forwardHidden runs the decoder and returns the final-normed hidden
// states [B·S, d].
func forwardHidden(c *hf.ModelConfig, w Nodes, in Inputs) *Node {
	g := in.Tokens.Graph()
	dims := in.Tokens.Shape().Dimensions
	B, S := dims[0], dims[1]
	N := B * S
	d := c.HiddenSize
	H, KV, D := c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDimension()
	G := H / KV
	dt := w.Base[hf.EmbedTokens].DType()
	eps := c.RMSNormEps

	x := Gather(w.Base[hf.EmbedTokens], Reshape(in.Tokens, N, 1)) // [N, d]

	// Mask [B, 1, S, 1, S]: key j visible from query i when j ≤ i and key j is real.
	causal := GreaterOrEqual(Iota(g, shapeOf(dtypes.Int32, S, S), 0), Iota(g, shapeOf(dtypes.Int32, S, S), 1))
	causal = BroadcastToDims(Reshape(causal, 1, 1, S, 1, S), B, KV, S, G, S)
	keyOK := GreaterThan(in.KeyMask, ZerosLike(in.KeyMask))
	keyOK = BroadcastToDims(Reshape(keyOK, B, 1, 1, 1, S), B, KV, S, G, S)
	visible := LogicalAnd(causal, keyOK)
	negInf := BroadcastToDims(ConstAsDType(g, dt, -1e30), B, KV, S, G, S)
	if dt == dtypes.Float32 {
		negInf = BroadcastToDims(ConstAsDType(g, dt, float64(-math.MaxFloat32)), B, KV, S, G, S)
	}
	scale := ConstAsDType(g, dt, 1/math.Sqrt(float64(D)))
	cos := Reshape(in.Cos, 1, S, 1, D)
	sin := Reshape(in.Sin, 1, S, 1, D)

	for l := range c.NumHiddenLayers {
		a := rmsNorm(x, w.Base[hf.InputNorm(l)], eps)
		q := linear(a, w, l, hf.ModQ, c.AttentionBias)
		k := linear(a, w, l, hf.ModK, c.AttentionBias)
		v := linear(a, w, l, hf.ModV, c.AttentionBias)
		q = Reshape(q, B, S, H, D)
		k = Reshape(k, B, S, KV, D)
		v = Reshape(v, B, S, KV, D)
		if c.QKNorm() {
			q = rmsNorm(q, w.Base[hf.QNorm(l)], eps)
			k = rmsNorm(k, w.Base[hf.KNorm(l)], eps)
		}
		q = rope(q, cos, sin, H, D)
		k = rope(k, cos, sin, KV, D)
		q5 := Reshape(q, B, S, KV, G, D)
		// scores [B, KV, S, G, S]
		scores := DotGeneral(q5, []int{4}, []int{0, 2}, k, []int{3}, []int{0, 2})
		scores = Mul(scores, scale)
		scores = Where(visible, scores, negInf)
		probs := Softmax(scores, 4)
		// out [B, KV, S, G, D]
		att := DotGeneral(probs, []int{4}, []int{0, 1}, v, []int{1}, []int{0, 2})
		att = Reshape(TransposeAllDims(att, 0, 2, 1, 3, 4), N, H*D)
		x = Add(x, linear(att, w, l, hf.ModO, false))

		m := rmsNorm(x, w.Base[hf.PostAttnNorm(l)], eps)
		gate := linear(m, w, l, hf.ModGate, false)
		up := linear(m, w, l, hf.ModUp, false)
		act := Mul(Mul(gate, Sigmoid(gate)), up)
		x = Add(x, linear(act, w, l, hf.ModDown, false))
	}
	_ = d
	return rmsNorm(x, w.Base[hf.FinalNorm], eps)
}

// Logits returns [B·S, vocab] logits of the decoder.
func Logits(c *hf.ModelConfig, w Nodes, in Inputs) *Node {
	h := forwardHidden(c, w, in)
	head := w.Base[hf.LMHead]
	if c.TieWordEmbeddings {
		head = w.Base[hf.EmbedTokens]
	}
	return DotGeneral(h, []int{1}, nil, head, []int{1}, nil)
}

// TokenLogprobs returns, per position t of every row, log p(targets[t])
// under softmax(logits_t · invTemp) and the entropy of that distribution
// (as [B, S] nodes; the entropy carries no gradient). targets is [B, S]
// int32 (the token at t+1; any valid id where unused), invTemp is [B].
func TokenLogprobs(c *hf.ModelConfig, w Nodes, in Inputs, targets, invTemp *Node) (logp, entropy *Node) {
	dims := in.Tokens.Shape().Dimensions
	B, S := dims[0], dims[1]
	N := B * S
	V := c.VocabSize
	logits := Logits(c, w, in) // [N, V]
	it := Reshape(BroadcastToDims(Reshape(invTemp, B, 1), B, S), N, 1)
	z := Mul(logits, it)
	mx := StopGradient(ReduceAndKeep(z, ReduceMax, 1))
	zs := Sub(z, mx)
	sumExp := ReduceAndKeep(Exp(zs), ReduceSum, 1)
	lse := Log(sumExp) // [N, 1], relative to mx
	g := in.Tokens.Graph()
	rows := Iota(g, shapeOf(dtypes.Int32, N, 1), 0)
	idx := Concatenate([]*Node{rows, Reshape(targets, N, 1)}, 1) // [N, 2]
	picked := Gather(zs, idx)                                    // [N]
	logp = Sub(picked, Reshape(lse, N))
	// H = lse − Σ p·z (shifted by mx, which cancels).
	p := StopGradient(Exp(Sub(zs, lse)))
	ent := Sub(Reshape(StopGradient(lse), N), ReduceSum(Mul(p, StopGradient(zs)), 1))
	_ = V
	return Reshape(logp, B, S), Reshape(ent, B, S)
}

// linear is y = x·Wᵀ (+ b) (+ s·(x·Aᵀ)·Bᵀ) on x [N, in].
func linear(x *Node, w Nodes, layer int, mod string, bias bool) *Node {
	W := w.Base[hf.LinearWeight(layer, mod)]
	y := DotGeneral(x, []int{1}, nil, W, []int{1}, nil)
	if bias {
		y = Add(y, InsertAxes(w.Base[hf.LinearBias(layer, mod)], 0))
	}
	path := hf.ModulePath(layer, mod)
	if a, ok := w.A[path]; ok && w.Scale != 0 {
		t := DotGeneral(x, []int{1}, nil, a, []int{1}, nil)
		t = DotGeneral(t, []int{1}, nil, w.B[path], []int{1}, nil)
		y = Add(y, Mul(t, ConstAsDType(x.Graph(), x.DType(), w.Scale)))
	}
	return y
}

// rmsNorm normalises over the last axis: x·rsqrt(mean(x²)+eps)·w.
func rmsNorm(x, w *Node, eps float64) *Node {
	ms := ReduceAndKeep(Square(x), ReduceMean, -1)
	y := Mul(x, Inverse(Sqrt(Add(ms, ConstAsDType(x.Graph(), x.DType(), eps))))) // Rsqrt has no gradient in GoMLX v0.28.1
	wd := make([]int, x.Rank())
	for i := range wd {
		wd[i] = 1
	}
	wd[len(wd)-1] = w.Shape().Dimensions[0]
	return Mul(y, Reshape(w, wd...))
}

// rope applies rotary embeddings in HF's rotate_half convention to
// x [B, S, heads, D]; cos and sin are [1, S, 1, D].
func rope(x, cos, sin *Node, heads, D int) *Node {
	dims := x.Shape().Dimensions
	full := func(t *Node) *Node { return BroadcastToDims(t, dims...) }
	x1 := Slice(x, AxisRange(), AxisRange(), AxisRange(), AxisRange(0, D/2))
	x2 := Slice(x, AxisRange(), AxisRange(), AxisRange(), AxisRange(D/2, D))
	rot := Concatenate([]*Node{Neg(x2), x1}, 3)
	_ = heads
	return Add(Mul(x, full(cos)), Mul(rot, full(sin)))
}

func shapeOf(dt dtypes.DType, dims ...int) shapes.Shape { return shapes.Make(dt, dims...) }
