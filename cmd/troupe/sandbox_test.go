package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSandboxRun(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "add.py")
	os.WriteFile(prog, []byte("a, b = map(int, input().split())\nprint(a + b)\n"), 0o644)
	in := filepath.Join(dir, "in.txt")
	os.WriteFile(in, []byte("2 3\n"), 0o644)
	loop := filepath.Join(dir, "loop.py")
	os.WriteFile(loop, []byte("while True: pass\n"), 0o644)

	out, errs, code := runCLI("sandbox", "run", prog, "--stdin", in, "--timeout", "3s", "--memory", "256M")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res struct {
		Status    string `json:"status"`
		Stdout    string `json:"stdout"`
		Stderr    string `json:"stderr"`
		ExitCode  int    `json:"exit_code"`
		WallNS    int64  `json:"wall_ns"`
		Isolation string `json:"isolation"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Status != "ok" || res.Stdout != "5\n" || res.WallNS <= 0 || res.Isolation == "" {
		t.Fatalf("%+v", res)
	}
	// The sandbox starts this executable as its helper: whatever the init
	// functions linked into it log must not reach the program's stderr,
	// which tool agents' turns show to the model.
	if res.Stderr != "" {
		t.Fatalf("a silent program's stderr: %q", res.Stderr)
	}

	out, _, code = runCLI("sandbox", "run", loop, "--timeout", "300ms")
	if code != 0 || !strings.Contains(out, `"status": "timeout"`) {
		t.Fatalf("loop: exit %d: %s", code, out)
	}

	for _, args := range [][]string{
		{"sandbox"},
		{"sandbox", "run"},
		{"sandbox", "exec", prog},
		{"sandbox", "run", filepath.Join(dir, "missing.py")},
		{"sandbox", "run", prog, "--stdin", filepath.Join(dir, "missing.txt")},
		{"sandbox", "run", prog, "--timeout", "soon"},
		{"sandbox", "run", prog, "--memory", "lots"},
		{"sandbox", "run", prog, "--memory", "1M"},
		{"sandbox", "run", prog, "--isolation", "chroot"},
		{"sandbox", "run", in},
		{"sandbox", "run", prog, "--lang", "cobol"},
		{"sandbox", "run", prog, "--bogus"},
	} {
		if _, errs, code := runCLI(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errs)
		}
	}
	if out, _, code := runCLI("sandbox", "--help"); code != 0 || !strings.Contains(out, "--memory") {
		t.Errorf("help: %d %s", code, out)
	}
}
