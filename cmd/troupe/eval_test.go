package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-rl/troupe/generation/builtin/servertest"
	"github.com/troupe-rl/troupe/internal/hf"
)

func TestEval(t *testing.T) {
	srv := servertest.Start(t, servertest.Options{})
	dir := t.TempDir()
	cfg := writeConfig(t, dir, fmt.Sprintf(`name: ev
runs_dir: %s
env: {name: planpath, size: 5, max_turns: 2}
generation: {backend: openai, base_urls: [%s], model: tiny, tokenizer: %s, eval: {max_tokens: 8}}
eval: {problems: 3, samples: 2}
`, dir, srv.URL, srv.ModelDir))
	out, errs, code := runCLI("eval", cfg, "--json")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	var res struct {
		Problems, Samples int
		SuccessRate       float64         `json:"success_rate"`
		ByTurn            map[int]float64 `json:"success_by_turn"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Problems != 3 || res.Samples != 6 || res.SuccessRate < 0 || res.SuccessRate > 1 {
		t.Fatalf("%+v", res)
	}

	// Per-role adapters, as troupe run lays them out.
	mc, err := hf.ReadModelConfig(srv.ModelDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{"tool", "plan"} {
		a := &hf.Adapter{Config: hf.NewAdapterConfig(2, 4, []string{hf.ModQ}, "tiny"), Modules: map[string]hf.LoRAPair{}}
		for l := 0; l < mc.NumHiddenLayers; l++ {
			sh := hf.LinearShapes(mc)[hf.ModQ]
			a.Modules[hf.ModulePath(l, hf.ModQ)] = hf.LoRAPair{A: hf.NewTensor(2, sh[1]), B: hf.NewTensor(sh[0], 2)}
		}
		if err := hf.WriteAdapter(filepath.Join(dir, "adapters", role, "v000003"), a); err != nil {
			t.Fatal(err)
		}
	}
	if out, errs, code := runCLI("eval", cfg, "--adapter", filepath.Join(dir, "adapters")); code != 0 || !strings.Contains(out, "pass@1") {
		t.Fatalf("eval with adapters: exit %d\n%s\n%s", code, out, errs)
	}
	if _, errs, code := runCLI("eval", cfg, "--adapter", filepath.Join(dir, "nothing")); code != 2 {
		t.Fatalf("missing adapters: exit %d: %s", code, errs)
	}
}
