package generation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// HTTPError is a non-2xx answer from a server.
type HTTPError struct {
	Endpoint   string
	Status     int
	Body       string        // the start of the body, for the message
	RetryAfter time.Duration // from a Retry-After header, 0 if none
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("generation: %s: HTTP %d: %s", e.Endpoint, e.Status, e.Body)
}

// Retryable reports whether a request that failed with err may succeed if
// sent again: connection failures, timeouts of one attempt, malformed
// responses, 408, 429 and 5xx. Cancellation of the caller's context and
// 4xx client errors are final.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	var he *HTTPError
	if errors.As(err, &he) {
		return he.Status == http.StatusTooManyRequests || he.Status == http.StatusRequestTimeout || he.Status >= 500
	}
	var me *MalformedError
	if errors.As(err, &me) {
		return true
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) || errors.Is(err, errAttemptTimeout) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// MalformedError is a 2xx response whose body could not be understood.
type MalformedError struct {
	Endpoint string
	Err      error
}

func (e *MalformedError) Error() string {
	return fmt.Sprintf("generation: %s: malformed response: %v", e.Endpoint, e.Err)
}
func (e *MalformedError) Unwrap() error { return e.Err }

var errAttemptTimeout = errors.New("generation: attempt timed out")

// ParseRetryAfter reads a Retry-After header (seconds or an HTTP date).
func ParseRetryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.Atoi(h); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// PoolOptions configure a Pool.
type PoolOptions struct {
	// AttemptTimeout bounds one attempt (default 2m).
	AttemptTimeout time.Duration
	// MaxAttempts bounds attempts per request, first included (default 6).
	MaxAttempts int
	// BackoffInitial and BackoffMax shape the jittered exponential backoff
	// between attempts (defaults 100ms and 10s).
	BackoffInitial, BackoffMax time.Duration
	// Cooldown is how long an endpoint that failed with a retryable error
	// stays out of rotation (default 2s, doubling on consecutive failures up
	// to 30s). A request still goes to a cooling endpoint when all are.
	Cooldown time.Duration
	Logger   *slog.Logger
}

func (o *PoolOptions) fill() {
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = 2 * time.Minute
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 6
	}
	if o.BackoffInitial <= 0 {
		o.BackoffInitial = 100 * time.Millisecond
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 10 * time.Second
	}
	if o.Cooldown <= 0 {
		o.Cooldown = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Pool spreads requests over several endpoints of one backend: each
// attempt goes to the healthy endpoint with the fewest requests in flight;
// a retryable failure takes the endpoint out of rotation for a cooldown and
// the request is retried (on any endpoint) after a jittered exponential
// backoff, honouring Retry-After. Safe for concurrent use.
type Pool struct {
	opts PoolOptions
	now  func() time.Time

	mu  sync.Mutex
	eps []*endpoint
}

type endpoint struct {
	url         string
	outstanding int
	fails       int       // consecutive retryable failures
	downUntil   time.Time // out of rotation until then
	served      int64
}

// NewPool returns a pool over the given endpoint URLs (at least one).
func NewPool(urls []string, opts PoolOptions) (*Pool, error) {
	if len(urls) == 0 {
		return nil, errors.New("generation: no endpoints")
	}
	opts.fill()
	p := &Pool{opts: opts, now: time.Now}
	for _, u := range urls {
		p.eps = append(p.eps, &endpoint{url: u})
	}
	return p, nil
}

// EndpointStats is a snapshot of one endpoint's state.
type EndpointStats struct {
	URL         string
	Outstanding int
	Served      int64
	Down        bool
}

// Stats returns the endpoints' current state.
func (p *Pool) Stats() []EndpointStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	out := make([]EndpointStats, len(p.eps))
	for i, e := range p.eps {
		out[i] = EndpointStats{URL: e.url, Outstanding: e.outstanding, Served: e.served, Down: now.Before(e.downUntil)}
	}
	return out
}

// acquire picks the endpoint for the next attempt.
func (p *Pool) acquire() *endpoint {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	var best *endpoint
	for _, e := range p.eps {
		if now.Before(e.downUntil) {
			continue
		}
		if best == nil || e.outstanding < best.outstanding {
			best = e
		}
	}
	if best == nil { // all cooling down: the one that recovers first
		for _, e := range p.eps {
			if best == nil || e.downUntil.Before(best.downUntil) {
				best = e
			}
		}
	}
	best.outstanding++
	return best
}

func (p *Pool) release(e *endpoint, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e.outstanding--
	switch {
	case err == nil:
		e.fails = 0
		e.downUntil = time.Time{}
		e.served++
	case Retryable(err):
		var he *HTTPError
		if errors.As(err, &he) && he.Status == http.StatusTooManyRequests {
			// Busy, not broken: keep it in rotation, the backoff paces us.
			return
		}
		e.fails++
		d := p.opts.Cooldown << min(e.fails-1, 4)
		d = min(d, 30*time.Second)
		e.downUntil = p.now().Add(d)
	}
}

// retryAfterBackOff waits at least the server's Retry-After.
type retryAfterBackOff struct {
	backoff.BackOff
	next time.Duration
}

func (b *retryAfterBackOff) NextBackOff() time.Duration {
	d := b.BackOff.NextBackOff()
	if d == backoff.Stop {
		return d
	}
	if b.next > d {
		d = b.next
	}
	b.next = 0
	return d
}

// Do runs attempt against endpoints until it succeeds, fails with a final
// error, MaxAttempts is reached, or ctx ends. attempt gets a context bounded
// by AttemptTimeout and the endpoint's base URL. Do returns the number of
// attempts made.
func (p *Pool) Do(ctx context.Context, attempt func(ctx context.Context, baseURL string) error) (int, error) {
	exp := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(p.opts.BackoffInitial),
		backoff.WithMaxInterval(p.opts.BackoffMax),
		backoff.WithMaxElapsedTime(0),
		backoff.WithRandomizationFactor(0.5),
	)
	ra := &retryAfterBackOff{BackOff: backoff.WithMaxRetries(exp, uint64(p.opts.MaxAttempts-1))}
	n := 0
	var last error
	op := func() error {
		n++
		e := p.acquire()
		actx, cancel := context.WithTimeoutCause(ctx, p.opts.AttemptTimeout, errAttemptTimeout)
		err := attempt(actx, e.url)
		if err != nil && ctx.Err() == nil && errors.Is(context.Cause(actx), errAttemptTimeout) {
			err = fmt.Errorf("%w after %v: %w", errAttemptTimeout, p.opts.AttemptTimeout, err)
		}
		cancel()
		p.release(e, err)
		if err == nil {
			return nil
		}
		last = err
		if ctx.Err() != nil {
			return backoff.Permanent(ctx.Err())
		}
		if !Retryable(err) {
			return backoff.Permanent(err)
		}
		var he *HTTPError
		if errors.As(err, &he) {
			ra.next = he.RetryAfter
		}
		p.opts.Logger.Debug("generation: retrying", "endpoint", e.url, "attempt", n, "err", err)
		return err
	}
	err := backoff.Retry(op, backoff.WithContext(ra, ctx))
	if err != nil {
		if ctx.Err() != nil {
			return n, fmt.Errorf("generation: %w (last error: %v)", ctx.Err(), last)
		}
		if Retryable(err) {
			return n, fmt.Errorf("generation: giving up after %d attempts: %w", n, err)
		}
		return n, err
	}
	return n, nil
}
