package modelgen

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-rl/troupe/generation/tokenizer"
	"github.com/troupe-rl/troupe/internal/hf"
)

func TestWriteQwen3(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	info, err := Write(dir, Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	c, err := hf.ReadModelConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.ModelType != "qwen3" || c.NumHiddenLayers != 2 || c.HiddenSize != 64 || c.VocabSize != 384 || !c.TieWordEmbeddings {
		t.Errorf("config %+v", c)
	}
	w, err := hf.LoadWeights(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := hf.CheckShapes(dir, c, w); err != nil {
		t.Fatal(err)
	}
	var sum, sq float64
	var n int
	for name, tt := range w {
		if strings.HasSuffix(name, "norm.weight") {
			for _, v := range tt.Data {
				if v != 1 {
					t.Fatalf("%s: norm weight %v, want 1", name, v)
				}
			}
			continue
		}
		for _, v := range tt.Data {
			sum += float64(v)
			sq += float64(v) * float64(v)
			n++
		}
	}
	mean, std := sum/float64(n), math.Sqrt(sq/float64(n))
	if math.Abs(mean) > 1e-3 || math.Abs(std-0.02) > 1e-3 {
		t.Errorf("init mean %.5f std %.5f, want 0 and 0.02", mean, std)
	}
	if info.Params != n+countNorms(w) {
		t.Errorf("Params %d", info.Params)
	}
	tk, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tk.VocabSize() > c.VocabSize || tk.VocabSize() != info.TokenCount {
		t.Errorf("tokenizer has %d tokens, config vocab %d", tk.VocabSize(), c.VocabSize)
	}
	for _, s := range []string{"The quick brown fox.", "def solve(nums):\n    return 0", "héllo wörld ✓ 🙂", "<|im_start|>user\nhi<|im_end|>"} {
		ids := tk.Encode(s)
		if got := tk.Decode(ids); got != s {
			t.Errorf("round trip %q → %v → %q", s, ids, got)
		}
	}
	if ids := tk.Encode("The answer is"); len(ids) >= len("The answer is") {
		t.Errorf("no merges learned: %v", ids)
	}
	eos := c.EOSTokenIDs()
	if im, _ := tk.TokenID("<|im_end|>"); len(eos) != 2 || eos[0] != int(im) {
		t.Errorf("eos %v, <|im_end|> is %d", eos, im)
	}
	if !strings.Contains(tk.ChatTemplate(), "im_start") {
		t.Errorf("no chat template")
	}
	ents, _ := os.ReadDir(filepath.Dir(dir))
	if len(ents) != 1 {
		t.Errorf("leftovers next to the model: %v", ents)
	}
}

func countNorms(w map[string]*hf.Tensor) int {
	n := 0
	for name, t := range w {
		if strings.HasSuffix(name, "norm.weight") {
			n += len(t.Data)
		}
	}
	return n
}

func TestDeterministic(t *testing.T) {
	root := t.TempDir()
	files := []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"}
	read := func(dir string) map[string][]byte {
		out := map[string][]byte{}
		for _, f := range files {
			data, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			out[f] = data
		}
		return out
	}
	o := Options{Seed: 42, Layers: 1, Dim: 32, Heads: 2, KVHeads: 1, Vocab: 300}
	for _, d := range []string{"a", "b"} {
		if _, err := Write(filepath.Join(root, d), o); err != nil {
			t.Fatal(err)
		}
	}
	o.Seed = 43
	if _, err := Write(filepath.Join(root, "c"), o); err != nil {
		t.Fatal(err)
	}
	a, b, c := read(filepath.Join(root, "a")), read(filepath.Join(root, "b")), read(filepath.Join(root, "c"))
	for _, f := range files {
		if !bytes.Equal(a[f], b[f]) {
			t.Errorf("%s differs between two runs with the same seed", f)
		}
	}
	if bytes.Equal(a["model.safetensors"], c["model.safetensors"]) {
		t.Error("a different seed gave the same weights")
	}
}

func TestVariants(t *testing.T) {
	root := t.TempDir()
	cases := []struct {
		name string
		o    Options
		ok   func(*hf.ModelConfig, *tokenizer.Tokenizer) string
	}{
		{"llama", Options{Arch: "llama", Untied: true, Vocab: 320}, func(c *hf.ModelConfig, tk *tokenizer.Tokenizer) string {
			if c.ModelType != "llama" || c.TieWordEmbeddings || !tk.AddBOS() || c.BOSTokenID == nil {
				return "not an untied llama with BOS"
			}
			return ""
		}},
		{"bf16", Options{Dtype: "bf16", Dim: 32, Heads: 2}, func(c *hf.ModelConfig, _ *tokenizer.Tokenizer) string {
			if c.TorchDtype != "bfloat16" {
				return "torch_dtype " + c.TorchDtype
			}
			return ""
		}},
		{"gqa head_dim", Options{Dim: 48, Heads: 6, KVHeads: 2, HeadDim: 16, FF: 100}, func(c *hf.ModelConfig, _ *tokenizer.Tokenizer) string {
			if c.HeadDimension() != 16 || c.IntermediateSize != 100 {
				return "shape options lost"
			}
			return ""
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(root, tc.name)
			if _, err := Write(dir, tc.o); err != nil {
				t.Fatal(err)
			}
			c, err := hf.ReadModelConfig(dir)
			if err != nil {
				t.Fatal(err)
			}
			w, err := hf.LoadWeights(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := hf.CheckShapes(dir, c, w); err != nil {
				t.Fatal(err)
			}
			tk, err := tokenizer.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if msg := tc.ok(c, tk); msg != "" {
				t.Error(msg)
			}
		})
	}
}

func TestCopyTokenizerAndCorpus(t *testing.T) {
	root := t.TempDir()
	corpus := filepath.Join(root, "corpus.txt")
	os.WriteFile(corpus, []byte(strings.Repeat("banana bandana cabana ", 50)), 0o644)
	src := filepath.Join(root, "src")
	if _, err := Write(src, Options{Corpus: corpus, Vocab: 400}); err != nil {
		t.Fatal(err)
	}
	tk, _ := tokenizer.Load(src)
	if ids := tk.Encode(" banana"); len(ids) != 1 {
		t.Errorf("corpus not used: %v", ids)
	}
	dst := filepath.Join(root, "dst")
	info, err := Write(dst, Options{Tokenizer: filepath.Join(src, "tokenizer.json"), Vocab: 9999})
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.VocabSize != tk.VocabSize() {
		t.Errorf("vocab %d, tokenizer has %d", info.Config.VocabSize, tk.VocabSize())
	}
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		a, _ := os.ReadFile(filepath.Join(src, f))
		b, _ := os.ReadFile(filepath.Join(dst, f))
		if !bytes.Equal(a, b) {
			t.Errorf("%s not copied", f)
		}
	}
}

func TestDestination(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "m")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("x"), 0o644)
	_, err := Write(dir, Options{})
	var bi interface{ BadInput() bool }
	if err == nil || !errors.As(err, &bi) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("non-empty destination: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "keep.txt")); err != nil {
		t.Fatal("destination touched")
	}
	if _, err := Write(dir, Options{Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "keep.txt")); err == nil {
		t.Error("--force kept the old content")
	}
	ents, _ := os.ReadDir(root)
	if len(ents) != 1 {
		t.Errorf("leftovers: %v", ents)
	}
	// An empty folder is fine without --force.
	empty := filepath.Join(root, "empty")
	os.Mkdir(empty, 0o755)
	if _, err := Write(empty, Options{}); err != nil {
		t.Error(err)
	}
}

func TestBadOptions(t *testing.T) {
	for _, o := range []Options{
		{Arch: "gpt2"}, {Dim: 65, Heads: 4}, {Heads: 4, KVHeads: 3}, {Vocab: 100}, {Dtype: "f16"}, {Layers: -1},
		{Tokenizer: "/nonexistent/tokenizer.json"},
	} {
		_, err := Write(filepath.Join(t.TempDir(), "m"), o)
		var bi interface{ BadInput() bool }
		if err == nil || !errors.As(err, &bi) || !bi.BadInput() {
			t.Errorf("%+v: %v (want a BadInput error)", o, err)
		}
	}
}
