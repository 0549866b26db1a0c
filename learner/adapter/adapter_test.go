package adapter

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/troupe-rl/troupe/internal/hf"
	"github.com/troupe-rl/troupe/learner/model"
)

func TestExportLoad(t *testing.T) {
	mc := model.TinyConfig(2, 16, 2, 1, 24, 20)
	lora, err := model.NewLoRA(mc, model.LoRAConfig{Rank: 4, Alpha: 8, Targets: []string{hf.ModQ, hf.ModV, hf.ModDown}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range lora.Data[1] {
		lora.Data[1][i] = float32(i) * 0.25
	}
	root := t.TempDir()
	dir, err := Export(root, "coder", 42, lora, "tiny-base")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "coder", "v000042"); dir != want {
		t.Errorf("dir %s, want %s", dir, want)
	}
	// PEFT files, readable by hf.ReadAdapter, with PEFT's names and config.
	a, err := hf.ReadAdapter(dir, mc)
	if err != nil {
		t.Fatal(err)
	}
	if a.Config.PeftType != "LORA" || a.Config.R != 4 || a.Config.LoRAAlpha != 8 || a.Config.BaseModelNameOrPath != "tiny-base" ||
		!slices.Equal(a.Config.TargetModules, []string{hf.ModQ, hf.ModV, hf.ModDown}) {
		t.Errorf("config: %+v", a.Config)
	}
	if len(a.Modules) != 6 {
		t.Errorf("%d modules, want 6", len(a.Modules))
	}
	ts, _, err := hf.ReadSafetensors(filepath.Join(dir, "adapter_model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ts["base_model.model.model.layers.1.mlp.down_proj.lora_B.weight"]; !ok {
		t.Errorf("PEFT tensor name missing; have %d tensors", len(ts))
	}
	back, err := Load(dir, mc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range lora.Data {
		if !slices.Equal(back.Data[i], lora.Data[i]) {
			t.Errorf("param %d differs after round trip", i)
		}
	}
	// No temporary folder left behind; re-export refused.
	ents, _ := os.ReadDir(filepath.Join(root, "coder"))
	if len(ents) != 1 {
		t.Errorf("folder holds %d entries", len(ents))
	}
	if _, err := Export(root, "coder", 42, lora, "x"); !errors.Is(err, ErrExists) {
		t.Errorf("re-export: %v", err)
	}
	if _, err := Export(root, "coder", 7, lora, "x"); err != nil {
		t.Fatal(err)
	}
	vs, _ := Versions(root, "coder")
	if !slices.Equal(vs, []int{7, 42}) {
		t.Errorf("versions %v", vs)
	}
	if _, err := Export(root, "../x", 1, lora, "x"); err == nil {
		t.Errorf("bad policy name accepted")
	}
}

func TestWriteDirAtomicFailureLeavesNothing(t *testing.T) {
	root := t.TempDir()
	final := filepath.Join(root, "p", "v000001")
	err := WriteDirAtomic(final, func(tmp string) error {
		os.WriteFile(filepath.Join(tmp, "half"), []byte("x"), 0o644)
		return errors.New("disk full")
	})
	if err == nil {
		t.Fatal("want error")
	}
	ents, _ := os.ReadDir(filepath.Join(root, "p"))
	if len(ents) != 0 {
		t.Errorf("left %d entries", len(ents))
	}
}
