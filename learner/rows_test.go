package learner

import (
	"reflect"
	"testing"

	"github.com/troupe-rl/troupe/learner/trajectory"
)

// TestFromStep: every Row field comes from its trajectory column, and the
// learner's projection holds every column FromStep reads.
func TestFromStep(t *testing.T) {
	s := trajectory.Step{ProblemID: "p", Turn: 3, Role: "plan", PromptIDs: []int32{1, 2}, CompletionIDs: []int32{3},
		Logprobs: []float32{-0.5}, RewardLocal: 0.25, RewardTeam: 0.75, Temperature: 0.6, Split: trajectory.SplitTrain}
	r := FromStep(&s)
	want := Row{ProblemID: "p", Turn: 3, Role: "plan", PromptIDs: []int32{1, 2}, CompletionIDs: []int32{3},
		Logprobs: []float32{-0.5}, RewardLocal: 0.25, RewardTeam: 0.75, Temperature: 0.6}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("FromStep = %+v, want %+v", r, want)
	}
	v := reflect.ValueOf(r)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("Row.%s is not mapped", v.Type().Field(i).Name)
		}
	}
	for _, col := range []string{trajectory.ColProblemID, trajectory.ColTurn, trajectory.ColRole, trajectory.ColPromptIDs,
		trajectory.ColCompletionIDs, trajectory.ColLogprobs, trajectory.ColRewardLocal, trajectory.ColRewardTeam,
		trajectory.ColTemperature, trajectory.ColSplit, trajectory.ColRetokenized} {
		found := false
		for _, c := range trajectory.LearnerColumns {
			found = found || c == col
		}
		if !found {
			t.Errorf("LearnerColumns lacks %s", col)
		}
	}
	if ok, _ := Trainable(&s); !ok {
		t.Error("a complete training row is not trainable")
	}
	for _, mod := range []func(*trajectory.Step){
		func(s *trajectory.Step) { s.Split = trajectory.SplitEval },
		func(s *trajectory.Step) { s.Retokenized = true },
		func(s *trajectory.Step) { s.Logprobs = nil },
		func(s *trajectory.Step) { s.PromptIDs = nil },
	} {
		c := s
		mod(&c)
		if ok, reason := Trainable(&c); ok || reason == "" {
			t.Errorf("row %+v trainable", c)
		}
	}
}
