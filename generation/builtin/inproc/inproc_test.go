package inproc_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/troupe-rl/troupe/generation"
	"github.com/troupe-rl/troupe/generation/builtin"
	"github.com/troupe-rl/troupe/generation/builtin/inproc"
	"github.com/troupe-rl/troupe/generation/builtin/servertest"
	"github.com/troupe-rl/troupe/generation/generationtest"
	"github.com/troupe-rl/troupe/generation/openai"
	"github.com/troupe-rl/troupe/internal/config"
)

const prompt = "<|im_start|>user\nFind the way from A to B.<|im_end|>\n<|im_start|>assistant\n"

// backends opens the in-process backend and the openai backend against
// troupe serve (servertest) on the same model folder.
func backends(t *testing.T) (*inproc.Backend, *openai.Backend, *servertest.Server) {
	t.Helper()
	srv := servertest.Start(t, servertest.Options{})
	var gc generation.Config
	config.SetDefaults(&gc)
	gc.Backend, gc.Model = "builtin", srv.ModelDir
	in, err := inproc.Open(gc, builtin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	gc.Backend, gc.Model, gc.BaseURLs = "openai", srv.Name, []string{srv.URL}
	oa, err := openai.New(gc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { oa.Close() })
	return in, oa, srv
}

// TestConformsToServe sends the same requests through the in-process
// backend and through HTTP to troupe serve and requires identical prompt
// ids, token ids, text, logprobs and finish reasons.
func TestConformsToServe(t *testing.T) {
	in, oa, _ := backends(t)
	seed := int64(99)
	ids, _ := in.Tokenize(context.Background(), prompt)
	reqs := map[string]*generation.Request{
		"sampled":   {Prompt: prompt, N: 4, Temperature: 1, TopP: 1, MaxTokens: 12, Seed: &seed},
		"top-k-p":   {Prompt: prompt, N: 3, Temperature: 0.7, TopP: 0.9, TopK: 20, MaxTokens: 10, Seed: &seed},
		"greedy":    {Prompt: prompt, N: 1, Temperature: 0, MaxTokens: 16},
		"stop":      {Prompt: prompt, N: 4, Temperature: 1, MaxTokens: 16, Seed: &seed, Stop: []string{"e", "a"}},
		"token-ids": {PromptIDs: ids, N: 2, Temperature: 1, MaxTokens: 8, Seed: &seed},
	}
	for name, req := range reqs {
		t.Run(name, func(t *testing.T) {
			a, err := in.Generate(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := oa.Generate(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a.PromptIDs, b.PromptIDs) {
				t.Errorf("prompt ids differ:\nbuiltin %v\nopenai  %v", a.PromptIDs, b.PromptIDs)
			}
			if !reflect.DeepEqual(a.Samples, b.Samples) {
				t.Errorf("samples differ:\nbuiltin %+v\nopenai  %+v", a.Samples, b.Samples)
			}
			t.Logf("%d samples identical, e.g. %q (%d tokens, %s)", len(a.Samples), a.Samples[0].Text, len(a.Samples[0].TokenIDs), a.Samples[0].FinishReason)
		})
	}
}

func TestConformance(t *testing.T) {
	in, oa, srv := backends(t)
	o := generationtest.Options{Prompt: prompt, AdapterDir: generationtest.WriteAdapter(t, srv.ModelDir)}
	t.Run("builtin", func(t *testing.T) { generationtest.Run(t, in, o) })
	t.Run("openai", func(t *testing.T) { generationtest.Run(t, oa, o) })
}

func TestRegistered(t *testing.T) {
	if _, err := generation.Open(context.Background(), generation.Config{Backend: "builtin"}); err == nil {
		t.Error("builtin without generation.model opened")
	}
}

func TestErrors(t *testing.T) {
	in, _, srv := backends(t)
	for _, name := range []string{srv.ModelDir, filepath.Base(srv.ModelDir)} {
		if _, err := in.Generate(context.Background(), &generation.Request{Prompt: prompt, Model: name, MaxTokens: 2}); err != nil {
			t.Errorf("model %q (the base): %v", name, err)
		}
	}
	_, err := in.Generate(context.Background(), &generation.Request{Prompt: prompt, Model: "nope", MaxTokens: 4})
	var bi interface{ BadInput() bool }
	if err == nil || !errors.As(err, &bi) || !bi.BadInput() {
		t.Errorf("unknown model: %v", err)
	}
	_, err = in.Generate(context.Background(), &generation.Request{Prompt: prompt, MaxTokens: 1 << 20})
	if err == nil {
		t.Error("max_tokens beyond the context succeeded")
	}
}
