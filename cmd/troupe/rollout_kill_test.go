package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-rl/troupe/generation/builtin/servertest"
	"github.com/troupe-rl/troupe/internal/faultproxy"
	"github.com/troupe-rl/troupe/learner/trajectory"
)

// TestRolloutKilledMidIteration SIGKILLs a `troupe rollout` process while
// it writes its shard: no shard becomes visible, and running the iteration
// again writes a complete one.
func TestRolloutKilledMidIteration(t *testing.T) {
	srv := servertest.Start(t, servertest.Options{})
	px, err := faultproxy.New(srv.Root)
	if err != nil {
		t.Fatal(err)
	}
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(100 * time.Millisecond) // keep the iteration going long enough to kill it
		px.ServeHTTP(w, r)
	}))
	defer slow.Close()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, fmt.Sprintf(`name: kill
runs_dir: %s
env: {name: planpath, size: 5, max_turns: 2, mode: single}
generation: {backend: openai, base_urls: [%s/v1], model: tiny, tokenizer: %s, train: {max_tokens: 8}}
rollout: {mode: tree, branches: 2, problems: 6, concurrency: 1}
`, dir, slow.URL, srv.ModelDir))
	trajDir := filepath.Join(dir, "kill", "trajectories")

	cmd := troupeCmd(t, "rollout", cfg)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for the writer's temporary file, let a few episodes land in it, kill.
	deadline := time.Now().Add(20 * time.Second)
	for {
		ents, _ := os.ReadDir(trajDir)
		found := false
		for _, e := range ents {
			found = found || strings.Contains(e.Name(), ".tmp")
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the rollout never started its shard")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	if m, _ := filepath.Glob(filepath.Join(trajDir, "*.parquet")); len(m) != 0 {
		t.Fatalf("a killed rollout left a visible shard: %v", m)
	}
	man, err := trajectory.OpenManifest(context.Background(), trajDir)
	if err != nil {
		t.Fatal(err)
	}
	if sh, _ := man.Shards(context.Background()); len(sh) != 0 {
		t.Fatalf("manifest lists shards after the kill: %+v", sh)
	}

	out, errs, code := runCLI("rollout", cfg, "--json")
	if code != 0 {
		t.Fatalf("rerun: exit %d\n%s\n%s", code, out, errs)
	}
	sh, _ := man.Shards(context.Background())
	if len(sh) != 1 {
		t.Fatalf("after the rerun the manifest lists %d shards", len(sh))
	}
	rows, err := trajectory.ReadFile(context.Background(), filepath.Join(trajDir, sh[0].Name), nil)
	if err != nil {
		t.Fatal(err)
	}
	episodes := map[string]bool{}
	for _, r := range rows {
		episodes[r.EpisodeID] = true
	}
	if len(episodes) != 6 || int64(len(rows)) != sh[0].Rows {
		t.Fatalf("rerun shard: %d rows from %d episodes (manifest says %d rows)", len(rows), len(episodes), sh[0].Rows)
	}
}
