package rollout_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/troupe-rl/troupe/envs"
	_ "github.com/troupe-rl/troupe/envs/planpath"
	"github.com/troupe-rl/troupe/generation"
	"github.com/troupe-rl/troupe/generation/builtin/servertest"
	"github.com/troupe-rl/troupe/generation/openai"
	"github.com/troupe-rl/troupe/generation/rollout"
	"github.com/troupe-rl/troupe/internal/config"
	"github.com/troupe-rl/troupe/internal/faultproxy"
	"github.com/troupe-rl/troupe/learner/trajectory"
)

// deadURL returns a loopback URL where nothing listens.
func deadURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/v1"
}

func driver(t *testing.T, urls []string, modelDir string, attempt time.Duration) *rollout.Driver {
	t.Helper()
	var gc generation.Config
	config.SetDefaults(&gc)
	gc.BaseURLs, gc.Model, gc.Tokenizer = urls, "tiny", modelDir
	gc.Timeout = attempt // a stalled response is abandoned and retried
	gc.MaxAttempts = 10
	b, err := openai.New(gc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	render, err := rollout.NewRenderer(gc)
	if err != nil {
		t.Fatal(err)
	}
	ec := envs.DefaultConfig("planpath")
	ec.Mode, ec.Size, ec.MaxTurns = envs.ModeSingle, 5, 2
	var rc rollout.Config
	config.SetDefaults(&rc)
	rc.Branches, rc.Problems = 3, 6
	return &rollout.Driver{
		Backend: b, BackendName: "openai", Model: "tiny", Env: ec, Render: render,
		Sampling: generation.Sampling{Temperature: 1, TopP: 1, MaxTokens: 12},
		Config:   rc, RunID: "faults", Seed: 7,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

type rowKey struct {
	episode    string
	turn       int32
	role       string
	branch     int32
	completion string
}

func collect(t *testing.T, d *rollout.Driver, seeds []int64) (*rollout.Summary, map[rowKey]int) {
	t.Helper()
	rows := map[rowKey]int{}
	var mu sync.Mutex
	sum, err := d.Run(context.Background(), 0, seeds, func(steps []trajectory.Step) error {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range steps {
			rows[rowKey{s.EpisodeID, s.Turn, s.Role, s.Branch, s.CompletionText}]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sum, rows
}

// TestFaultsLoseNothing puts every HTTP fault between the openai backend
// and the real embedded server, plus a dead second endpoint, and checks
// that every episode completes or is named as failed, and that the rows are
// exactly those of a fault-free run (seeded sampling makes retries repeat
// the same completions): none lost, none duplicated.
func TestFaultsLoseNothing(t *testing.T) {
	srv := servertest.Start(t, servertest.Options{})
	seeds := []int64{1, 2, 3, 4}

	cleanSum, clean := collect(t, driver(t, []string{srv.URL}, srv.ModelDir, time.Minute), seeds)
	if len(cleanSum.Failed) != 0 || cleanSum.Episodes != len(seeds) {
		t.Fatalf("fault-free run: %+v", cleanSum)
	}

	// A stalled response costs one attempt timeout: make it a few times the
	// slowest fault-free call (race builds on a busy machine are slow).
	attempt := max(2*time.Second, time.Duration(4*cleanSum.Latency.Max)*time.Millisecond)
	px, err := faultproxy.New(srv.Root)
	if err != nil {
		t.Fatal(err)
	}
	px.Paths = []string{"/completions"}
	px.RetryAfter = 1
	// Every other request fails, cycling through the faults, so each one
	// hits several requests whatever the scheduling.
	cycle := []faultproxy.Fault{faultproxy.Status500, faultproxy.Status429, faultproxy.Reset, faultproxy.Stall, faultproxy.Malformed}
	px.SetChooser(func(n int64) faultproxy.Fault {
		if n%2 == 0 {
			return faultproxy.Pass
		}
		return cycle[(n/2)%int64(len(cycle))]
	})
	hs := httptest.NewServer(px)
	defer hs.Close()
	d := driver(t, []string{hs.URL + "/v1", deadURL(t)}, srv.ModelDir, attempt)
	sum, rows := collect(t, d, seeds)

	for _, f := range []faultproxy.Fault{faultproxy.Status500, faultproxy.Status429, faultproxy.Reset, faultproxy.Stall, faultproxy.Malformed} {
		t.Logf("fault %-9s applied %d times", f, px.Count(f))
		if px.Count(f) == 0 {
			t.Errorf("fault %s never applied: the test proves nothing about it", f)
		}
	}
	t.Logf("episodes %d, failed %d, calls %d, retried %d", sum.Episodes, len(sum.Failed), sum.Calls, sum.RetriedCalls)
	if sum.Episodes != len(seeds) {
		t.Fatalf("%d episodes reported, want %d", sum.Episodes, len(seeds))
	}
	failed := map[string]bool{}
	for _, f := range sum.Failed {
		if f.EpisodeID == "" || f.Err == "" {
			t.Fatalf("failure not named: %+v", f)
		}
		failed[f.EpisodeID] = true
	}
	for k, n := range rows {
		if n != 1 {
			t.Errorf("row %+v written %d times", k, n)
		}
		if clean[k] != 1 {
			t.Errorf("row %+v is not in the fault-free run", k)
		}
	}
	var missing []string
	for k := range clean {
		if rows[k] == 0 && !failed[k.episode] {
			missing = append(missing, fmt.Sprint(k))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%d rows of completed episodes lost, e.g. %s", len(missing), missing[0])
	}
	if sum.RetriedCalls == 0 {
		t.Errorf("no call was retried")
	}
}
