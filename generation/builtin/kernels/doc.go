// Package kernels holds the f32 hot loops of troupe's embedded engine: the
// "x times W transposed" matrix product that every linear layer is, and the
// dot/axpy pair that attention uses.
//
// Implementations behind one API, chosen at build time:
//
//   - [MatMulT] on amd64: 2×4-tile AVX-512 kernels in Go assembly
//     (asm_amd64.s), ~140–165 GFLOP/s per core at 256–1024 rows here. No
//     cgo and no experiment needed.
//   - Dot, Axpy, Exp and SiLUMul with GOEXPERIMENT=simd on amd64: AVX-512
//     through Go 1.26's simd/archsimd (simd_amd64.go); portable Go
//     otherwise.
//   - build tag "openblas" (cgo, libopenblas-dev; package kernels/blas):
//     OpenBLAS sgemm for MatMulT, single-threaded per call. Measured
//     slower than the assembly tiles here (~90–120 GFLOP/s per core) and
//     not batch-invariant (below), so it is optional.
//   - other GOARCHes, tag purego, or no AVX-512 at run time: portable Go.
//
// The AVX-512 paths check the CPU (and the OS's ZMM support) at start-up.
// [Variant] names the combination in use, e.g. "asm-avx512+simd".
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

// Variant names the implementations in use: the matrix kernel
// ("asm-avx512", "openblas" or "go"), then "+simd" when the elementwise
// kernels use simd/archsimd.
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
