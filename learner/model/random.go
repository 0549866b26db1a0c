package model

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"

	"github.com/troupe-rl/troupe/internal/hf"
)

// RandomWeights returns weights for config c drawn from seed: linear and
// embedding weights N(0, std²), norm weights 1 + N(0, 0.1²) (so that tests
// exercise them), biases N(0, std²). For tests, benchmarks and tiny demo
// models; not a training initialisation recipe.
func RandomWeights(c *hf.ModelConfig, seed uint64, std float64) map[string]*hf.Tensor {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	out := map[string]*hf.Tensor{}
	names := make([]string, 0)
	shapes := hf.ModelShapes(c)
	for n := range shapes {
		names = append(names, n)
	}
	slices.Sort(names) // deterministic draws
	for _, n := range names {
		t := hf.NewTensor(shapes[n]...)
		norm := len(t.Shape) == 1 && !isBias(n)
		for i := range t.Data {
			if norm {
				t.Data[i] = float32(1 + 0.1*rng.NormFloat64())
			} else {
				t.Data[i] = float32(std * rng.NormFloat64())
			}
		}
		out[n] = t
	}
	return out
}

func isBias(name string) bool { return len(name) > 5 && name[len(name)-5:] == ".bias" }

// WriteRandom writes a random model folder (config.json and
// model.safetensors) to dir.
func WriteRandom(dir string, c *hf.ModelConfig, seed uint64, std float64) error {
	if err := hf.WriteModelConfig(dir, c); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	w := RandomWeights(c, seed, std)
	if err := hf.WriteSafetensors(filepath.Join(dir, "model.safetensors"), w, map[string]string{"format": "pt"}, hf.DtypeF32); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	return nil
}

// TinyConfig is a small Qwen3-shaped config for tests and demos.
func TinyConfig(layers, hidden, heads, kvHeads, ff, vocab int) *hf.ModelConfig {
	return &hf.ModelConfig{
		Architectures: []string{"Qwen3ForCausalLM"}, ModelType: "qwen3",
		VocabSize: vocab, HiddenSize: hidden, IntermediateSize: ff, NumHiddenLayers: layers,
		NumAttentionHeads: heads, NumKeyValueHeads: kvHeads, MaxPositionEmbeddings: 4096,
		RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true, HiddenAct: "silu", TorchDtype: "float32",
	}
}
