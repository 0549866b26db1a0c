package hf

import "fmt"

// Module names of the decoder's linear layers that LoRA may target, in
// PEFT's spelling (target_modules).
const (
	ModQ    = "q_proj"
	ModK    = "k_proj"
	ModV    = "v_proj"
	ModO    = "o_proj"
	ModGate = "gate_proj"
	ModUp   = "up_proj"
	ModDown = "down_proj"
)

// AllModules lists every LoRA-targetable module.
var AllModules = []string{ModQ, ModK, ModV, ModO, ModGate, ModUp, ModDown}

// Tensor names of a Qwen/Llama decoder in Hugging Face's layout.
const (
	EmbedTokens = "model.embed_tokens.weight"
	FinalNorm   = "model.norm.weight"
	LMHead      = "lm_head.weight" // absent when tie_word_embeddings
)

// ModulePath is the module path of a linear layer within layer i, e.g.
// "model.layers.3.self_attn.q_proj".
func ModulePath(layer int, module string) string {
	switch module {
	case ModQ, ModK, ModV, ModO:
		return fmt.Sprintf("model.layers.%d.self_attn.%s", layer, module)
	case ModGate, ModUp, ModDown:
		return fmt.Sprintf("model.layers.%d.mlp.%s", layer, module)
	}
	panic("hf: unknown module " + module)
}

// LinearWeight is the weight name of a linear layer ([out, in], as PyTorch
// stores nn.Linear weights).
func LinearWeight(layer int, module string) string { return ModulePath(layer, module) + ".weight" }

// LinearBias is the bias name of a linear layer (q/k/v when attention_bias).
func LinearBias(layer int, module string) string { return ModulePath(layer, module) + ".bias" }

// Per-layer norm weight names.
func InputNorm(layer int) string { return fmt.Sprintf("model.layers.%d.input_layernorm.weight", layer) }
func PostAttnNorm(layer int) string {
	return fmt.Sprintf("model.layers.%d.post_attention_layernorm.weight", layer)
}
func QNorm(layer int) string { return fmt.Sprintf("model.layers.%d.self_attn.q_norm.weight", layer) }
func KNorm(layer int) string { return fmt.Sprintf("model.layers.%d.self_attn.k_norm.weight", layer) }

// ModelShapes returns the expected shape of every tensor of a model with
// config c (what LoadWeights must find).
func ModelShapes(c *ModelConfig) map[string][]int {
	hd := c.HeadDimension()
	d, ff := c.HiddenSize, c.IntermediateSize
	qd, kvd := c.NumAttentionHeads*hd, c.NumKeyValueHeads*hd
	s := map[string][]int{
		EmbedTokens: {c.VocabSize, d},
		FinalNorm:   {d},
	}
	if !c.TieWordEmbeddings {
		s[LMHead] = []int{c.VocabSize, d}
	}
	for l := 0; l < c.NumHiddenLayers; l++ {
		for m, sh := range LinearShapes(c) {
			s[LinearWeight(l, m)] = sh
		}
		if c.AttentionBias {
			s[LinearBias(l, ModQ)] = []int{qd}
			s[LinearBias(l, ModK)] = []int{kvd}
			s[LinearBias(l, ModV)] = []int{kvd}
		}
		s[InputNorm(l)] = []int{d}
		s[PostAttnNorm(l)] = []int{d}
		if c.QKNorm() {
			s[QNorm(l)] = []int{hd}
			s[KNorm(l)] = []int{hd}
		}
	}
	_ = ff
	return s
}

// LinearShapes gives [out, in] for each linear module of one layer.
func LinearShapes(c *ModelConfig) map[string][]int {
	hd := c.HeadDimension()
	d, ff := c.HiddenSize, c.IntermediateSize
	qd, kvd := c.NumAttentionHeads*hd, c.NumKeyValueHeads*hd
	return map[string][]int{
		ModQ: {qd, d}, ModK: {kvd, d}, ModV: {kvd, d}, ModO: {d, qd},
		ModGate: {ff, d}, ModUp: {ff, d}, ModDown: {d, ff},
	}
}

// CheckShapes verifies that weights hold exactly the tensors of config c
// with the right shapes (extra tensors are an error too, except lm_head
// when embeddings are tied). file names the folder in errors.
func CheckShapes(file string, c *ModelConfig, weights map[string]*Tensor) error {
	want := ModelShapes(c)
	for name, shape := range want {
		t, ok := weights[name]
		if !ok {
			return formatErr(file, nil, "tensor %q is missing", name)
		}
		if !sameShape(t.Shape, shape) {
			return formatErr(file, nil, "tensor %q has shape %v, config.json implies %v", name, t.Shape, shape)
		}
	}
	for name := range weights {
		if _, ok := want[name]; !ok && !(name == LMHead && c.TieWordEmbeddings) {
			return formatErr(file, nil, "unexpected tensor %q for this config", name)
		}
	}
	return nil
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
