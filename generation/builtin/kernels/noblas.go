//go:build !openblas || !cgo

package kernels

func matMulT(y []float32, ldy int, x []float32, M, K int, w []float32, o0, o1 int) {
	matMulTSIMD(y, ldy, x, M, K, w, o0, o1)
}

func matMulVariant() string { return mmVariant() + elemVariant() }
