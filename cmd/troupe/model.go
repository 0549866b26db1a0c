package main

import (
	"context"
	"fmt"

	"github.com/troupe-rl/troupe/generation/builtin/modelgen"
)

func init() {
	register(&command{
		name:    "model",
		args:    "init --out DIR [--arch qwen3|llama] [--layers N] [--dim N] [--heads N] [--kv-heads N] [--ff N] [--vocab N] [--seed S] [--tokenizer FILE] [--corpus FILE] [--dtype f32|bf16] [--force]",
		summary: "write a random-initialised model folder (Hugging Face layout)",
		detail: `troupe model init writes config.json, model.safetensors, tokenizer.json,
tokenizer_config.json and generation_config.json: a Qwen3 (default) or Llama
decoder with weights drawn from normal(0, 0.02) (norms 1), deterministic given
--seed. The byte-level BPE tokenizer is trained on a small built-in corpus (or
--corpus FILE) up to --vocab ids, or copied from --tokenizer FILE (a
tokenizer.json, or a folder with one; the vocabulary is then sized to fit it).
Such models produce noise; they exist for tests, benchmarks and CPU runs.
The folder is built under a temporary name and renamed into place, so a
killed run leaves no half model; a non-empty --out is refused without --force.
  troupe model init --out models/tiny
  troupe model init --out models/tiny-llama --arch llama --layers 4 --dim 128 --heads 8 --kv-heads 2`,
		run: runModel,
	})
}

func runModel(ctx context.Context, env *cliEnv, args []string) error {
	c := commands["model"]
	if len(args) == 0 {
		return usagef("missing subcommand (init)")
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		_, err := parseFlags(env, c, newFlags(env, c), args)
		return err
	}
	if args[0] != "init" {
		return usagef("unknown subcommand %q (want init)", args[0])
	}
	fs := newFlags(env, c)
	var o modelgen.Options
	out := fs.String("out", "", "model folder to write (required)")
	fs.StringVar(&o.Arch, "arch", "qwen3", "architecture: qwen3 or llama")
	fs.IntVar(&o.Layers, "layers", 2, "decoder layers")
	fs.IntVar(&o.Dim, "dim", 64, "hidden size")
	fs.IntVar(&o.Heads, "heads", 4, "attention heads")
	fs.IntVar(&o.KVHeads, "kv-heads", 2, "key/value heads (GQA)")
	fs.IntVar(&o.HeadDim, "head-dim", 0, "head dimension (0 = dim/heads)")
	fs.IntVar(&o.FF, "ff", 0, "MLP intermediate size (0 = 3·dim)")
	fs.IntVar(&o.Vocab, "vocab", 384, "vocabulary size (ignored with --tokenizer)")
	fs.IntVar(&o.MaxPositions, "max-positions", 2048, "context length (max_position_embeddings)")
	fs.BoolVar(&o.Untied, "untied", false, "separate lm_head instead of tied embeddings")
	fs.Int64Var(&o.Seed, "seed", 0, "random seed for the weights")
	fs.Float64Var(&o.InitStd, "init-std", 0.02, "standard deviation of the initial weights")
	fs.StringVar(&o.Dtype, "dtype", "f32", "weight dtype: f32 or bf16")
	fs.StringVar(&o.Tokenizer, "tokenizer", "", "tokenizer.json to copy instead of training one")
	fs.StringVar(&o.Corpus, "corpus", "", "text file to train the tokenizer on (default: a built-in corpus)")
	fs.BoolVar(&o.Force, "force", false, "replace a non-empty --out folder")
	pos, err := parseFlags(env, c, fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if *out == "" {
		return usagef("--out is required")
	}
	for name, v := range map[string]int{"layers": o.Layers, "dim": o.Dim, "heads": o.Heads, "kv-heads": o.KVHeads, "vocab": o.Vocab, "max-positions": o.MaxPositions} {
		if v <= 0 {
			return usagef("--%s must be > 0, got %d", name, v)
		}
	}
	info, err := modelgen.Write(*out, o)
	if err != nil {
		return err
	}
	cfg := info.Config
	fmt.Fprintf(env.stdout, "wrote %s: %s, %d layers, d=%d, %d/%d heads, ff=%d, vocab %d (%d tokens), %.2fM parameters\n",
		info.Dir, cfg.ModelType, cfg.NumHiddenLayers, cfg.HiddenSize, cfg.NumAttentionHeads, cfg.NumKeyValueHeads,
		cfg.IntermediateSize, cfg.VocabSize, info.TokenCount, float64(info.Params)/1e6)
	return nil
}
