package report_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-rl/troupe/internal/report"
	"github.com/troupe-rl/troupe/internal/report/reporttest"
)

// TestReplayGolden compares Replay's output on a synthetic run with
// testdata/*.golden (go test -run ReplayGolden -update rewrites them).
func TestReplayGolden(t *testing.T) {
	tmp := t.TempDir()
	dir := reporttest.WriteRun(t, tmp, reporttest.Default("golden"))
	shard := filepath.Join(dir, "trajectories", "iter-000002-rollout.parquet")
	yes, no := true, false
	cases := []struct {
		name string
		path string
		opts report.ReplayOptions
	}{
		{"all", filepath.Join(dir, "trajectories"), report.ReplayOptions{Show: 2, Turn: -1}},
		{"shard_success_prompts", shard, report.ReplayOptions{Show: 1, Turn: -1, Success: &yes, Prompts: true}},
		{"failed_eval", dir, report.ReplayOptions{Show: 1, Turn: -1, Success: &no, Split: "eval", Branches: true}},
		{"role_turn", dir, report.ReplayOptions{Show: 1, Role: "executor", Turn: 0}},
		{"episode", dir, report.ReplayOptions{Show: 5, Turn: -1, Episode: "it1-train-2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := report.Replay(context.Background(), &buf, c.path, c.opts); err != nil {
				t.Fatal(err)
			}
			got := strings.ReplaceAll(buf.String(), tmp, "TMP")
			golden := filepath.Join("testdata", "replay_"+c.name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s (run with -update to accept):\n%s", golden, got)
			}
		})
	}
}

func TestReplayBadPath(t *testing.T) {
	tmp := t.TempDir()
	notParquet := filepath.Join(tmp, "x.parquet")
	os.WriteFile(notParquet, []byte("not parquet at all"), 0o644)
	for _, p := range []string{filepath.Join(tmp, "missing"), tmp, notParquet} {
		err := report.Replay(context.Background(), &bytes.Buffer{}, p, report.ReplayOptions{Turn: -1})
		var bi interface{ BadInput() bool }
		if !errors.As(err, &bi) || !bi.BadInput() || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v", p, err)
		}
	}
}
