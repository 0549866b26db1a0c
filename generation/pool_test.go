package generation

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func fastPool(t *testing.T, urls ...string) *Pool {
	t.Helper()
	p, err := NewPool(urls, PoolOptions{BackoffInitial: time.Millisecond, BackoffMax: 5 * time.Millisecond, Cooldown: 50 * time.Millisecond, MaxAttempts: 5, AttemptTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRetryable(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&HTTPError{Status: 500}, true},
		{&HTTPError{Status: 503}, true},
		{&HTTPError{Status: 429}, true},
		{&HTTPError{Status: 400}, false},
		{&HTTPError{Status: 404}, false},
		{&MalformedError{Err: errors.New("x")}, true},
		{syscall.ECONNRESET, true},
		{syscall.ECONNREFUSED, true},
		{context.Canceled, false},
		{errors.New("other"), false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := Retryable(tt.err); got != tt.want {
			t.Errorf("Retryable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if d := ParseRetryAfter("3", now); d != 3*time.Second {
		t.Errorf("seconds: %v", d)
	}
	if d := ParseRetryAfter(now.Add(5*time.Second).Format(http.TimeFormat), now); d != 5*time.Second {
		t.Errorf("date: %v", d)
	}
	if d := ParseRetryAfter("soon", now); d != 0 {
		t.Errorf("garbage: %v", d)
	}
}

func TestPoolRetriesThenSucceeds(t *testing.T) {
	p := fastPool(t, "a")
	var n atomic.Int32
	attempts, err := p.Do(context.Background(), func(ctx context.Context, url string) error {
		if n.Add(1) < 3 {
			return &HTTPError{Status: 500}
		}
		return nil
	})
	if err != nil || attempts != 3 {
		t.Fatalf("attempts %d err %v", attempts, err)
	}
}

func TestPoolFinalErrorStops(t *testing.T) {
	p := fastPool(t, "a")
	attempts, err := p.Do(context.Background(), func(ctx context.Context, url string) error {
		return &HTTPError{Status: 400, Body: "bad"}
	})
	var he *HTTPError
	if attempts != 1 || !errors.As(err, &he) || he.Status != 400 {
		t.Fatalf("attempts %d err %v", attempts, err)
	}
}

func TestPoolGivesUp(t *testing.T) {
	p := fastPool(t, "a")
	attempts, err := p.Do(context.Background(), func(ctx context.Context, url string) error {
		return &HTTPError{Status: 502}
	})
	if attempts != 5 || err == nil {
		t.Fatalf("attempts %d err %v", attempts, err)
	}
}

func TestPoolHonoursRetryAfter(t *testing.T) {
	p := fastPool(t, "a")
	var first time.Time
	var gap time.Duration
	_, err := p.Do(context.Background(), func(ctx context.Context, url string) error {
		if first.IsZero() {
			first = time.Now()
			return &HTTPError{Status: 429, RetryAfter: 300 * time.Millisecond}
		}
		gap = time.Since(first)
		return nil
	})
	if err != nil || gap < 300*time.Millisecond {
		t.Fatalf("gap %v err %v", gap, err)
	}
}

func TestPoolAvoidsDeadEndpoint(t *testing.T) {
	p := fastPool(t, "dead", "live")
	served := map[string]int{}
	var mu sync.Mutex
	for i := 0; i < 20; i++ {
		_, err := p.Do(context.Background(), func(ctx context.Context, url string) error {
			mu.Lock()
			served[url]++
			mu.Unlock()
			if url == "dead" {
				return syscall.ECONNREFUSED
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The dead endpoint is tried once, then cools down for the rest (the
	// loop is far shorter than its 50ms cooldown).
	if served["dead"] > 2 || served["live"] != 20 {
		t.Fatalf("served %v", served)
	}
}

func TestPoolLeastOutstanding(t *testing.T) {
	p := fastPool(t, "a", "b")
	release := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[string]int{}
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.Do(context.Background(), func(ctx context.Context, url string) error {
				mu.Lock()
				counts[url]++
				mu.Unlock()
				<-release
				return nil
			})
		}()
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		mu.Lock()
		total := counts["a"] + counts["b"]
		mu.Unlock()
		if total == 10 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if counts["a"] != 5 || counts["b"] != 5 {
		t.Fatalf("unbalanced: %v", counts)
	}
}

func TestPoolAttemptTimeoutIsRetried(t *testing.T) {
	p, _ := NewPool([]string{"a"}, PoolOptions{AttemptTimeout: 20 * time.Millisecond, BackoffInitial: time.Millisecond, MaxAttempts: 3})
	var n atomic.Int32
	attempts, err := p.Do(context.Background(), func(ctx context.Context, url string) error {
		if n.Add(1) == 1 {
			<-ctx.Done() // a stalled response
			return ctx.Err()
		}
		return nil
	})
	if err != nil || attempts != 2 {
		t.Fatalf("attempts %d err %v", attempts, err)
	}
}

func TestPoolCallerCancel(t *testing.T) {
	p := fastPool(t, "a")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.Do(ctx, func(ctx context.Context, url string) error { return ctx.Err() })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
}
