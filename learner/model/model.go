// Package model is the learner's Qwen3/Qwen2/Llama decoder as a GoMLX
// graph, loaded from the same Hugging Face folder as the embedded engine
// (through internal/hf), with LoRA adapters on its linear layers.
//
// Semantics follow Hugging Face transformers exactly, because the engine's
// log-probabilities must agree with the learner's (1e-4 in float32):
//
//   - h = embed_tokens[ids];
//   - per layer: a = RMSNorm(h)·w_in with RMSNorm(x) = x·rsqrt(mean(x²)+eps);
//     q,k,v = a·Wᵀ (+ bias when attention_bias) (+ LoRA); Qwen3 applies
//     q_norm/k_norm (RMSNorm over head_dim, per head) before RoPE; RoPE in
//     the rotate_half convention (dimension i pairs with i + head_dim/2),
//     angles pos·inv_freq computed in float32 like HF, inv_freq from
//     [hf.ModelConfig.RopeInvFreq]; grouped-query attention (query head h
//     uses kv head h / (heads/kv_heads)), scores·1/√head_dim, causal and
//     key-padding mask, softmax; o_proj; residual; post_attention_layernorm;
//     SwiGLU down(silu(gate(x))·up(x)); residual;
//   - final norm; lm_head, or the embedding matrix when tie_word_embeddings.
//
// LoRA (PEFT semantics): y = x·Wᵀ + s·(x·Aᵀ)·Bᵀ with A [r, in], B [out, r],
// s = lora_alpha/r; A starts kaiming-uniform like PEFT (U(±1/√in)), B = 0,
// so a fresh adapter leaves the model unchanged. Base weights are graph
// inputs that are never differentiated (frozen); only A and B get
// gradients.
//
// Sequences are right-padded: row b holds prompt ++ completion in positions
// 0..len_b−1 and padding after; positions are 0..S−1. Logits at position t
// predict token t+1, so completion token j of a row with prompt length P is
// scored by the logits at position P+j−1, divided by the sampling
// temperature before the log-softmax.
package model

import (
	"fmt"
	"math"
	"slices"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/troupe-rl/troupe/internal/hf"
)

// Model is a decoder's config and frozen base weights, ready to be fed to
// graphs.
type Model struct {
	Config *hf.ModelConfig
	DType  dtypes.DType // Float32 (training) or Float64 (gradient checks)
	Source string       // folder it was loaded from, "" if built in memory

	names   []string          // base weight names, sorted
	weights []*tensors.Tensor // in names order
	invFreq []float32
}

// Load reads config.json and the safetensors weights of an HF folder.
func Load(dir string, dt dtypes.DType) (*Model, error) {
	cfg, err := hf.ReadModelConfig(dir)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	w, err := hf.LoadWeights(dir)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if err := hf.CheckShapes(dir, cfg, w); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	m, err := New(cfg, w, dt)
	if err != nil {
		return nil, err
	}
	m.Source = dir
	return m, nil
}

// New builds a model from a config and weights named as in HF.
func New(cfg *hf.ModelConfig, w map[string]*hf.Tensor, dt dtypes.DType) (*Model, error) {
	if dt != dtypes.Float32 && dt != dtypes.Float64 {
		return nil, fmt.Errorf("model: dtype %s is not supported (float32 or float64)", dt)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if err := hf.CheckShapes("weights", cfg, w); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	m := &Model{Config: cfg, DType: dt}
	for name := range hf.ModelShapes(cfg) {
		m.names = append(m.names, name)
	}
	slices.Sort(m.names)
	for _, name := range m.names {
		t := w[name]
		m.weights = append(m.weights, hostTensor(t.Data, dt, t.Shape...))
	}
	for _, f := range cfg.RopeInvFreq() {
		m.invFreq = append(m.invFreq, float32(f))
	}
	return m, nil
}

// hostTensor makes a tensor of dtype dt from float32 data.
func hostTensor(data []float32, dt dtypes.DType, dims ...int) *tensors.Tensor {
	if dt == dtypes.Float64 {
		d := make([]float64, len(data))
		for i, v := range data {
			d[i] = float64(v)
		}
		return tensors.FromFlatDataAndDimensions(d, dims...)
	}
	return tensors.FromFlatDataAndDimensions(slices.Clone(data), dims...)
}

// hostTensor64 makes a tensor of dtype dt from float64 data.
func hostTensor64(data []float64, dt dtypes.DType, dims ...int) *tensors.Tensor {
	if dt == dtypes.Float64 {
		return tensors.FromFlatDataAndDimensions(slices.Clone(data), dims...)
	}
	d := make([]float32, len(data))
	for i, v := range data {
		d[i] = float32(v)
	}
	return tensors.FromFlatDataAndDimensions(d, dims...)
}

// WeightNames returns the base weight names in graph-input order.
func (m *Model) WeightNames() []string { return slices.Clone(m.names) }

// ropeTables returns cos and sin [S, head_dim] for positions 0..S−1 as HF
// computes them: angle = float32(pos)·float32(inv_freq) rounded to
// float32, then cos/sin, the half-dimension table repeated twice.
func (m *Model) ropeTables(S int) (cos, sin *tensors.Tensor) {
	D := m.Config.HeadDimension()
	half := D / 2
	c := make([]float64, S*D)
	s := make([]float64, S*D)
	for p := range S {
		for i := range half {
			ang := float64(float32(p) * m.invFreq[i])
			cv, sv := math.Cos(ang), math.Sin(ang)
			if m.DType == dtypes.Float32 {
				cv, sv = float64(float32(cv)), float64(float32(sv))
			}
			c[p*D+i], c[p*D+i+half] = cv, cv
			s[p*D+i], s[p*D+i+half] = sv, sv
		}
	}
	return hostTensor64(c, m.DType, S, D), hostTensor64(s, m.DType, S, D)
}
