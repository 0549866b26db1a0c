package learner

import "github.com/troupe-rl/troupe/learner/trajectory"

// FromStep maps a trajectory row to a learner Row, one field per field
// (read it with trajectory.LearnerColumns). The slices are shared, not
// copied.
func FromStep(s *trajectory.Step) Row {
	return Row{
		ProblemID:     s.ProblemID,
		Turn:          int(s.Turn),
		Role:          s.Role,
		PromptIDs:     s.PromptIDs,
		CompletionIDs: s.CompletionIDs,
		Logprobs:      s.Logprobs,
		RewardLocal:   s.RewardLocal,
		RewardTeam:    s.RewardTeam,
		Temperature:   s.Temperature,
	}
}

// Trainable reports whether a trajectory row can be trained on: a
// training-split row whose completion tokens all carry the behaviour
// logprob the server sampled them with (re-tokenized rows have none, and
// their ids may not be what the server sampled). The reason is for logs.
func Trainable(s *trajectory.Step) (ok bool, reason string) {
	switch {
	case s.Split != "" && s.Split != trajectory.SplitTrain:
		return false, "split " + s.Split
	case s.Retokenized:
		return false, "retokenized (no server token ids)"
	case len(s.PromptIDs) == 0:
		return false, "no prompt ids"
	case len(s.Logprobs) != len(s.CompletionIDs):
		return false, "logprobs do not match the completion ids"
	}
	return true, ""
}
