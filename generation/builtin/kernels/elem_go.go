//go:build !(goexperiment.simd && amd64)

package kernels

func dot(a, b []float32) float32         { return dotGo(a, b) }
func axpy(alpha float32, x, y []float32) { axpyGo(alpha, x, y) }
func expScaled(dst, src []float32, scale, shift float32) float64 {
	return expScaledGo(dst, src, scale, shift)
}
func siluMul(dst, gate, up []float32) { siluMulGo(dst, gate, up) }
func elemVariant() string             { return "" }
