//go:build goexperiment.simd && amd64

package kernels

import (
	"simd/archsimd"
	"unsafe"
)

// hasAVX512 selects the AVX-512 kernels at run time.
var hasAVX512 = archsimd.X86.AVX512()

func simdVariant() string {
	if hasAVX512 {
		return "simd-avx512"
	}
	return "go"
}

// ld loads 16 float32 at p+k (k in elements). Callers guarantee bounds.
func ld(p unsafe.Pointer, k int) archsimd.Float32x16 {
	return archsimd.LoadFloat32x16((*[16]float32)(unsafe.Add(p, k*4)))
}

// hsum reduces 16 lanes in a fixed tree: (lo8+hi8) → (lo4+hi4) → pairs.
func hsum(v archsimd.Float32x16) float32 {
	v8 := v.GetLo().Add(v.GetHi())
	v4 := v8.GetLo().Add(v8.GetHi())
	var a [4]float32
	v4.Store(&a)
	return (a[0] + a[1]) + (a[2] + a[3])
}

// tail adds the elements past the last full 16-block, in order.
func tail(s float32, a, b []float32, k0 int) float32 {
	for k := k0; k < len(a); k++ {
		s += a[k] * b[k]
	}
	return s
}

func dot(a, b []float32) float32 {
	if !hasAVX512 {
		return dotGo(a, b)
	}
	n := len(a)
	b = b[:n]
	n16 := n &^ 15
	var acc archsimd.Float32x16
	if n16 > 0 {
		pa, pb := unsafe.Pointer(&a[0]), unsafe.Pointer(&b[0])
		for k := 0; k < n16; k += 16 {
			acc = ld(pa, k).MulAdd(ld(pb, k), acc)
		}
	}
	return tail(hsum(acc), a, b, n16)
}

func axpy(alpha float32, x, y []float32) {
	if !hasAVX512 {
		axpyGo(alpha, x, y)
		return
	}
	n := len(x)
	y = y[:n]
	n16 := n &^ 15
	if n16 > 0 {
		al := archsimd.BroadcastFloat32x16(alpha)
		px, py := unsafe.Pointer(&x[0]), unsafe.Pointer(&y[0])
		for k := 0; k < n16; k += 16 {
			p := (*[16]float32)(unsafe.Add(py, k*4))
			ld(px, k).MulAdd(al, archsimd.LoadFloat32x16(p)).Store(p)
		}
	}
	for k := n16; k < n; k++ {
		y[k] += alpha * x[k]
	}
}

// matMulTSIMD computes the block with 2×4 register tiles (2 x rows × 4 W
// rows); leftovers use 1×4 and 1×1 tiles. Every output
// element is one accumulator over k in 16-lane steps, reduced by hsum,
// then the tail: identical arithmetic in every tile shape.
func matMulTSIMD(y []float32, ldy int, x []float32, M, K int, w []float32, o0, o1 int) {
	if !hasAVX512 {
		matMulTGo(y, ldy, x, M, K, w, o0, o1)
		return
	}
	// Tile M so the x rows of a tile stay in L2 while W rows stream.
	mTile := max(4, min(64, (192<<10)/(4*max(K, 1)))&^3)
	for m0 := 0; m0 < M; m0 += mTile {
		m1 := min(m0+mTile, M)
		o := o0
		for ; o+4 <= o1; o += 4 {
			m := m0
			for ; m+2 <= m1; m += 2 {
				tile2x4(y[m*ldy+o:], ldy, x[m*K:(m+2)*K], K, w[o*K:(o+4)*K])
			}
			for ; m < m1; m++ {
				tile1x4(y[m*ldy+o:m*ldy+o+4], x[m*K:(m+1)*K], K, w[o*K:(o+4)*K])
			}
		}
		for ; o < o1; o++ {
			wr := w[o*K : (o+1)*K]
			for m := m0; m < m1; m++ {
				y[m*ldy+o] = dot(x[m*K:(m+1)*K], wr)
			}
		}
	}
}

func tile1x4(y []float32, x []float32, K int, w []float32) {
	k16 := K &^ 15
	var c0, c1, c2, c3 archsimd.Float32x16
	if k16 > 0 {
		px := unsafe.Pointer(&x[0])
		pw0 := unsafe.Pointer(&w[0])
		pw1 := unsafe.Add(pw0, K*4)
		pw2 := unsafe.Add(pw1, K*4)
		pw3 := unsafe.Add(pw2, K*4)
		for k := 0; k < k16; k += 16 {
			a := ld(px, k)
			c0 = a.MulAdd(ld(pw0, k), c0)
			c1 = a.MulAdd(ld(pw1, k), c1)
			c2 = a.MulAdd(ld(pw2, k), c2)
			c3 = a.MulAdd(ld(pw3, k), c3)
		}
	}
	y[0] = tail(hsum(c0), x, w[0:K], k16)
	y[1] = tail(hsum(c1), x, w[K:2*K], k16)
	y[2] = tail(hsum(c2), x, w[2*K:3*K], k16)
	y[3] = tail(hsum(c3), x, w[3*K:4*K], k16)
}

// tile2x4 is 2 x rows × 4 W rows: 8 accumulators plus the 4 W vectors
// and one x vector fit the 15 vector registers Go allocates without
// spilling (a 4×4 tile spilled accumulators to the stack in the loop).
func tile2x4(y []float32, ldy int, x []float32, K int, w []float32) {
	k16 := K &^ 15
	var c00, c01, c02, c03, c10, c11, c12, c13 archsimd.Float32x16
	if k16 > 0 {
		px0 := unsafe.Pointer(&x[0])
		px1 := unsafe.Add(px0, K*4)
		pw0 := unsafe.Pointer(&w[0])
		pw1 := unsafe.Add(pw0, K*4)
		pw2 := unsafe.Add(pw1, K*4)
		pw3 := unsafe.Add(pw2, K*4)
		for k := 0; k < k16; k += 16 {
			b0, b1, b2, b3 := ld(pw0, k), ld(pw1, k), ld(pw2, k), ld(pw3, k)
			a := ld(px0, k)
			c00 = a.MulAdd(b0, c00)
			c01 = a.MulAdd(b1, c01)
			c02 = a.MulAdd(b2, c02)
			c03 = a.MulAdd(b3, c03)
			a = ld(px1, k)
			c10 = a.MulAdd(b0, c10)
			c11 = a.MulAdd(b1, c11)
			c12 = a.MulAdd(b2, c12)
			c13 = a.MulAdd(b3, c13)
		}
	}
	x0, x1 := x[0:K], x[K:2*K]
	w0, w1, w2, w3 := w[0:K], w[K:2*K], w[2*K:3*K], w[3*K:4*K]
	y0, y1 := y[0:4], y[ldy:ldy+4]
	y0[0], y0[1], y0[2], y0[3] = tail(hsum(c00), x0, w0, k16), tail(hsum(c01), x0, w1, k16), tail(hsum(c02), x0, w2, k16), tail(hsum(c03), x0, w3, k16)
	y1[0], y1[1], y1[2], y1[3] = tail(hsum(c10), x1, w0, k16), tail(hsum(c11), x1, w1, k16), tail(hsum(c12), x1, w2, k16), tail(hsum(c13), x1, w3, k16)
}

// exp16 is Cephes' expf on 16 lanes: x = n·ln2 + r, |r| ≤ ln2/2, exp(r) by
// a degree-6 polynomial, times 2ⁿ (VSCALEFPS).
func exp16(x archsimd.Float32x16) archsimd.Float32x16 {
	x = x.Max(archsimd.BroadcastFloat32x16(-87.33654)).Min(archsimd.BroadcastFloat32x16(88.72283))
	n := x.Mul(archsimd.BroadcastFloat32x16(1.44269504088896341)).RoundToEvenScaled(0)
	r := n.MulAdd(archsimd.BroadcastFloat32x16(-0.693359375), x)
	r = n.MulAdd(archsimd.BroadcastFloat32x16(2.12194440e-4), r)
	p := archsimd.BroadcastFloat32x16(1.9875691500e-4)
	p = p.MulAdd(r, archsimd.BroadcastFloat32x16(1.3981999507e-3))
	p = p.MulAdd(r, archsimd.BroadcastFloat32x16(8.3334519073e-3))
	p = p.MulAdd(r, archsimd.BroadcastFloat32x16(4.1665795894e-2))
	p = p.MulAdd(r, archsimd.BroadcastFloat32x16(1.6666665459e-1))
	p = p.MulAdd(r, archsimd.BroadcastFloat32x16(5.0000001201e-1))
	y := p.MulAdd(r.Mul(r), r).Add(archsimd.BroadcastFloat32x16(1))
	return y.Scale(n)
}

// exp1 is exp16 on one value (tails), so every element gets the same
// arithmetic whatever its index.
func exp1(x float32) float32 {
	var a [16]float32
	a[0] = x
	v := exp16(archsimd.LoadFloat32x16(&a))
	v.Store(&a)
	return a[0]
}

func expScaled(dst, src []float32, scale, shift float32) float64 {
	if !hasAVX512 {
		return expScaledGo(dst, src, scale, shift)
	}
	n := len(src)
	n16 := n &^ 15
	var acc archsimd.Float64x8
	if n16 > 0 {
		sc, sh := archsimd.BroadcastFloat32x16(scale), archsimd.BroadcastFloat32x16(-shift)
		ps, pd := unsafe.Pointer(&src[0]), unsafe.Pointer(&dst[0])
		for k := 0; k < n16; k += 16 {
			e := exp16(ld(ps, k).MulAdd(sc, sh))
			e.Store((*[16]float32)(unsafe.Add(pd, k*4)))
			acc = acc.Add(e.GetLo().ConvertToFloat64()).Add(e.GetHi().ConvertToFloat64())
		}
	}
	var a [8]float64
	acc.Store(&a)
	s := ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
	for k := n16; k < n; k++ {
		e := exp1(src[k]*scale - shift)
		dst[k] = e
		s += float64(e)
	}
	return s
}

func siluMul(dst, gate, up []float32) {
	if !hasAVX512 {
		siluMulGo(dst, gate, up)
		return
	}
	n := len(gate)
	n16 := n &^ 15
	if n16 > 0 {
		one, neg := archsimd.BroadcastFloat32x16(1), archsimd.BroadcastFloat32x16(-1)
		pg, pu, pd := unsafe.Pointer(&gate[0]), unsafe.Pointer(&up[0]), unsafe.Pointer(&dst[0])
		for k := 0; k < n16; k += 16 {
			g := ld(pg, k)
			s := g.Div(exp16(g.Mul(neg)).Add(one))
			s.Mul(ld(pu, k)).Store((*[16]float32)(unsafe.Add(pd, k*4)))
		}
	}
	for k := n16; k < n; k++ {
		g := gate[k]
		dst[k] = g / (exp1(-g) + 1) * up[k]
	}
}
