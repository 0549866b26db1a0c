// Package servertest starts troupe's real embedded server for tests: a
// tiny random model written by modelgen into a temporary folder, the
// engine on it, and the OpenAI-compatible HTTP server on a random
// 127.0.0.1 port. Tests then talk HTTP to it as they would to vLLM.
package servertest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/troupe-rl/troupe/generation/builtin"
	"github.com/troupe-rl/troupe/generation/builtin/modelgen"
	"github.com/troupe-rl/troupe/generation/builtin/server"
)

// Server is a running embedded server.
type Server struct {
	URL      string // base URL including /v1, e.g. http://127.0.0.1:41234/v1
	Root     string // http://127.0.0.1:41234
	ModelDir string // the model folder
	Name     string // served model name
	Server   *server.Server
}

// Options tune Start; zero values are small and fast.
type Options struct {
	Model  modelgen.Options // the tiny model (defaults: modelgen's)
	Engine builtin.Options
	Server server.Options
	// ModelDir, if set, serves this existing folder instead of writing one.
	ModelDir string
}

// Start writes a model (unless opts.ModelDir is set), loads it and serves it
// until the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	dir := opts.ModelDir
	if dir == "" {
		dir = t.TempDir()
		opts.Model.Force = true
		if _, err := modelgen.Write(dir, opts.Model); err != nil {
			t.Fatalf("servertest: writing the model: %v", err)
		}
	}
	m, err := server.Load(dir, server.LoadOptions{Name: "tiny", Engine: opts.Engine})
	if err != nil {
		t.Fatalf("servertest: %v", err)
	}
	if opts.Server.Logger == nil {
		opts.Server.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Server.ShutdownTimeout == 0 {
		opts.Server.ShutdownTimeout = 5 * time.Second
	}
	s := server.New(opts.Server)
	s.SetModel(m)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("servertest: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("servertest: serve: %v", err)
		}
	})
	root := "http://" + ln.Addr().String()
	return &Server{URL: root + "/v1", Root: root, ModelDir: dir, Name: "tiny", Server: s}
}
