package builtin

import (
	"fmt"
	"math"

	"github.com/troupe-rl/troupe/internal/hf"
)

// linear is a weight matrix W [out, in] (row-major, PyTorch's layout) and
// an optional bias [out]. Fused layers (q|k|v, gate|up) concatenate rows.
type linear struct {
	w       []float32
	b       []float32
	in, out int
}

// layer holds one decoder layer's weights.
type layer struct {
	inNorm, postNorm []float32
	qNorm, kNorm     []float32 // Qwen3 only
	qkv              linear    // rows: q (nh·hd), k (nkv·hd), v (nkv·hd)
	o                linear
	gateUp           linear // rows: gate (ff), up (ff)
	down             linear
}

// model is the immutable weights plus shape constants. It is shared by
// every sequence and never written after newModel.
type model struct {
	cfg                       *hf.ModelConfig
	d, hd, nh, nkv, ff, vocab int
	qd, kvd                   int
	eps                       float64
	invFreq                   []float64
	embed                     []float32 // [vocab, d]
	lmHead                    linear    // may alias embed (tied)
	norm                      []float32
	layers                    []layer
	scale                     float32 // 1/sqrt(hd)
}

// newModel checks weights against cfg and copies them into the engine's
// layout (fused q|k|v and gate|up). The caller's tensors are not kept,
// except the embedding and lm_head, which are used in place.
func newModel(cfg *hf.ModelConfig, weights map[string]*hf.Tensor, where string) (*model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("builtin: %w", &hf.FormatError{File: where, What: err.Error()})
	}
	if err := hf.CheckShapes(where, cfg, weights); err != nil {
		return nil, fmt.Errorf("builtin: %w", err)
	}
	m := &model{
		cfg: cfg, d: cfg.HiddenSize, hd: cfg.HeadDimension(), nh: cfg.NumAttentionHeads,
		nkv: cfg.NumKeyValueHeads, ff: cfg.IntermediateSize, vocab: cfg.VocabSize,
		eps: cfg.RMSNormEps, invFreq: cfg.RopeInvFreq(),
	}
	m.qd, m.kvd = m.nh*m.hd, m.nkv*m.hd
	m.scale = float32(1 / math.Sqrt(float64(m.hd)))
	m.embed = weights[hf.EmbedTokens].Data
	m.norm = weights[hf.FinalNorm].Data
	if cfg.TieWordEmbeddings {
		m.lmHead = linear{w: m.embed, in: m.d, out: m.vocab}
	} else {
		m.lmHead = linear{w: weights[hf.LMHead].Data, in: m.d, out: m.vocab}
	}
	m.layers = make([]layer, cfg.NumHiddenLayers)
	for l := range m.layers {
		L := &m.layers[l]
		L.inNorm = weights[hf.InputNorm(l)].Data
		L.postNorm = weights[hf.PostAttnNorm(l)].Data
		if cfg.QKNorm() {
			L.qNorm = weights[hf.QNorm(l)].Data
			L.kNorm = weights[hf.KNorm(l)].Data
		}
		w := func(mod string) []float32 { return weights[hf.LinearWeight(l, mod)].Data }
		L.qkv = fuse(m.d, w(hf.ModQ), w(hf.ModK), w(hf.ModV))
		if cfg.AttentionBias {
			b := func(mod string) []float32 { return weights[hf.LinearBias(l, mod)].Data }
			L.qkv.b = concat(b(hf.ModQ), b(hf.ModK), b(hf.ModV))
		}
		L.o = linear{w: w(hf.ModO), in: m.qd, out: m.d}
		L.gateUp = fuse(m.d, w(hf.ModGate), w(hf.ModUp))
		L.down = linear{w: w(hf.ModDown), in: m.ff, out: m.d}
	}
	return m, nil
}

func concat(parts ...[]float32) []float32 {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]float32, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func fuse(in int, parts ...[]float32) linear {
	w := concat(parts...)
	return linear{w: w, in: in, out: len(w) / in}
}

// moduleSpan says where a LoRA-targetable module's output lives: which
// fused linear of the layer and which columns of its output.
func (m *model) moduleSpan(mod string) (which int, off, out, in int) {
	switch mod {
	case hf.ModQ:
		return linQKV, 0, m.qd, m.d
	case hf.ModK:
		return linQKV, m.qd, m.kvd, m.d
	case hf.ModV:
		return linQKV, m.qd + m.kvd, m.kvd, m.d
	case hf.ModO:
		return linO, 0, m.d, m.qd
	case hf.ModGate:
		return linGateUp, 0, m.ff, m.d
	case hf.ModUp:
		return linGateUp, m.ff, m.ff, m.d
	case hf.ModDown:
		return linDown, 0, m.d, m.ff
	}
	return -1, 0, 0, 0
}

// The four (fused) linear layers of a decoder layer.
const (
	linQKV = iota
	linO
	linGateUp
	linDown
	numLin
)
