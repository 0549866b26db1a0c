package main

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/troupe-rl/troupe/sandbox"
)

func init() {
	register(&command{
		name:    "sandbox",
		args:    "run FILE [--stdin F] [--timeout D] [--memory M] [--lang L] [--require] [--isolation I]",
		summary: "run a program in the code sandbox and print the result as JSON",
		detail: `troupe sandbox run FILE runs FILE the way rollouts run model-written code:
in fresh Linux namespaces (no network, private file system, nothing outlives
the run) with limits on time, memory, processes, output and file size. The
language comes from the extension (.py python, .sh sh) or --lang.

It prints one JSON object: status (ok, exit, timeout, memory, output_limit,
signal, setup_error), exit_code, signal, stdout, stderr, wall_ns, cpu_ns,
max_rss_bytes, truncated, detail, isolation. The exit code is 0 whenever the
program was judged, whatever its status.

  troupe sandbox run solve.py --stdin case1.txt --timeout 2s --memory 256M`,
		run: runSandbox,
	})
}

// sandboxOutput is the JSON printed by `troupe sandbox run`.
type sandboxOutput struct {
	sandbox.Result
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
}

func runSandbox(ctx context.Context, env *cliEnv, args []string) error {
	c := commands["sandbox"]
	fs := newFlags(env, c)
	stdinPath := fs.String("stdin", "", "file to feed as standard input")
	timeout := fs.Duration("timeout", 5*time.Second, "wall-clock limit")
	memory := fs.String("memory", "512M", "address-space limit per process (e.g. 256M, 1G)")
	lang := fs.String("lang", "", "language (default: from FILE's extension)")
	require := fs.Bool("require", false, "fail unless namespace isolation is available")
	isolation := fs.String("isolation", "auto", "auto, namespaces or rlimits")
	pos, err := parseFlags(env, c, fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 || pos[0] != "run" {
		return usagef("want the subcommand run")
	}
	if len(pos) != 2 {
		return usagef("run wants exactly one FILE, got %d arguments", len(pos)-1)
	}
	file := pos[1]
	cfg := sandbox.DefaultConfig()
	cfg.Require, cfg.Isolation, cfg.Timeout = *require, *isolation, *timeout
	mem, err := sandbox.ParseBytes(*memory)
	if err != nil {
		return usagef("--memory: %v", err)
	}
	if mem < 16<<20 {
		return usagef("--memory: %s is below the 16M minimum", *memory)
	}
	cfg.MemoryMB = int((mem + 1<<20 - 1) >> 20)
	if err := cfg.Validate(); err != nil {
		return usagef("%v", err)
	}
	if *lang == "" {
		switch strings.ToLower(filepath.Ext(file)) {
		case ".py":
			*lang = "python"
		case ".sh":
			*lang = "sh"
		default:
			return usagef("cannot tell the language of %s: use --lang (%s)", file, strings.Join(sandbox.Languages(), ", "))
		}
	}
	src, err := os.ReadFile(file)
	if err != nil {
		return fileError(file, err)
	}
	var stdin []byte
	if *stdinPath != "" {
		if stdin, err = os.ReadFile(*stdinPath); err != nil {
			return fileError(*stdinPath, err)
		}
	}
	sb, err := sandbox.New(cfg, env.log)
	if err != nil {
		return err
	}
	defer sb.Close()
	res, err := sb.Run(ctx, sandbox.Program{Lang: *lang, Source: string(src), Stdin: stdin}, sandbox.Limits{})
	if errors.Is(err, sandbox.ErrUnknownLanguage) {
		return usagef("%v", err)
	}
	if err != nil {
		return err
	}
	enc := json.NewEncoder(env.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(sandboxOutput{Result: res, Stdout: string(res.Stdout), Stderr: string(res.Stderr)})
}

// inputError is a missing or unreadable input file (exit code 2).
type inputError struct{ err error }

func (e *inputError) Error() string  { return e.err.Error() }
func (e *inputError) Unwrap() error  { return e.err }
func (e *inputError) BadInput() bool { return true }

func fileError(name string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return &inputError{err: errors.New(name + ": no such file")}
	}
	return &inputError{err: err}
}
