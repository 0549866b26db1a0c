package sokoban_test

import (
	"testing"

	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/envs/envtest"
	_ "github.com/troupe-rl/troupe/envs/sokoban"
)

func TestConformance(t *testing.T) {
	for _, mode := range []string{envs.ModeMulti, envs.ModeSingle} {
		t.Run(mode, func(t *testing.T) {
			cfg := envs.DefaultConfig("sokoban")
			cfg.Mode = mode
			envtest.Run(t, "sokoban", cfg, envs.Deps{Runner: envtest.NewPythonRunner(t)}, envtest.Options{})
		})
	}
}
