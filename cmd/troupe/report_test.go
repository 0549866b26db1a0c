package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/troupe-rl/troupe/internal/report"
	"github.com/troupe-rl/troupe/internal/report/reporttest"
	"github.com/troupe-rl/troupe/learner"
	"github.com/troupe-rl/troupe/learner/atgrpo"
	"github.com/troupe-rl/troupe/learner/loss"
)

func TestReportCLI(t *testing.T) {
	defer func(s float64) { reportPlotScale = s }(reportPlotScale)
	reportPlotScale = 0.3
	parent := t.TempDir()
	a := reporttest.WriteRun(t, parent, reporttest.Default("a"))
	b := reporttest.WriteRun(t, parent, reporttest.Default("b"))
	out, errOut, code := runCLI("report", a)
	if code != 0 || !strings.Contains(out, filepath.Join(a, "report.html")) {
		t.Fatalf("code %d\n%s\n%s", code, out, errOut)
	}
	cmp := filepath.Join(parent, "ab.html")
	if out, errOut, code := runCLI("report", a, b, "--out", cmp); code != 0 {
		t.Fatalf("overlay: code %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(cmp); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(parent, "nope")
	for _, args := range [][]string{{"report"}, {"report", missing}, {"report", a, missing}, {"report", a, "--bogus"}} {
		_, errOut, code := runCLI(args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", args, code, errOut)
		}
		if len(args) > 1 && args[len(args)-1] == missing && !strings.Contains(errOut, missing) {
			t.Errorf("%v: error does not name the folder: %s", args, errOut)
		}
	}
}

func TestReplayCLI(t *testing.T) {
	dir := reporttest.WriteRun(t, t.TempDir(), reporttest.Default("r"))
	out, errOut, code := runCLI("replay", filepath.Join(dir, "trajectories"), "--show", "1", "--failed", "--role", "planner")
	if code != 0 || !strings.Contains(out, "=== episode") || !strings.Contains(out, "summary (failed, role=planner)") {
		t.Fatalf("code %d\n%s\n%s", code, out, errOut)
	}
	if strings.Contains(out, "| executor |") {
		t.Errorf("--role planner printed executor steps:\n%s", out)
	}
	bad := filepath.Join(t.TempDir(), "bad.parquet")
	os.WriteFile(bad, []byte("PAR1 garbage"), 0o644)
	for _, args := range [][]string{
		{"replay"}, {"replay", filepath.Join(dir, "missing")}, {"replay", bad},
		{"replay", dir, "--success", "--failed"}, {"replay", dir, "--split", "test"}, {"replay", dir, "--show", "-1"},
	} {
		_, errOut, code := runCLI(args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", args, code, errOut)
		}
	}
}

// TestTrainRecordMatchesLearner holds report.TrainRecord (a mirror that
// keeps the report free of the learner's tensor stack) to learner.Metrics.
func TestTrainRecordMatchesLearner(t *testing.T) {
	m := learner.Metrics{Step: 3, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Rows: 4, Tokens: 5, Loss: 0.5,
		Groups: atgrpo.Stats{Rows: 4, Groups: 2, ZeroVarianceFrac: 0.5, Reward: atgrpo.RewardStat{N: 4, Mean: 1, Std: 2},
			ByRole: map[string]atgrpo.RewardStat{"a": {N: 1}}, ByTurn: map[int]atgrpo.RewardStat{1: {N: 2}}},
		Policies: map[string]learner.PolicyMetrics{"a": {Metrics: loss.Metrics{Loss: 1, Tokens: 2, RatioMean: 3, RatioMax: 4, ClipFrac: 5, KL: 6},
			Entropy: 7, GradNorm: 8, LR: 9, Rows: 10, MicroBatches: 11, PaddedTokens: 12, OptSteps: 13}},
		Seconds: 1.5, TokensPerSec: 2.5, PaddedPerSec: 3.5}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var r report.TrainRecord
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	back, _ := json.Marshal(r)
	var x, y map[string]any
	json.Unmarshal(data, &x)
	json.Unmarshal(back, &y)
	if !reflect.DeepEqual(x, y) {
		t.Errorf("report.TrainRecord lost fields of learner.Metrics:\nlearner %s\nreport  %s", data, back)
	}
}
