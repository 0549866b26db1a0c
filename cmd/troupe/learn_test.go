package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-rl/troupe/generation/builtin/modelgen"
	"github.com/troupe-rl/troupe/generation/builtin/servertest"
	"github.com/troupe-rl/troupe/learner"
	"github.com/troupe-rl/troupe/learner/trajectory"
)

// smallModel is the learn tests' model: one layer, d=32.
var smallModel = modelgen.Options{Layers: 1, Dim: 32, Heads: 2, FF: 64}

// learnedLines reads metrics.jsonl: each line's step and shards.
func learnedLines(t *testing.T, path string) (steps []int, shards [][]string) {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var m struct {
			Step   int      `json:"step"`
			Shards []string `json:"shards"`
			Tokens int      `json:"tokens"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v: %q", path, err, sc.Text())
		}
		steps = append(steps, m.Step)
		shards = append(shards, m.Shards)
	}
	return steps, shards
}

// checkpointConsumed returns the latest checkpoint's step and consumed shards.
func checkpointConsumed(t *testing.T, out string) (int, []string) {
	t.Helper()
	ck, err := learner.LatestCheckpoint(filepath.Join(out, "checkpoints"))
	if err != nil || ck == "" {
		t.Fatalf("no checkpoint under %s (%v)", out, err)
	}
	data, err := os.ReadFile(filepath.Join(ck, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Step     int      `json:"step"`
		Consumed []string `json:"consumed"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	return st.Step, st.Consumed
}

// checkExactlyOnce checks that metrics lines are steps 1..n in order, that
// the shards they trained on are all of want, each once, and that the
// checkpoint and the manifest agree.
func checkExactlyOnce(t *testing.T, out, trajDir string, want []string) {
	t.Helper()
	steps, shards := learnedLines(t, filepath.Join(out, "metrics.jsonl"))
	var trained []string
	for i, s := range steps {
		if s != i+1 {
			t.Fatalf("metrics steps %v: want 1..%d in order", steps, len(steps))
		}
		trained = append(trained, shards[i]...)
	}
	step, consumed := checkpointConsumed(t, out)
	sorted := func(x []string) []string { x = slices.Clone(x); slices.Sort(x); return x }
	if step != len(steps) || !slices.Equal(consumed, trained) {
		t.Fatalf("checkpoint step %d consumed %v; metrics: %d steps trained %v", step, consumed, len(steps), trained)
	}
	if !slices.Equal(sorted(trained), sorted(want)) || len(slices.Compact(sorted(trained))) != len(trained) {
		t.Fatalf("trained %v, want each of %v exactly once", trained, want)
	}
	man, err := trajectory.OpenManifest(context.Background(), trajDir)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := man.Shards(context.Background())
	for _, s := range all {
		if !s.Consumed {
			t.Fatalf("shard %s trained but not marked consumed", s.Name)
		}
	}
	for _, p := range []string{"plan"} {
		if _, err := os.Stat(filepath.Join(out, "adapters", p, fmt.Sprintf("v%06d", step), "adapter_model.safetensors")); err != nil {
			t.Fatalf("adapter of step %d not exported: %v", step, err)
		}
	}
}

// TestLearnEndToEnd: `troupe rollout` writes shards against the real
// server, `troupe learn` trains on them, and a second learn finds nothing.
func TestLearnEndToEnd(t *testing.T) {
	srv := servertest.Start(t, servertest.Options{Model: smallModel})
	dir := t.TempDir()
	// Plan-Path prompts are ~400 tokens with the tiny tokenizer: keep the
	// rows few (GoMLX runs ~20× slower under -race).
	cfg := writeConfig(t, dir, fmt.Sprintf(`name: e2e
runs_dir: %s
env: {name: planpath, size: 3, max_turns: 1, mode: single, alpha: 0.5}
generation: {backend: openai, base_urls: [%s], model: tiny, tokenizer: %s, chat_template: plain, train: {max_tokens: 8}}
rollout: {mode: tree, branches: 2, problems: 1}
learner: {lr: 1e-3, warmup_steps: 0, lora_rank: 4, micro_batch_tokens: 4096}
`, dir, srv.URL, srv.ModelDir))
	trajDir := filepath.Join(dir, "e2e", "trajectories")
	for it := range 2 {
		if out, errs, code := runCLI("rollout", cfg, "--iteration", fmt.Sprint(it)); code != 0 {
			t.Fatalf("rollout %d: exit %d\n%s\n%s", it, code, out, errs)
		}
	}
	man, err := trajectory.OpenManifest(context.Background(), trajDir)
	if err != nil {
		t.Fatal(err)
	}
	pend, _ := man.Pending(context.Background())
	var names []string
	for _, s := range pend {
		names = append(names, s.Name)
	}
	if len(names) != 2 {
		t.Fatalf("pending after two rollouts: %v", names)
	}
	start := time.Now()
	out, errs, code := runCLI("learn", cfg, "--trajectories", trajDir)
	if code != 0 || !strings.Contains(out, "trained 2 steps on 2 shards (4 rows") {
		t.Fatalf("learn: exit %d\n%s\n%s", code, out, errs)
	}
	t.Logf("learn: %s(%v)", out, time.Since(start).Round(time.Millisecond))
	runDir := filepath.Join(dir, "e2e")
	checkExactlyOnce(t, runDir, trajDir, names)

	// Nothing pending: nothing done.
	out, errs, code = runCLI("learn", cfg, "--trajectories", trajDir)
	if code != 0 || !strings.Contains(out, "nothing to do") {
		t.Fatalf("second learn: exit %d\n%s\n%s", code, out, errs)
	}
	if steps, _ := learnedLines(t, filepath.Join(runDir, "metrics.jsonl")); len(steps) != 2 {
		t.Fatalf("second learn added metrics: steps %v", steps)
	}

	// A third rollout iteration is trained on by the next learn, as step 3.
	if out, errs, code := runCLI("rollout", cfg, "--iteration", "2"); code != 0 {
		t.Fatalf("rollout 2: exit %d\n%s\n%s", code, out, errs)
	}
	pend, _ = man.Pending(context.Background())
	out, errs, code = runCLI("learn", cfg, "--trajectories", trajDir)
	if code != 0 || !strings.Contains(out, "trained 1 steps") || !strings.Contains(out, "learner at step 3") {
		t.Fatalf("third learn: exit %d\n%s\n%s", code, out, errs)
	}
	checkExactlyOnce(t, runDir, trajDir, append(names, pend[0].Name))
}

// writeShards writes synthetic shards of iterations from..from+n-1 (random
// tokens inside the vocabulary) into dir and lists them in its manifest.
func writeShards(t *testing.T, dir string, from, n, vocab int) []string {
	t.Helper()
	ctx := context.Background()
	man, err := trajectory.OpenManifest(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for it := from; it < from+n; it++ {
		rng := rand.New(rand.NewPCG(uint64(it), 7))
		w, err := trajectory.Create(dir, int64(it), &trajectory.WriterOptions{Tag: "synth"})
		if err != nil {
			t.Fatal(err)
		}
		for p := range 3 {
			for b := range 3 {
				s := trajectory.Step{RunID: "kill", Iteration: int64(it), EpisodeID: fmt.Sprintf("e%d-%d", it, p), ProblemID: fmt.Sprintf("p%d-%d", it, p),
					Split: trajectory.SplitTrain, Branch: int32(b), Role: "plan", Temperature: 1, RewardLocal: rng.Float64(), RewardTeam: rng.Float64()}
				for range 4 + rng.IntN(8) {
					s.PromptIDs = append(s.PromptIDs, int32(rng.IntN(vocab)))
				}
				for range 2 + rng.IntN(6) {
					s.CompletionIDs = append(s.CompletionIDs, int32(rng.IntN(vocab)))
					s.Logprobs = append(s.Logprobs, float32(-1-4*rng.Float64()))
				}
				if err := w.Write(s); err != nil {
					t.Fatal(err)
				}
			}
		}
		info, err := w.Commit()
		if err != nil {
			t.Fatal(err)
		}
		if err := man.Commit(ctx, info); err != nil {
			t.Fatal(err)
		}
		names = append(names, info.Name)
	}
	return names
}

// TestLearnKilledResumes SIGKILLs `troupe learn` mid-run, reruns the same
// command, and checks that every shard was trained on exactly once. Then
// it recreates each crash window by hand (a metrics line of an unsaved
// step, an unexported adapter, a shard checkpointed but still pending) and
// checks that a rerun heals them without training anything.
func TestLearnKilledResumes(t *testing.T) {
	dir := t.TempDir()
	modelDir := filepath.Join(dir, "model")
	opts := smallModel
	opts.Force = true
	if _, err := modelgen.Write(modelDir, opts); err != nil {
		t.Fatal(err)
	}
	trajDir := filepath.Join(dir, "traj")
	const nShards = 5
	names := writeShards(t, trajDir, 0, nShards, 300)
	cfg := writeConfig(t, dir, fmt.Sprintf(`name: kill
runs_dir: %s
env: {name: planpath, mode: single}
learner: {model: %s, lr: 1e-3, warmup_steps: 0, lora_rank: 4, keep_checkpoints: 2}
`, dir, modelDir))
	out := filepath.Join(dir, "kill")
	metrics := filepath.Join(out, "metrics.jsonl")

	// Kill twice: once just after a step's metrics line, once a random
	// few milliseconds after the next one (inside the checkpoint, export
	// or manifest update, or the step after).
	jitter := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	prev := 0
	for round := range 2 {
		cmd := troupeCmd(t, "learn", cfg, "--trajectories", trajDir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			if steps, _ := learnedLines(t, metrics); len(steps) >= prev+1+(1-round) {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("round %d: learn never got past step %d", round, prev)
			}
			time.Sleep(2 * time.Millisecond)
		}
		if round == 1 {
			time.Sleep(time.Duration(jitter.IntN(30)) * time.Millisecond)
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		steps, _ := learnedLines(t, metrics)
		t.Logf("round %d: killed with %d metrics lines", round, len(steps))
		if round == 0 && len(steps) >= nShards {
			t.Fatalf("the learn finished before the kill (%d steps): the test checked nothing", len(steps))
		}
		prev = len(steps)
	}

	cmd := troupeCmd(t, "learn", cfg, "--trajectories", trajDir)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("resumed learn: %v\n%s", err, b)
	}
	checkExactlyOnce(t, out, trajDir, names)

	// Crash windows, recreated: (1) killed after appending a metrics line,
	// before its checkpoint; (2) killed after the checkpoint, before the
	// export; (3) killed after the export, before MarkConsumed.
	step, consumed := checkpointConsumed(t, out)
	f, err := os.OpenFile(metrics, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "{\"step\":%d,\"shards\":[\"iter-000099-x.parquet\"]}\n{\"step\":", step+1)
	f.Close()
	if err := os.RemoveAll(filepath.Join(out, "adapters", "plan", fmt.Sprintf("v%06d", step))); err != nil {
		t.Fatal(err)
	}
	last := consumed[len(consumed)-1]
	mpath := filepath.Join(trajDir, trajectory.ManifestName)
	data, _ := os.ReadFile(mpath)
	var doc map[string]any
	json.Unmarshal(data, &doc)
	for _, s := range doc["shards"].([]any) {
		if s.(map[string]any)["name"] == last {
			s.(map[string]any)["consumed"] = false
		}
	}
	data, _ = json.Marshal(doc)
	os.WriteFile(mpath, data, 0o644)

	stdout, stderr, code := runCLI("learn", cfg, "--trajectories", trajDir)
	if code != 0 || !strings.Contains(stdout, "nothing to do") {
		t.Fatalf("learn after the recreated crash: exit %d\n%s\n%s", code, stdout, stderr)
	}
	checkExactlyOnce(t, out, trajDir, names)
}

// TestLearnBadInput: bad model folders and flags exit 2 naming the key.
func TestLearnBadInput(t *testing.T) {
	dir := t.TempDir()
	trajDir := filepath.Join(dir, "traj")
	os.MkdirAll(trajDir, 0o755)
	tests := []struct {
		learner, gen string
		args         []string
		want         string
	}{
		{"{}", "{}", nil, "learner.model"},
		{"{model: /nonexistent}", "{}", nil, "learner.model"},
		{"{}", "{tokenizer: " + dir + "}", nil, "generation.tokenizer"},
		{"{model: " + dir + ", lr: 2}", "{}", nil, "learner.lr"},
		{"{alpha: 0.5}", "{}", nil, "learner.alpha"},
		{"{model: " + dir + "}", "{}", []string{"--trajectories", filepath.Join(dir, "none")}, "not a directory"},
	}
	for _, tc := range tests {
		cfg := writeConfig(t, dir, fmt.Sprintf("name: bad\nruns_dir: %s\nenv: {name: planpath, mode: single}\nlearner: %s\ngeneration: %s\n", dir, tc.learner, tc.gen))
		args := append([]string{"learn", cfg}, tc.args...)
		if tc.args == nil {
			args = append(args, "--trajectories", trajDir)
		}
		_, stderr, code := runCLI(args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("learner %s generation %s: exit %d, stderr %q; want 2 naming %s", tc.learner, tc.gen, code, stderr, tc.want)
		}
	}
	if _, stderr, code := runCLI("learn", "x.yaml"); code != 2 || !strings.Contains(stderr, "--trajectories") {
		t.Errorf("missing --trajectories: exit %d %q", code, stderr)
	}
}

// TestLearnFollow: --follow trains on shards as they appear and stops at a
// safe point on SIGINT (exit 0, every trained shard checkpointed and
// marked consumed).
func TestLearnFollow(t *testing.T) {
	dir := t.TempDir()
	modelDir := filepath.Join(dir, "model")
	opts := smallModel
	opts.Force = true
	if _, err := modelgen.Write(modelDir, opts); err != nil {
		t.Fatal(err)
	}
	trajDir := filepath.Join(dir, "traj")
	names := writeShards(t, trajDir, 0, 1, 300)
	cfg := writeConfig(t, dir, fmt.Sprintf(`name: follow
runs_dir: %s
env: {name: planpath, mode: single}
learner: {model: %s, lora_rank: 4}
`, dir, modelDir))
	out := filepath.Join(dir, "follow")
	metrics := filepath.Join(out, "metrics.jsonl")
	cmd := troupeCmd(t, "learn", cfg, "--trajectories", trajDir, "--follow", "--poll", "20ms")
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitSteps := func(n int) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			if steps, _ := learnedLines(t, metrics); len(steps) >= n {
				return
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("--follow never reached step %d", n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitSteps(1)
	names = append(names, writeShards(t, trajDir, 1, 2, 300)...)
	waitSteps(3)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("learn --follow after SIGINT: %v\n%s", err, stdout.String())
	}
	if !strings.Contains(stdout.String(), "trained 3 steps on 3 shards") {
		t.Fatalf("stdout: %s", stdout.String())
	}
	checkExactlyOnce(t, out, trajDir, names)
}

// TestLearnMaxSteps: --max-steps counts the learner's steps in all, so the
// same command run again does nothing.
func TestLearnMaxSteps(t *testing.T) {
	dir := t.TempDir()
	modelDir := filepath.Join(dir, "model")
	opts := smallModel
	opts.Force = true
	if _, err := modelgen.Write(modelDir, opts); err != nil {
		t.Fatal(err)
	}
	trajDir := filepath.Join(dir, "traj")
	names := writeShards(t, trajDir, 0, 3, 300)
	cfg := writeConfig(t, dir, fmt.Sprintf("name: max\nruns_dir: %s\nenv: {name: planpath, mode: single}\nlearner: {model: %s, lora_rank: 4}\n", dir, modelDir))
	for i, want := range []string{"trained 2 steps", "nothing to do", "trained 1 steps"} {
		max := "2"
		if i == 2 {
			max = "3"
		}
		out, errs, code := runCLI("learn", cfg, "--trajectories", trajDir, "--max-steps", max)
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("run %d (--max-steps %s): exit %d, want %q\n%s\n%s", i, max, code, want, out, errs)
		}
	}
	checkExactlyOnce(t, filepath.Join(dir, "max"), trajDir, names)
}
