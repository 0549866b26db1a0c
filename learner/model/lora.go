package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/troupe-rl/troupe/internal/hf"
)

// LoRAConfig says which linear modules get adapters and their rank and
// scaling numerator.
type LoRAConfig struct {
	Rank    int
	Alpha   float64
	Targets []string // PEFT module names (hf.ModQ …); empty means all seven
}

// Scaling is lora_alpha / r.
func (c LoRAConfig) Scaling() float64 { return c.Alpha / float64(c.Rank) }

func (c LoRAConfig) targets() []string {
	if len(c.Targets) == 0 {
		return hf.AllModules
	}
	return c.Targets
}

// Validate checks the targets and numbers.
func (c LoRAConfig) Validate() error {
	if c.Rank < 1 || !(c.Alpha > 0) {
		return fmt.Errorf("model: LoRA needs rank ≥ 1 and alpha > 0, got %d and %v", c.Rank, c.Alpha)
	}
	for _, t := range c.Targets {
		if !slices.Contains(hf.AllModules, t) {
			return fmt.Errorf("model: LoRA target %q is not one of %v", t, hf.AllModules)
		}
	}
	return nil
}

// LoRA holds one adapter's parameters on the host, in float32, in a fixed
// order: for each layer, for each target in hf.AllModules order, A then B.
// Params()[2i] is module i's A ([r, in], row-major), Params()[2i+1] its B
// ([out, r]).
type LoRA struct {
	Config  LoRAConfig
	Modules []string // module paths (hf.ModulePath), in parameter order
	Shapes  [][]int  // per parameter
	Data    [][]float32
}

// NewLoRA returns a fresh adapter for model config mc: A ~ U(±1/√in)
// (PEFT's kaiming_uniform with a=√5), B = 0, drawn from seed.
func NewLoRA(mc *hf.ModelConfig, c LoRAConfig, seed uint64) (*LoRA, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	l := &LoRA{Config: c}
	l.Config.Targets = slices.Clone(c.targets())
	shapes := hf.LinearShapes(mc)
	rng := rand.New(rand.NewPCG(seed, 0x10ba))
	for layer := range mc.NumHiddenLayers {
		for _, mod := range hf.AllModules {
			if !slices.Contains(l.Config.Targets, mod) {
				continue
			}
			out, in := shapes[mod][0], shapes[mod][1]
			a := make([]float32, c.Rank*in)
			bound := 1 / math.Sqrt(float64(in))
			for i := range a {
				a[i] = float32((2*rng.Float64() - 1) * bound)
			}
			l.Modules = append(l.Modules, hf.ModulePath(layer, mod))
			l.Shapes = append(l.Shapes, []int{c.Rank, in}, []int{out, c.Rank})
			l.Data = append(l.Data, a, make([]float32, out*c.Rank))
		}
	}
	return l, nil
}

// NumParams is the number of scalars in the adapter.
func (l *LoRA) NumParams() int {
	n := 0
	for _, d := range l.Data {
		n += len(d)
	}
	return n
}

// Clone returns a deep copy.
func (l *LoRA) Clone() *LoRA {
	c := &LoRA{Config: l.Config, Modules: slices.Clone(l.Modules)}
	c.Config.Targets = slices.Clone(l.Config.Targets)
	for i := range l.Data {
		c.Shapes = append(c.Shapes, slices.Clone(l.Shapes[i]))
		c.Data = append(c.Data, slices.Clone(l.Data[i]))
	}
	return c
}

// Adapter converts the parameters to a PEFT adapter (copies the data).
func (l *LoRA) Adapter(baseModel string) *hf.Adapter {
	a := &hf.Adapter{
		Config:  hf.NewAdapterConfig(l.Config.Rank, l.Config.Alpha, l.Config.Targets, baseModel),
		Modules: map[string]hf.LoRAPair{},
	}
	for i, path := range l.Modules {
		a.Modules[path] = hf.LoRAPair{
			A: &hf.Tensor{Shape: slices.Clone(l.Shapes[2*i]), Data: slices.Clone(l.Data[2*i])},
			B: &hf.Tensor{Shape: slices.Clone(l.Shapes[2*i+1]), Data: slices.Clone(l.Data[2*i+1])},
		}
	}
	return a
}

// FromAdapter converts a PEFT adapter for model config mc into a LoRA,
// checking that it covers every targeted module of every layer.
func FromAdapter(a *hf.Adapter, mc *hf.ModelConfig) (*LoRA, error) {
	if a.Config.UseRSLoRA {
		return nil, fmt.Errorf("model: rsLoRA adapters are not supported")
	}
	c := LoRAConfig{Rank: a.Config.R, Alpha: a.Config.LoRAAlpha, Targets: a.Config.TargetModules}
	l, err := NewLoRA(mc, c, 0)
	if err != nil {
		return nil, err
	}
	if len(a.Modules) != len(l.Modules) {
		return nil, fmt.Errorf("model: adapter has %d modules, config %v implies %d", len(a.Modules), c.targets(), len(l.Modules))
	}
	for i, path := range l.Modules {
		p, ok := a.Modules[path]
		if !ok {
			return nil, fmt.Errorf("model: adapter lacks module %s", path)
		}
		for j, t := range []*hf.Tensor{p.A, p.B} {
			if !slices.Equal(t.Shape, l.Shapes[2*i+j]) {
				return nil, fmt.Errorf("model: adapter module %s: shape %v, want %v", path, t.Shape, l.Shapes[2*i+j])
			}
			l.Data[2*i+j] = slices.Clone(t.Data)
		}
	}
	return l, nil
}

// MergeInto adds s·B·A to each adapted module's base weight in w (Hugging
// Face names, [out, in]; modified in place), so that the model w describes
// computes what the base model with this adapter computes (up to float32
// rounding).
func (l *LoRA) MergeInto(w map[string]*hf.Tensor) error {
	s := float32(l.Config.Scaling())
	r := l.Config.Rank
	for i, path := range l.Modules {
		wt, ok := w[path+".weight"]
		if !ok {
			return fmt.Errorf("model: merge: no weight %s.weight", path)
		}
		a, b := l.Data[2*i], l.Data[2*i+1]
		out, in := l.Shapes[2*i+1][0], l.Shapes[2*i][1]
		if !slices.Equal(wt.Shape, []int{out, in}) {
			return fmt.Errorf("model: merge: %s.weight has shape %v, the adapter [%d %d]", path, wt.Shape, out, in)
		}
		for o := range out {
			row := wt.Data[o*in : (o+1)*in]
			for k := range r {
				c := s * b[o*r+k]
				if c == 0 {
					continue
				}
				ak := a[k*in : (k+1)*in]
				for j := range row {
					row[j] += c * ak[j]
				}
			}
		}
	}
	return nil
}
