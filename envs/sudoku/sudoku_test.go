package sudoku_test

import (
	"testing"

	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/envs/envtest"
	_ "github.com/troupe-rl/troupe/envs/sudoku"
)

func TestConformance(t *testing.T) {
	for _, mode := range []string{envs.ModeMulti, envs.ModeSingle} {
		for _, size := range []int{4, 6, 9} {
			t.Run(mode, func(t *testing.T) {
				cfg := envs.DefaultConfig("sudoku")
				cfg.Mode = mode
				cfg.Size = size
				envtest.Run(t, "sudoku", cfg, envs.Deps{Runner: envtest.NewPythonRunner(t)}, envtest.Options{})
			})
		}
	}
}
