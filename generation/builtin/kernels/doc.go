// Package kernels holds the f32 hot loops of troupe's embedded engine: the
// "x times W transposed" matrix product that every linear layer is, and the
// dot/axpy pair that attention uses.
//
// Implementations behind one API, chosen at build time:
//
//   - amd64, default build: a 2×4-tile AVX-512 kernel in Go assembly
//     (asm_amd64.s) for [MatMulT]; portable Go for the rest. No cgo, no
//     experiment needed.
//   - amd64 with GOEXPERIMENT=simd: the same tiles written with Go 1.26's
//     simd/archsimd (simd_amd64.go), plus AVX-512 Dot, Axpy, Exp and
//     SiLUMul. Its products are bitwise equal to the assembly build's.
//   - build tag "openblas" (cgo, libopenblas-dev): OpenBLAS sgemm for
//     [MatMulT], single-threaded per call. Measured slower than the Go
//     tiles on this project's machines and not batch-invariant (below), so
//     it is optional.
//   - elsewhere (other GOARCHes, tag purego, or no AVX-512 at run time):
//     portable Go.
//
// The AVX-512 paths check the CPU (and OS ZMM support) at start-up and
// fall back to portable Go. [Variant] names the one in use.
//
// Determinism contract: every output element of [MatMulT] is computed by
// the same sequence of floating-point operations whatever M, the output
// range [o0,o1) or the caller's blocking are, so a row's result does not
// depend on which other rows share the call (the engine relies on this for
// "same seed, same tokens, whatever the batch"). The Go kernels guarantee it
// by construction; with OpenBLAS it holds for the sgemm kernels observed
// (the K loop is not split by M), which the engine's tests check.
//
// Functions are single-threaded and allocation-free; callers parallelise
// by splitting the output range.
package kernels

// MatMulT computes y[m*ldy+o] = Σ_k x[m*K+k]·w[o*K+k] for m in [0,M) and o
// in [o0,o1): y = x·Wᵀ with W stored [out, K] row-major as PyTorch stores
// nn.Linear weights. Only that block of y is written (overwritten).
func MatMulT(y []float32, ldy int, x []float32, M, K int, w []float32, o0, o1 int) {
	if M <= 0 || o1 <= o0 {
		return
	}
	_ = x[M*K-1]
	_ = w[o1*K-1]
	_ = y[(M-1)*ldy+o1-1]
	matMulT(y, ldy, x, M, K, w, o0, o1)
}

// Dot returns Σ a[i]·b[i] over len(a) elements (b must be as long).
func Dot(a, b []float32) float32 {
	return dot(a, b[:len(a)])
}

// Axpy does y[i] += alpha·x[i] over len(x) elements.
func Axpy(alpha float32, x, y []float32) {
	axpy(alpha, x, y[:len(x)])
}

// Variant names the implementation in use: "openblas", "simd-avx512" or
// "go".
func Variant() string { return matMulVariant() }

// Exp writes dst[i] = exp(src[i]·scale − shift) over len(src) elements
// and returns their sum (accumulated in float64). Arguments below −87 give
// ≈0; the SIMD version is a degree-6 polynomial accurate to ~2 ulp.
func Exp(dst, src []float32, scale, shift float32) float64 {
	return expScaled(dst[:len(src)], src, scale, shift)
}

// SiLUMul writes dst[i] = silu(gate[i])·up[i] (SwiGLU's activation),
// silu(x) = x/(1+exp(−x)).
func SiLUMul(dst, gate, up []float32) {
	siluMul(dst[:len(gate)], gate, up[:len(gate)])
}
