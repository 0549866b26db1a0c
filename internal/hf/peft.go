package hf

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/troupe-rl/troupe/internal/atomicfile"
)

// AdapterConfig is PEFT's adapter_config.json for a LoRA adapter (the keys
// vLLM and PEFT read; unknown keys are ignored on read).
type AdapterConfig struct {
	PeftType             string         `json:"peft_type"` // "LORA"
	TaskType             string         `json:"task_type,omitempty"`
	R                    int            `json:"r"`
	LoRAAlpha            float64        `json:"lora_alpha"`
	LoRADropout          float64        `json:"lora_dropout"`
	TargetModules        []string       `json:"target_modules"`
	BaseModelNameOrPath  string         `json:"base_model_name_or_path"`
	Bias                 string         `json:"bias"`
	FanInFanOut          bool           `json:"fan_in_fan_out"`
	InferenceMode        bool           `json:"inference_mode"`
	UseRSLoRA            bool           `json:"use_rslora"`
	ModulesToSave        []string       `json:"modules_to_save"`
	RankPattern          map[string]int `json:"rank_pattern"`
	AlphaPattern         map[string]int `json:"alpha_pattern"`
	LayersToTransform    any            `json:"layers_to_transform"`
	InitLoRAWeights      bool           `json:"init_lora_weights"`
	Revision             any            `json:"revision"`
	LayersPattern        any            `json:"layers_pattern"`
	UseDora              bool           `json:"use_dora"`
	MegatronConfig       any            `json:"megatron_config"`
	MegatronCore         string         `json:"megatron_core,omitempty"`
	AutoMappingPeftModel any            `json:"auto_mapping"`
}

// Scaling is the factor applied to B·A: lora_alpha/r, or lora_alpha/√r
// with rsLoRA.
func (c *AdapterConfig) Scaling() float64 {
	if c.UseRSLoRA {
		return c.LoRAAlpha / math.Sqrt(float64(c.R))
	}
	return c.LoRAAlpha / float64(c.R)
}

// LoRAPair holds one module's low-rank factors: A is [r, in], B is [out, r]
// (PEFT's shapes); the update is W += Scaling · B·A.
type LoRAPair struct {
	A, B *Tensor
}

// Adapter is a LoRA adapter: config plus factors keyed by module path
// (e.g. "model.layers.0.self_attn.q_proj", see [ModulePath]).
type Adapter struct {
	Config  AdapterConfig
	Modules map[string]LoRAPair
}

// NewAdapterConfig returns a LoRA config with PEFT's defaults filled.
func NewAdapterConfig(r int, alpha float64, targets []string, base string) AdapterConfig {
	return AdapterConfig{
		PeftType: "LORA", TaskType: "CAUSAL_LM", R: r, LoRAAlpha: alpha,
		TargetModules: append([]string(nil), targets...), BaseModelNameOrPath: base,
		Bias: "none", InferenceMode: true, InitLoRAWeights: true,
		RankPattern: map[string]int{}, AlphaPattern: map[string]int{},
	}
}

// peftPrefix is what PEFT prepends to module paths in adapter tensor names.
const peftPrefix = "base_model.model."

var peftName = regexp.MustCompile(`^base_model\.model\.(model\.layers\.(\d+)\.(?:self_attn|mlp)\.([a-z_]+))\.lora_([AB])(?:\.default)?\.weight$`)

// WriteAdapter writes dir/adapter_config.json and
// dir/adapter_model.safetensors (F32), each atomically. dir is created.
func WriteAdapter(dir string, a *Adapter) error {
	if err := a.validate("WriteAdapter"); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("hf: %w", err)
	}
	tensors := make(map[string]*Tensor, 2*len(a.Modules))
	for path, p := range a.Modules {
		tensors[peftPrefix+path+".lora_A.weight"] = p.A
		tensors[peftPrefix+path+".lora_B.weight"] = p.B
	}
	if err := WriteSafetensors(filepath.Join(dir, "adapter_model.safetensors"), tensors, map[string]string{"format": "pt"}, DtypeF32); err != nil {
		return err
	}
	data, err := json.MarshalIndent(a.Config, "", "  ")
	if err != nil {
		return fmt.Errorf("hf: %w", err)
	}
	return atomicfile.WriteFile(filepath.Join(dir, "adapter_config.json"), append(data, '\n'), 0o644)
}

// ReadAdapter reads a PEFT LoRA adapter folder. If base is non-nil, module
// shapes are checked against it.
func ReadAdapter(dir string, base *ModelConfig) (*Adapter, error) {
	cfgPath := filepath.Join(dir, "adapter_config.json")
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, formatErr(cfgPath, nil, "missing: an adapter folder needs adapter_config.json")
		}
		return nil, fmt.Errorf("hf: %w", err)
	}
	a := &Adapter{Modules: map[string]LoRAPair{}}
	if err := json.Unmarshal(data, &a.Config); err != nil {
		return nil, formatErr(cfgPath, err, "not a valid adapter config")
	}
	if a.Config.PeftType != "LORA" {
		return nil, formatErr(cfgPath, nil, "peft_type %q is not supported (want LORA)", a.Config.PeftType)
	}
	if a.Config.R <= 0 || !(a.Config.LoRAAlpha > 0) {
		return nil, formatErr(cfgPath, nil, "r (%d) and lora_alpha (%v) must be > 0", a.Config.R, a.Config.LoRAAlpha)
	}
	if len(a.Config.RankPattern) > 0 || len(a.Config.AlphaPattern) > 0 || a.Config.UseDora {
		return nil, formatErr(cfgPath, nil, "rank_pattern, alpha_pattern and use_dora are not supported")
	}
	stPath := filepath.Join(dir, "adapter_model.safetensors")
	ts, _, err := ReadSafetensors(stPath)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ts))
	for n := range ts {
		names = append(names, n)
	}
	sort.Strings(names)
	targets := map[string]bool{}
	for _, m := range a.Config.TargetModules {
		targets[m] = true
	}
	for _, n := range names {
		m := peftName.FindStringSubmatch(n)
		if m == nil {
			return nil, formatErr(stPath, nil, "tensor %q is not a LoRA factor of a decoder layer's linear module", n)
		}
		path, layer, mod, ab := m[1], m[2], m[3], m[4]
		if !targets[mod] {
			return nil, formatErr(stPath, nil, "tensor %q: module %s is not in target_modules %v", n, mod, a.Config.TargetModules)
		}
		if base != nil {
			li, _ := strconv.Atoi(layer)
			if li >= base.NumHiddenLayers {
				return nil, formatErr(stPath, nil, "tensor %q: layer %d, the base model has %d", n, li, base.NumHiddenLayers)
			}
		}
		p := a.Modules[path]
		if ab == "A" {
			p.A = ts[n]
		} else {
			p.B = ts[n]
		}
		a.Modules[path] = p
	}
	if err := a.validate(stPath); err != nil {
		return nil, err
	}
	if base != nil {
		shapes := LinearShapes(base)
		for path, p := range a.Modules {
			mod := path[strings.LastIndex(path, ".")+1:]
			sh, ok := shapes[mod]
			if !ok {
				return nil, formatErr(stPath, nil, "module %s: unknown module %s", path, mod)
			}
			if p.A.Shape[1] != sh[1] || p.B.Shape[0] != sh[0] {
				return nil, formatErr(stPath, nil, "module %s: A %v and B %v do not fit the base weight [out=%d, in=%d]", path, p.A.Shape, p.B.Shape, sh[0], sh[1])
			}
		}
	}
	return a, nil
}

// validate checks that every module has both factors with matching rank.
func (a *Adapter) validate(file string) error {
	if len(a.Modules) == 0 {
		return formatErr(file, nil, "adapter has no LoRA tensors")
	}
	for path, p := range a.Modules {
		if p.A == nil || p.B == nil {
			return formatErr(file, nil, "module %s: needs both lora_A and lora_B", path)
		}
		if len(p.A.Shape) != 2 || len(p.B.Shape) != 2 || p.A.Shape[0] != a.Config.R || p.B.Shape[1] != a.Config.R {
			return formatErr(file, nil, "module %s: lora_A %v and lora_B %v must be [r=%d, in] and [out, r=%d]", path, p.A.Shape, p.B.Shape, a.Config.R, a.Config.R)
		}
	}
	return nil
}
