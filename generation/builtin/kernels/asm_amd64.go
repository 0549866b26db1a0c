//go:build amd64 && !goexperiment.simd && !purego

package kernels

import "unsafe"

// Without GOEXPERIMENT=simd, amd64 builds get the same 2×4-tile AVX-512
// kernel written in Go assembly (asm_amd64.s), so a plain `go build` is
// fast too. The assembly only accumulates 16-lane partial sums; reduction
// and tails are the Go code below, in the same order as simd_amd64.go, so
// both builds give bitwise the same products. dot, axpy, exp and SwiGLU use
// the portable Go versions here.

func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
func xgetbv0() (eax, edx uint32)

//go:noescape
func accum2x4(x0, x1, w unsafe.Pointer, K, k16 int, out *[8][16]float32)

//go:noescape
func accum1x4(x0, w unsafe.Pointer, K, k16 int, out *[4][16]float32)

//go:noescape
func accum1x1(x0, w unsafe.Pointer, k16 int, out *[16]float32)

// hasAVX512 requires AVX-512F in the CPU and ZMM state enabled by the OS.
var hasAVX512 = func() bool {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	if ecx1&(1<<27) == 0 { // OSXSAVE
		return false
	}
	if xcr0, _ := xgetbv0(); xcr0&0xe6 != 0xe6 { // SSE, AVX, opmask, ZMM
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	return ebx7&(1<<16) != 0
}()

func simdVariant() string {
	if hasAVX512 {
		return "asm-avx512"
	}
	return "go"
}

func dot(a, b []float32) float32         { return dotGo(a, b) }
func axpy(alpha float32, x, y []float32) { axpyGo(alpha, x, y) }
func expScaled(dst, src []float32, scale, shift float32) float64 {
	return expScaledGo(dst, src, scale, shift)
}
func siluMul(dst, gate, up []float32) { siluMulGo(dst, gate, up) }

// hsumArr reduces 16 lanes exactly as simd_amd64.go's hsum does.
func hsumArr(a *[16]float32) float32 {
	var v8 [8]float32
	for i := range v8 {
		v8[i] = a[i] + a[i+8]
	}
	v4 := [4]float32{v8[0] + v8[4], v8[1] + v8[5], v8[2] + v8[6], v8[3] + v8[7]}
	return (v4[0] + v4[1]) + (v4[2] + v4[3])
}

// tailAdd adds the elements past the last full 16-block, in order.
func tailAdd(s float32, a, b []float32, k0 int) float32 {
	for k := k0; k < len(a); k++ {
		s += a[k] * b[k]
	}
	return s
}

func dot16(x, w []float32, K, k16 int) float32 {
	var acc [16]float32
	if k16 > 0 {
		accum1x1(unsafe.Pointer(&x[0]), unsafe.Pointer(&w[0]), k16, &acc)
	}
	return tailAdd(hsumArr(&acc), x[:K], w[:K], k16)
}

func matMulTSIMD(y []float32, ldy int, x []float32, M, K int, w []float32, o0, o1 int) {
	if !hasAVX512 || K < 16 {
		matMulTGo(y, ldy, x, M, K, w, o0, o1)
		return
	}
	k16 := K &^ 15
	var acc8 [8][16]float32
	var acc4 [4][16]float32
	mTile := max(4, min(64, (192<<10)/(4*K))&^3)
	for m0 := 0; m0 < M; m0 += mTile {
		m1 := min(m0+mTile, M)
		o := o0
		for ; o+4 <= o1; o += 4 {
			wb := w[o*K : (o+4)*K]
			m := m0
			for ; m+2 <= m1; m += 2 {
				x0, x1 := x[m*K:(m+1)*K], x[(m+1)*K:(m+2)*K]
				accum2x4(unsafe.Pointer(&x0[0]), unsafe.Pointer(&x1[0]), unsafe.Pointer(&wb[0]), K, k16, &acc8)
				for j := range 4 {
					wj := wb[j*K : (j+1)*K]
					y[m*ldy+o+j] = tailAdd(hsumArr(&acc8[j]), x0, wj, k16)
					y[(m+1)*ldy+o+j] = tailAdd(hsumArr(&acc8[4+j]), x1, wj, k16)
				}
			}
			for ; m < m1; m++ {
				x0 := x[m*K : (m+1)*K]
				accum1x4(unsafe.Pointer(&x0[0]), unsafe.Pointer(&wb[0]), K, k16, &acc4)
				for j := range 4 {
					y[m*ldy+o+j] = tailAdd(hsumArr(&acc4[j]), x0, wb[j*K:(j+1)*K], k16)
				}
			}
		}
		for ; o < o1; o++ {
			wr := w[o*K : (o+1)*K]
			for m := m0; m < m1; m++ {
				y[m*ldy+o] = dot16(x[m*K:(m+1)*K], wr, K, k16)
			}
		}
	}
}
