package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-rl/troupe/generation/builtin/servertest"
	"github.com/troupe-rl/troupe/generation/tokenizer"
	"github.com/troupe-rl/troupe/learner/trajectory"
)

// writeConfig writes an experiment config pointing at baseURL.
func writeConfig(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "exp.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRolloutEndToEnd runs `troupe rollout` with the openai backend against
// the real embedded server on Plan-Path in tree mode and checks the shard.
func TestRolloutEndToEnd(t *testing.T) {
	srv := servertest.Start(t, servertest.Options{})
	dir := t.TempDir()
	const B, K, turns = 3, 3, 2
	cfg := writeConfig(t, dir, fmt.Sprintf(`name: e2e
runs_dir: %s
env: {name: planpath, size: 5, max_turns: %d}
generation:
  backend: openai
  base_urls: [%s]
  model: tiny
  tokenizer: %s
  train: {temperature: 1.0, max_tokens: 24}
rollout: {mode: tree, branches: %d, problems: %d}
`, dir, turns, srv.URL, srv.ModelDir, K, B))
	stdout, stderr, code := runCLI("rollout", cfg, "--json")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var res struct {
		Shard   trajectory.ShardInfo `json:"shard"`
		Summary struct {
			Episodes int `json:"episodes"`
			Rows     int `json:"rows"`
			Failed   []any
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("summary: %v\n%s", err, stdout)
	}
	if res.Summary.Episodes != B || len(res.Summary.Failed) != 0 {
		t.Fatalf("summary %+v", res.Summary)
	}
	shard := filepath.Join(dir, "e2e", "trajectories", res.Shard.Name)
	rows, err := trajectory.ReadFile(context.Background(), shard, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Exactly B×turns×roles×K rows, fewer only for episodes that ended
	// early: every (episode, turn, role) step has K rows, and an episode
	// with fewer steps ended with its chosen row done.
	type stepKey struct {
		ep   string
		turn int32
		role string
	}
	steps := map[stepKey]int{}
	perEpisode := map[string]int{}
	lastChosen := map[string]trajectory.Step{}
	for _, r := range rows {
		k := stepKey{r.EpisodeID, r.Turn, r.Role}
		if steps[k] == 0 {
			perEpisode[r.EpisodeID]++
		}
		steps[k]++
		if r.Chosen {
			if prev, ok := lastChosen[r.EpisodeID]; !ok || r.Turn > prev.Turn || (r.Turn == prev.Turn && r.Role == "plan") {
				lastChosen[r.EpisodeID] = r
			}
		}
	}
	want := 0
	for ep, n := range perEpisode {
		full := turns * 2 // tool and plan
		if n < full && !lastChosen[ep].Done {
			t.Errorf("episode %s has %d of %d steps but did not end", ep, n, full)
		}
		want += n * K
	}
	if len(perEpisode) != B || len(rows) != want || len(rows) != res.Summary.Rows {
		t.Fatalf("%d episodes, %d rows, want %d (summary %d)", len(perEpisode), len(rows), want, res.Summary.Rows)
	}
	for k, n := range steps {
		if n != K {
			t.Fatalf("step %+v has %d rows, want %d", k, n, K)
		}
	}
	tok, err := tokenizer.Load(srv.ModelDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if len(r.CompletionIDs) == 0 || len(r.Logprobs) != len(r.CompletionIDs) || len(r.PromptIDs) == 0 {
			t.Fatalf("row %s/%d/%s/%d: %d ids, %d logprobs, %d prompt ids", r.EpisodeID, r.Turn, r.Role, r.Branch, len(r.CompletionIDs), len(r.Logprobs), len(r.PromptIDs))
		}
		if got := tok.DecodeSkipSpecial(r.CompletionIDs); got != r.CompletionText {
			t.Fatalf("completion ids decode to %q, stored text %q", got, r.CompletionText)
		}
		if got := tok.Decode(r.PromptIDs); got != r.PromptText {
			t.Fatalf("prompt ids decode to %q, stored prompt %q", got, r.PromptText)
		}
		if r.GroupKey != fmt.Sprintf("%s/t%d/%s", r.ProblemID, r.Turn, r.Role) || r.Split != "train" || r.Env != "planpath" {
			t.Fatalf("row fields: %+v", r)
		}
	}
	// The stored logprobs are the server's: the same request again (same
	// prompt, seed and n) returns the same tokens and logprobs.
	r0 := rows[0]
	body, _ := json.Marshal(map[string]any{"model": "tiny", "prompt": r0.PromptText, "n": K, "max_tokens": 24,
		"temperature": r0.Temperature, "top_p": 1, "seed": r0.Seed, "logprobs": 1, "return_token_ids": true})
	resp, err := http.Post(srv.URL+"/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var cr struct {
		Choices []struct {
			TokenIDs []int32 `json:"token_ids"`
			Logprobs struct {
				TokenLogprobs []float32 `json:"token_logprobs"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	json.NewDecoder(resp.Body).Decode(&cr)
	for _, r := range rows[:K] {
		c := cr.Choices[r.Branch]
		if fmt.Sprint(c.TokenIDs) != fmt.Sprint(r.CompletionIDs) || fmt.Sprint(c.Logprobs.TokenLogprobs) != fmt.Sprint(r.Logprobs) {
			t.Fatalf("branch %d: server gave %v %v, shard has %v %v", r.Branch, c.TokenIDs, c.Logprobs.TokenLogprobs, r.CompletionIDs, r.Logprobs)
		}
	}
	if out, errs, code := runCLI("inspect", shard); code != 0 || !strings.Contains(out, "completion_ids") {
		t.Fatalf("inspect: exit %d\n%s\n%s", code, out, errs)
	}
	// The same iteration again is refused: the shard exists.
	if _, stderr, code := runCLI("rollout", cfg); code != 2 || !strings.Contains(stderr, "already exists") {
		t.Fatalf("second rollout of iteration 0: exit %d: %s", code, stderr)
	}
}
