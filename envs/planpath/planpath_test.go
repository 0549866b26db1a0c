package planpath_test

import (
	"testing"

	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/envs/envtest"
	_ "github.com/troupe-rl/troupe/envs/planpath"
)

func TestConformance(t *testing.T) {
	for _, mode := range []string{envs.ModeMulti, envs.ModeSingle} {
		t.Run(mode, func(t *testing.T) {
			cfg := envs.DefaultConfig("planpath")
			cfg.Mode = mode
			envtest.Run(t, "planpath", cfg, envs.Deps{Runner: envtest.NewPythonRunner(t)}, envtest.Options{})
		})
	}
}
