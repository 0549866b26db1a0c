package sandbox

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunBasics(t *testing.T) {
	for _, iso := range []string{"namespaces", "rlimits"} {
		t.Run(iso, func(t *testing.T) {
			s := testSandbox(t, iso)
			tests := []struct {
				name   string
				p      Program
				status Status
				check  func(t *testing.T, r Result)
			}{
				{"hello", Program{Lang: "python", Source: "print('hello')"}, StatusOK, func(t *testing.T, r Result) {
					if string(r.Stdout) != "hello\n" || r.ExitCode != 0 || r.Wall <= 0 || r.CPU <= 0 {
						t.Errorf("%+v", r)
					}
				}},
				{"stdin and files", Program{Lang: "py", Source: "import sys\nprint(sys.stdin.read().strip(), open('data/x.txt').read())\nimport lib; print(lib.V)",
					Stdin: []byte("in\n"), Files: map[string][]byte{"data/x.txt": []byte("file"), "lib.py": []byte("V = 7")}}, StatusOK,
					func(t *testing.T, r Result) {
						if string(r.Stdout) != "in file\n7\n" {
							t.Errorf("stdout %q stderr %q", r.Stdout, r.Stderr)
						}
					}},
				{"large stdin", Program{Lang: "python", Source: "import sys\nprint(len(sys.stdin.read()))", Stdin: []byte(strings.Repeat("x", 1<<20))}, StatusOK,
					func(t *testing.T, r Result) {
						if string(r.Stdout) != "1048576\n" {
							t.Errorf("stdout %q", r.Stdout)
						}
					}},
				{"ignores stdin", Program{Lang: "python", Source: "print(1)", Stdin: []byte(strings.Repeat("x", 1<<20))}, StatusOK, nil},
				{"exit code", Program{Lang: "python", Source: "import sys\nsys.stderr.write('bad')\nsys.exit(3)"}, StatusExit, func(t *testing.T, r Result) {
					if r.ExitCode != 3 || string(r.Stderr) != "bad" {
						t.Errorf("%+v", r)
					}
				}},
				{"exception", Program{Lang: "python", Source: "1/0"}, StatusExit, func(t *testing.T, r Result) {
					if !strings.Contains(string(r.Stderr), "ZeroDivisionError") {
						t.Errorf("stderr %q", r.Stderr)
					}
				}},
				{"segfault", Program{Lang: "python", Source: "import ctypes\nctypes.string_at(0)"}, StatusSignal, func(t *testing.T, r Result) {
					if r.Signal != "SIGSEGV" {
						t.Errorf("signal %q", r.Signal)
					}
				}},
				{"kills itself", Program{Lang: "python", Source: "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\nprint('survived')"}, StatusSignal,
					func(t *testing.T, r Result) {
						if r.Signal != "SIGTERM" || len(r.Stdout) != 0 {
							t.Errorf("signal %q stdout %q", r.Signal, r.Stdout)
						}
					}},
				{"alarm", Program{Lang: "python", Source: "import signal, time\nsignal.alarm(1)\ntime.sleep(10)"}, StatusSignal,
					func(t *testing.T, r Result) {
						if r.Signal != "SIGALRM" {
							t.Errorf("signal %q", r.Signal)
						}
					}},
				{"abort", Program{Lang: "python", Source: "import os\nos.abort()"}, StatusSignal, func(t *testing.T, r Result) {
					if r.Signal != "SIGABRT" {
						t.Errorf("signal %q", r.Signal)
					}
				}},
				{"shell", Program{Lang: "sh", Source: "echo $((6*7))"}, StatusOK, func(t *testing.T, r Result) {
					if string(r.Stdout) != "42\n" {
						t.Errorf("stdout %q stderr %q", r.Stdout, r.Stderr)
					}
				}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					t.Parallel()
					r, err := s.Run(context.Background(), tt.p, Limits{Wall: 5 * time.Second})
					if err != nil {
						t.Fatal(err)
					}
					if r.Status != tt.status {
						t.Fatalf("status %s (%s), want %s; stderr %.300s", r.Status, r.Detail, tt.status, r.Stderr)
					}
					if tt.check != nil {
						tt.check(t, r)
					}
				})
			}
		})
	}
}

func TestRunErrors(t *testing.T) {
	s := testSandbox(t, "auto")
	ctx := context.Background()
	if _, err := s.Run(ctx, Program{Lang: "cobol"}, Limits{}); !errors.Is(err, ErrUnknownLanguage) {
		t.Errorf("unknown language: %v", err)
	}
	if _, err := s.Run(ctx, Program{Lang: "python", Files: map[string][]byte{"../x": nil}}, Limits{}); err == nil {
		t.Error("escaping file name accepted")
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Run(done, Program{Lang: "python", Source: "pass"}, Limits{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: %v", err)
	}
	// Cancelled mid-run: killed promptly, error says so.
	ctx2, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel2()
	start := time.Now()
	r, err := s.Run(ctx2, Program{Lang: "python", Source: "import time\ntime.sleep(30)"}, Limits{})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second || r.Status != StatusSignal {
		t.Errorf("mid-run cancel: %+v, %v after %v", r, err, time.Since(start))
	}
}

func TestRequire(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Require = true
	s, err := New(cfg, nil)
	if err != nil {
		t.Logf("no namespaces here, and require refused: %v", err)
		if !strings.HasPrefix(err.Error(), "sandbox: ") {
			t.Error(err)
		}
		return
	}
	defer s.Close()
	if s.Isolation() != isolationNS {
		t.Fatalf("require: true gave %s", s.Isolation())
	}
}

// countingRunner counts concurrent runs on top of a real Runner.
type countingRunner struct {
	r         Runner
	cur, peak atomic.Int32
}

func (c *countingRunner) Run(ctx context.Context, p Program, l Limits) (Result, error) {
	n := c.cur.Add(1)
	defer c.cur.Add(-1)
	for {
		old := c.peak.Load()
		if n <= old || c.peak.CompareAndSwap(old, n) {
			break
		}
	}
	return c.r.Run(ctx, p, l)
}

func TestRunCasesAndRunAll(t *testing.T) {
	s := testSandbox(t, "auto", func(c *Config) { c.Workers = 2 })
	p := Program{Lang: "python", Source: "a, b = map(int, input().split())\nprint(a + b)"}
	cases := []Case{{Stdin: "1 2", Want: "3"}, {Stdin: "2 2", Want: "4\n"}, {Stdin: "x y", Want: "?"}, {Stdin: "5 5", Want: "11"}}
	rep, err := RunCases(context.Background(), s, p, cases, CaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Verdict{VerdictPass, VerdictPass, Verdict(StatusExit), VerdictWrongAnswer}
	for i, c := range rep.Cases {
		if c.Verdict != want[i] {
			t.Errorf("case %d: %s, want %s (%s)", i, c.Verdict, want[i], c.Result.Stderr)
		}
	}
	if rep.Passed != 2 {
		t.Errorf("passed %d", rep.Passed)
	}

	cr := &countingRunner{r: s}
	jobs := make([]Job, 6)
	for i := range jobs {
		jobs[i] = Job{Program: Program{Lang: "python", Source: "import time\ntime.sleep(0.2)\nprint(" + string(rune('0'+i)) + ")"}}
	}
	out := RunAll(context.Background(), cr, jobs, 3)
	for i, o := range out {
		if o.Err != nil || strings.TrimSpace(string(o.Result.Stdout)) != string(rune('0'+i)) {
			t.Errorf("job %d: %+v %v", i, o.Result, o.Err)
		}
	}
	if p := cr.peak.Load(); p > 3 {
		t.Errorf("RunAll ran %d at once, bound 3", p)
	}
	if n := len(s.sem); n != 0 {
		t.Errorf("semaphore still holds %d", n)
	}
}
