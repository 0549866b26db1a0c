package configs

import (
	"path/filepath"
	"testing"
)

// TestShippedConfigsLoad: every YAML file under configs/ decodes strictly
// and validates (configs/paper point at servers and folders that exist only
// on a GPU box, so only the config itself is checked here).
func TestShippedConfigsLoad(t *testing.T) {
	var files []string
	for _, pat := range []string{"*.yaml", "ablations/*.yaml", "paper/*.yaml"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 10 {
		t.Fatalf("found only %d config files: %v", len(files), files)
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
