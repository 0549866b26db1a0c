package hf

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func tinyConfig() *ModelConfig {
	return &ModelConfig{ModelType: "qwen3", VocabSize: 32, HiddenSize: 16, IntermediateSize: 24,
		NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 8,
		MaxPositionEmbeddings: 64, RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true}
}

func randTensors(c *ModelConfig) map[string]*Tensor {
	out := map[string]*Tensor{}
	x := float32(0.1)
	for name, shape := range ModelShapes(c) {
		t := NewTensor(shape...)
		for i := range t.Data {
			x = x*1.37 + 0.11
			x -= float32(math.Floor(float64(x)))
			t.Data[i] = x - 0.5
		}
		out[name] = t
	}
	return out
}

func TestSafetensorsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	c := tinyConfig()
	want := randTensors(c)
	want["scalar"] = &Tensor{Shape: []int{}, Data: []float32{3}}
	p := filepath.Join(dir, "model.safetensors")
	if err := WriteSafetensors(p, want, map[string]string{"format": "pt"}, DtypeF32); err != nil {
		t.Fatal(err)
	}
	got, meta, err := ReadSafetensors(p)
	if err != nil {
		t.Fatal(err)
	}
	if meta["format"] != "pt" || len(got) != len(want) {
		t.Fatalf("meta %v, %d tensors want %d", meta, len(got), len(want))
	}
	for n, w := range want {
		g := got[n]
		if !sameShape(g.Shape, w.Shape) {
			t.Fatalf("%s: shape %v want %v", n, g.Shape, w.Shape)
		}
		for i := range w.Data {
			if g.Data[i] != w.Data[i] {
				t.Fatalf("%s[%d] = %v want %v", n, i, g.Data[i], w.Data[i])
			}
		}
	}
	delete(want, "scalar")
	if err := CheckShapes(dir, c, want); err != nil {
		t.Fatal(err)
	}
}

func TestBF16AndF16(t *testing.T) {
	// bf16 round trip keeps values exactly representable in bf16.
	for _, v := range []float32{0, 1, -2, 0.5, 3.140625, float32(math.Inf(1))} {
		if got := math.Float32frombits(uint32(F32ToBF16(v)) << 16); got != v {
			t.Errorf("bf16(%v) = %v", v, got)
		}
	}
	// Known half-precision encodings.
	for bits, want := range map[uint16]float32{0x3c00: 1, 0xc000: -2, 0x3555: 0.333251953125, 0x0001: 5.960464477539063e-08, 0x7bff: 65504} {
		if got := F16ToF32(bits); got != want {
			t.Errorf("f16 %#x = %v want %v", bits, got, want)
		}
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "x.safetensors")
	if err := WriteSafetensors(p, map[string]*Tensor{"w": {Shape: []int{2}, Data: []float32{1.5, -0.25}}}, nil, DtypeBF16); err != nil {
		t.Fatal(err)
	}
	got, _, err := ReadSafetensors(p)
	if err != nil || got["w"].Data[0] != 1.5 || got["w"].Data[1] != -0.25 {
		t.Fatalf("bf16 file: %v %v", got, err)
	}
}

func TestShardedWeights(t *testing.T) {
	dir := t.TempDir()
	c := tinyConfig()
	all := randTensors(c)
	a, b := map[string]*Tensor{}, map[string]*Tensor{}
	wm := map[string]string{}
	for n, ten := range all {
		if strings.Contains(n, "layers.0.") {
			a[n], wm[n] = ten, "model-00001-of-00002.safetensors"
		} else {
			b[n], wm[n] = ten, "model-00002-of-00002.safetensors"
		}
	}
	if err := WriteSafetensors(filepath.Join(dir, "model-00001-of-00002.safetensors"), a, nil, DtypeF32); err != nil {
		t.Fatal(err)
	}
	if err := WriteSafetensors(filepath.Join(dir, "model-00002-of-00002.safetensors"), b, nil, DtypeBF16); err != nil {
		t.Fatal(err)
	}
	idx, _ := json.Marshal(map[string]any{"metadata": map[string]any{}, "weight_map": wm})
	os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), idx, 0o644)
	got, err := LoadWeights(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckShapes(dir, c, got); err != nil {
		t.Fatal(err)
	}
}

func TestBadFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.safetensors")
	WriteSafetensors(good, map[string]*Tensor{"w": {Shape: []int{4}, Data: []float32{1, 2, 3, 4}}}, nil, DtypeF32)
	data, _ := os.ReadFile(good)
	cases := map[string][]byte{
		"empty":     {},
		"short":     data[:5],
		"truncated": data[:len(data)-3],
		"huge hdr":  binary.LittleEndian.AppendUint64(nil, 1<<40),
		"not json":  append(binary.LittleEndian.AppendUint64(nil, 3), []byte("abc")...),
	}
	for name, b := range cases {
		p := filepath.Join(dir, name+".safetensors")
		os.WriteFile(p, b, 0o644)
		_, _, err := ReadSafetensors(p)
		var fe *FormatError
		if !errors.As(err, &fe) || !fe.BadInput() || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: want FormatError naming the file, got %v", name, err)
		}
	}
	if _, err := LoadWeights(dir); err == nil || !strings.Contains(err.Error(), "model.safetensors") {
		t.Errorf("folder without weights: %v", err)
	}
	if _, err := ReadModelConfig(dir); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("folder without config: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type":"gpt2"}`), 0o644)
	if _, err := ReadModelConfig(dir); err == nil || !strings.Contains(err.Error(), "gpt2") {
		t.Errorf("bad model_type: %v", err)
	}
}

func TestModelConfigRoundTrip(t *testing.T) {
	dir := t.TempDir()
	c := tinyConfig()
	c.EOSTokenID = []int{3, 4}
	if err := WriteModelConfig(dir, c); err != nil {
		t.Fatal(err)
	}
	got, err := ReadModelConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.HiddenSize != 16 || !got.QKNorm() || len(got.EOSTokenIDs()) != 2 || got.HeadDimension() != 8 {
		t.Fatalf("%+v", got)
	}
}

func TestRopeLlama3(t *testing.T) {
	c := tinyConfig()
	c.HeadDim, c.RopeTheta = 128, 500000
	c.RopeScaling = &RopeScaling{RopeType: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}
	inv := c.RopeInvFreq()
	// Highest frequencies are unchanged, lowest are divided by the factor.
	if inv[0] != 1 {
		t.Fatalf("inv[0] = %v", inv[0])
	}
	base := 1 / math.Pow(500000, float64(126)/128)
	if math.Abs(inv[63]-base/8) > 1e-15 {
		t.Fatalf("inv[63] = %v want %v", inv[63], base/8)
	}
}

func TestAdapterRoundTrip(t *testing.T) {
	dir := t.TempDir()
	c := tinyConfig()
	a := &Adapter{Config: NewAdapterConfig(4, 8, []string{ModQ, ModDown}, "tiny"), Modules: map[string]LoRAPair{}}
	for l := 0; l < 2; l++ {
		for _, m := range []string{ModQ, ModDown} {
			sh := LinearShapes(c)[m]
			p := LoRAPair{A: NewTensor(4, sh[1]), B: NewTensor(sh[0], 4)}
			p.A.Data[0], p.B.Data[1] = 0.5, -1
			a.Modules[ModulePath(l, m)] = p
		}
	}
	if err := WriteAdapter(dir, a); err != nil {
		t.Fatal(err)
	}
	got, err := ReadAdapter(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Modules) != 4 || got.Config.Scaling() != 2 {
		t.Fatalf("%d modules, scaling %v", len(got.Modules), got.Config.Scaling())
	}
	p := got.Modules["model.layers.1.mlp.down_proj"]
	if p.A.Data[0] != 0.5 || p.B.Data[1] != -1 {
		t.Fatal("values lost")
	}
	// A base model with other shapes is refused, naming the module.
	small := tinyConfig()
	small.IntermediateSize = 8
	if _, err := ReadAdapter(dir, small); err == nil || !strings.Contains(err.Error(), "down_proj") {
		t.Fatalf("shape mismatch not caught: %v", err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "adapter_config.json"))
	for _, key := range []string{`"peft_type": "LORA"`, `"r": 4`, `"lora_alpha": 8`, `"target_modules"`, `"base_model_name_or_path": "tiny"`} {
		if !strings.Contains(string(raw), key) {
			t.Errorf("adapter_config.json lacks %s", key)
		}
	}
}

func FuzzReadSafetensors(f *testing.F) {
	dir := f.TempDir()
	good := filepath.Join(dir, "g.safetensors")
	WriteSafetensors(good, map[string]*Tensor{"w": {Shape: []int{2, 2}, Data: []float32{1, 2, 3, 4}}}, nil, DtypeBF16)
	data, _ := os.ReadFile(good)
	f.Add(data)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "f.safetensors")
		os.WriteFile(p, b, 0o644)
		ts, _, err := ReadSafetensors(p)
		if err == nil {
			for _, x := range ts {
				if x.Numel() != len(x.Data) {
					t.Fatal("inconsistent tensor")
				}
			}
		}
	})
}
