package kernels

import "math"

// dotGo is the portable dot product: four lanes (k mod 4), summed as
// (l0+l1)+(l2+l3), then the tail in order.
func dotGo(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	var s0, s1, s2, s3 float32
	k := 0
	for ; k+4 <= n; k += 4 {
		s0 += a[k] * b[k]
		s1 += a[k+1] * b[k+1]
		s2 += a[k+2] * b[k+2]
		s3 += a[k+3] * b[k+3]
	}
	s := (s0 + s1) + (s2 + s3)
	for ; k < n; k++ {
		s += a[k] * b[k]
	}
	return s
}

func axpyGo(alpha float32, x, y []float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += alpha * v
	}
}

// matMulTGo is the portable product: one dotGo per output element, with
// the W row outermost so it stays in cache across the x rows.
func matMulTGo(y []float32, ldy int, x []float32, M, K int, w []float32, o0, o1 int) {
	const mTile = 32
	for m0 := 0; m0 < M; m0 += mTile {
		m1 := min(m0+mTile, M)
		for o := o0; o < o1; o++ {
			wr := w[o*K : o*K+K]
			for m := m0; m < m1; m++ {
				y[m*ldy+o] = dotGo(x[m*K:m*K+K], wr)
			}
		}
	}
}

func expScaledGo(dst, src []float32, scale, shift float32) float64 {
	var s float64
	for i, v := range src {
		e := float32(math.Exp(float64(v*scale - shift)))
		dst[i] = e
		s += float64(e)
	}
	return s
}

func siluMulGo(dst, gate, up []float32) {
	for i, g := range gate {
		dst[i] = g / (1 + float32(math.Exp(float64(-g)))) * up[i]
	}
}
