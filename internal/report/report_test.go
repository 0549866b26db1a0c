package report_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/troupe-rl/troupe/internal/report"
	"github.com/troupe-rl/troupe/internal/report/reporttest"
	"github.com/troupe-rl/troupe/learner/trajectory"
)

var update = flag.Bool("update", false, "rewrite golden files")

var fixed = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

// testScale renders small PNGs: rasterising dominates the tests' time
// under -race.
const testScale = 0.4

// checkSelfContained fails when the page loads anything from outside.
func checkSelfContained(t *testing.T, html string) {
	t.Helper()
	bad := regexp.MustCompile(`(?i)(src|href)\s*=\s*"(https?:|//|file:)|<script|<link|@import|url\(\s*['"]?(https?:|//)`)
	if m := bad.FindString(html); m != "" {
		t.Errorf("report is not self-contained: %q", m)
	}
	if !strings.Contains(html, `src="data:image/png;base64,`) {
		t.Error("report embeds no image")
	}
}

// checkPNG decodes a PNG and wants a share of pixels that are not the
// white background.
func checkPNG(t *testing.T, data []byte, name string) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b := img.Bounds()
	if b.Dx() < 300 || b.Dy() < 150 {
		t.Errorf("%s: %v too small", name, b)
	}
	n := 0
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r < 0xf000 || g < 0xf000 || bl < 0xf000 {
				n++
			}
		}
	}
	if frac := float64(n) / float64(b.Dx()*b.Dy()/4); frac < 0.01 {
		t.Errorf("%s: only %.4f of pixels drawn", name, frac)
	}
	_ = image.Point{}
}

func TestReportOneRun(t *testing.T) {
	dir := reporttest.WriteRun(t, t.TempDir(), reporttest.Default("alpha"))
	res, err := report.Write(context.Background(), []string{dir}, report.Options{Now: fixed, PlotScale: testScale})
	if err != nil {
		t.Fatal(err)
	}
	if res.HTML != filepath.Join(dir, "report.html") {
		t.Errorf("html at %s", res.HTML)
	}
	data, err := os.ReadFile(res.HTML)
	if err != nil {
		t.Fatal(err)
	}
	html := string(data)
	checkSelfContained(t, html)
	for _, want := range []string{"troupe run · alpha", "Evaluation success rate", "Zero-variance", "Successful episode", "Failed episode",
		"planner", "executor", "learner.lr", "Diagnostics", "verdict"} {
		if !strings.Contains(html, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	names := map[string]bool{}
	for _, p := range res.Plots {
		names[strings.TrimSuffix(filepath.Base(p), ".png")] = true
		if filepath.Dir(p) != filepath.Join(dir, "plots") {
			t.Errorf("plot %s outside plots/", p)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		checkPNG(t, data, p)
	}
	for _, want := range []string{"eval_success", "eval_success_by_role", "reward_by_role", "reward_by_turn", "zero_variance", "rollout_success",
		"loss", "entropy", "clip_fraction", "kl", "ratio", "grad_norm", "lr", "tokens_per_sec", "wall_time", "completion_length", "format_failures"} {
		if !names[want] {
			t.Errorf("no plot %s (have %v)", want, names)
		}
	}
	if len(res.Runs[0].Transcripts) != 2 {
		t.Errorf("%d transcripts", len(res.Runs[0].Transcripts))
	}
}

func TestReportOverlay(t *testing.T) {
	parent := t.TempDir()
	a := reporttest.WriteRun(t, parent, reporttest.Default("tree"))
	sb := reporttest.Default("no_tree")
	sb.Skill, sb.Seed, sb.Iterations = 0.05, 2, 2
	b := reporttest.WriteRun(t, parent, sb)
	out := filepath.Join(t.TempDir(), "cmp", "ablation.html")
	res, err := report.Write(context.Background(), []string{a, b}, report.Options{Out: out, Now: fixed, PlotScale: testScale})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	html := string(data)
	checkSelfContained(t, html)
	for _, want := range []string{"comparison of 2 runs", "Ablation table", "<td>tree</td>", "<td>no_tree</td>"} {
		if !strings.Contains(html, want) {
			t.Errorf("overlay lacks %q", want)
		}
	}
	if len(res.Plots) < 10 {
		t.Errorf("%d plots", len(res.Plots))
	}
	for _, p := range res.Plots {
		if filepath.Dir(p) != filepath.Join(filepath.Dir(out), "ablation-plots") {
			t.Errorf("plot %s", p)
		}
	}
	data, _ = os.ReadFile(res.Plots[0])
	checkPNG(t, data, res.Plots[0])
}

func TestReportBadRun(t *testing.T) {
	tmp := t.TempDir()
	empty := filepath.Join(tmp, "empty")
	os.Mkdir(empty, 0o755)
	badm := filepath.Join(tmp, "badm")
	os.Mkdir(badm, 0o755)
	os.WriteFile(filepath.Join(badm, report.MetricsName), []byte("{\"step\":1}\nnot json\n{\"step\":2}\n"), 0o644)
	for _, dir := range []string{filepath.Join(tmp, "missing"), empty, badm} {
		_, err := report.Write(context.Background(), []string{dir}, report.Options{})
		var re *report.Error
		if !errors.As(err, &re) || !re.BadInput() || !strings.Contains(err.Error(), filepath.Base(dir)) {
			t.Errorf("%s: %v", dir, err)
		}
	}
}

func TestReadMetricsTolerant(t *testing.T) {
	p := filepath.Join(t.TempDir(), "metrics.jsonl")
	data := `{"step":2,"loss":0.5,"new_field":{"x":1},"policies":{"a":{"kl":0.1,"clip_frac":0.2,"entropy":1.5}}}
{"type":"eval","iteration":0,"step":2,"success_rate":0.25,"success_by_turn":{"0":0.1,"1":0.25},"future":true}
{"type":"train","step":1}

{"type":"something_new","x":1}
{"type":"phases","iteration":0,"seconds":{"rollout":3}}
{"step":3,"lo`
	os.WriteFile(p, []byte(data), 0o644)
	m, err := report.ReadMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Train) != 2 || m.Train[0].Step != 1 || m.Train[1].Policies["a"].KL != 0.1 || m.Train[1].Policies["a"].Entropy != 1.5 {
		t.Errorf("train %+v", m.Train)
	}
	if len(m.Eval) != 1 || m.Eval[0].SuccessByTurn[1] != 0.25 || len(m.Phases) != 1 || m.Skipped != 2 {
		t.Errorf("eval %+v phases %+v skipped %d", m.Eval, m.Phases, m.Skipped)
	}
}

func TestEvalRecordRoundTrip(t *testing.T) {
	dir := t.TempDir()
	rec := report.EvalRecord{Iteration: 3, Step: 7, SuccessRate: 0.5, SuccessByRole: map[string]float64{"a": 0.5}, Samples: 4}
	if err := report.AppendEval(dir, rec); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, report.MetricsName))
	if !strings.HasPrefix(string(data), `{"type":"eval",`) {
		t.Errorf("line %s", data)
	}
	m, err := report.ReadMetrics(filepath.Join(dir, report.MetricsName))
	if err != nil || len(m.Eval) != 1 || m.Eval[0].Step != 7 || m.Eval[0].Type != "eval" {
		t.Fatalf("%v %+v", err, m)
	}
}

func TestEvalFromSteps(t *testing.T) {
	mk := func(ep, prob, role string, turn int32, chosen, success bool, verdict string) trajectory.Step {
		return trajectory.Step{EpisodeID: ep, ProblemID: prob, Role: role, Turn: turn, Chosen: chosen, Success: success, Reward: 1,
			Info: `{"verdict":"` + verdict + `"}`, CompletionIDs: []int32{1, 2}}
	}
	rows := []trajectory.Step{
		// p1: two samples, one solved by executor at turn 1.
		mk("e1", "p1", "planner", 0, true, false, "ok"), mk("e1", "p1", "executor", 0, true, false, "no_answer"),
		mk("e1", "p1", "planner", 1, true, false, "ok"), mk("e1", "p1", "executor", 1, true, true, "ok"),
		mk("e1", "p1", "executor", 1, false, false, "ok"), // sibling branch: ignored
		mk("e2", "p1", "planner", 0, true, false, "ok"), mk("e2", "p1", "executor", 0, true, false, "ok"),
		// p2: one sample solved by the planner at turn 0.
		mk("e3", "p2", "planner", 0, true, true, "ok"),
	}
	rec := report.EvalFromSteps(rows)
	if rec.SuccessRate != 0.75 { // (1/2 + 1/1) / 2
		t.Errorf("success %v", rec.SuccessRate)
	}
	if rec.Problems != 2 || rec.Samples != 3 {
		t.Errorf("problems %d samples %d", rec.Problems, rec.Samples)
	}
	if rec.SuccessByRole["executor"] != 1.0/3 || rec.SuccessByRole["planner"] != 1.0/3 {
		t.Errorf("by role %v", rec.SuccessByRole)
	}
	if rec.SuccessByTurn[0] != 1.0/3 || rec.SuccessByTurn[1] != 2.0/3 {
		t.Errorf("by turn %v", rec.SuccessByTurn)
	}
	if rec.FormatOKRate != 6.0/7 || rec.CompletionTokens != 2 {
		t.Errorf("format %v tokens %v", rec.FormatOKRate, rec.CompletionTokens)
	}
}
