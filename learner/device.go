package learner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/gobackend"
)

// Device names for learner.device.
const (
	DeviceCPU  = "cpu"
	DeviceCUDA = "cuda"
)

// NewBackend returns the GoMLX backend for the config's device: the
// pure-Go backend with an explicit parallelism on cpu (the default worker
// pool deadlocked intermittently in v0.28; see shared/research/godeps.md),
// or XLA with the PJRT CUDA plugin on cuda.
func NewBackend(c *Config) (compute.Backend, error) {
	switch c.Device {
	case DeviceCPU:
		b, err := gobackend.New(fmt.Sprintf("parallelism=%d", c.CPUParallelism))
		if err != nil {
			return nil, fmt.Errorf("learner: cpu backend: %w", err)
		}
		return b, nil
	case DeviceCUDA:
		path, err := FindCUDAPlugin(c.CUDAPlugin)
		if err != nil {
			return nil, err
		}
		return newXLABackend(path)
	}
	return nil, fmt.Errorf("learner: unknown device %q", c.Device)
}

// cudaPluginNames are the file names the PJRT CUDA plugin ships under:
// go-xla's conventions and the jax-cuda*-pjrt wheel's.
var cudaPluginNames = []string{"pjrt_c_api_cuda_plugin.so", "pjrt-plugin-cuda.so", "pjrt_plugin_cuda.so", "xla_cuda_plugin.so"}

// FindCUDAPlugin returns the PJRT CUDA plugin to load: explicit (a file
// path from learner.cuda_plugin) when given, else the first of
// cudaPluginNames in the directories of $PJRT_PLUGIN_LIBRARY_PATH
// (colon-separated), also looking one level down in jax_plugins-style
// sub-folders (xla_cuda12/, xla_cuda13/).
func FindCUDAPlugin(explicit string) (string, error) {
	if explicit != "" {
		abs, err := filepath.Abs(explicit)
		if err != nil {
			return "", fmt.Errorf("learner: cuda_plugin: %w", err)
		}
		if st, err := os.Stat(abs); err != nil || st.IsDir() {
			return "", fmt.Errorf("learner: cuda_plugin %s: not a file (%v)", abs, err)
		}
		return abs, nil
	}
	env := os.Getenv("PJRT_PLUGIN_LIBRARY_PATH")
	var dirs []string
	for _, d := range strings.Split(env, ":") {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	for _, d := range dirs {
		for _, n := range cudaPluginNames {
			cands := []string{filepath.Join(d, n)}
			sub, _ := filepath.Glob(filepath.Join(d, "*", n))
			cands = append(cands, sub...)
			for _, p := range cands {
				if st, err := os.Stat(p); err == nil && !st.IsDir() {
					return filepath.Abs(p)
				}
			}
		}
	}
	return "", fmt.Errorf("learner: device cuda: no PJRT CUDA plugin found (looked for %s in PJRT_PLUGIN_LIBRARY_PATH=%q); "+
		"install it with `pip install \"jax[cuda13]\"` (or jax-cuda13-pjrt) and set PJRT_PLUGIN_LIBRARY_PATH to "+
		"<site-packages>/jax_plugins/xla_cuda13, or set learner.cuda_plugin to the .so file",
		strings.Join(cudaPluginNames, ", "), env)
}
