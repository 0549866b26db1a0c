package builtin

import (
	"sync"
	"sync/atomic"
)

// pool is a fixed set of worker goroutines that run parallel loops for the
// forward pass. Only the scheduler goroutine submits work, one loop at a
// time; the submitter works too, so a pool of n uses n goroutines in all.
type pool struct {
	n    int
	work chan *loop
	wg   sync.WaitGroup // workers alive
}

// loop is one parallel-for: chunks [i*grain, min((i+1)*grain, n)) are
// handed out dynamically; fn receives the worker index (0..n-1, stable for
// the call, for per-worker scratch) and a chunk.
type loop struct {
	fn    func(worker, lo, hi int)
	n     int
	grain int
	next  atomic.Int64
	done  sync.WaitGroup
}

func newPool(n int) *pool {
	p := &pool{n: max(n, 1), work: make(chan *loop)}
	for w := 1; w < p.n; w++ {
		p.wg.Add(1)
		go p.worker(w)
	}
	return p
}

func (p *pool) worker(id int) {
	defer p.wg.Done()
	for l := range p.work {
		l.run(id)
		l.done.Done()
	}
}

func (l *loop) run(worker int) {
	for {
		i := int(l.next.Add(1) - 1)
		lo := i * l.grain
		if lo >= l.n {
			return
		}
		l.fn(worker, lo, min(lo+l.grain, l.n))
	}
}

// parallelFor runs fn over [0,n) in chunks of grain and returns when all
// are done. Which worker runs which chunk varies; callers make each
// chunk's result independent of that.
func (p *pool) parallelFor(l *loop, n, grain int, fn func(worker, lo, hi int)) {
	if n <= 0 {
		return
	}
	grain = max(grain, 1)
	chunks := (n + grain - 1) / grain
	helpers := min(p.n, chunks) - 1
	l.fn, l.n, l.grain = fn, n, grain
	l.next.Store(0)
	if helpers <= 0 {
		l.run(0)
		return
	}
	l.done.Add(helpers)
	for range helpers {
		p.work <- l
	}
	l.run(0)
	l.done.Wait()
}

func (p *pool) close() {
	close(p.work)
	p.wg.Wait()
}
