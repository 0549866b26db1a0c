package envtest

import (
	"log/slog"
	"testing"

	"github.com/troupe-rl/troupe/internal/config"
	"github.com/troupe-rl/troupe/sandbox"
)

// NewRunner returns troupe's real sandbox (sandbox.New with the default
// config) for running tool agents' programs in tests, closed when t ends.
// Environments are tested through the same isolation, limits and verdicts
// that rollouts use. It skips t when no python3 is found.
func NewRunner(t testing.TB) sandbox.Runner {
	t.Helper()
	var cfg sandbox.Config
	config.SetDefaults(&cfg)
	sb, err := sandbox.New(cfg, slog.Default())
	if err != nil {
		t.Skipf("no sandbox for python: %v", err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}
