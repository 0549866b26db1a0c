package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const trivial = "print(sum(range(10)))\n"

// BenchmarkRun measures sandboxed runs per second of a trivial Python
// program with 2 and 8 concurrent workers.
func BenchmarkRun(b *testing.B) {
	for _, workers := range []int{2, 8} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			s := testSandbox(b, "auto", func(c *Config) { c.Workers = workers })
			p := Program{Lang: "python", Source: trivial}
			var next atomic.Int64
			var failed atomic.Int64
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						res, err := s.Run(context.Background(), p, Limits{})
						if err != nil || res.Status != StatusOK {
							failed.Add(1)
						}
					}
				})
			}
			wg.Wait()
			el := time.Since(start)
			b.StopTimer()
			if failed.Load() > 0 {
				b.Fatalf("%d runs failed", failed.Load())
			}
			b.ReportMetric(float64(b.N)/el.Seconds(), "runs/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkOverhead compares a sandboxed run with a bare start of the same
// interpreter on the same file, one after the other in each iteration.
func BenchmarkOverhead(b *testing.B) {
	s := testSandbox(b, "auto")
	dir := b.TempDir()
	file := filepath.Join(dir, "main.py")
	if err := os.WriteFile(file, []byte(trivial), 0o644); err != nil {
		b.Fatal(err)
	}
	p := Program{Lang: "python", Source: trivial}
	var bare, boxed time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		cmd := exec.Command(s.python, "-B", "-s", file)
		cmd.Dir = dir
		if out, err := cmd.Output(); err != nil || string(out) != "45\n" {
			b.Fatalf("bare: %q %v", out, err)
		}
		t1 := time.Now()
		res, err := s.Run(context.Background(), p, Limits{})
		if err != nil || res.Status != StatusOK {
			b.Fatalf("sandbox: %+v %v", res, err)
		}
		bare += t1.Sub(t0)
		boxed += time.Since(t1)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(b.N) / 1e6 }
	b.ReportMetric(ms(bare), "bare-ms/run")
	b.ReportMetric(ms(boxed), "sandbox-ms/run")
	b.ReportMetric(ms(boxed-bare), "overhead-ms/run")
	b.ReportMetric(0, "ns/op")
	b.Logf("isolation %s", s.Isolation())
}
