package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

func TestMatMulT(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ M, K, N int }{{1, 1, 1}, {1, 16, 4}, {3, 17, 5}, {4, 64, 8}, {7, 100, 13}, {33, 256, 37}, {5, 1024, 64}} {
		t.Run(fmt.Sprintf("%dx%dx%d", tc.M, tc.K, tc.N), func(t *testing.T) {
			x, w := randSlice(r, tc.M*tc.K), randSlice(r, tc.N*tc.K)
			y := make([]float32, tc.M*tc.N)
			MatMulT(y, tc.N, x, tc.M, tc.K, w, 0, tc.N)
			for m := 0; m < tc.M; m++ {
				for o := 0; o < tc.N; o++ {
					var want float64
					for k := 0; k < tc.K; k++ {
						want += float64(x[m*tc.K+k]) * float64(w[o*tc.K+k])
					}
					if d := math.Abs(want - float64(y[m*tc.N+o])); d > 1e-4*math.Sqrt(float64(tc.K)) {
						t.Fatalf("y[%d,%d] = %v, want %v", m, o, y[m*tc.N+o], want)
					}
				}
			}
			// Row independence: each row computed alone, and split output
			// ranges, give bitwise the same values.
			for m := 0; m < tc.M; m++ {
				y1 := make([]float32, tc.N)
				h := tc.N / 2
				MatMulT(y1, tc.N, x[m*tc.K:(m+1)*tc.K], 1, tc.K, w, 0, h)
				MatMulT(y1, tc.N, x[m*tc.K:(m+1)*tc.K], 1, tc.K, w, h, tc.N)
				for o := range y1 {
					if Variant() == "openblas" { // not batch-invariant; see the package doc
						if d := y1[o] - y[m*tc.N+o]; d > 1e-4 || d < -1e-4 {
							t.Fatalf("row %d col %d: alone %v, in batch %v", m, o, y1[o], y[m*tc.N+o])
						}
						continue
					}
					if y1[o] != y[m*tc.N+o] {
						t.Fatalf("row %d col %d: alone %v, in batch %v", m, o, y1[o], y[m*tc.N+o])
					}
				}
			}
		})
	}
}

func TestDotAxpy(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 15, 16, 33, 128} {
		a, b := randSlice(r, n), randSlice(r, n)
		var want float64
		for i := range a {
			want += float64(a[i]) * float64(b[i])
		}
		if got := Dot(a, b); math.Abs(float64(got)-want) > 1e-4 {
			t.Errorf("Dot n=%d = %v, want %v", n, got, want)
		}
		y := append([]float32(nil), b...)
		Axpy(0.5, a, y)
		for i := range y {
			if d := y[i] - (b[i] + 0.5*a[i]); d > 1e-6 || d < -1e-6 {
				t.Fatalf("Axpy n=%d [%d] = %v", n, i, y[i])
			}
		}
	}
}

func BenchmarkMatMulT(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct{ M, K, N int }{{1, 1024, 3072}, {32, 1024, 3072}, {256, 1024, 1024}, {1024, 1024, 1024}} {
		b.Run(fmt.Sprintf("%s/%dx%dx%d", Variant(), tc.M, tc.K, tc.N), func(b *testing.B) {
			x, w := randSlice(r, tc.M*tc.K), randSlice(r, tc.N*tc.K)
			y := make([]float32, tc.M*tc.N)
			for b.Loop() {
				MatMulT(y, tc.N, x, tc.M, tc.K, w, 0, tc.N)
			}
			b.ReportMetric(2*float64(tc.M*tc.K*tc.N)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

func TestExpSiLU(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 15, 16, 40, 1000} {
		src := make([]float32, n)
		for i := range src {
			src[i] = float32(r.Float64()*60 - 50)
		}
		dst := make([]float32, n)
		sum := Exp(dst, src, 0.9, 1.5)
		var want float64
		for i, v := range src {
			e := math.Exp(float64(v)*0.9 - 1.5)
			want += e
			if math.Abs(float64(dst[i])-e) > 5e-6*e+1e-38 {
				t.Fatalf("Exp n=%d [%d] = %v, want %v", n, i, dst[i], e)
			}
		}
		if math.Abs(sum-want) > 5e-6*want {
			t.Fatalf("Exp sum = %v, want %v", sum, want)
		}
		gate, up := randSlice(r, n), randSlice(r, n)
		SiLUMul(dst, gate, up)
		for i := range gate {
			g := float64(gate[i])
			if w := g / (1 + math.Exp(-g)) * float64(up[i]); math.Abs(float64(dst[i])-w) > 1e-6*(1+math.Abs(w)) {
				t.Fatalf("SiLUMul [%d] = %v, want %v", i, dst[i], w)
			}
		}
	}
}
