package trajectory

import "time"

// Step is one row of a trajectory shard: one LLM call made by one role at one
// turn of one branch of one episode, together with what the environment said
// about it. Rollout fills every field except where noted; the learner reads
// the token ids, logprobs, rewards and grouping columns.
//
// The parquet tags are the column names of the on-disk schema and are part
// of the contract: renaming one breaks every stored shard. Add new columns
// at the end; readers ignore columns they do not know and read missing ones
// as zero values.
type Step struct {
	// RunID names the experiment run (the runs/<run> directory name).
	RunID string `parquet:"run_id,dict"`
	// Iteration is the rollout/learn iteration (0-based) that produced the row.
	Iteration int64 `parquet:"iteration"`
	// PolicyVersion is the adapter version that sampled the completion (the
	// learner step count of the adapter that was loaded; 0 = base model).
	PolicyVersion int64 `parquet:"policy_version"`
	// EpisodeID identifies the episode (one problem, one tree of branches),
	// unique within the run.
	EpisodeID string `parquet:"episode_id"`
	// ProblemID identifies the dataset problem/task; AT-GRPO never groups
	// rows of different problems.
	ProblemID string `parquet:"problem_id,dict"`
	// Env is the environment's registry name (e.g. "planpath", "mathqa").
	Env string `parquet:"env,dict"`
	// Split is "train" or "eval" (see [SplitTrain], [SplitEval]).
	Split string `parquet:"split,dict"`
	// Branch is the tree-sampling branch, 0..K-1.
	Branch int32 `parquet:"branch"`
	// Chosen is true for the branch tree sampling kept at this turn (argmax
	// reward, ties to the lowest index); every branch is still trained on.
	Chosen bool `parquet:"chosen"`
	// Turn is the episode turn, 0-based.
	Turn int32 `parquet:"turn"`
	// Role is the agent role that spoke (e.g. "planner", "coder").
	Role string `parquet:"role,dict"`
	// Policy is the adapter name that served the role, or "base".
	Policy string `parquet:"policy,dict"`
	// Backend is the generation backend's registry name ("openai",
	// "ollama", "builtin").
	Backend string `parquet:"backend,dict"`
	// Model is the base model name as the backend reported it.
	Model string `parquet:"model,dict"`
	// PromptText is the rendered prompt exactly as sent (after the chat
	// template), UTF-8.
	PromptText string `parquet:"prompt_text"`
	// CompletionText is the sampled completion text, UTF-8.
	CompletionText string `parquet:"completion_text"`
	// PromptIDs are the prompt token ids the server actually used. Empty
	// lists read back as nil.
	PromptIDs []int32 `parquet:"prompt_ids,list"`
	// CompletionIDs are the sampled completion token ids.
	CompletionIDs []int32 `parquet:"completion_ids,list"`
	// Logprobs are the behaviour policy's natural-log probabilities of
	// CompletionIDs, one per completion token (same length), as returned by
	// the backend at sampling time. Empty when the backend gave none.
	Logprobs []float32 `parquet:"logprobs,list"`
	// Retokenized is true when the backend returned no token ids and rollout
	// re-tokenized PromptText/CompletionText with troupe's tokenizer; such
	// ids may differ from what the server sampled, and Logprobs is then empty.
	Retokenized bool `parquet:"retokenized"`
	// FinishReason is the backend's finish reason ("stop", "length", …).
	FinishReason string `parquet:"finish_reason,dict"`
	// Temperature is the sampling temperature of the request.
	Temperature float64 `parquet:"temperature"`
	// TopP is the nucleus sampling threshold of the request (1 = off).
	TopP float64 `parquet:"top_p"`
	// TopK is the top-k limit of the request (0 or -1 = off).
	TopK int32 `parquet:"top_k"`
	// Seed is the sampling seed sent with the request (0 = none).
	Seed int64 `parquet:"seed"`
	// RewardLocal is the role's own reward for this turn, from the env.
	RewardLocal float64 `parquet:"reward_local"`
	// RewardTeam is the team reward for this turn, from the env.
	RewardTeam float64 `parquet:"reward_team"`
	// Reward is the mixed reward the learner optimises:
	// α·RewardTeam + (1−α)·RewardLocal, filled by rollout.
	Reward float64 `parquet:"reward"`
	// Done is true when the episode ended after this step.
	Done bool `parquet:"done"`
	// Success is the env's success flag after this step.
	Success bool `parquet:"success"`
	// GroupKey is the AT-GRPO group the row belongs to, as rollout computed
	// it (problem_id/turn/role, or problem_id alone in no_tree mode).
	GroupKey string `parquet:"group_key,dict"`
	// LatencyMS is the wall time of the LLM call in milliseconds.
	LatencyMS float64 `parquet:"latency_ms"`
	// CreatedAt is when the call finished. Stored as UTC microseconds
	// (TIMESTAMP(MICROS, UTC)): sub-microsecond digits and the location are
	// dropped, and readers return UTC times.
	CreatedAt time.Time `parquet:"created_at,timestamp(microsecond)"`
	// Info is a JSON object (as text) with env-specific fields; "" = none.
	Info string `parquet:"info"`
}

// Values of [Step.Split].
const (
	SplitTrain = "train"
	SplitEval  = "eval"
)

// Column names, as stored in shards (the parquet tags of [Step]).
const (
	ColRunID          = "run_id"
	ColIteration      = "iteration"
	ColPolicyVersion  = "policy_version"
	ColEpisodeID      = "episode_id"
	ColProblemID      = "problem_id"
	ColEnv            = "env"
	ColSplit          = "split"
	ColBranch         = "branch"
	ColChosen         = "chosen"
	ColTurn           = "turn"
	ColRole           = "role"
	ColPolicy         = "policy"
	ColBackend        = "backend"
	ColModel          = "model"
	ColPromptText     = "prompt_text"
	ColCompletionText = "completion_text"
	ColPromptIDs      = "prompt_ids"
	ColCompletionIDs  = "completion_ids"
	ColLogprobs       = "logprobs"
	ColRetokenized    = "retokenized"
	ColFinishReason   = "finish_reason"
	ColTemperature    = "temperature"
	ColTopP           = "top_p"
	ColTopK           = "top_k"
	ColSeed           = "seed"
	ColRewardLocal    = "reward_local"
	ColRewardTeam     = "reward_team"
	ColReward         = "reward"
	ColDone           = "done"
	ColSuccess        = "success"
	ColGroupKey       = "group_key"
	ColLatencyMS      = "latency_ms"
	ColCreatedAt      = "created_at"
	ColInfo           = "info"
)

// LearnerColumns is the projection the learner needs: grouping keys, token
// ids, behaviour logprobs (and the temperature they were sampled at) and
// rewards (no texts).
var LearnerColumns = []string{
	ColIteration, ColPolicyVersion, ColEpisodeID, ColProblemID, ColSplit, ColBranch, ColTurn,
	ColRole, ColPolicy, ColPromptIDs, ColCompletionIDs, ColLogprobs, ColRetokenized,
	ColReward, ColRewardLocal, ColRewardTeam, ColGroupKey, ColFinishReason, ColTemperature,
}

// ReplayColumns is the projection transcript replay needs: texts and
// outcomes, no token lists.
var ReplayColumns = []string{
	ColRunID, ColIteration, ColEpisodeID, ColProblemID, ColEnv, ColSplit, ColBranch, ColChosen,
	ColTurn, ColRole, ColPolicy, ColPromptText, ColCompletionText, ColFinishReason,
	ColRewardLocal, ColRewardTeam, ColReward, ColDone, ColSuccess, ColInfo,
}

// Columns returns every column name of the schema in on-disk order.
func Columns() []string {
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = f.name
	}
	return out
}
