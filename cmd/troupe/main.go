// Command troupe trains teams of LLM agents with AT-GRPO: it runs rollouts
// against an OpenAI-compatible server, stores every LLM call in Parquet
// trajectory shards, trains LoRA adapters from them and hot-swaps the
// adapters back into the server.
//
// Each subcommand lives in its own file and registers itself in init.
// Exit codes: 0 ok, 2 bad input (config, flags, files — the message names the
// file, key or line), 1 anything else.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// command is one subcommand. run gets the arguments after the subcommand's
// name; it returns a usageError (exit 2) for bad flags.
type command struct {
	name    string
	args    string // synopsis of the arguments, e.g. "CONFIG [key=value ...]"
	summary string // one line for `troupe help`
	detail  string // paragraphs for `troupe NAME --help`
	run     func(ctx context.Context, env *cliEnv, args []string) error
}

// cliEnv carries the process's streams so that tests can run commands
// in-process.
type cliEnv struct {
	stdout, stderr io.Writer
	log            *slog.Logger
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("troupe: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

// usageError is a bad command line; it maps to exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string  { return e.msg }
func (e *usageError) BadInput() bool { return true }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// badInput is implemented by every troupe error that blames the input
// (config.Error, trajectory's corrupt-file errors, …).
type badInput interface{ BadInput() bool }

// exitCode maps an error to the process exit code.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var bi badInput
	if errors.As(err, &bi) && bi.BadInput() {
		return 2
	}
	return 1
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env := &cliEnv{
		stdout: os.Stdout,
		stderr: os.Stderr,
		log:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel()})),
	}
	slog.SetDefault(env.log)
	os.Exit(runMain(ctx, env, os.Args[1:]))
}

func logLevel() slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(os.Getenv("TROUPE_LOG"))); err != nil {
		return slog.LevelInfo
	}
	return l
}

// runMain dispatches args and returns the exit code.
func runMain(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				printCommandHelp(env.stdout, c)
				return 0
			}
		}
		printHelp(env.stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(env.stderr, "troupe: unknown command %q (see `troupe help`)\n", args[0])
		return 2
	}
	err := c.run(ctx, env, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(env.stderr, "troupe %s: %v\nusage: troupe %s %s\n", c.name, err, c.name, c.args)
		} else {
			fmt.Fprintf(env.stderr, "troupe %s: %v\n", c.name, err)
		}
	}
	return exitCode(err)
}

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "troupe trains teams of LLM agents with AT-GRPO.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "usage: troupe COMMAND [arguments]")
	fmt.Fprintln(w)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "`troupe COMMAND --help` describes a command. Exit codes: 0 ok, 2 bad input, 1 other errors.")
}

func printCommandHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "usage: troupe %s %s\n\n%s\n", c.name, c.args, c.summary)
	if c.detail != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.detail))
	}
}

// newFlags returns a FlagSet for command c whose -help prints the command's
// help and whose errors are usage errors.
func newFlags(env *cliEnv, c *command) *flag.FlagSet {
	fs := flag.NewFlagSet("troupe "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args with fs, allowing flags after positional arguments
// (`troupe run cfg.yaml --print-config`). It returns the positional ones.
func parseFlags(env *cliEnv, c *command, fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printCommandHelp(env.stdout, c)
				fmt.Fprintln(env.stdout, "\nflags:")
				fs.SetOutput(env.stdout)
				fs.PrintDefaults()
				return nil, flag.ErrHelp
			}
			return nil, usagef("%v", err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
