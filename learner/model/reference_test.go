package model

import (
	"math"

	"github.com/troupe-rl/troupe/internal/hf"
)

// refModel is a plain-Go, float64, one-sequence-at-a-time implementation of
// the package doc's semantics, written for clarity: the graph is held to it.
type refModel struct {
	c    *hf.ModelConfig
	w    map[string]*hf.Tensor
	lora *LoRA
}

func (r *refModel) mat(name string) ([]float32, int, int) {
	t := r.w[name]
	return t.Data, t.Shape[0], t.Shape[1]
}

// linear returns W·x (+b) (+ s·B·A·x).
func (r *refModel) linear(layer int, mod string, x []float64) []float64 {
	W, out, in := r.mat(hf.LinearWeight(layer, mod))
	y := make([]float64, out)
	for o := range out {
		var s float64
		for i := range in {
			s += float64(W[o*in+i]) * x[i]
		}
		y[o] = s
	}
	if b, ok := r.w[hf.LinearBias(layer, mod)]; ok && r.c.AttentionBias {
		for o := range y {
			y[o] += float64(b.Data[o])
		}
	}
	if r.lora != nil {
		path := hf.ModulePath(layer, mod)
		for k, p := range r.lora.Modules {
			if p != path {
				continue
			}
			A, B := r.lora.Data[2*k], r.lora.Data[2*k+1]
			rank := r.lora.Config.Rank
			ax := make([]float64, rank)
			for j := range rank {
				for i := range in {
					ax[j] += float64(A[j*in+i]) * x[i]
				}
			}
			for o := range out {
				var s float64
				for j := range rank {
					s += float64(B[o*rank+j]) * ax[j]
				}
				y[o] += r.lora.Config.Scaling() * s
			}
		}
	}
	return y
}

func refRMS(x []float64, w []float32, eps float64) []float64 {
	var ms float64
	for _, v := range x {
		ms += v * v
	}
	ms /= float64(len(x))
	inv := 1 / math.Sqrt(ms+eps)
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = v * inv * float64(w[i])
	}
	return y
}

// forward returns, for each position t < len(seq)−1, log p(seq[t+1]) at
// temperature temp, and the entropy of each position's distribution.
func (r *refModel) forward(seq []int32, temp float64) (logp, ent []float64) {
	c := r.c
	n := len(seq)
	d, H, KV, D := c.HiddenSize, c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDimension()
	G := H / KV
	emb := r.w[hf.EmbedTokens].Data
	h := make([][]float64, n)
	for t, tok := range seq {
		h[t] = make([]float64, d)
		for i := range d {
			h[t][i] = float64(emb[int(tok)*d+i])
		}
	}
	inv := c.RopeInvFreq()
	rope := func(x []float64, pos int) {
		for i := range D / 2 {
			ang := float64(float32(pos) * float32(inv[i]))
			cs, sn := math.Cos(ang), math.Sin(ang)
			a, b := x[i], x[i+D/2]
			x[i] = a*cs - b*sn
			x[i+D/2] = b*cs + a*sn
		}
	}
	for l := range c.NumHiddenLayers {
		qs, ks, vs := make([][]float64, n), make([][]float64, n), make([][]float64, n)
		for t := range n {
			a := refRMS(h[t], r.w[hf.InputNorm(l)].Data, c.RMSNormEps)
			qs[t], ks[t], vs[t] = r.linear(l, hf.ModQ, a), r.linear(l, hf.ModK, a), r.linear(l, hf.ModV, a)
			for hh := range H {
				q := qs[t][hh*D : (hh+1)*D]
				if c.QKNorm() {
					copy(q, refRMS(q, r.w[hf.QNorm(l)].Data, c.RMSNormEps))
				}
				rope(q, t)
			}
			for hh := range KV {
				k := ks[t][hh*D : (hh+1)*D]
				if c.QKNorm() {
					copy(k, refRMS(k, r.w[hf.KNorm(l)].Data, c.RMSNormEps))
				}
				rope(k, t)
			}
		}
		for t := range n {
			att := make([]float64, H*D)
			for hh := range H {
				kvh := hh / G
				q := qs[t][hh*D : (hh+1)*D]
				sc := make([]float64, t+1)
				mx := math.Inf(-1)
				for j := 0; j <= t; j++ {
					var s float64
					for i := range D {
						s += q[i] * ks[j][kvh*D+i]
					}
					sc[j] = s / math.Sqrt(float64(D))
					mx = math.Max(mx, sc[j])
				}
				var z float64
				for j := range sc {
					sc[j] = math.Exp(sc[j] - mx)
					z += sc[j]
				}
				for j := range sc {
					for i := range D {
						att[hh*D+i] += sc[j] / z * vs[j][kvh*D+i]
					}
				}
			}
			o := r.linear(l, hf.ModO, att)
			for i := range d {
				h[t][i] += o[i]
			}
			m := refRMS(h[t], r.w[hf.PostAttnNorm(l)].Data, c.RMSNormEps)
			gate, up := r.linear(l, hf.ModGate, m), r.linear(l, hf.ModUp, m)
			for i := range gate {
				gate[i] = gate[i] / (1 + math.Exp(-gate[i])) * up[i]
			}
			dn := r.linear(l, hf.ModDown, gate)
			for i := range d {
				h[t][i] += dn[i]
			}
		}
	}
	head := hf.LMHead
	if c.TieWordEmbeddings {
		head = hf.EmbedTokens
	}
	Wh, V, _ := r.mat(head)
	for t := 0; t+1 < n; t++ {
		x := refRMS(h[t], r.w[hf.FinalNorm].Data, c.RMSNormEps)
		z := make([]float64, V)
		mx := math.Inf(-1)
		for v := range V {
			var s float64
			for i := range d {
				s += float64(Wh[v*d+i]) * x[i]
			}
			z[v] = s / temp
			mx = math.Max(mx, z[v])
		}
		var se float64
		for _, v := range z {
			se += math.Exp(v - mx)
		}
		lse := mx + math.Log(se)
		var hh float64
		for _, v := range z {
			p := math.Exp(v - lse)
			hh -= p * (v - lse)
		}
		logp = append(logp, z[seq[t+1]]-lse)
		ent = append(ent, hh)
	}
	return logp, ent
}
