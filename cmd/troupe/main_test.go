package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
)

// runCLI runs troupe in-process with args and returns its output and exit code.
func runCLI(args ...string) (stdout, stderr string, code int) {
	var o, e bytes.Buffer
	env := &cliEnv{stdout: &o, stderr: &e, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	code = runMain(context.Background(), env, args)
	return o.String(), e.String(), code
}
