package rollout_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/generation"
	"github.com/troupe-rl/troupe/generation/builtin"
	"github.com/troupe-rl/troupe/generation/builtin/inproc"
	"github.com/troupe-rl/troupe/generation/builtin/modelgen"
	"github.com/troupe-rl/troupe/generation/builtin/server"
	"github.com/troupe-rl/troupe/generation/openai"
	"github.com/troupe-rl/troupe/generation/rollout"
	"github.com/troupe-rl/troupe/internal/config"
	"github.com/troupe-rl/troupe/learner/trajectory"
)

// serveEnv, when set to a model folder, makes the test binary run the
// embedded server instead of the tests (the benchmark's server process).
const serveEnv = "TROUPE_ROLLOUT_BENCH_SERVE"

func TestMain(m *testing.M) {
	if dir := os.Getenv(serveEnv); dir != "" {
		if err := serve(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serve runs what `troupe serve --max-batch 256 --max-queue 512` runs,
// printing the base URL once listening, until SIGTERM or stdin closes.
func serve(dir string) error {
	m, err := server.Load(dir, server.LoadOptions{Name: "tiny", Engine: builtin.Options{MaxBatch: 256, MaxQueue: 512}})
	if err != nil {
		return err
	}
	s := server.New(server.Options{MaxConcurrent: 768, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s.SetModel(m)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() { io.Copy(io.Discard, os.Stdin); stop() }()
	fmt.Printf("listening on http://%s/v1\n", ln.Addr())
	return s.Serve(ctx, ln)
}

// procCPU is a process's user+system CPU time from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces) start at ")".
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64) // utime is field 14, i.e. index 11 after pid and comm
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const hz = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / hz, nil
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startServer runs the embedded server on dir in a child process (the test
// binary re-executed) and returns its base URL and pid.
func startServer(b *testing.B, dir string) (string, int) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serveEnv+"="+dir)
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("server: %v", err)
	}
	url := strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
	for i := 0; ; i++ {
		resp, err := http.Get(strings.TrimSuffix(url, "/v1") + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if i > 100 {
			b.Fatalf("server not healthy: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return url, cmd.Process.Pid
}

// BenchmarkRollout256 measures troupe's client path at scale: each op is a
// fixed workload of 256 concurrent single-agent Plan-Path episodes (64
// problems × 4 no_tree branches, up to 4 turns, max_tokens 8) driven by
// rollout.Driver through the openai backend against the embedded server
// running as a separate process, with every row written to a Parquet
// shard. It reports sustained LLM calls/s, the client's CPU per call
// (this process: driver, environments, HTTP+JSON, Parquet) and the
// server's (the child, from /proc), and the client's share of the total.
func BenchmarkRollout256(b *testing.B) {
	dir := b.TempDir()
	if _, err := modelgen.Write(filepath.Join(dir, "model"), modelgen.Options{}); err != nil {
		b.Fatal(err)
	}
	url, pid := startServer(b, filepath.Join(dir, "model"))
	var err error
	if err := os.MkdirAll(filepath.Join(dir, "traj"), 0o755); err != nil {
		b.Fatal(err)
	}

	var gc generation.Config
	config.SetDefaults(&gc)
	gc.BaseURLs, gc.Model, gc.Tokenizer = []string{url}, "tiny", filepath.Join(dir, "model")
	gc.MaxConcurrency = 256
	var be generation.Backend
	if os.Getenv("TROUPE_BENCH_INPROC") != "" {
		// The same workload with the engine in this process (for profiling
		// the server side; the CPU split is then meaningless).
		gc.Model = filepath.Join(dir, "model")
		be, err = inproc.Open(gc, builtin.Options{MaxBatch: 256, MaxQueue: 512})
	} else {
		be, err = openai.New(gc)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	render, err := rollout.NewRenderer(gc)
	if err != nil {
		b.Fatal(err)
	}
	ec := envs.DefaultConfig("planpath")
	ec.Mode, ec.Size, ec.MaxTurns = envs.ModeSingle, 5, 4
	var rc rollout.Config
	config.SetDefaults(&rc)
	rc.Mode, rc.Branches, rc.Problems, rc.Concurrency = rollout.ModeNoTree, 4, 64, 256
	d := &rollout.Driver{
		Backend: be, BackendName: "openai", Model: "tiny", Env: ec, Render: render,
		Sampling: generation.Sampling{Temperature: 1, TopP: 1, MaxTokens: 8},
		Config:   rc, RunID: "bench", Seed: 1,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	seeds := make([]int64, rc.Problems)
	for i := range seeds {
		seeds[i] = int64(i + 1)
	}
	var promptToks int
	run := func(iter int64) int {
		w, err := trajectory.Create(filepath.Join(dir, "traj"), iter, nil)
		if err != nil {
			b.Fatal(err)
		}
		sum, err := d.Run(context.Background(), iter, seeds, func(steps []trajectory.Step) error { return w.Write(steps...) })
		if err != nil {
			b.Fatal(err)
		}
		if _, err := w.Commit(); err != nil {
			b.Fatal(err)
		}
		if len(sum.Failed) > 0 || sum.Episodes != rc.Problems*rc.Branches {
			b.Fatalf("episodes %d, failed %v", sum.Episodes, sum.Failed)
		}
		promptToks += sum.PromptToks
		return sum.Calls
	}
	run(0) // warm up: connections, tokenizer caches, the engine's scratch

	calls := 0
	promptToks = 0
	srv0, _ := procCPU(pid)
	cli0 := selfCPU()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		calls += run(int64(i + 1))
	}
	wall := time.Since(start)
	b.StopTimer()
	srv1, err := procCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	cli := selfCPU() - cli0
	srv := srv1 - srv0
	report(b, calls, wall, cli, srv)
	b.ReportMetric(float64(promptToks)/float64(calls), "prompt-tokens/call")
}

// report writes the CPU split metrics.
func report(b *testing.B, calls int, wall, cli, srv time.Duration) {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(calls) }
	b.ReportMetric(float64(calls)/wall.Seconds(), "calls/s")
	b.ReportMetric(float64(calls)/float64(b.N), "calls/op")
	b.ReportMetric(ms(cli), "client-cpu-ms/call")
	b.ReportMetric(ms(srv), "server-cpu-ms/call")
	b.ReportMetric(100*float64(cli)/float64(cli+srv), "client-cpu-%")
}

// BenchmarkGenerate256 is the client path without the environments and
// with short prompts, so that the server is as fast as it gets and the
// client's share is not flattered by long prefills: each op is 2048
// completions requests (prompt ~20 tokens, max_tokens 8, N=1) issued by
// 256 goroutines through the openai backend against the embedded server
// in a child process.
func BenchmarkGenerate256(b *testing.B) {
	dir := b.TempDir()
	if _, err := modelgen.Write(dir, modelgen.Options{}); err != nil {
		b.Fatal(err)
	}
	url, pid := startServer(b, dir)
	var gc generation.Config
	config.SetDefaults(&gc)
	gc.BaseURLs, gc.Model, gc.MaxConcurrency = []string{url}, "tiny", 256
	be, err := openai.New(gc)
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	const perOp, workers = 2048, 256
	run := func() {
		var wg sync.WaitGroup
		next := make(chan int64, perOp)
		for i := range int64(perOp) {
			next <- i
		}
		close(next)
		for range workers {
			wg.Go(func() {
				for i := range next {
					req := &generation.Request{Prompt: "Move from A to B. Answer with one word:", N: 1, Temperature: 1, TopP: 1, MaxTokens: 8, Seed: &i}
					if _, err := be.Generate(context.Background(), req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	run()
	srv0, _ := procCPU(pid)
	cli0 := selfCPU()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		run()
	}
	wall := time.Since(start)
	b.StopTimer()
	srv1, _ := procCPU(pid)
	report(b, perOp*b.N, wall, selfCPU()-cli0, srv1-srv0)
}
