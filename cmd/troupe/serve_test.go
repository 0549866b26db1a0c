package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// syncBuffer is a goroutine-safe bytes.Buffer.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func testEnv() (*cliEnv, *syncBuffer, *syncBuffer) {
	out, errb := &syncBuffer{}, &syncBuffer{}
	return &cliEnv{stdout: out, stderr: errb, log: slog.New(slog.NewTextHandler(io.Discard, nil))}, out, errb
}

func TestModelInit(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "tiny")
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"model", "init", "--out", dir, "--layers", "1", "--dim", "32", "--heads", "2", "--kv-heads", "1", "--vocab", "300", "--seed", "3"}, 0, "1 layers, d=32"},
		{[]string{"model", "init", "--out", dir}, 2, "not empty"},
		{[]string{"model", "init", "--out", dir, "--force", "--arch", "llama", "--dtype", "bf16"}, 0, "llama"},
		{[]string{"model", "init"}, 2, "--out is required"},
		{[]string{"model", "init", "--out", filepath.Join(root, "x"), "--arch", "gpt2"}, 2, "arch"},
		{[]string{"model", "init", "--out", filepath.Join(root, "x"), "--dim", "0"}, 2, "--dim"},
		{[]string{"model", "init", "--out", filepath.Join(root, "x"), "--tokenizer", filepath.Join(root, "none.json")}, 2, "none.json"},
		{[]string{"model", "frobnicate"}, 2, "unknown subcommand"},
		{[]string{"model"}, 2, "missing subcommand"},
	}
	for _, c := range cases {
		env, out, errb := testEnv()
		code := runMain(context.Background(), env, c.args)
		if code != c.code || !strings.Contains(out.String()+errb.String(), c.want) {
			t.Errorf("%v: exit %d (want %d)\nstdout: %s\nstderr: %s", c.args, code, c.code, out, errb)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err != nil {
		t.Error(err)
	}
}

var listenLine = regexp.MustCompile(`troupe serve: listening on (http://127\.0\.0\.1:\d+)`)

// TestServe runs the real `troupe serve` code path on 127.0.0.1:0.
func TestServe(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "tiny")
	env, _, errb := testEnv()
	if code := runMain(context.Background(), env, []string{"model", "init", "--out", dir, "--seed", "1"}); code != 0 {
		t.Fatalf("model init: %s", errb)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env, out, errb := testEnv()
	exited := make(chan int, 1)
	go func() {
		exited <- runMain(ctx, env, []string{"serve", "--model", dir, "--addr", "127.0.0.1:0", "--api-key", "k", "--served-model-name", "tiny", "--max-batch", "4", "--threads", "2"})
	}()
	var url string
	deadline := time.Now().Add(20 * time.Second)
	for url == "" {
		if m := listenLine.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
			break
		}
		select {
		case code := <-exited:
			t.Fatalf("serve exited %d: %s", code, errb)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no listening line")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for {
		resp, err := http.Get(url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
			if resp.StatusCode != 503 {
				t.Fatalf("/health: %d", resp.StatusCode)
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("never healthy")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cfg := openai.DefaultConfig("k")
	cfg.BaseURL = url + "/v1"
	client := openai.NewClientWithConfig(cfg)
	resp, err := client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "tiny", MaxTokens: 5,
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}})
	if err != nil || len(resp.Choices) != 1 || resp.Usage.CompletionTokens == 0 {
		t.Fatalf("chat: %+v %v", resp, err)
	}
	req, _ := http.NewRequest("POST", url+"/tokenize", strings.NewReader(`{"prompt":"hello"}`))
	req.Header.Set("Authorization", "Bearer k")
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var tk struct{ Count int }
	json.NewDecoder(r.Body).Decode(&tk)
	r.Body.Close()
	if tk.Count == 0 {
		t.Errorf("tokenize: %+v", tk)
	}
	cancel() // what SIGINT does through signal.NotifyContext
	select {
	case code := <-exited:
		if code != 0 {
			t.Errorf("serve exit %d: %s", code, errb)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
}

func TestServeBadInput(t *testing.T) {
	empty := t.TempDir()
	for _, args := range [][]string{
		{"serve"},
		{"serve", "--model", empty},
		{"serve", "--model", empty, "--max-batch", "0"},
		{"serve", "--model", empty, "--bogus"},
	} {
		env, _, errb := testEnv()
		if code := runMain(context.Background(), env, args); code != 2 {
			t.Errorf("%v: exit %d: %s", args, code, errb)
		}
	}
}
