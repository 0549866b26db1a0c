// Package modelgen writes random-initialised models in Hugging Face's folder
// layout (config.json, model.safetensors, tokenizer.json,
// tokenizer_config.json, generation_config.json), so that tests, examples
// and CPU runs have a model without downloading weights. The output is a
// deterministic function of the Options (seed included): linear and
// embedding weights are drawn from normal(0, InitStd) with a stream per
// tensor derived from (Seed, tensor name), norm weights are 1.
//
// The tokenizer is a byte-level BPE trained on a small built-in corpus (or
// a given text file) with the tokenizer package, or a copy of a given
// tokenizer.json, in which case the vocabulary is sized to fit it.
//
// Write refuses a non-empty destination unless Force is set, and builds the
// folder under a temporary name next to it, renaming it into place at the
// end: a killed run leaves no half-written model (only a ".name.tmp-*"
// folder).
package modelgen

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/troupe-rl/troupe/internal/atomicfile"
	"github.com/troupe-rl/troupe/internal/hf"
)

// Architectures Write can produce.
const (
	ArchQwen3 = "qwen3"
	ArchLlama = "llama"
)

// Options describe the model to write. Zero values take the defaults noted.
type Options struct {
	Arch         string  // "qwen3" (default) or "llama"
	Layers       int     // default 2
	Dim          int     // hidden size, default 64
	Heads        int     // attention heads, default 4
	KVHeads      int     // key/value heads, default Heads/2 (at least 1)
	HeadDim      int     // default Dim/Heads
	FF           int     // MLP intermediate size, default 3·Dim
	Vocab        int     // vocabulary size, default 384 (ignored with Tokenizer: sized to fit it)
	MaxPositions int     // max_position_embeddings, default 2048
	Untied       bool    // separate lm_head (default: tied to the embeddings)
	Seed         int64   // the weights are a function of it (the tokenizer, of the corpus)
	InitStd      float64 // default 0.02
	Dtype        string  // "f32" (default) or "bf16"
	// Tokenizer, if set, is a tokenizer.json (or a folder holding one, with
	// its tokenizer_config.json) to copy instead of training one.
	Tokenizer string
	// Corpus, if set, is a UTF-8 text file to train the tokenizer on
	// instead of the built-in corpus.
	Corpus string
	// Force allows replacing a non-empty destination.
	Force bool
}

// Error is a bad option or destination; it is the user's input (exit 2).
type Error struct{ msg string }

func (e *Error) Error() string  { return "modelgen: " + e.msg }
func (e *Error) BadInput() bool { return true }

func badf(format string, args ...any) error { return &Error{fmt.Sprintf(format, args...)} }

func (o *Options) setDefaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	if o.Arch == "" {
		o.Arch = ArchQwen3
	}
	def(&o.Layers, 2)
	def(&o.Dim, 64)
	def(&o.Heads, 4)
	def(&o.KVHeads, max(1, o.Heads/2))
	def(&o.FF, 3*o.Dim)
	def(&o.Vocab, 384)

	def(&o.MaxPositions, 2048)
	if o.InitStd == 0 {
		o.InitStd = 0.02
	}
	if o.Dtype == "" {
		o.Dtype = "f32"
	}
}

// Config returns the config.json the options describe (vocab_size is
// o.Vocab; Write adjusts it to the tokenizer) and the options with
// defaults filled.
func Config(o Options) (*hf.ModelConfig, Options, error) {
	o.setDefaults()
	for name, v := range map[string]int{"layers": o.Layers, "dim": o.Dim, "heads": o.Heads, "kv-heads": o.KVHeads, "ff": o.FF, "vocab": o.Vocab, "max-positions": o.MaxPositions} {
		if v < 0 {
			return nil, o, badf("%s must be > 0, got %d", name, v)
		}
	}
	if o.HeadDim < 0 {
		return nil, o, badf("head-dim must be > 0, got %d", o.HeadDim)
	}
	if o.HeadDim == 0 && o.Heads > 0 && o.Dim%o.Heads != 0 {
		return nil, o, badf("dim (%d) must be a multiple of heads (%d) unless head-dim is given", o.Dim, o.Heads)
	}
	if !(o.InitStd > 0 && o.InitStd < 10) {
		return nil, o, badf("init std must be in (0, 10), got %v", o.InitStd)
	}
	switch strings.ToLower(o.Dtype) {
	case "f32", "float32":
		o.Dtype = hf.DtypeF32
	case "bf16", "bfloat16":
		o.Dtype = hf.DtypeBF16
	default:
		return nil, o, badf("dtype %q: want f32 or bf16", o.Dtype)
	}
	c := &hf.ModelConfig{
		ModelType:             o.Arch,
		VocabSize:             o.Vocab,
		HiddenSize:            o.Dim,
		IntermediateSize:      o.FF,
		NumHiddenLayers:       o.Layers,
		NumAttentionHeads:     o.Heads,
		NumKeyValueHeads:      o.KVHeads,
		HeadDim:               o.HeadDim,
		MaxPositionEmbeddings: o.MaxPositions,
		RMSNormEps:            1e-6,
		RopeTheta:             1e6,
		TieWordEmbeddings:     !o.Untied,
		HiddenAct:             "silu",
		TorchDtype:            map[string]string{hf.DtypeF32: "float32", hf.DtypeBF16: "bfloat16"}[o.Dtype],
	}
	switch o.Arch {
	case ArchQwen3:
		c.Architectures = []string{"Qwen3ForCausalLM"}
		if c.HeadDim == 0 {
			c.HeadDim = o.Dim / max(o.Heads, 1)
		}
	case ArchLlama:
		c.Architectures = []string{"LlamaForCausalLM"}
		c.RMSNormEps = 1e-5
		c.RopeTheta = 500000
	default:
		return nil, o, badf("arch %q: want qwen3 or llama", o.Arch)
	}
	if err := c.Validate(); err != nil {
		return nil, o, badf("%v", err)
	}
	return c, o, nil
}

// Weights returns random weights for c: every tensor of hf.ModelShapes,
// linear and embedding weights ~ normal(0, std), norms = 1. Each tensor's
// values depend only on (seed, its name).
func Weights(c *hf.ModelConfig, seed int64, std float64) map[string]*hf.Tensor {
	out := map[string]*hf.Tensor{}
	for name, shape := range hf.ModelShapes(c) {
		t := hf.NewTensor(shape...)
		if strings.HasSuffix(name, "norm.weight") {
			for i := range t.Data {
				t.Data[i] = 1
			}
		} else if !strings.HasSuffix(name, ".bias") {
			h := fnv.New64a()
			h.Write([]byte(name))
			rng := rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
			for i := range t.Data {
				t.Data[i] = float32(rng.NormFloat64() * std)
			}
		}
		out[name] = t
	}
	return out
}

// Info describes a written model.
type Info struct {
	Dir        string
	Config     *hf.ModelConfig
	Params     int // number of weights
	TokenCount int // tokens the tokenizer defines
}

// Write creates the model folder dir.
func Write(dir string, o Options) (*Info, error) {
	c, o, err := Config(o)
	if err != nil {
		return nil, err
	}
	if err := checkDest(dir, o.Force); err != nil {
		return nil, err
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("modelgen: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(filepath.Clean(dir))+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("modelgen: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("modelgen: %w", err)
	}
	tk, err := writeTokenizer(tmp, c, o)
	if err != nil {
		return nil, err
	}
	c.VocabSize = tk.vocab
	c.EOSTokenID = tk.eos
	c.BOSTokenID = tk.bos
	if err := c.Validate(); err != nil {
		return nil, badf("%v", err)
	}
	if err := hf.WriteModelConfig(tmp, c); err != nil {
		return nil, fmt.Errorf("modelgen: %w", err)
	}
	w := Weights(c, o.Seed, o.InitStd)
	params := 0
	for _, t := range w {
		params += len(t.Data)
	}
	meta := map[string]string{"format": "pt", "generator": "troupe modelgen", "seed": fmt.Sprint(o.Seed)}
	if err := hf.WriteSafetensors(filepath.Join(tmp, "model.safetensors"), w, meta, o.Dtype); err != nil {
		return nil, fmt.Errorf("modelgen: %w", err)
	}
	gen := map[string]any{"eos_token_id": tk.eos, "do_sample": true, "temperature": 1.0, "top_p": 1.0}
	if tk.bos != nil {
		gen["bos_token_id"] = *tk.bos
	}
	if err := writeJSON(filepath.Join(tmp, "generation_config.json"), gen); err != nil {
		return nil, err
	}
	if err := atomicfile.SyncDir(tmp); err != nil {
		return nil, fmt.Errorf("modelgen: %w", err)
	}
	if err := replaceDir(tmp, dir); err != nil {
		return nil, err
	}
	ok = true
	return &Info{Dir: dir, Config: c, Params: params, TokenCount: tk.tokens}, nil
}

// checkDest refuses an existing non-empty folder (or a file) unless force.
func checkDest(dir string, force bool) error {
	st, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("modelgen: %w", err)
	}
	if !st.IsDir() {
		return badf("%s exists and is not a folder", dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("modelgen: %w", err)
	}
	if len(ents) > 0 && !force {
		return badf("%s is not empty (use --force to replace it)", dir)
	}
	return nil
}

// replaceDir moves the finished folder tmp to dir, replacing dir if it
// exists (the old one is moved aside first and removed last).
func replaceDir(tmp, dir string) error {
	var old string
	if _, err := os.Stat(dir); err == nil {
		old = tmp + ".old"
		if err := os.Rename(dir, old); err != nil {
			return fmt.Errorf("modelgen: %w", err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if old != "" {
			os.Rename(old, dir)
		}
		return fmt.Errorf("modelgen: %w", err)
	}
	if old != "" {
		os.RemoveAll(old)
	}
	if err := atomicfile.SyncDir(filepath.Dir(dir)); err != nil {
		return fmt.Errorf("modelgen: %w", err)
	}
	return nil
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("modelgen: %w", err)
	}
	if err := atomicfile.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("modelgen: %w", err)
	}
	return nil
}
