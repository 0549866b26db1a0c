//go:build amd64 && !purego

package kernels

import "unsafe"

// amd64 builds multiply with 2×4-tile AVX-512 kernels in Go assembly
// (asm_amd64.s): 2 x rows × 4 W rows, 8 zmm accumulators, one FMA chain
// per output over 16-lane k steps, reduced in a fixed tree; tails in Go.
// The same tiles written with simd/archsimd ran 20–40 % slower (Go
// allocates 15 vector registers and does not fold loads into FMAs), so the
// assembly serves GOEXPERIMENT=simd builds too. Plain `go build` needs no
// experiment and no cgo.

func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
func xgetbv0() (eax, edx uint32)

//go:noescape
func accum2x4(x0, x1, w unsafe.Pointer, K, k16 int, out *[8]float32)

//go:noescape
func accum1x4(x0, w unsafe.Pointer, K, k16 int, out *[4]float32)

//go:noescape
func accum1x1(x0, w unsafe.Pointer, k16 int, out *float32)

// asmAVX512 requires AVX-512F in the CPU and ZMM state enabled by the OS.
var asmAVX512 = func() bool {
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

func mmVariant() string {
	if asmAVX512 {
		return "asm-avx512"
	}
	return "go"
}

// tailAdd adds the elements past the last full 16-block, in order.
func tailAdd(s float32, a, b []float32, k0 int) float32 {
	for k := k0; k < len(a); k++ {
		s += a[k] * b[k]
	}
	return s
}

func dot16(x, w []float32, K, k16 int) float32 {
	var acc float32
	accum1x1(unsafe.Pointer(&x[0]), unsafe.Pointer(&w[0]), k16, &acc)
	return tailAdd(acc, x[:K], w[:K], k16)
}

func matMulTSIMD(y []float32, ldy int, x []float32, M, K int, w []float32, o0, o1 int) {
	if !asmAVX512 || K < 16 {
		matMulTGo(y, ldy, x, M, K, w, o0, o1)
		return
	}
	k16 := K &^ 15
	var acc8 [8]float32
	var acc4 [4]float32
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
					y[m*ldy+o+j] = tailAdd(acc8[j], x0, wj, k16)
					y[(m+1)*ldy+o+j] = tailAdd(acc8[4+j], x1, wj, k16)
				}
			}
			for ; m < m1; m++ {
				x0 := x[m*K : (m+1)*K]
				accum1x4(unsafe.Pointer(&x0[0]), unsafe.Pointer(&wb[0]), K, k16, &acc4)
				for j := range 4 {
					y[m*ldy+o+j] = tailAdd(acc4[j], x0, wb[j*K:(j+1)*K], k16)
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
