package sft

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/envs/envtest"
	_ "github.com/troupe-rl/troupe/envs/planpath"
	"github.com/troupe-rl/troupe/generation"
	"github.com/troupe-rl/troupe/generation/builtin"
	"github.com/troupe-rl/troupe/generation/builtin/modelgen"
	"github.com/troupe-rl/troupe/generation/rollout"
	"github.com/troupe-rl/troupe/internal/config"
	"github.com/troupe-rl/troupe/internal/hf"
	"github.com/troupe-rl/troupe/learner"
	"github.com/troupe-rl/troupe/learner/internal/gomlxtest"
	"github.com/troupe-rl/troupe/learner/loss"
	"github.com/troupe-rl/troupe/learner/trajectory"
)

func TestMain(m *testing.M) { os.Exit(gomlxtest.Main(m)) }

func tinyModel(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m")
	if _, err := modelgen.Write(dir, modelgen.Options{Layers: 1, Dim: 32, Heads: 2, KVHeads: 1, Vocab: 384, InitStd: 0.3, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func planpath(mode string) envs.Config {
	c := envs.DefaultConfig("planpath")
	c.Size, c.Mode, c.MaxTurns = 4, mode, 2
	return c
}

// planpathDeps is planpath(mode) and its deps: a real sandbox for the
// tool agent's programs in multi mode.
func planpathDeps(t *testing.T, mode string) (envs.Config, envs.Deps) {
	var deps envs.Deps
	if mode == envs.ModeMulti {
		deps.Runner = envtest.NewRunner(t)
	}
	return planpath(mode), deps
}

func renderer(t *testing.T, modelDir string) func(envs.Prompt) (string, error) {
	t.Helper()
	var g generation.Config
	config.SetDefaults(&g)
	g.Tokenizer = modelDir
	r, err := rollout.NewRenderer(g)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// replayBackend answers a prompt text with the demonstration whose prompt
// it is ("no demo" otherwise), as a server would: prompt ids from enc.
type replayBackend struct {
	enc   *Encoder
	mu    sync.Mutex
	byTxt map[string]string
}

func (b *replayBackend) Generate(_ context.Context, req *generation.Request) (*generation.Response, error) {
	b.mu.Lock()
	text, ok := b.byTxt[req.Prompt]
	b.mu.Unlock()
	if !ok {
		text = "no demo for this prompt"
	}
	ids := b.enc.Tok.Encode(text)
	return &generation.Response{PromptIDs: b.enc.Tok.Encode(req.Prompt), Endpoint: "replay",
		Samples: []generation.Sample{{Text: text, TokenIDs: ids, Logprobs: make([]float32, len(ids)), FinishReason: "stop"}}}, nil
}

func (b *replayBackend) Close() error { return nil }

// TestDemosAreRolloutPrompts checks that a demonstration's prompt is the
// prompt a rollout sends for the same seed, turn and role: the rollout
// driver, answered with the demonstrations' completions, replays the
// oracle episodes exactly.
func TestDemosAreRolloutPrompts(t *testing.T) {
	dir := tinyModel(t)
	enc, err := NewEncoder(dir, renderer(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := enc.Tok.IDToken(enc.EOS); got != "<|im_end|>" {
		t.Errorf("EOS = %q, want <|im_end|>", got)
	}
	for _, mode := range []string{envs.ModeSingle, envs.ModeMulti} {
		t.Run(mode, func(t *testing.T) {
			cfg, deps := planpathDeps(t, mode)
			seeds := TrainSeeds(7, 2)
			demos, err := Demonstrations(context.Background(), cfg, deps, enc, seeds, 0, 2)
			if err != nil {
				t.Fatal(err)
			}
			wantRoles := map[string]int{envs.ModeSingle: 1, envs.ModeMulti: 2}[mode]
			if len(demos) != wantRoles*len(seeds) {
				t.Fatalf("%d demos for %d seeds, want %d roles each", len(demos), len(seeds), wantRoles)
			}
			be := &replayBackend{enc: enc, byTxt: map[string]string{}}
			key := map[string]Demo{}
			for _, d := range demos {
				be.byTxt[d.PromptText] = d.Completion
				e, _ := envs.New(cfg.Name, cfg, deps)
				e.Reset(d.Seed)
				key[fmt.Sprintf("%s/%d/%s", e.Task().ID, d.Turn, d.Role)] = d
				if last := d.CompletionIDs[len(d.CompletionIDs)-1]; last != enc.EOS {
					t.Errorf("completion ends with %d, want EOS %d", last, enc.EOS)
				}
			}
			var rc rollout.Config
			config.SetDefaults(&rc)
			rc.Mode, rc.Branches = rollout.ModeNoTree, 1
			d := &rollout.Driver{Backend: be, BackendName: "replay", Env: cfg, Deps: deps, Render: enc.Render, Config: rc,
				Sampling: generation.Sampling{Temperature: 1, MaxTokens: 64}}
			var rows []trajectory.Step
			sum, err := d.Run(context.Background(), 0, seeds, func(r []trajectory.Step) error { rows = append(rows, r...); return nil })
			if err != nil {
				t.Fatal(err)
			}
			if sum.Successes != len(seeds) || len(rows) != len(demos) {
				t.Fatalf("rollout replay: %d/%d solved, %d rows for %d demos", sum.Successes, len(seeds), len(rows), len(demos))
			}
			for _, r := range rows {
				k := fmt.Sprintf("%s/%d/%s", r.ProblemID, r.Turn, r.Role)
				dm, ok := key[k]
				if !ok {
					t.Fatalf("rollout row %s has no demonstration", k)
				}
				if r.PromptText != dm.PromptText {
					t.Errorf("%s: rollout prompt differs from the demonstration's:\n%q\n%q", k, r.PromptText, dm.PromptText)
				}
				if fmt.Sprint(r.PromptIDs) != fmt.Sprint(dm.PromptIDs) {
					t.Errorf("%s: prompt ids differ", k)
				}
			}
		})
	}
}

func TestConfigErrorsNameKeys(t *testing.T) {
	for key, mod := range map[string]func(*Config){
		"steps": func(c *Config) { c.Steps = 0 }, "batch_size": func(c *Config) { c.BatchSize = -1 },
		"lr": func(c *Config) { c.LR = 2 }, "seeds": func(c *Config) { c.Seeds = 0 },
		"eval_every": func(c *Config) { c.EvalEvery = -1 }, "full": func(c *Config) { c.Full = true },
		"detours": func(c *Config) { c.Detours = 1.5 }, "loss_agg": func(c *Config) { c.LossAgg = "sum" },
		"modes[1]": func(c *Config) { c.Modes = []string{"multi", "duo"} }, "modes[2]": func(c *Config) { c.Modes = []string{"single", "multi", "single"} },
	} {
		var c Config
		c.SetDefaults()
		mod(&c)
		var fe *config.FieldError
		if err := c.Validate(); !errors.As(err, &fe) || fe.Field != key {
			t.Errorf("%s: got %v", key, err)
		}
	}
}

// TestDetours: detoured demonstrations show later turns — prompts with the
// history of a wrong answer — and never the wrong answer itself; every
// demonstrated episode still ends solved by the oracle.
func TestDetours(t *testing.T) {
	dir := tinyModel(t)
	enc, err := NewEncoder(dir, renderer(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	seeds := TrainSeeds(5, 6)
	for _, mode := range []string{envs.ModeSingle, envs.ModeMulti} {
		t.Run(mode, func(t *testing.T) {
			cfg, deps := planpathDeps(t, mode)
			plain, err := Demonstrations(context.Background(), cfg, deps, enc, seeds, 0, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range plain {
				if d.Turn != 0 {
					t.Fatalf("seed %d: a plain demonstration at turn %d", d.Seed, d.Turn)
				}
			}
			demos, err := Demonstrations(context.Background(), cfg, deps, enc, seeds, 1, 2)
			if err != nil {
				t.Fatal(err)
			}
			last := map[int64]Demo{}
			later := 0
			for _, d := range demos {
				if d.Turn == 0 && d.Role == "plan" {
					t.Errorf("seed %d: the wrong turn-0 answer is a demonstration: %q", d.Seed, d.Completion)
				}
				if d.Turn > 0 {
					later++
					if !strings.Contains(d.PromptText, "Earlier turns") {
						t.Errorf("seed %d turn %d: the prompt shows no history:\n%s", d.Seed, d.Turn, d.PromptText)
					}
				}
				last[d.Seed] = d
			}
			// max_turns 2: one wrong turn, then the oracle at turn 1 (unless the
			// other seed's answer happened to solve this one).
			if later < len(seeds)/2 {
				t.Fatalf("%d later-turn demonstrations for %d seeds", later, len(seeds))
			}
			for seed, d := range last {
				if d.Turn == 1 && d.Role == "plan" && !strings.HasPrefix(d.Completion, "#### ") {
					t.Errorf("seed %d: last demonstration %q is not the oracle's answer", seed, d.Completion)
				}
			}
		})
	}
}

// TestWeighBySequence: with the weights, the learner's token mean is the
// mean over examples of their token means.
func TestWeighBySequence(t *testing.T) {
	batch := []learner.Example{{CompletionIDs: make([]int32, 2)}, {CompletionIDs: make([]int32, 10)}, {CompletionIDs: make([]int32, 4)}}
	weighBySequence(batch)
	// Per-token losses ℓ_r constant within example r: Σ_r w_r·n_r·ℓ_r / N must be mean_r ℓ_r.
	losses := []float64{1, 5, 3}
	got := 0.0
	for i, e := range batch {
		got += e.Weight * float64(len(e.CompletionIDs)) * losses[i]
	}
	if got /= 16; math.Abs(got-3) > 1e-12 {
		t.Fatalf("weighted token mean %v, want the mean of the examples' means 3 (weights %v %v %v)", got, batch[0].Weight, batch[1].Weight, batch[2].Weight)
	}
}

func TestDetourTurns(t *testing.T) {
	for _, tc := range []struct {
		detours  float64
		maxTurns int
		wantFrac float64
	}{{0, 4, 0}, {1, 4, 1}, {0.5, 4, 0.5}, {1, 1, 0}} {
		n, seen := 0, map[int]bool{}
		for i := range 4000 {
			k := detourTurns(splitmix(uint64(i)), tc.detours, tc.maxTurns)
			if k < 0 || k > tc.maxTurns-1 && k > 0 {
				t.Fatalf("%+v: %d wrong turns", tc, k)
			}
			if k > 0 {
				n++
				seen[k] = true
			}
		}
		if f := float64(n) / 4000; f < tc.wantFrac-0.03 || f > tc.wantFrac+0.03 {
			t.Errorf("%+v: %.3f of seeds detour", tc, f)
		}
		if tc.wantFrac > 0 && len(seen) != tc.maxTurns-1 {
			t.Errorf("%+v: wrong-turn counts %v, want each of 1..%d", tc, seen, tc.maxTurns-1)
		}
	}
}

func TestEnvConfigs(t *testing.T) {
	env := envs.DefaultConfig("planpath")
	env.Mode, env.Size = envs.ModeSingle, 5
	var c Config
	c.SetDefaults()
	if got := c.EnvConfigs(env); len(got) != 1 || got[0].Mode != envs.ModeSingle {
		t.Fatalf("no modes: %+v, want env as is", got)
	}
	c.Modes = []string{envs.ModeMulti, envs.ModeSingle}
	got := c.EnvConfigs(env)
	if len(got) != 2 || got[0].Mode != envs.ModeMulti || got[1].Mode != envs.ModeSingle || got[0].Size != 5 {
		t.Fatalf("modes [multi single]: %+v", got)
	}
}

// TestLearnerConfigOneStepPerBatch: RL's learner.mini_batches does not
// split SFT batches.
func TestLearnerConfigOneStepPerBatch(t *testing.T) {
	var lc learner.Config
	config.SetDefaults(&lc)
	lc.MiniBatches = 8
	var c Config
	c.SetDefaults()
	if got := LearnerConfig(lc, c, 100); got.MiniBatches != 1 || got.Loss.Kind != loss.KindSFT {
		t.Fatalf("mini_batches %d, loss %q: want 1 and sft", got.MiniBatches, got.Loss.Kind)
	}
}

// TestRunLearns: a few SFT steps on a tiny model lower the loss, export a
// PEFT adapter the engine loads, and a merged model that computes what
// base + adapter computes.
func TestRunLearns(t *testing.T) {
	dir := tinyModel(t)
	out := filepath.Join(t.TempDir(), "sft")
	var c Config
	c.SetDefaults()
	c.Steps, c.BatchSize, c.Seeds, c.LR, c.WarmupSteps = 3, 2, 2, 1e-2, 1
	c.EvalEvery, c.EvalSeeds, c.EvalMaxTokens = 0, 1, 4
	var lc learner.Config
	lc.SetDefaults()
	lc.LoRARank, lc.CPUParallelism = 4, 2
	ctx := context.Background()
	res, err := Run(ctx, Options{Config: c, Learner: lc, Env: planpath(envs.ModeSingle), Render: renderer(t, dir),
		ModelDir: dir, OutDir: out, Seed: 1, Backend: gomlxtest.Backend(t)})
	if err != nil {
		t.Fatal(err)
	}
	if !(res.LastLoss < res.FirstLoss) || res.Steps != 3 || len(res.Evals) != 1 {
		t.Fatalf("result %+v: want 3 steps, 1 eval, loss going down", res)
	}
	data, err := os.ReadFile(filepath.Join(out, "metrics.jsonl"))
	if err != nil || len(data) == 0 {
		t.Fatalf("metrics.jsonl: %v", err)
	}
	// The merged model greedy-decodes like base + adapter.
	cfg, _ := hf.ReadModelConfig(dir)
	if _, err := hf.ReadAdapter(res.AdapterDir, cfg); err != nil {
		t.Fatal(err)
	}
	base, err := builtin.Open(dir, builtin.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	if err := base.LoadAdapter(ctx, AdapterName, res.AdapterDir); err != nil {
		t.Fatal(err)
	}
	merged, err := builtin.Open(res.MergedDir, builtin.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer merged.Close()
	prompt := []int32{1, 2, 3, 4, 5, 6, 7, 8}
	a, err := base.Generate(ctx, &builtin.Request{Prompt: prompt, MaxTokens: 6, Adapter: AdapterName})
	if err != nil {
		t.Fatal(err)
	}
	b, err := merged.Generate(ctx, &builtin.Request{Prompt: prompt, MaxTokens: 6})
	if err != nil {
		t.Fatal(err)
	}
	sa, sb := a.Samples[0], b.Samples[0]
	if fmt.Sprint(sa.Tokens) != fmt.Sprint(sb.Tokens) {
		t.Fatalf("greedy tokens: adapter %v, merged %v", sa.Tokens, sb.Tokens)
	}
	for i := range sa.Logprobs {
		if d := sa.Logprobs[i] - sb.Logprobs[i]; d > 1e-3 || d < -1e-3 {
			t.Errorf("token %d: logprob %v (adapter) vs %v (merged)", i, sa.Logprobs[i], sb.Logprobs[i])
		}
	}
}
