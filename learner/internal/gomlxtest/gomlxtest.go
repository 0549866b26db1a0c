// Package gomlxtest gives the learner's tests a GoMLX backend and decides
// whether GoMLX graphs can run in this test binary at all.
//
// GoMLX v0.28.1's pure-Go matmul kernels (github.com/gomlx/compute
// v0.1.0, nosimd_small_transposed.go) convert uintptr arithmetic back to
// pointers, which the -race build's checkptr instrumentation rejects with a
// fatal error (not a panic: the whole test binary dies), and the library's
// no_unsafe build tag does not compile. So under -race, Main probes in a
// child process whether a matmul survives; if not, Backend skips the test
// with the reason and the fix (-gcflags=all=-d=checkptr=0).
package gomlxtest

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/gobackend"
	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
)

const probeEnv = "TROUPE_GOMLX_CHECKPTR_PROBE"

var skipReason string

// Main wraps testing.M.Run; call it from TestMain.
func Main(m *testing.M) int {
	if os.Getenv(probeEnv) == "1" {
		probe()
		return 0
	}
	if RaceEnabled {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), probeEnv+"=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			skipReason = fmt.Sprintf("GoMLX's pure-Go matmul trips checkptr under -race (%v); run with -gcflags=all=-d=checkptr=0 to test GoMLX graphs with the race detector (probe output: %.200s)", err, out)
		}
	}
	return m.Run()
}

func probe() {
	b, err := gobackend.New("parallelism=2")
	if err != nil {
		panic(err)
	}
	x := tensors.FromFlatDataAndDimensions(make([]float32, 64*32), 64, 32)
	w := tensors.FromFlatDataAndDimensions(make([]float32, 16*32), 16, 32)
	_, err = graph.CallOnceN(b, func(x, w *graph.Node) []*graph.Node {
		return []*graph.Node{graph.DotGeneral(x, []int{1}, nil, w, []int{1}, nil)}
	}, x, w)
	if err != nil {
		panic(err)
	}
}

// Backend returns a pure-Go backend configured as the learner configures it
// (explicit parallelism), or skips the test when GoMLX cannot run here.
func Backend(tb testing.TB) compute.Backend {
	tb.Helper()
	if skipReason != "" {
		tb.Skip(skipReason)
	}
	b, err := gobackend.New("parallelism=8")
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// Scale returns n, or a smaller number under -race where everything runs
// about 10× slower.
func Scale(n, underRace int) int {
	if RaceEnabled {
		return underRace
	}
	return n
}
