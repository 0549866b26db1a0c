package envtest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-rl/troupe/sandbox"
)

// PythonRunner is a sandbox.Runner for tests: it runs python3 on the host
// with a wall-clock timeout and output caps, in a fresh temporary directory
// and its own process group (killed whole on timeout). It is NOT a sandbox —
// no memory, file or network isolation — and must never run model output
// outside tests. It is safe for concurrent use.
type PythonRunner struct {
	// Python is the interpreter (default "python3").
	Python string
}

var _ sandbox.Runner = PythonRunner{}

// NewPythonRunner returns a PythonRunner for the real interpreter behind
// python3 (skipping version-manager shims, which cost a shell start per run).
// It skips t when python3 is missing.
func NewPythonRunner(t testing.TB) PythonRunner {
	t.Helper()
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Skipf("python3 not available: %v", err)
	}
	return PythonRunner{Python: strings.TrimSpace(string(out))}
}

type capWriter struct {
	buf   bytes.Buffer
	limit int64
	over  bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	if room := w.limit - int64(w.buf.Len()); int64(len(p)) > room {
		w.over = true
		if room > 0 {
			w.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return w.buf.Write(p)
}

// Run implements sandbox.Runner.
func (r PythonRunner) Run(ctx context.Context, p sandbox.Program, l sandbox.Limits) (sandbox.Result, error) {
	if err := ctx.Err(); err != nil {
		return sandbox.Result{}, err
	}
	if p.Lang != "python" {
		return sandbox.Result{Status: sandbox.StatusSetup, Detail: "unsupported language " + p.Lang}, nil
	}
	if l.Wall <= 0 {
		l.Wall = 10 * time.Second
	}
	if l.OutputBytes <= 0 {
		l.OutputBytes = 64 << 10
	}
	py := r.Python
	if py == "" {
		py = "python3"
	}
	dir, err := os.MkdirTemp("", "envtest-py-")
	if err != nil {
		return sandbox.Result{Status: sandbox.StatusSetup, Detail: err.Error()}, nil
	}
	defer os.RemoveAll(dir)
	for name, data := range p.Files {
		if !filepath.IsLocal(name) {
			return sandbox.Result{Status: sandbox.StatusSetup, Detail: "file name not local: " + name}, nil
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return sandbox.Result{Status: sandbox.StatusSetup, Detail: err.Error()}, nil
		}
	}
	// -c keeps tracebacks free of the temporary path (deterministic output);
	// long programs go through a file (the kernel caps one argument at 128 KiB).
	args := []string{"-I", "-B", "-c", p.Source}
	if len(p.Source) > 64<<10 || strings.IndexByte(p.Source, 0) >= 0 {
		if err := os.WriteFile(filepath.Join(dir, "main.py"), []byte(p.Source), 0o600); err != nil {
			return sandbox.Result{Status: sandbox.StatusSetup, Detail: err.Error()}, nil
		}
		args = []string{"-I", "-B", "main.py"}
	}
	tctx, cancel := context.WithTimeout(ctx, l.Wall)
	defer cancel()
	cmd := exec.CommandContext(tctx, py, args...)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(p.Stdin)
	stdout := &capWriter{limit: l.OutputBytes}
	stderr := &capWriter{limit: l.OutputBytes}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	start := time.Now()
	err = cmd.Run()
	res := sandbox.Result{Stdout: stdout.buf.Bytes(), Stderr: stderr.buf.Bytes(), Wall: time.Since(start),
		Truncated: stdout.over || stderr.over}
	if ps := cmd.ProcessState; ps != nil {
		res.CPU = ps.UserTime() + ps.SystemTime()
		res.ExitCode = ps.ExitCode()
	}
	var ee *exec.ExitError
	switch {
	case tctx.Err() != nil && ctx.Err() == nil:
		res.Status, res.Detail = sandbox.StatusTimeout, "wall-clock limit "+l.Wall.String()
	case ctx.Err() != nil:
		return res, ctx.Err()
	case res.Truncated:
		res.Status = sandbox.StatusOutputLimit
	case err == nil:
		res.Status = sandbox.StatusOK
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Status, res.Signal = sandbox.StatusSignal, ws.Signal().String()
		} else {
			res.Status = sandbox.StatusExit
		}
	default:
		res.Status, res.Detail = sandbox.StatusSetup, err.Error()
	}
	return res, nil
}
