package server

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/troupe-rl/troupe/generation/builtin"
	"github.com/troupe-rl/troupe/generation/tokenizer"
	"github.com/troupe-rl/troupe/internal/hf"
)

// LoadOptions configure Load.
type LoadOptions struct {
	// Name is the served model name (default: the folder's base name).
	Name string
	// ChatTemplate is "auto" (or ""): the model's own chat_template, else
	// ChatML; or a built-in renderer to force: qwen3, chatml, llama3, plain.
	ChatTemplate string
	// Engine configures the engine (batch, queue, context, threads).
	Engine builtin.Options
}

// Load opens a model folder: the engine on its weights, its tokenizer and
// its chat template. The returned Model's Close closes the engine.
func Load(dir string, o LoadOptions) (*Model, error) {
	cfg, err := hf.ReadModelConfig(dir)
	if err != nil {
		return nil, fmt.Errorf("server: load %s: %w", dir, err)
	}
	tk, err := tokenizer.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("server: load %s: %w", dir, err)
	}
	tmpl, err := chatTemplateFor(tk, o.ChatTemplate)
	if err != nil {
		return nil, fmt.Errorf("server: load %s: %w", dir, err)
	}
	eng, err := builtin.Open(dir, o.Engine)
	if err != nil {
		return nil, fmt.Errorf("server: load %s: %w", dir, err)
	}
	name := o.Name
	if name == "" {
		abs, _ := filepath.Abs(dir)
		name = filepath.Base(abs)
	}
	var eos []int32
	for _, id := range cfg.EOSTokenIDs() {
		eos = append(eos, int32(id))
	}
	for _, id := range tk.EOSIDs() {
		if !slices.Contains(eos, id) {
			eos = append(eos, id)
		}
	}
	root, _ := filepath.Abs(dir)
	return &Model{
		Engine: eng, Tokenizer: hfTokenizer{tk}, Template: tmpl, Name: name, Root: root, EOS: eos,
		Close: eng.Close,
	}, nil
}

// hfTokenizer adapts *tokenizer.Tokenizer to Tokenizer.
type hfTokenizer struct{ t *tokenizer.Tokenizer }

func (h hfTokenizer) Encode(text string, addSpecial bool) []int32 {
	if addSpecial && h.t.AddBOS() {
		if bos, ok := h.t.BOSID(); ok {
			return h.t.AppendEncode([]int32{bos}, text)
		}
	}
	return h.t.Encode(text)
}

func (h hfTokenizer) Decode(ids []int32, skipSpecial bool) string {
	if skipSpecial {
		return h.t.DecodeSkipSpecial(ids)
	}
	return h.t.Decode(ids)
}

// TokenBytes returns a token's exact bytes (chat logprobs' "bytes").
func (h hfTokenizer) TokenBytes(id int32) []byte { return h.t.TokenBytes(id) }
