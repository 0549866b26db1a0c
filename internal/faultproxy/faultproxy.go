// Package faultproxy is a reverse proxy for tests that puts faults a real
// server cannot produce on demand — 500s, 429 with Retry-After, connection
// resets, stalled responses, malformed JSON — in front of a real server
// (troupe's own embedded server). Everything it does not fault is passed
// through unchanged.
package faultproxy

import (
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Fault is what the proxy does to one request.
type Fault int

// The faults.
const (
	Pass      Fault = iota // forward to the server
	Status500              // answer 500 without forwarding
	Status429              // answer 429 with Retry-After without forwarding
	Reset                  // close the connection without an answer
	Stall                  // hold the request until the client gives up
	Malformed              // forward, then replace the body with broken JSON
)

func (f Fault) String() string {
	return [...]string{"pass", "500", "429", "reset", "stall", "malformed"}[f]
}

// Proxy is an http.Handler. Choose decides each request's fault; by default
// every request passes.
type Proxy struct {
	target *url.URL
	rp     *httputil.ReverseProxy
	// RetryAfter is the Retry-After header value sent with 429s (seconds).
	RetryAfter int
	// Paths limits faults to request paths with one of these suffixes
	// (empty = all paths).
	Paths []string

	mu     sync.Mutex
	choose func(n int64) Fault
	n      atomic.Int64
	counts [6]atomic.Int64
}

// New proxies to target (e.g. "http://127.0.0.1:1234").
func New(target string) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	return &Proxy{target: u, rp: httputil.NewSingleHostReverseProxy(u), RetryAfter: 1}, nil
}

// SetChooser sets the function that picks the fault for the n-th faultable
// request (n counts from 0).
func (p *Proxy) SetChooser(f func(n int64) Fault) {
	p.mu.Lock()
	p.choose = f
	p.mu.Unlock()
}

// Random returns a chooser that applies each fault with the given
// probability (the rest pass), from a seeded stream.
func Random(seed uint64, probs map[Fault]float64) func(int64) Fault {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	order := []Fault{Status500, Status429, Reset, Stall, Malformed}
	return func(int64) Fault {
		mu.Lock()
		x := r.Float64()
		mu.Unlock()
		for _, f := range order {
			if x < probs[f] {
				return f
			}
			x -= probs[f]
		}
		return Pass
	}
}

// Count returns how often fault f was applied.
func (p *Proxy) Count(f Fault) int64 { return p.counts[f].Load() }

func (p *Proxy) faultable(path string) bool {
	if len(p.Paths) == 0 {
		return true
	}
	for _, s := range p.Paths {
		if strings.HasSuffix(path, s) {
			return true
		}
	}
	return false
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f := Pass
	if p.faultable(r.URL.Path) {
		p.mu.Lock()
		choose := p.choose
		p.mu.Unlock()
		if choose != nil {
			f = choose(p.n.Add(1) - 1)
		}
	}
	p.counts[f].Add(1)
	switch f {
	case Status500:
		http.Error(w, `{"error":{"message":"injected fault","type":"server_error"}}`, http.StatusInternalServerError)
	case Status429:
		w.Header().Set("Retry-After", strconv.Itoa(p.RetryAfter))
		http.Error(w, `{"error":{"message":"injected: busy","type":"rate_limit"}}`, http.StatusTooManyRequests)
	case Reset:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				if tc, ok := conn.(interface{ SetLinger(int) error }); ok {
					tc.SetLinger(0) // RST, not FIN
				}
				conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	case Stall:
		// Read the body first: only then does net/http notice a client
		// that hangs up and cancel the request's context.
		io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
	case Malformed:
		rec := &bodyCutter{ResponseWriter: w}
		p.rp.ServeHTTP(rec, r)
	default:
		p.rp.ServeHTTP(w, r)
	}
}

// bodyCutter forwards headers and status but writes a truncated JSON body.
type bodyCutter struct {
	http.ResponseWriter
	wrote bool
}

func (b *bodyCutter) WriteHeader(code int) {
	b.Header().Del("Content-Length")
	b.ResponseWriter.WriteHeader(code)
}

func (b *bodyCutter) Write(p []byte) (int, error) {
	if !b.wrote {
		b.wrote = true
		b.ResponseWriter.Write([]byte(`{"choices": [{"index": 0, "text": "tru`))
	}
	return len(p), nil
}
