package learner

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gomlx/compute"

	"github.com/troupe-rl/troupe/internal/config"
	"github.com/troupe-rl/troupe/internal/hf"
	"github.com/troupe-rl/troupe/learner/adapter"
	"github.com/troupe-rl/troupe/learner/internal/gomlxtest"
	"github.com/troupe-rl/troupe/learner/model"
)

func TestMain(m *testing.M) { os.Exit(gomlxtest.Main(m)) }

func testBackend(t testing.TB) compute.Backend { return gomlxtest.Backend(t) }

func defaultConfig() Config {
	var c Config
	c.SetDefaults()
	return c
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		mod func(*Config)
		key string
	}{
		{func(*Config) {}, ""},
		{func(c *Config) { c.Device = "tpu" }, "device"},
		{func(c *Config) { c.Policies = "each" }, "policies"},
		{func(c *Config) { c.LR = 0 }, "lr"},
		{func(c *Config) { c.TotalSteps = 5 }, "total_steps"},
		{func(c *Config) { c.LoRATargets = []string{"qproj"} }, "lora_targets"},
		{func(c *Config) { c.MicroBatchTokens = 1 }, "micro_batch_tokens"},
		{func(c *Config) { c.MiniBatches = 0 }, "mini_batches"},
		{func(c *Config) { c.Grouping = "x" }, "grouping"},
		{func(c *Config) { c.CPUParallelism = 0 }, "cpu_parallelism"},
	}
	for _, tc := range tests {
		c := defaultConfig()
		tc.mod(&c)
		err := c.Validate()
		if tc.key == "" {
			if err != nil {
				t.Errorf("defaults: %v", err)
			}
			continue
		}
		if fe, ok := err.(*config.FieldError); !ok || fe.Field != tc.key {
			t.Errorf("want error on %s, got %v", tc.key, err)
		}
	}
	// New names keys by their full path, as the experiment loader does.
	bad := defaultConfig()
	bad.LR = 2
	if _, err := New(context.Background(), bad, t.TempDir(), []string{"a"}, Options{}); err == nil || !contains(err.Error(), "learner.lr") {
		t.Errorf("New with lr=2: %v, want an error naming learner.lr", err)
	}
	bad = defaultConfig()
	bad.Loss.Kind = "dpo"
	if _, err := New(context.Background(), bad, t.TempDir(), []string{"a"}, Options{}); err == nil || !contains(err.Error(), "learner.loss.kind") {
		t.Errorf("New with loss.kind=dpo: %v, want an error naming learner.loss.kind", err)
	}
	// alpha belongs to env: learner.alpha is no key.
	var exp struct {
		Learner Config `yaml:"learner"`
	}
	if err := config.Decode("x.yaml", []byte("learner:\n  alpha: 0.5\n"), &exp); err == nil {
		t.Error("learner.alpha accepted; env.alpha is its only owner")
	}
	// The loader fills nested defaults and names nested keys.
	var root struct {
		Learner Config `yaml:"learner"`
	}
	err := config.Decode("x.yaml", []byte("learner:\n  loss:\n    kind: dpo\n"), &root)
	if err == nil || !contains(err.Error(), "learner.loss.kind") {
		t.Errorf("nested loss key: %v", err)
	}
	if err := config.Decode("x.yaml", []byte("learner:\n  lr: 0.001\n  step_timeout: 5m\n"), &root); err != nil || root.Learner.Loss.TISCap != 2 {
		t.Errorf("decode: %v %+v", err, root.Learner.Loss)
	}
}

func contains(s, sub string) bool {
	return len(s) >= len(sub) && (s == sub || len(sub) == 0 || indexOf(s, sub) >= 0)
}
func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func TestMicroBatches(t *testing.T) {
	var seqs []model.Sequence
	for i := range 13 {
		s := model.Sequence{Prompt: make([]int32, 3+i*2), Completion: make([]int32, 1+i%4)}
		s.Logprobs = make([]float32, len(s.Completion))
		seqs = append(seqs, s)
	}
	mbs, err := MicroBatches(seqs, 128)
	if err != nil {
		t.Fatal(err)
	}
	rows, toks := 0, 0
	for _, b := range mbs {
		if b.B*b.S > 128 || b.S%16 != 0 || b.B&(b.B-1) != 0 {
			t.Errorf("micro-batch %dx%d breaks the budget or bucketing", b.B, b.S)
		}
		rows += b.Rows
		toks += b.NumTokens
	}
	want := 0
	for _, s := range seqs {
		want += len(s.Completion)
	}
	if rows != 13 || toks != want {
		t.Errorf("rows %d tokens %d, want 13 %d", rows, toks, want)
	}
	if _, err := MicroBatches([]model.Sequence{{Prompt: make([]int32, 200)}}, 128); err == nil {
		t.Error("too-long sequence accepted")
	}
}

// synth is the synthetic task: prompts of 3 random tokens, one-token
// completions sampled from the current policy, reward 1 when the
// completion is the target token.
type synth struct {
	l      *Learner
	mc     *hf.ModelConfig
	target int32
}

// newSynth is the synthetic task (target token 5) on a fresh learner with
// one shared policy and miniBatches optimiser steps per Step; the learner
// is closed when the test ends.
func newSynth(t *testing.T, miniBatches int) *synth {
	t.Helper()
	mc := model.TinyConfig(2, 32, 4, 2, 64, 16)
	dir := writeTinyModel(t, mc)
	cfg := defaultConfig()
	cfg.Policies = PoliciesShared
	cfg.LR, cfg.WarmupSteps, cfg.LoRARank, cfg.LoRAAlpha = 0.02, 0, 4, 8
	cfg.MicroBatchTokens, cfg.MiniBatches = 512, miniBatches
	l, err := New(context.Background(), cfg, dir, []string{"solver"}, Options{Backend: testBackend(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &synth{l: l, mc: mc, target: 5}
}

// dist returns, per prompt, the policy's next-token distribution (exact,
// by scoring every candidate token).
func (s *synth) dist(t testing.TB, prompts [][]int32) [][]float64 {
	V := s.mc.VocabSize
	var seqs []model.Sequence
	for _, p := range prompts {
		for v := range V {
			seqs = append(seqs, model.Sequence{Prompt: p, Completion: []int32{int32(v)}})
		}
	}
	b, err := model.Pack(seqs, len(seqs), 16)
	if err != nil {
		t.Fatal(err)
	}
	p := s.l.policies[SharedPolicy]
	lp, err := p.prog.Logprobs(p.lora, b, false)
	if err != nil {
		t.Fatal(err)
	}
	c := model.CompletionLogprobs(seqs, b.S, lp)
	out := make([][]float64, len(prompts))
	for i := range prompts {
		for v := range V {
			out[i] = append(out[i], c[i*V+v][0])
		}
	}
	return out
}

func (s *synth) batch(t testing.TB, rng *rand.Rand, problems, k int) (*Batch, float64) {
	prompts := make([][]int32, problems)
	for i := range prompts {
		prompts[i] = []int32{int32(rng.IntN(s.mc.VocabSize)), int32(rng.IntN(s.mc.VocabSize)), int32(rng.IntN(s.mc.VocabSize))}
	}
	d := s.dist(t, prompts)
	b := &Batch{}
	success := 0.0
	for i, p := range prompts {
		success += math.Exp(d[i][s.target])
		for range k {
			u, tok := rng.Float64(), 0
			for acc := 0.0; tok < len(d[i])-1; tok++ {
				acc += math.Exp(d[i][tok])
				if u < acc {
					break
				}
			}
			r := 0.0
			if int32(tok) == s.target {
				r = 1
			}
			b.Rows = append(b.Rows, Row{ProblemID: string(rune('a' + i)), Role: "solver", PromptIDs: p,
				CompletionIDs: []int32{int32(tok)}, Logprobs: []float32{float32(d[i][tok])}, RewardLocal: r, RewardTeam: r})
		}
	}
	return b, success / float64(problems)
}

// writeTinyModel writes a random model. Weights have std 0.3: with the
// final RMSNorm and tied embeddings, a logit can reach only about
// √d·|E_v|, so a smaller std caps every token's probability well below 1
// whatever the adapter does (std 0.1 plateaued at 0.63 on the synthetic task).
func writeTinyModel(t testing.TB, c *hf.ModelConfig) string {
	dir := t.TempDir()
	if err := model.WriteRandom(dir, c, 11, 0.3); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSyntheticTaskLearns: reward 1 for emitting the target token; a few
// dozen AT-GRPO steps take the policy's success probability from ~1/V to
// near 1 (sign and plumbing).
func TestSyntheticTaskLearns(t *testing.T) {
	s := newSynth(t, 1)
	l := s.l
	rng := rand.New(rand.NewPCG(1, 2))
	steps := 20 // success reaches ≈1 by step ~16 with these settings
	mw, err := OpenMetrics(filepath.Join(t.TempDir(), "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var first, last float64
	for i := range steps {
		b, succ := s.batch(t, rng, 8, 8)
		if i == 0 {
			first = succ
		}
		last = succ
		m, err := l.Step(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		if err := mw.Write(m); err != nil {
			t.Fatal(err)
		}
		if i%5 == 0 || i == steps-1 {
			pm := m.Policies[SharedPolicy]
			t.Logf("step %2d: success %.3f reward %.3f zero-var %.2f loss %+.4f grad %.3f entropy %.3f ratio %.3f/%.3f mismatch max %.4f",
				m.Step, succ, m.Groups.Reward.Mean, m.Groups.ZeroVarianceFrac, m.Loss, pm.GradNorm, pm.Entropy, pm.RatioMean, pm.RatioMax, pm.MismatchMax)
		}
	}
	_, final := s.batch(t, rng, 32, 1)
	t.Logf("success probability: before %.3f, after %d steps %.3f (last batch %.3f)", first, steps, final, last)
	if first > 0.2 || final < 0.9 {
		t.Errorf("success %.3f → %.3f: the policy did not learn the target", first, final)
	}
	mw.Close()
}

// TestMiniBatchSteps: with learner.mini_batches 4 one Step makes four
// optimiser steps over the whole batch, and the synthetic task is learnt
// in a quarter of the learner steps TestSyntheticTaskLearns needs.
func TestMiniBatchSteps(t *testing.T) {
	s := newSynth(t, 4)
	l := s.l
	rng := rand.New(rand.NewPCG(1, 2))
	var first float64
	for i := range 5 {
		b, succ := s.batch(t, rng, 8, 8)
		if i == 0 {
			first = succ
		}
		m, err := l.Step(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		pm := m.Policies[SharedPolicy]
		if pm.OptSteps != 4*(i+1) || pm.Rows != 64 || m.Tokens != 64 || pm.MicroBatches != 4 {
			t.Fatalf("step %d: %d optimiser steps, %d rows, %d tokens, %d micro-batches; want %d, 64, 64, 4",
				i+1, pm.OptSteps, pm.Rows, m.Tokens, pm.MicroBatches, 4*(i+1))
		}
	}
	_, final := s.batch(t, rng, 32, 1)
	t.Logf("success probability: before %.3f, after 5 learner steps of 4 mini-batches %.3f", first, final)
	if first > 0.2 || final < 0.9 {
		t.Errorf("success %.3f → %.3f after 5 steps × 4 mini-batches", first, final)
	}
}

func TestCheckpointResumeExact(t *testing.T) {
	mc := model.TinyConfig(2, 32, 4, 2, 64, 16)
	dir := writeTinyModel(t, mc)
	cfg := defaultConfig()
	cfg.LR, cfg.WarmupSteps, cfg.TotalSteps, cfg.LoRARank, cfg.LoRAAlpha = 0.01, 1, 10, 4, 8
	cfg.MicroBatchTokens = 64 // several micro-batches per step
	backend := testBackend(t)
	roles := []string{"planner", "coder"}
	ckRoot := t.TempDir()
	batch := func(step int) *Batch {
		rng := rand.New(rand.NewPCG(uint64(step), 3))
		b := &Batch{Shards: []string{"iter-" + string(rune('0'+step)) + ".parquet"}}
		for i := range 16 {
			row := Row{ProblemID: string(rune('a' + i%4)), Turn: i % 2, Role: roles[i%2], RewardLocal: rng.Float64(), RewardTeam: rng.Float64(), Temperature: 0.9}
			for range 2 + rng.IntN(5) {
				row.PromptIDs = append(row.PromptIDs, int32(rng.IntN(16)))
			}
			for range 1 + rng.IntN(5) {
				row.CompletionIDs = append(row.CompletionIDs, int32(rng.IntN(16)))
				row.Logprobs = append(row.Logprobs, float32(-1-rng.Float64()))
			}
			b.Rows = append(b.Rows, row)
		}
		return b
	}
	ctx := context.Background()
	a, err := New(ctx, cfg, dir, roles, Options{Backend: backend})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var ck string
	for step := 1; step <= 2; step++ {
		if _, err := a.Step(ctx, batch(step)); err != nil {
			t.Fatal(err)
		}
		if ck, err = a.Checkpoint(ckRoot); err != nil {
			t.Fatal(err)
		}
	}
	ma, err := a.Step(ctx, batch(3))
	if err != nil {
		t.Fatal(err)
	}
	latest, _ := LatestCheckpoint(ckRoot)
	if latest != ck || filepath.Base(ck) != "step-000002" {
		t.Fatalf("latest checkpoint %s, want %s", latest, ck)
	}
	b, err := New(ctx, cfg, dir, roles, Options{Backend: backend, Resume: ck})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.StepCount() != 2 || !slices.Equal(b.Consumed(), []string{"iter-1.parquet", "iter-2.parquet"}) {
		t.Errorf("restored step %d consumed %v", b.StepCount(), b.Consumed())
	}
	mb, err := b.Step(ctx, batch(3))
	if err != nil {
		t.Fatal(err)
	}
	if ma.Loss != mb.Loss {
		t.Errorf("loss at step 3: original %v, resumed %v", ma.Loss, mb.Loss)
	}
	for _, name := range a.Policies() {
		pa, pb := a.policies[name], b.policies[name]
		if pa.opt.T != pb.opt.T {
			t.Errorf("%s: opt steps %d vs %d", name, pa.opt.T, pb.opt.T)
		}
		for i := range pa.lora.Data {
			if !slices.Equal(pa.lora.Data[i], pb.lora.Data[i]) {
				t.Errorf("%s: param %d differs after the resumed step", name, i)
				break
			}
		}
		if ma.Policies[name].GradNorm != mb.Policies[name].GradNorm {
			t.Errorf("%s: grad norm %v vs %v", name, ma.Policies[name].GradNorm, mb.Policies[name].GradNorm)
		}
	}
	t.Logf("step 3 loss: original %.9g, resumed %.9g", ma.Loss, mb.Loss)
	// Export the adapters: PEFT folders readable by hf.ReadAdapter.
	outs, err := b.Export(filepath.Join(t.TempDir(), "adapters"), 3)
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range outs {
		if filepath.Base(d) != "v000003" || filepath.Base(filepath.Dir(d)) != name {
			t.Errorf("export dir %s", d)
		}
		ad, err := hf.ReadAdapter(d, mc)
		if err != nil {
			t.Fatal(err)
		}
		back, err := adapter.Load(d, mc)
		if err != nil {
			t.Fatal(err)
		}
		if len(ad.Modules) != 14 || !slices.Equal(back.Data[3], b.LoRA(name).Data[3]) {
			t.Errorf("%s: exported adapter differs", name)
		}
	}
	// Keep only keep_checkpoints.
	b.Step(ctx, batch(4))
	b.Checkpoint(ckRoot)
	b.Step(ctx, batch(5))
	b.Checkpoint(ckRoot)
	steps, _ := checkpointSteps(ckRoot)
	if !slices.Equal(steps, []int{4, 5}) {
		t.Errorf("checkpoints kept: %v", steps)
	}
}

func TestStepRejectsBadRows(t *testing.T) {
	mc := model.TinyConfig(1, 16, 2, 1, 16, 8)
	dir := writeTinyModel(t, mc)
	l, err := New(context.Background(), defaultConfig(), dir, []string{"a"}, Options{Backend: testBackend(t)})
	if err != nil {
		t.Fatal(err)
	}
	tests := []Row{
		{Role: "b", PromptIDs: []int32{1}},
		{Role: "a"},
		{Role: "a", PromptIDs: []int32{1}, CompletionIDs: []int32{2}},
		{Role: "a", PromptIDs: []int32{100}, CompletionIDs: []int32{2}, Logprobs: []float32{-1}},
	}
	for i, r := range tests {
		if _, err := l.Step(context.Background(), &Batch{Rows: []Row{r}}); err == nil {
			t.Errorf("row %d accepted", i)
		}
	}
}

func TestMetricsJSONL(t *testing.T) {
	p := filepath.Join(t.TempDir(), "m", "metrics.jsonl")
	w, err := OpenMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(&Metrics{Step: 1, Policies: map[string]PolicyMetrics{"x": {GradNorm: 2}}})
	w.Write(&Metrics{Step: 2})
	w.Close()
	f, _ := os.Open(p)
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 2 {
		t.Errorf("%d lines", n)
	}
}

func TestCUDAWithoutPlugin(t *testing.T) {
	t.Setenv("PJRT_PLUGIN_LIBRARY_PATH", t.TempDir())
	c := defaultConfig()
	c.Device = DeviceCUDA
	_, err := NewBackend(&c)
	if err == nil || !contains(err.Error(), "no PJRT CUDA plugin found") {
		t.Errorf("want a clear missing-plugin error, got %v", err)
	}
	c.CUDAPlugin = "/nonexistent/xla_cuda_plugin.so"
	if _, err := NewBackend(&c); err == nil || !contains(err.Error(), "not a file") {
		t.Errorf("explicit missing plugin: %v", err)
	}
}
