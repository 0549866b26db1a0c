//go:build goexperiment.simd && amd64

package kernels

import (
	"simd/archsimd"
	"unsafe"
)

// hasAVX512 selects the AVX-512 kernels at run time.
var hasAVX512 = archsimd.X86.AVX512()

func elemVariant() string {
	if hasAVX512 {
		return "+simd"
	}
	return ""
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
	return tailAdd(hsum(acc), a, b, n16)
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
