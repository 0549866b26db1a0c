package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/troupe-rl/troupe/configs"
	"github.com/troupe-rl/troupe/learner/sft"
)

func init() {
	register(&command{
		name:    "sft",
		args:    "CONFIG [key=value ...] [--json] [--corpus FILE]",
		summary: "supervised warm start from solver demonstrations",
		detail: `Plays sft.seeds training seeds with the environment's solver through the same
prompts as rollouts (generation.chat_template and the model's tokenizer), and trains one
shared LoRA adapter (learner.lora_rank, lora_alpha, lora_targets) on the solver's completions,
each ended by the model's end-of-turn token, with token-mean cross-entropy for sft.steps
steps of sft.batch_size demonstrations. Every sft.eval_every steps and at the end it
measures greedy success on sft.eval_seeds validation seeds with the embedded engine.
The base model is sft.model (default generation.model), a model folder. sft.modes
(e.g. [single, multi]) demonstrates several env modes on the same seeds; the default is
env.mode. Where the environment has a general solver program (Plan-Path's BFS), the tool
agent is shown that program rather than one that prints a precomputed answer.

Writes runs/<name>/sft/metrics.jsonl (loss per step, evaluations), the adapter in PEFT
layout to runs/<name>/sft/adapter/ and, with sft.merge (default), the base model with the
adapter merged into its weights to runs/<name>/sft/model/ (start RL from it).

--corpus FILE writes the rendered prompts and solver completions of the sft.seeds
demonstrations to FILE and exits: train a tiny model's tokenizer on it so that prompts
take few tokens:
  troupe sft configs/planpath-tiny.yaml --corpus pp.txt
  troupe model init --out models/pp --corpus pp.txt --vocab 1024 --init-std 0.3`,
		run: runSFT,
	})
}

func runSFT(ctx context.Context, env *cliEnv, args []string) error {
	c := commands["sft"]
	fs := newFlags(env, c)
	asJSON := fs.Bool("json", false, "print the result as JSON")
	corpus := fs.String("corpus", "", "write the demonstrations' text to FILE (a tokenizer corpus) and exit")
	pos, err := parseFlags(env, c, fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 {
		return usagef("missing CONFIG")
	}
	cfg, err := configs.Load(pos[0], pos[1:]...)
	if err != nil {
		return err
	}
	if *corpus != "" {
		return writeCorpus(ctx, env, cfg, *corpus)
	}
	modelDir, key := cfg.SFT.Model, "sft.model"
	if modelDir == "" {
		modelDir, key = cfg.Generation.Model, "generation.model"
	}
	if st, err := os.Stat(filepath.Join(modelDir, "config.json")); err != nil || !st.Mode().IsRegular() {
		return &badConfig{key: key, err: fmt.Errorf("%q is not a model folder (no config.json): sft trains a local model", modelDir)}
	}
	exp, err := openTasks(env, cfg)
	if err != nil {
		return err
	}
	defer exp.close()
	res, err := sft.Run(ctx, sft.Options{
		Config: cfg.SFT, Learner: cfg.Learner, Env: cfg.Env, Deps: exp.deps(), Render: exp.render,
		ModelDir: modelDir, OutDir: filepath.Join(exp.runDir(), "sft"), Seed: cfg.Seed, Log: env.log, Progress: env.stderr,
	})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Fprintf(env.stdout, "demos %d (%d completion tokens, longest sequence %d)  steps %d  loss %.3f → %.3f  train %.1fs  total %.1fs\n",
		res.Demos, res.DemoTokens, res.MaxSeqLen, res.Steps, res.FirstLoss, res.LastLoss, res.TrainSeconds, res.Seconds)
	for _, e := range res.Evals {
		fmt.Fprintf(env.stdout, "eval step %d (train %.0fs): success %.1f%% (%d/%d)  parse ok %.1f%%  reward %.3f\n",
			e.Step, e.TrainSeconds, 100*e.SuccessRate, e.Successes, e.Episodes, 100*e.ParseOK, e.Reward)
	}
	fmt.Fprintf(env.stdout, "adapter: %s\n", res.AdapterDir)
	if res.MergedDir != "" {
		fmt.Fprintf(env.stdout, "merged model: %s\n", res.MergedDir)
	}
	return nil
}

func writeCorpus(ctx context.Context, env *cliEnv, cfg *configs.Experiment, path string) error {
	exp, err := openTasks(env, cfg)
	if err != nil {
		return err
	}
	defer exp.close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	for _, ec := range cfg.SFT.EnvConfigs(cfg.Env) {
		if err := sft.WriteCorpus(ctx, f, ec, exp.deps(), exp.render, sft.TrainSeeds(cfg.Seed, cfg.SFT.Seeds), cfg.SFT.Detours); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}
