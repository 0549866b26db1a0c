package builtin

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/troupe-rl/troupe/internal/hf"
)

// tinyConfig is a small model for tests: 2 layers, d=32, 4 heads over 2
// kv heads, head_dim 8, ff 48, vocab 97 (odd, to exercise kernel edges).
func tinyConfig(modelType string) *hf.ModelConfig {
	c := &hf.ModelConfig{
		ModelType: modelType, VocabSize: 97, HiddenSize: 32, IntermediateSize: 48,
		NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2,
		MaxPositionEmbeddings: 64, RMSNormEps: 1e-6, RopeTheta: 10000,
		TieWordEmbeddings: true, EOSTokenID: 1,
	}
	switch modelType {
	case "llama":
		c.TieWordEmbeddings = false
		c.HeadDim = 16 // head_dim ≠ hidden/heads
		c.RopeScaling = &hf.RopeScaling{RopeType: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 16}
	case "qwen2":
		c.AttentionBias = true
		c.TieWordEmbeddings = false
	}
	return c
}

// randomWeights draws every tensor of cfg: linear weights N(0, 1/in) so
// activations stay O(1), norms around 1, biases small.
func randomWeights(cfg *hf.ModelConfig, seed uint64) map[string]*hf.Tensor {
	r := rand.New(rand.NewPCG(seed, 7))
	w := map[string]*hf.Tensor{}
	shapes := hf.ModelShapes(cfg)
	for _, name := range slices.Sorted(maps.Keys(shapes)) {
		shape := shapes[name]
		t := hf.NewTensor(shape...)
		switch {
		case strings.HasSuffix(name, "norm.weight"):
			for i := range t.Data {
				t.Data[i] = float32(1 + 0.2*r.NormFloat64())
			}
		case len(shape) == 1:
			for i := range t.Data {
				t.Data[i] = float32(0.1 * r.NormFloat64())
			}
		default:
			sd := 1 / math.Sqrt(float64(shape[1]))
			if name == hf.EmbedTokens {
				sd = 0.3
			}
			for i := range t.Data {
				t.Data[i] = float32(sd * r.NormFloat64())
			}
		}
		w[name] = t
	}
	return w
}

// refLogits is a deliberately plain float64 forward over the whole
// sequence (no cache, no fusion, no batching) in Hugging Face's semantics;
// it returns logits for every position.
func refLogits(cfg *hf.ModelConfig, w map[string]*hf.Tensor, toks []int32) [][]float64 {
	d, hd := cfg.HiddenSize, cfg.HeadDimension()
	nh, nkv, ff, V := cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.IntermediateSize, cfg.VocabSize
	T := len(toks)
	eps := cfg.RMSNormEps
	inv := cfg.RopeInvFreq()
	get := func(n string) []float32 { return w[n].Data }
	norm := func(x []float64, g []float32) []float64 {
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		r := 1 / math.Sqrt(ss/float64(len(x))+eps)
		out := make([]float64, len(x))
		for i := range x {
			out[i] = x[i] * r * float64(g[i])
		}
		return out
	}
	lin := func(x []float64, W []float32, b []float32, out int) []float64 {
		in := len(x)
		y := make([]float64, out)
		for o := range out {
			var s float64
			for k := range in {
				s += x[k] * float64(W[o*in+k])
			}
			if b != nil {
				s += float64(b[o])
			}
			y[o] = s
		}
		return y
	}
	rope := func(x []float64, pos int) {
		h := len(x) / 2
		rot := make([]float64, len(x))
		for i := range h {
			c, s := math.Cos(float64(pos)*inv[i]), math.Sin(float64(pos)*inv[i])
			rot[i] = x[i]*c - x[i+h]*s
			rot[i+h] = x[i+h]*c + x[i]*s
		}
		copy(x, rot)
	}
	h := make([][]float64, T)
	for t, tok := range toks {
		h[t] = make([]float64, d)
		for i := range d {
			h[t][i] = float64(get(hf.EmbedTokens)[int(tok)*d+i])
		}
	}
	for l := range cfg.NumHiddenLayers {
		var bq, bk, bv []float32
		if cfg.AttentionBias {
			bq, bk, bv = get(hf.LinearBias(l, hf.ModQ)), get(hf.LinearBias(l, hf.ModK)), get(hf.LinearBias(l, hf.ModV))
		}
		q := make([][]float64, T)
		k := make([][]float64, T)
		v := make([][]float64, T)
		for t := range T {
			x := norm(h[t], get(hf.InputNorm(l)))
			q[t] = lin(x, get(hf.LinearWeight(l, hf.ModQ)), bq, nh*hd)
			k[t] = lin(x, get(hf.LinearWeight(l, hf.ModK)), bk, nkv*hd)
			v[t] = lin(x, get(hf.LinearWeight(l, hf.ModV)), bv, nkv*hd)
			for hh := range nh {
				if cfg.QKNorm() {
					copy(q[t][hh*hd:(hh+1)*hd], norm(q[t][hh*hd:(hh+1)*hd], get(hf.QNorm(l))))
				}
				rope(q[t][hh*hd:(hh+1)*hd], t)
			}
			for hh := range nkv {
				if cfg.QKNorm() {
					copy(k[t][hh*hd:(hh+1)*hd], norm(k[t][hh*hd:(hh+1)*hd], get(hf.KNorm(l))))
				}
				rope(k[t][hh*hd:(hh+1)*hd], t)
			}
		}
		for t := range T {
			att := make([]float64, nh*hd)
			for hh := range nh {
				g := hh / (nh / nkv)
				sc := make([]float64, t+1)
				mx := math.Inf(-1)
				for p := 0; p <= t; p++ {
					var s float64
					for i := range hd {
						s += q[t][hh*hd+i] * k[p][g*hd+i]
					}
					sc[p] = s / math.Sqrt(float64(hd))
					mx = math.Max(mx, sc[p])
				}
				var sum float64
				for p := range sc {
					sc[p] = math.Exp(sc[p] - mx)
					sum += sc[p]
				}
				for p := range sc {
					for i := range hd {
						att[hh*hd+i] += sc[p] / sum * v[p][g*hd+i]
					}
				}
			}
			o := lin(att, get(hf.LinearWeight(l, hf.ModO)), nil, d)
			for i := range d {
				h[t][i] += o[i]
			}
			x := norm(h[t], get(hf.PostAttnNorm(l)))
			gt := lin(x, get(hf.LinearWeight(l, hf.ModGate)), nil, ff)
			up := lin(x, get(hf.LinearWeight(l, hf.ModUp)), nil, ff)
			for i := range ff {
				gt[i] = gt[i] / (1 + math.Exp(-gt[i])) * up[i]
			}
			dn := lin(gt, get(hf.LinearWeight(l, hf.ModDown)), nil, d)
			for i := range d {
				h[t][i] += dn[i]
			}
		}
	}
	head := hf.LMHead
	if cfg.TieWordEmbeddings {
		head = hf.EmbedTokens
	}
	out := make([][]float64, T)
	for t := range T {
		out[t] = lin(norm(h[t], get(hf.FinalNorm)), get(head), nil, V)
	}
	return out
}

// refLogprob is log softmax(logits/T)[tok] (T=0 → 1).
func refLogprob(logits []float64, tok int32, T float64) float64 {
	if T <= 0 {
		T = 1
	}
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = math.Max(mx, v/T)
	}
	var s float64
	for _, v := range logits {
		s += math.Exp(v/T - mx)
	}
	return logits[tok]/T - mx - math.Log(s)
}

// mergeLoRA returns weights with W' = W + s·B·A for every module of a.
func mergeLoRA(cfg *hf.ModelConfig, w map[string]*hf.Tensor, a *hf.Adapter) map[string]*hf.Tensor {
	out := make(map[string]*hf.Tensor, len(w))
	for n, t := range w {
		out[n] = t
	}
	s := a.Config.Scaling()
	for path, p := range a.Modules {
		name := path + ".weight"
		W := w[name]
		nw := hf.NewTensor(W.Shape...)
		O, I, R := W.Shape[0], W.Shape[1], a.Config.R
		for o := range O {
			for i := range I {
				var acc float64
				for r := range R {
					acc += float64(p.B.Data[o*R+r]) * float64(p.A.Data[r*I+i])
				}
				nw.Data[o*I+i] = float32(float64(W.Data[o*I+i]) + s*acc)
			}
		}
		out[name] = nw
	}
	return out
}

// randomAdapter makes a LoRA adapter on the given modules of every layer;
// zeroB makes it a no-op.
func randomAdapter(cfg *hf.ModelConfig, seed uint64, r int, mods []string, zeroB bool) *hf.Adapter {
	rng := rand.New(rand.NewPCG(seed, 11))
	a := &hf.Adapter{Config: hf.NewAdapterConfig(r, float64(2*r), mods, "tiny"), Modules: map[string]hf.LoRAPair{}}
	shapes := hf.LinearShapes(cfg)
	for l := range cfg.NumHiddenLayers {
		for _, m := range mods {
			sh := shapes[m]
			A, B := hf.NewTensor(r, sh[1]), hf.NewTensor(sh[0], r)
			for i := range A.Data {
				A.Data[i] = float32(rng.NormFloat64() / math.Sqrt(float64(sh[1])))
			}
			if !zeroB {
				for i := range B.Data {
					B.Data[i] = float32(0.1 * rng.NormFloat64())
				}
			}
			a.Modules[hf.ModulePath(l, m)] = hf.LoRAPair{A: A, B: B}
		}
	}
	return a
}
