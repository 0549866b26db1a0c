// Package adapter exports trained LoRA adapters in PEFT layout, the format
// vLLM, PEFT and troupe's embedded engine load, into versioned folders:
//
//	<root>/<policy>/v000042/adapter_config.json
//	<root>/<policy>/v000042/adapter_model.safetensors
//
// A version folder is written under a temporary name in the same parent
// and renamed into place, so a reader (a server hot-swapping adapters)
// never sees a partial adapter; an existing version is never overwritten.
package adapter

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/troupe-rl/troupe/internal/atomicfile"
	"github.com/troupe-rl/troupe/internal/hf"
	"github.com/troupe-rl/troupe/learner/model"
)

// ErrExists is returned by Export when the version folder already exists.
var ErrExists = errors.New("adapter: version already exported")

var versionDir = regexp.MustCompile(`^v(\d{6,})$`)

// VersionName is the folder name of a version: v000042.
func VersionName(v int) string { return fmt.Sprintf("v%06d", v) }

// Dir is <root>/<policy>/v<version>.
func Dir(root, policy string, version int) string {
	return filepath.Join(root, policy, VersionName(version))
}

// Export writes lora as version of policy under root and returns the
// folder. baseModel goes to base_model_name_or_path.
func Export(root, policy string, version int, lora *model.LoRA, baseModel string) (string, error) {
	if policy == "" || strings.ContainsAny(policy, `/\`) || strings.HasPrefix(policy, ".") {
		return "", fmt.Errorf("adapter: bad policy name %q", policy)
	}
	final := Dir(root, policy, version)
	if _, err := os.Stat(final); err == nil {
		return "", fmt.Errorf("%w: %s", ErrExists, final)
	}
	if err := WriteDirAtomic(final, func(tmp string) error {
		return hf.WriteAdapter(tmp, lora.Adapter(baseModel))
	}); err != nil {
		return "", err
	}
	return final, nil
}

// WriteDirAtomic creates folder final by letting fill write into a
// temporary sibling folder and renaming it into place (fsyncing the
// parent). A leftover temporary folder is named ".<base>.tmp-*".
func WriteDirAtomic(final string, fill func(tmp string) error) error {
	parent := filepath.Dir(final)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("adapter: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(final)+".tmp-")
	if err != nil {
		return fmt.Errorf("adapter: %w", err)
	}
	if err := fill(tmp); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := atomicfile.SyncDir(tmp); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("adapter: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("adapter: %w", err)
	}
	if err := atomicfile.SyncDir(parent); err != nil {
		return fmt.Errorf("adapter: %w", err)
	}
	return nil
}

// Versions lists the exported versions of policy under root, ascending.
func Versions(root, policy string) ([]int, error) {
	ents, err := os.ReadDir(filepath.Join(root, policy))
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("adapter: %w", err)
	}
	var vs []int
	for _, e := range ents {
		if m := versionDir.FindStringSubmatch(e.Name()); m != nil && e.IsDir() {
			v, _ := strconv.Atoi(m[1])
			vs = append(vs, v)
		}
	}
	sort.Ints(vs)
	return vs, nil
}

// Load reads an adapter folder for a base model with config mc.
func Load(dir string, mc *hf.ModelConfig) (*model.LoRA, error) {
	a, err := hf.ReadAdapter(dir, mc)
	if err != nil {
		return nil, fmt.Errorf("adapter: %w", err)
	}
	l, err := model.FromAdapter(a, mc)
	if err != nil {
		return nil, fmt.Errorf("adapter: %s: %w", dir, err)
	}
	return l, nil
}
