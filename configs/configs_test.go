package configs

import (
	"strings"
	"testing"
)

// TestAlphaHasOneOwner: env.alpha sets the learner's reward mix, and
// learner.alpha is no key.
func TestAlphaHasOneOwner(t *testing.T) {
	e, err := Load("planpath-tiny.yaml", "env.alpha=0.25")
	if err != nil {
		t.Fatal(err)
	}
	if lc := e.LearnerConfig(); lc.Alpha != 0.25 {
		t.Errorf("learner alpha %v, want env.alpha 0.25", lc.Alpha)
	}
	if _, err := Load("planpath-tiny.yaml", "learner.alpha=0.5"); err == nil || !strings.Contains(err.Error(), "learner.alpha") {
		t.Errorf("learner.alpha override: %v, want an unknown-key error", err)
	}
	if _, err := Load("planpath-tiny.yaml", "learner.lr=3"); err == nil || !strings.Contains(err.Error(), "learner.lr") {
		t.Errorf("learner.lr=3: %v, want an error naming learner.lr", err)
	}
}

// TestLearnerModelDefault: learner.model falls back to generation.tokenizer.
func TestLearnerModelDefault(t *testing.T) {
	e, err := Load("planpath-tiny.yaml", "generation.tokenizer=/m")
	if err != nil {
		t.Fatal(err)
	}
	if got := e.LearnerConfig().Model; got != "/m" {
		t.Errorf("learner model %q, want generation.tokenizer", got)
	}
	e, _ = Load("planpath-tiny.yaml", "generation.tokenizer=/m", "learner.model=/n")
	if got := e.LearnerConfig().Model; got != "/n" {
		t.Errorf("learner model %q, want learner.model", got)
	}
}
