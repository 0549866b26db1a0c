package trajectory

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// texts are fragments random texts are built from: ASCII, accents, CJK,
// emoji (incl. ZWJ sequences), control characters and JSON-hostile bytes.
var texts = []string{
	"", "a", "Hello, world", "ünïcödé", "日本語のテキスト", "🙂", "👩‍👩‍👧", "\n", "\t", `"quoted"`,
	`back\slash`, "\x00nul", "مرحبا", "<|im_start|>assistant\n", "ﬁ", "\u200b", strings.Repeat("x", 300),
}

func randText(r *rand.Rand, maxParts int) string {
	var b strings.Builder
	for range r.IntN(maxParts + 1) {
		b.WriteString(texts[r.IntN(len(texts))])
	}
	return b.String()
}

func randInts(r *rand.Rand, n int) []int32 {
	if n == 0 {
		return nil // empty lists read back as nil
	}
	out := make([]int32, n)
	for i := range out {
		switch r.IntN(10) {
		case 0:
			out[i] = int32(r.Uint32()) // full range incl. negatives
		default:
			out[i] = r.Int32N(152000)
		}
	}
	return out
}

func randFloats(r *rand.Rand, n int) []float32 {
	if n == 0 {
		return nil
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = -float32(r.ExpFloat64())
	}
	return out
}

var roles = []string{"planner", "coder", "tester", "solver", ""}

// randStep returns a random valid row of iteration it. maxTok bounds the
// token lists.
func randStep(r *rand.Rand, it int64, maxTok int) Step {
	nc := r.IntN(maxTok + 1)
	s := Step{
		RunID:          "run-" + randText(r, 1),
		Iteration:      it,
		PolicyVersion:  r.Int64N(1000),
		EpisodeID:      fmt.Sprintf("ep-%d", r.IntN(1e6)),
		ProblemID:      fmt.Sprintf("p%d", r.IntN(20)),
		Env:            []string{"planpath", "mathqa", "code"}[r.IntN(3)],
		Split:          []string{SplitTrain, SplitEval}[r.IntN(2)],
		Branch:         r.Int32N(8),
		Chosen:         r.IntN(2) == 0,
		Turn:           r.Int32N(6),
		Role:           roles[r.IntN(len(roles))],
		Policy:         []string{"base", "planner", "shared"}[r.IntN(3)],
		Backend:        []string{"openai", "builtin"}[r.IntN(2)],
		Model:          "Qwen/Qwen3-0.6B",
		PromptText:     randText(r, 20),
		CompletionText: randText(r, 10),
		PromptIDs:      randInts(r, r.IntN(maxTok+1)),
		CompletionIDs:  randInts(r, nc),
		Retokenized:    r.IntN(5) == 0,
		FinishReason:   []string{"stop", "length", ""}[r.IntN(3)],
		Temperature:    r.Float64() * 2,
		TopP:           r.Float64(),
		TopK:           r.Int32N(100) - 1,
		Seed:           int64(r.Uint64()),
		RewardLocal:    r.NormFloat64(),
		RewardTeam:     r.NormFloat64(),
		Reward:         r.NormFloat64() * 1e6,
		Done:           r.IntN(2) == 0,
		Success:        r.IntN(3) == 0,
		GroupKey:       fmt.Sprintf("p%d/%d/%s", r.IntN(20), r.IntN(6), roles[r.IntN(len(roles))]),
		LatencyMS:      r.Float64() * 1e4,
		CreatedAt:      time.UnixMicro(r.Int64N(4e15) - 1e15).UTC(),
	}
	if !s.Retokenized {
		s.Logprobs = randFloats(r, nc)
	}
	if r.IntN(2) == 0 {
		txt, _ := json.Marshal(randText(r, 3))
		s.Info = fmt.Sprintf(`{"k":%d,"t":%s}`, r.IntN(100), txt)
	}
	return s
}

// writeShard writes steps as one shard in dir and returns its info.
func writeShard(t testing.TB, dir string, it int64, opts *WriterOptions, steps []Step) ShardInfo {
	t.Helper()
	w, err := Create(dir, it, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(steps...); err != nil {
		t.Fatal(err)
	}
	info, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func readAll(t testing.TB, path string, opts *ReadOptions) []Step {
	t.Helper()
	rows, err := ReadFile(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}
