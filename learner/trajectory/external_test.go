//go:build integration

package trajectory

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteForExternal writes a shard and the values an independent reader
// must find in it into $TROUPE_TRAJ_EXTERNAL_DIR; it is driven by
// scripts/integration.d/10-trajectory-duckdb.sh, which checks the shard
// with DuckDB.
func TestWriteForExternal(t *testing.T) {
	dir := os.Getenv("TROUPE_TRAJ_EXTERNAL_DIR")
	if dir == "" {
		t.Skip("TROUPE_TRAJ_EXTERNAL_DIR not set")
	}
	r := rand.New(rand.NewPCG(11, 12))
	type expect struct {
		Seed           int64   `json:"seed"`
		Role           string  `json:"role"`
		PromptText     string  `json:"prompt_text"`
		CompletionText string  `json:"completion_text"`
		PromptLen      int     `json:"prompt_len"`
		CompletionLen  int     `json:"completion_len"`
		LogprobsLen    int     `json:"logprobs_len"`
		PromptSum      int64   `json:"prompt_sum"`
		LogprobsSum    float64 `json:"logprobs_sum"`
		Reward         float64 `json:"reward"`
		Chosen         bool    `json:"chosen"`
		CreatedAtUS    int64   `json:"created_at_us"`
		Info           string  `json:"info"`
	}
	var steps []Step
	var exp []expect
	for i := range 500 {
		s := randStep(r, 3, 400)
		s.Seed = int64(i) // row key for the external reader
		if i == 0 {
			s.PromptIDs, s.CompletionIDs, s.Logprobs = nil, nil, nil // empty lists
		}
		steps = append(steps, s)
		e := expect{Seed: s.Seed, Role: s.Role, PromptText: s.PromptText, CompletionText: s.CompletionText,
			PromptLen: len(s.PromptIDs), CompletionLen: len(s.CompletionIDs), LogprobsLen: len(s.Logprobs),
			Reward: s.Reward, Chosen: s.Chosen, CreatedAtUS: s.CreatedAt.UnixMicro(), Info: s.Info}
		for _, id := range s.PromptIDs {
			e.PromptSum += int64(id)
		}
		for _, lp := range s.Logprobs {
			e.LogprobsSum += float64(lp)
		}
		exp = append(exp, e)
	}
	// Several row groups, so readers must stitch them.
	info := writeShard(t, dir, 3, &WriterOptions{Tag: "ext", RowGroupBytes: 256 << 10}, steps)
	// A dead writer's temporary file must not be picked up by a glob.
	if err := os.WriteFile(filepath.Join(dir, "."+info.Name+".tmp-123"), []byte("PAR1partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(map[string]any{"shard": info.Name, "rows": exp})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "expect.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}
