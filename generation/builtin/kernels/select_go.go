//go:build !amd64 || (purego && !goexperiment.simd)

package kernels

func dot(a, b []float32) float32         { return dotGo(a, b) }
func axpy(alpha float32, x, y []float32) { axpyGo(alpha, x, y) }
func matMulTSIMD(y []float32, ldy int, x []float32, M, K int, w []float32, o0, o1 int) {
	matMulTGo(y, ldy, x, M, K, w, o0, o1)
}
func simdVariant() string { return "go" }

func expScaled(dst, src []float32, scale, shift float32) float64 {
	return expScaledGo(dst, src, scale, shift)
}
func siluMul(dst, gate, up []float32) { siluMulGo(dst, gate, up) }
