package learner

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gomlx/compute/dtypes"

	"github.com/troupe-rl/troupe/generation/builtin"
	"github.com/troupe-rl/troupe/generation/builtin/modelgen"
	"github.com/troupe-rl/troupe/generation/builtin/servertest"
	"github.com/troupe-rl/troupe/internal/hf"
	"github.com/troupe-rl/troupe/learner/loss"
	"github.com/troupe-rl/troupe/learner/model"
)

// parityTol is the agreement the design asks of the learner's and the
// engine's logprobs (both float32).
const parityTol = 1e-4

func randomPrompt(rng *rand.Rand, vocab, n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(rng.IntN(vocab))
	}
	return p
}

// TestEngineParity: the learner's logprobs of tokens sampled by the
// embedded engine (in-process, modelgen's Qwen3-style model: q/k norm,
// GQA, tied embeddings) agree with the engine's own within 1e-4, for the
// base model and with a LoRA adapter on all seven modules (nonzero B), at
// two temperatures.
func TestEngineParity(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	// InitStd 0.1 gives peaked next-token distributions (logprobs from
	// about -0.1 to -20), a harder test than the near-uniform default.
	if _, err := modelgen.Write(dir, modelgen.Options{InitStd: 0.1, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	eng, err := builtin.Open(dir, builtin.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	m, err := model.Load(dir, dtypes.Float32)
	if err != nil {
		t.Fatal(err)
	}
	lora, err := model.NewLoRA(m.Config, model.LoRAConfig{Rank: 4, Alpha: 8, Targets: hf.AllModules}, 5)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for i := 1; i < len(lora.Data); i += 2 {
		for j := range lora.Data[i] {
			lora.Data[i][j] = float32(rng.NormFloat64() * 0.1)
		}
	}
	adir := filepath.Join(t.TempDir(), "adapter")
	if err := hf.WriteAdapter(adir, lora.Adapter(dir)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := eng.LoadAdapter(ctx, "a", adir); err != nil {
		t.Fatal(err)
	}
	var lc loss.Config
	lc.SetDefaults()
	prog, err := m.NewProgram(testBackend(t), lora, lc)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Finalize()

	for _, adapterName := range []string{"", "a"} {
		var seqs []model.Sequence
		var engLP [][]float32
		for i, temp := range []float64{1.0, 0.7} {
			seed := int64(11 + i)
			prompt := randomPrompt(rng, m.Config.VocabSize, 6+5*i)
			res, err := eng.Generate(ctx, &builtin.Request{Prompt: prompt, N: 3,
				MaxTokens: 20, Temperature: temp, Seed: &seed, Adapter: adapterName})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range res.Samples {
				seqs = append(seqs, model.Sequence{Prompt: prompt, Completion: s.Tokens, Temperature: temp})
				engLP = append(engLP, s.Logprobs)
			}
		}
		got, err := prog.Score(lora, seqs, adapterName == "")
		if err != nil {
			t.Fatal(err)
		}
		maxDiff, minLP, n := 0.0, 0.0, 0
		for i := range seqs {
			for j, lp := range engLP[i] {
				maxDiff = math.Max(maxDiff, math.Abs(got[i][j]-float64(lp)))
				minLP = math.Min(minLP, float64(lp))
				n++
			}
		}
		what := "base model"
		if adapterName != "" {
			what = "LoRA adapter (r=4, all 7 modules, B≠0)"
		}
		t.Logf("parity, %s: %d sampled tokens (T=1.0 and 0.7, logprobs down to %.2f): max |learner − engine| = %.3g", what, n, minLP, maxDiff)
		if maxDiff > parityTol {
			t.Errorf("%s: learner and engine logprobs differ by %.3g > %g", what, maxDiff, parityTol)
		}
		if adapterName == "" {
			continue
		}
		// Same tokens scored without the adapter: it must change them.
		off, err := prog.Score(lora, seqs, true)
		if err != nil {
			t.Fatal(err)
		}
		change := 0.0
		for i := range seqs {
			for j := range seqs[i].Completion {
				change = math.Max(change, math.Abs(off[i][j]-got[i][j]))
			}
		}
		if change < 0.05 {
			t.Errorf("the adapter changes logprobs by at most %.3g: the test would not see a LoRA mismatch", change)
		}
	}
}

// completion is the part of an OpenAI completions response the round trip reads.
type completion struct {
	Choices []struct {
		TokenIDs       []int32 `json:"token_ids"`
		PromptTokenIDs []int32 `json:"prompt_token_ids"`
		Logprobs       struct {
			TokenLogprobs []float32 `json:"token_logprobs"`
		} `json:"logprobs"`
	} `json:"choices"`
}

func postJSON(t *testing.T, url string, body any, out any) {
	t.Helper()
	data, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s: %s", url, resp.Status, buf.String())
	}
	if out != nil {
		if err := json.Unmarshal(buf.Bytes(), out); err != nil {
			t.Fatalf("POST %s: %v: %s", url, err, buf.String())
		}
	}
}

// TestAdapterRoundTrip: an adapter trained for a few learner steps is
// exported, loaded into the real server over HTTP, and changes the
// server's greedy completions exactly as the learner's forward predicts:
// every greedy token is the learner's argmax, and the server's logprobs
// equal the learner's within 1e-4.
func TestAdapterRoundTrip(t *testing.T) {
	srv := servertest.Start(t, servertest.Options{Model: modelgen.Options{InitStd: 0.1, Seed: 4}})
	cfg := defaultConfig()
	cfg.Policies = PoliciesShared
	cfg.LR, cfg.WarmupSteps, cfg.LoRARank, cfg.LoRAAlpha = 0.05, 0, 4, 8
	ctx := context.Background()
	l, err := New(ctx, cfg, srv.ModelDir, []string{"solver"}, Options{Backend: testBackend(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := l.policies[SharedPolicy]
	V := l.model.Config.VocabSize
	rng := rand.New(rand.NewPCG(9, 9))
	for step := range 3 {
		// Two problems, four completions each, scored by the learner itself
		// (ratio 1); reward favours completions starting with token 7.
		var rows []Row
		var seqs []model.Sequence
		for pi := range 2 {
			prompt := randomPrompt(rng, V, 5)
			for range 4 {
				c := randomPrompt(rng, V, 3)
				if rng.IntN(2) == 0 {
					c[0] = 7
				}
				seqs = append(seqs, model.Sequence{Prompt: prompt, Completion: c})
				r := 0.0
				if c[0] == 7 {
					r = 1
				}
				rows = append(rows, Row{ProblemID: string(rune('a' + pi)), Role: "solver", PromptIDs: prompt, CompletionIDs: c, RewardLocal: r, RewardTeam: r})
			}
		}
		lps, err := p.prog.Score(p.lora, seqs, false)
		if err != nil {
			t.Fatal(err)
		}
		for i := range rows {
			for _, x := range lps[i] {
				rows[i].Logprobs = append(rows[i].Logprobs, float32(x))
			}
		}
		if _, err := l.Step(ctx, &Batch{Rows: rows, Shards: []string{"s" + string(rune('0'+step))}}); err != nil {
			t.Fatal(err)
		}
	}
	dirs, err := l.Export(filepath.Join(t.TempDir(), "adapters"), l.StepCount())
	if err != nil {
		t.Fatal(err)
	}
	postJSON(t, srv.URL+"/load_lora_adapter", map[string]any{"lora_name": "trained", "lora_path": dirs[SharedPolicy]}, nil)

	prompts := [][]int32{randomPrompt(rng, V, 6), randomPrompt(rng, V, 11), randomPrompt(rng, V, 17)}
	maxDiff, changed := 0.0, 0
	for _, prompt := range prompts {
		var base, tuned completion
		req := map[string]any{"model": "tiny", "prompt": prompt, "max_tokens": 12, "temperature": 0, "logprobs": 1,
			"return_token_ids": true, "ignore_eos": true}
		postJSON(t, srv.URL+"/completions", req, &base)
		req["model"] = "trained"
		postJSON(t, srv.URL+"/completions", req, &tuned)
		ch := tuned.Choices[0]
		if len(ch.TokenIDs) == 0 || len(ch.Logprobs.TokenLogprobs) != len(ch.TokenIDs) {
			t.Fatalf("server returned %d tokens, %d logprobs", len(ch.TokenIDs), len(ch.Logprobs.TokenLogprobs))
		}
		if len(ch.PromptTokenIDs) > 0 && !slices.Equal(ch.PromptTokenIDs, prompt) {
			t.Fatalf("server used prompt %v, sent %v", ch.PromptTokenIDs, prompt)
		}
		if !slices.Equal(base.Choices[0].TokenIDs, ch.TokenIDs) {
			changed++
		}
		seq := model.Sequence{Prompt: prompt, Completion: ch.TokenIDs}
		got, err := p.prog.Score(p.lora, []model.Sequence{seq}, false)
		if err != nil {
			t.Fatal(err)
		}
		for j, lp := range ch.Logprobs.TokenLogprobs {
			maxDiff = math.Max(maxDiff, math.Abs(got[0][j]-float64(lp)))
		}
		b, err := model.Pack([]model.Sequence{seq}, 1, seq.Len())
		if err != nil {
			t.Fatal(err)
		}
		am, err := p.prog.Argmax(p.lora, b, false)
		if err != nil {
			t.Fatal(err)
		}
		pred := am[len(prompt)-1 : seq.Len()-1]
		if !slices.Equal(pred, ch.TokenIDs) {
			t.Errorf("prompt %v: server's greedy completion %v, learner's argmax continuation %v", prompt, ch.TokenIDs, pred)
		}
	}
	t.Logf("round trip after %d learner steps: greedy completions of %d prompts equal the learner's argmax; %d of %d differ from the base model's; max |server − learner| logprob = %.3g",
		l.StepCount(), len(prompts), changed, len(prompts), maxDiff)
	if maxDiff > parityTol {
		t.Errorf("server and learner logprobs differ by %.3g > %g", maxDiff, parityTol)
	}
	if changed == 0 {
		t.Error("the trained adapter changed no greedy completion: the round trip proves nothing")
	}
}
