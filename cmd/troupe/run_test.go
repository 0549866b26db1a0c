package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-rl/troupe/generation/builtin/servertest"
	"github.com/troupe-rl/troupe/internal/report"
)

// TestRunTrainTokens checks train_tokens: the run ends after the first
// iteration whose learner step brings the trained completion tokens to the
// budget, evaluates there, and a rerun of the finished run adds nothing.
func TestRunTrainTokens(t *testing.T) {
	srv := servertest.Start(t, servertest.Options{})
	dir := t.TempDir()
	const budget = 40
	cfg := writeConfig(t, dir, fmt.Sprintf(`name: tt
runs_dir: %s
iterations: 50
train_tokens: %d
env: {name: planpath, size: 4, max_turns: 1, mode: single}
generation: {backend: openai, base_urls: [%s], model: tiny, tokenizer: %s, train: {max_tokens: 8}, eval: {max_tokens: 8}}
rollout: {mode: tree, branches: 2, problems: 2}
learner: {lora_rank: 2, lr: 1e-3}
eval: {every: 100, problems: 1, samples: 1}
`, dir, budget, srv.URL, srv.ModelDir))
	for run := range 2 {
		out, errs, code := runCLI("run", cfg)
		if code != 0 {
			t.Fatalf("run %d: exit %d\n%s\n%s", run, code, out, errs)
		}
		m, err := report.ReadMetrics(filepath.Join(dir, "tt", "metrics.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for i, tr := range m.Train {
			if total >= budget {
				t.Fatalf("run %d: step %d trained after the budget was reached (%d ≥ %d)", run, tr.Step, total, budget)
			}
			total += tr.Tokens
			if tr.Step != i+1 {
				t.Fatalf("run %d: steps logged %+v", run, m.Train)
			}
		}
		n := len(m.Train)
		if total < budget || n >= 50 {
			t.Fatalf("run %d: %d steps, %d tokens: want the run to stop once %d tokens are trained", run, n, total, budget)
		}
		if len(m.Eval) != 2 || m.Eval[1].Iteration != int64(n-1) {
			t.Fatalf("run %d: evaluations %+v, want before the first and after iteration %d", run, m.Eval, n-1)
		}
		if !strings.Contains(out, fmt.Sprintf("%d completion tokens trained", total)) {
			t.Errorf("run %d: summary %q does not give the %d tokens trained", run, out, total)
		}
	}
}
