package kernels

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// BenchmarkMatMulTCold streams W from memory (64 matrices, 800 MB), as a
// decode step does, with two goroutines splitting the output columns.
func BenchmarkMatMulTCold(b *testing.B) {
	const M, K, N, nW = 32, 1024, 3072, 64
	r := rand.New(rand.NewPCG(5, 6))
	ws := make([][]float32, nW)
	for i := range ws {
		ws[i] = make([]float32, N*K)
		for j := range ws[i] {
			ws[i][j] = float32(j % 7)
		}
	}
	x := randSlice(r, M*K)
	y := make([]float32, M*N)
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("%s/threads%d", Variant(), threads), func(b *testing.B) {
			i := 0
			for b.Loop() {
				w := ws[i%nW]
				i++
				var wg sync.WaitGroup
				for t := range threads {
					wg.Add(1)
					go func() {
						defer wg.Done()
						lo, hi := t*N/threads, (t+1)*N/threads
						for o := lo; o < hi; o += 64 {
							MatMulT(y, N, x, M, K, w, o, min(o+64, hi))
						}
					}()
				}
				wg.Wait()
			}
			b.ReportMetric(2*float64(M*K*N)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
