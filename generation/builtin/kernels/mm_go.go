//go:build !amd64 || purego

package kernels

func matMulTSIMD(y []float32, ldy int, x []float32, M, K int, w []float32, o0, o1 int) {
	matMulTGo(y, ldy, x, M, K, w, o0, o1)
}

func mmVariant() string { return "go" }

// tailAdd adds the elements past the last full 16-block, in order.
func tailAdd(s float32, a, b []float32, k0 int) float32 {
	for k := k0; k < len(a); k++ {
		s += a[k] * b[k]
	}
	return s
}
