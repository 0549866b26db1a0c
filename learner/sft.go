package learner

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/troupe-rl/troupe/learner/loss"
	"github.com/troupe-rl/troupe/learner/model"
)

// Example is one supervised demonstration: a prompt and the completion the
// policy of Role should write after it (ending with the end-of-turn token).
type Example struct {
	Role          string
	PromptIDs     []int32
	CompletionIDs []int32
	// Weight multiplies the example's per-token loss; 0 means 1 (every
	// completion token of the batch counts the same).
	Weight float64
}

// SFTStep trains every policy on its examples of ex with the token-mean
// cross-entropy of the completion tokens (supervised fine-tuning), each
// token's weighted by its example's Weight: the
// same micro-batching, gradient accumulation, clipping and AdamW step as
// Step, without advantages. The learner must have been made with
// loss.kind: sft (the compiled graphs hold the loss).
func (l *Learner) SFTStep(ctx context.Context, ex []Example) (*Metrics, error) {
	if l.broken != nil {
		return nil, fmt.Errorf("learner: unusable after an earlier failure: %w", l.broken)
	}
	if l.cfg.Loss.Kind != loss.KindSFT {
		return nil, fmt.Errorf("learner: SFTStep needs loss.kind %q, the learner has %q", loss.KindSFT, l.cfg.Loss.Kind)
	}
	start := time.Now()
	for i, e := range ex {
		if _, ok := l.policies[l.cfg.PolicyFor(e.Role)]; !ok {
			return nil, fmt.Errorf("learner: example %d: role %q has no policy (roles %v)", i, e.Role, l.roles)
		}
		if e.Weight < 0 || math.IsNaN(e.Weight) || math.IsInf(e.Weight, 0) {
			return nil, fmt.Errorf("learner: example %d: weight %v, want a finite value ≥ 0", i, e.Weight)
		}
		if len(e.PromptIDs) == 0 || len(e.CompletionIDs) == 0 {
			return nil, fmt.Errorf("learner: example %d: needs a prompt and a completion (%d and %d tokens)", i, len(e.PromptIDs), len(e.CompletionIDs))
		}
		if err := l.checkTokens(slices.Concat(e.PromptIDs, e.CompletionIDs)); err != nil {
			return nil, fmt.Errorf("learner: example %d: %w", i, err)
		}
	}
	met := &Metrics{Step: l.step + 1, Rows: len(ex), Policies: map[string]PolicyMetrics{}}
	err := l.trainPolicies(ctx, met, start, func(name string) []model.Sequence {
		var seqs []model.Sequence
		for _, e := range ex {
			if l.cfg.PolicyFor(e.Role) == name {
				w := e.Weight
				if w == 0 {
					w = 1
				}
				seqs = append(seqs, model.Sequence{Prompt: e.PromptIDs, Completion: e.CompletionIDs, Advantage: w})
			}
		}
		return seqs
	})
	if err != nil {
		return nil, err
	}
	return met, nil
}

// checkTokens fails on an id outside the model's vocabulary.
func (l *Learner) checkTokens(ids []int32) error {
	for _, t := range ids {
		if t < 0 || int(t) >= l.model.Config.VocabSize {
			return fmt.Errorf("token id %d outside the vocabulary (%d)", t, l.model.Config.VocabSize)
		}
	}
	return nil
}
