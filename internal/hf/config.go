package hf

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/troupe-rl/troupe/internal/atomicfile"
)

// ModelConfig is the part of a Hugging Face config.json that describes a
// Qwen2/Qwen3 or Llama decoder. Fields keep Hugging Face's names.
type ModelConfig struct {
	Architectures         []string     `json:"architectures,omitempty"`
	ModelType             string       `json:"model_type"` // "qwen3", "qwen2", "llama"
	VocabSize             int          `json:"vocab_size"`
	HiddenSize            int          `json:"hidden_size"`
	IntermediateSize      int          `json:"intermediate_size"`
	NumHiddenLayers       int          `json:"num_hidden_layers"`
	NumAttentionHeads     int          `json:"num_attention_heads"`
	NumKeyValueHeads      int          `json:"num_key_value_heads"`
	HeadDim               int          `json:"head_dim,omitempty"` // default hidden_size / num_attention_heads
	MaxPositionEmbeddings int          `json:"max_position_embeddings"`
	RMSNormEps            float64      `json:"rms_norm_eps"`
	RopeTheta             float64      `json:"rope_theta"`
	RopeScaling           *RopeScaling `json:"rope_scaling,omitempty"`
	TieWordEmbeddings     bool         `json:"tie_word_embeddings"`
	AttentionBias         bool         `json:"attention_bias"` // q/k/v biases (Qwen2 has them)
	HiddenAct             string       `json:"hidden_act,omitempty"`
	BOSTokenID            *int         `json:"bos_token_id,omitempty"`
	EOSTokenID            any          `json:"eos_token_id,omitempty"` // int or []int
	TorchDtype            string       `json:"torch_dtype,omitempty"`
}

// RopeScaling is config.json's rope_scaling: types "llama3", "linear" and
// "default" are supported.
type RopeScaling struct {
	RopeType                      string  `json:"rope_type,omitempty"`
	Type                          string  `json:"type,omitempty"` // older spelling of rope_type
	Factor                        float64 `json:"factor,omitempty"`
	LowFreqFactor                 float64 `json:"low_freq_factor,omitempty"`
	HighFreqFactor                float64 `json:"high_freq_factor,omitempty"`
	OriginalMaxPositionEmbeddings int     `json:"original_max_position_embeddings,omitempty"`
}

// Kind returns the rope scaling type ("default" when none).
func (r *RopeScaling) Kind() string {
	if r == nil {
		return "default"
	}
	if r.RopeType != "" {
		return r.RopeType
	}
	if r.Type != "" {
		return r.Type
	}
	return "default"
}

// QKNorm reports whether the architecture RMS-normalises q and k per head
// (Qwen3 does).
func (c *ModelConfig) QKNorm() bool { return c.ModelType == "qwen3" }

// HeadDimension returns head_dim, defaulting to hidden_size/heads.
func (c *ModelConfig) HeadDimension() int {
	if c.HeadDim > 0 {
		return c.HeadDim
	}
	if c.NumAttentionHeads == 0 {
		return 0
	}
	return c.HiddenSize / c.NumAttentionHeads
}

// EOSTokenIDs returns eos_token_id as a list.
func (c *ModelConfig) EOSTokenIDs() []int {
	switch v := c.EOSTokenID.(type) {
	case float64:
		return []int{int(v)}
	case int:
		return []int{v}
	case []any:
		var out []int
		for _, x := range v {
			if f, ok := x.(float64); ok {
				out = append(out, int(f))
			}
		}
		return out
	case []int:
		return v
	}
	return nil
}

// Validate checks that the config describes a model troupe can run.
func (c *ModelConfig) Validate() error {
	switch c.ModelType {
	case "qwen3", "qwen2", "llama":
	default:
		return fmt.Errorf("model_type %q is not supported (want qwen3, qwen2 or llama)", c.ModelType)
	}
	pos := map[string]int{
		"vocab_size": c.VocabSize, "hidden_size": c.HiddenSize, "intermediate_size": c.IntermediateSize,
		"num_hidden_layers": c.NumHiddenLayers, "num_attention_heads": c.NumAttentionHeads,
		"num_key_value_heads": c.NumKeyValueHeads, "max_position_embeddings": c.MaxPositionEmbeddings,
	}
	for _, k := range []string{"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "max_position_embeddings"} {
		if pos[k] <= 0 {
			return fmt.Errorf("%s must be > 0, got %d", k, pos[k])
		}
	}
	if c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		return fmt.Errorf("num_attention_heads (%d) must be a multiple of num_key_value_heads (%d)", c.NumAttentionHeads, c.NumKeyValueHeads)
	}
	if c.HeadDim == 0 && c.HiddenSize%c.NumAttentionHeads != 0 {
		return fmt.Errorf("hidden_size (%d) must be a multiple of num_attention_heads (%d) when head_dim is absent", c.HiddenSize, c.NumAttentionHeads)
	}
	if c.HeadDimension()%2 != 0 {
		return fmt.Errorf("head_dim (%d) must be even for RoPE", c.HeadDimension())
	}
	if !(c.RMSNormEps > 0) || math.IsInf(c.RMSNormEps, 0) {
		return fmt.Errorf("rms_norm_eps must be > 0, got %v", c.RMSNormEps)
	}
	if !(c.RopeTheta > 0) || math.IsInf(c.RopeTheta, 0) {
		return fmt.Errorf("rope_theta must be > 0, got %v", c.RopeTheta)
	}
	switch k := c.RopeScaling.Kind(); k {
	case "default":
	case "linear":
		if !(c.RopeScaling.Factor > 0) {
			return fmt.Errorf("rope_scaling.factor must be > 0")
		}
	case "llama3":
		r := c.RopeScaling
		if !(r.Factor > 0) || !(r.LowFreqFactor > 0) || !(r.HighFreqFactor > r.LowFreqFactor) || r.OriginalMaxPositionEmbeddings <= 0 {
			return fmt.Errorf("rope_scaling (llama3) needs factor > 0, 0 < low_freq_factor < high_freq_factor and original_max_position_embeddings > 0")
		}
	default:
		return fmt.Errorf("rope_scaling type %q is not supported (want llama3 or linear)", k)
	}
	if c.HiddenAct != "" && c.HiddenAct != "silu" {
		return fmt.Errorf("hidden_act %q is not supported (want silu)", c.HiddenAct)
	}
	return nil
}

// RopeInvFreq returns the rotary inverse frequencies (head_dim/2 values),
// with rope_scaling applied as Hugging Face's _compute_*_parameters do.
func (c *ModelConfig) RopeInvFreq() []float64 {
	hd := c.HeadDimension()
	inv := make([]float64, hd/2)
	for i := range inv {
		inv[i] = 1 / math.Pow(c.RopeTheta, float64(2*i)/float64(hd))
	}
	switch c.RopeScaling.Kind() {
	case "linear":
		for i := range inv {
			inv[i] /= c.RopeScaling.Factor
		}
	case "llama3":
		r := c.RopeScaling
		old := float64(r.OriginalMaxPositionEmbeddings)
		lowWavelen := old / r.LowFreqFactor
		highWavelen := old / r.HighFreqFactor
		for i, f := range inv {
			wavelen := 2 * math.Pi / f
			switch {
			case wavelen < highWavelen:
			case wavelen > lowWavelen:
				inv[i] = f / r.Factor
			default:
				smooth := (old/wavelen - r.LowFreqFactor) / (r.HighFreqFactor - r.LowFreqFactor)
				inv[i] = (1-smooth)*f/r.Factor + smooth*f
			}
		}
	}
	return inv
}

// ReadModelConfig reads and validates dir/config.json.
func ReadModelConfig(dir string) (*ModelConfig, error) {
	path := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, formatErr(path, nil, "missing: a model folder needs config.json")
		}
		return nil, fmt.Errorf("hf: %w", err)
	}
	var c ModelConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, formatErr(path, err, "not valid JSON for a model config")
	}
	if c.NumKeyValueHeads == 0 {
		c.NumKeyValueHeads = c.NumAttentionHeads
	}
	if c.RopeTheta == 0 {
		c.RopeTheta = 10000
	}
	if err := c.Validate(); err != nil {
		return nil, formatErr(path, nil, "%v", err)
	}
	return &c, nil
}

// WriteModelConfig writes dir/config.json atomically.
func WriteModelConfig(dir string, c *ModelConfig) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("hf: WriteModelConfig: %w", err)
	}
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("hf: %w", err)
	}
	return atomicfile.WriteFile(filepath.Join(dir, "config.json"), append(data, '\n'), 0o644)
}
