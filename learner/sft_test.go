package learner

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/troupe-rl/troupe/learner/loss"
	"github.com/troupe-rl/troupe/learner/model"
)

// TestSFTStepLowersCrossEntropy: repeated SFT steps on fixed examples drive
// the token-mean cross-entropy of their completions down, and the loss
// SFTStep reports is that cross-entropy (−mean logprob, checked with Score).
func TestSFTStepLowersCrossEntropy(t *testing.T) {
	mc := model.TinyConfig(1, 32, 4, 2, 64, 16)
	dir := writeTinyModel(t, mc)
	cfg := defaultConfig()
	cfg.LR, cfg.WarmupSteps, cfg.LoRARank, cfg.LoRAAlpha = 0.02, 0, 4, 8
	cfg.Loss.Kind = loss.KindSFT
	ctx := context.Background()
	l, err := New(ctx, cfg, dir, []string{"tool", "plan"}, Options{Backend: testBackend(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ex := []Example{
		{Role: "tool", PromptIDs: []int32{1, 2, 3}, CompletionIDs: []int32{4, 5, 6, 15}},
		{Role: "plan", PromptIDs: []int32{7, 8}, CompletionIDs: []int32{9, 10, 15}},
	}
	var first, last float64
	for i := range 8 {
		m, err := l.SFTStep(ctx, ex)
		if err != nil {
			t.Fatal(err)
		}
		if m.Tokens != 7 || len(m.Policies) != 2 {
			t.Fatalf("step %d: %d tokens, %d policies", i, m.Tokens, len(m.Policies))
		}
		if i == 0 {
			first = m.Loss
			// The reported loss is the cross-entropy before the step: the base model
			// (fresh adapters have B = 0).
			want := 0.0
			for _, e := range ex {
				want += baseCrossEntropy(t, l, e)
			}
			if want /= 7; math.Abs(want-first) > 1e-4 {
				t.Errorf("step 1 loss %v, cross-entropy of the base model %v", first, want)
			}
		}
		last = m.Loss
	}
	if !(last < first-0.5) {
		t.Errorf("cross-entropy %v → %v: want a clear decrease", first, last)
	}

	// A learner built for a policy loss refuses SFT steps.
	cfg.Loss.Kind = loss.KindPG
	pg, err := New(ctx, cfg, dir, []string{"plan"}, Options{Backend: testBackend(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if _, err := pg.SFTStep(ctx, ex[1:]); err == nil || !strings.Contains(err.Error(), "sft") {
		t.Errorf("SFTStep with loss kind pg: %v", err)
	}
}

// TestSFTStepWeights: an example's Weight multiplies its tokens' loss (0
// counts as 1), and a negative weight is refused.
func TestSFTStepWeights(t *testing.T) {
	mc := model.TinyConfig(1, 32, 4, 2, 64, 16)
	dir := writeTinyModel(t, mc)
	cfg := defaultConfig()
	cfg.WarmupSteps, cfg.LoRARank, cfg.LoRAAlpha = 0, 4, 8
	cfg.Loss.Kind = loss.KindSFT
	cfg.Policies = PoliciesShared
	ctx := context.Background()
	ex := []Example{
		{Role: "tool", PromptIDs: []int32{1, 2, 3}, CompletionIDs: []int32{4, 5, 6, 15}},
		{Role: "plan", PromptIDs: []int32{7, 8}, CompletionIDs: []int32{9, 10, 15}},
	}
	for _, tc := range []struct{ w0, w1, f0, f1 float64 }{{0, 0, 1, 1}, {3, 0.5, 3, 0.5}, {0, 2, 1, 2}} {
		l, err := New(ctx, cfg, dir, []string{"tool", "plan"}, Options{Backend: testBackend(t)})
		if err != nil {
			t.Fatal(err)
		}
		ce := [2]float64{baseCrossEntropy(t, l, ex[0]), baseCrossEntropy(t, l, ex[1])}
		w := []Example{ex[0], ex[1]}
		w[0].Weight, w[1].Weight = tc.w0, tc.w1
		m, err := l.SFTStep(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		if want := (tc.f0*ce[0] + tc.f1*ce[1]) / 7; math.Abs(m.Loss-want) > 1e-4 {
			t.Errorf("weights %v, %v: loss %v, want %v", tc.w0, tc.w1, m.Loss, want)
		}
		w[1].Weight = -1
		if _, err := l.SFTStep(ctx, w); err == nil || !strings.Contains(err.Error(), "weight") {
			t.Errorf("negative weight: %v", err)
		}
		l.Close()
	}
}

// baseCrossEntropy is −Σ log p of e's completion under the base model
// (adapter off), scored by e's policy.
func baseCrossEntropy(t *testing.T, l *Learner, e Example) float64 {
	t.Helper()
	p := l.policies[l.cfg.PolicyFor(e.Role)]
	lps, err := p.prog.Score(p.lora, []model.Sequence{{Prompt: e.PromptIDs, Completion: e.CompletionIDs}}, true)
	if err != nil {
		t.Fatal(err)
	}
	ce := 0.0
	for _, lp := range lps[0] {
		ce -= lp
	}
	return ce
}
