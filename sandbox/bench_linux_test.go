package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
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
	// CPU time (ours and our waited children's) is reported too: unlike wall
	// time it barely moves when other work shares the machine.
	cpu := func() time.Duration {
		var self, kids syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &self)
		syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
		return time.Duration(self.Utime.Nano() + self.Stime.Nano() + kids.Utime.Nano() + kids.Stime.Nano())
	}
	var bare, boxed, bareCPU, boxedCPU time.Duration
	b.ResetTimer()
	for range b.N {
		c0, t0 := cpu(), time.Now()
		cmd := exec.Command(s.python, "-B", "-s", file)
		cmd.Dir = dir
		if out, err := cmd.Output(); err != nil || string(out) != "45\n" {
			b.Fatalf("bare: %q %v", out, err)
		}
		c1, t1 := cpu(), time.Now()
		res, err := s.Run(context.Background(), p, Limits{})
		if err != nil || res.Status != StatusOK {
			b.Fatalf("sandbox: %+v %v", res, err)
		}
		bare += t1.Sub(t0)
		boxed += time.Since(t1)
		bareCPU += c1 - c0
		boxedCPU += cpu() - c1
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(b.N) / 1e6 }
	b.ReportMetric(ms(bare), "bare-ms/run")
	b.ReportMetric(ms(boxed), "sandbox-ms/run")
	b.ReportMetric(ms(boxed-bare), "overhead-ms/run")
	b.ReportMetric(ms(boxedCPU-bareCPU), "overhead-cpu-ms/run")
	b.ReportMetric(0, "ns/op")
	b.Logf("isolation %s", s.Isolation())
}
