package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/troupe-rl/troupe/generation/builtin"
	"github.com/troupe-rl/troupe/generation/builtin/server"
	"github.com/troupe-rl/troupe/internal/hf"
)

func init() {
	register(&command{
		name:    "serve",
		args:    "--model DIR [--addr 127.0.0.1:8000] [--api-key K] [--served-model-name N] [--max-batch N] [--max-queue N]",
		summary: "serve a model folder with the embedded engine (OpenAI/vLLM-compatible HTTP)",
		detail: `troupe serve loads a Hugging Face model folder (config.json, model.safetensors,
tokenizer.json) into the embedded engine and answers OpenAI-compatible requests
with vLLM's extras: /v1/completions, /v1/chat/completions, /v1/models,
/v1/load_lora_adapter, /v1/unload_lora_adapter, /tokenize, /detokenize, /health.

It binds 127.0.0.1 unless --addr says otherwise; --addr 127.0.0.1:0 picks a free
port. Once listening it prints one line to stdout:
  troupe serve: listening on http://127.0.0.1:PORT
and answers 503 until the model is loaded. --api-key (or $TROUPE_API_KEY)
requires "Authorization: Bearer KEY". Requests beyond --max-batch decoding plus
--max-queue waiting get 429. SIGINT/SIGTERM stop accepting requests and give
those in flight --shutdown-timeout to finish.
  troupe model init --out models/tiny && troupe serve --model models/tiny`,
		run: runServe,
	})
}

func runServe(ctx context.Context, env *cliEnv, args []string) error {
	c := commands["serve"]
	fs := newFlags(env, c)
	modelDir := fs.String("model", "", "model folder (required)")
	addr := fs.String("addr", "127.0.0.1:8000", "listen address (host:port; port 0 picks a free one)")
	apiKey := fs.String("api-key", os.Getenv("TROUPE_API_KEY"), "require this bearer token (default $TROUPE_API_KEY)")
	name := fs.String("served-model-name", "", "model name clients send (default: the folder's base name)")
	maxBatch := fs.Int("max-batch", 32, "sequences decoded together")
	maxQueue := fs.Int("max-queue", 256, "requests waiting beyond the batch before 429")
	maxContext := fs.Int("max-context", 0, "context length cap (0 = the model's)")
	threads := fs.Int("threads", 0, "kernel threads (0 = GOMAXPROCS)")
	chatTemplate := fs.String("chat-template", "auto", "chat prompt format: auto (the model's chat_template, else chatml), qwen3, chatml, llama3 or plain")
	maxBody := fs.Int64("max-body-bytes", 16<<20, "request body limit (413 beyond)")
	shutdown := fs.Duration("shutdown-timeout", 30*time.Second, "how long requests in flight may finish after SIGINT/SIGTERM")
	pos, err := parseFlags(env, c, fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return usagef("unexpected argument %q", pos[0])
	case *modelDir == "":
		return usagef("--model is required")
	case *maxBatch < 1:
		return usagef("--max-batch must be ≥ 1, got %d", *maxBatch)
	case *maxQueue < 0:
		return usagef("--max-queue must be ≥ 0, got %d", *maxQueue)
	case *maxContext < 0 || *threads < 0 || *maxBody < 1 || *shutdown <= 0:
		return usagef("--max-context, --threads must be ≥ 0; --max-body-bytes and --shutdown-timeout > 0")
	}
	// Fail fast (exit 2) on a folder that is not a model, before binding.
	if _, err := hf.ReadModelConfig(*modelDir); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return usagef("--addr %s: %v", *addr, err)
	}
	srv := server.New(server.Options{
		APIKey:          *apiKey,
		MaxBodyBytes:    *maxBody,
		MaxConcurrent:   *maxBatch + *maxQueue,
		ShutdownTimeout: *shutdown,
		Logger:          env.log,
	})
	url := "http://" + ln.Addr().String()
	fmt.Fprintf(env.stdout, "troupe serve: listening on %s\n", url)
	env.log.Info("serve: listening", "url", url, "model", *modelDir, "auth", *apiKey != "")

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()

	start := time.Now()
	m, loadErr := server.Load(*modelDir, server.LoadOptions{
		Name:         *name,
		ChatTemplate: *chatTemplate,
		Engine:       builtin.Options{MaxBatch: *maxBatch, MaxQueue: *maxQueue, MaxContext: *maxContext, Threads: *threads},
	})
	if loadErr != nil {
		cancel()
		<-served
		return loadErr
	}
	if ctx.Err() != nil { // interrupted while loading
		m.Close()
		return <-served
	}
	srv.SetModel(m)
	env.log.Info("serve: ready", "model", m.Name, "load_time", time.Since(start).Round(time.Millisecond), "url", url+"/v1")
	err = <-served
	m.Close() // idempotent: also covers a shutdown that raced SetModel
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}
