package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"testing"
)

// runCLI runs troupe in-process with args and returns its output and exit code.
func runCLI(args ...string) (stdout, stderr string, code int) {
	var o, e bytes.Buffer
	env := &cliEnv{stdout: &o, stderr: &e, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	code = runMain(context.Background(), env, args)
	return o.String(), e.String(), code
}

// TestMain lets tests run the test binary as the troupe command (with
// TROUPE_TEST_AS_MAIN=1), for subprocess tests such as SIGKILL mid-run.
func TestMain(m *testing.M) {
	if os.Getenv("TROUPE_TEST_AS_MAIN") == "1" {
		os.Args = append([]string{"troupe"}, os.Args[1:]...)
		main()
		return
	}
	os.Exit(m.Run())
}

// troupeCmd returns a command running this test binary as troupe.
func troupeCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "TROUPE_TEST_AS_MAIN=1")
	return cmd
}
