package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testSandbox builds a sandbox in the given isolation mode, or skips when the
// machine cannot provide it.
func testSandbox(t testing.TB, isolation string, mut ...func(*Config)) *Sandbox {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Isolation = isolation
	// The fallback as root runs programs under private uids: the temp root
	// must be searchable by them (t.TempDir's parent is not).
	root, err := os.MkdirTemp("", "troupe-sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o711); err != nil {
		t.Fatal(err)
	}
	cfg.TempRoot = root
	cfg.Workers = 4
	// TROUPE_SANDBOX_TEST_PYTHON picks the interpreter, e.g. to run the
	// tests as an unprivileged user who cannot reach root's pyenv.
	cfg.Python = os.Getenv("TROUPE_SANDBOX_TEST_PYTHON")
	for _, m := range mut {
		m(&cfg)
	}
	if isolation == "rlimits" && os.Geteuid() == 0 && cfg.Python == "" {
		// As root the fallback runs programs under private uids, which need
		// an interpreter every user can execute (pyenv under /root is not).
		if exe, err := resolvePython(""); err != nil || !worldExecutable(exe) {
			if !worldExecutable("/usr/bin/python3") {
				t.Skipf("fallback as root needs a world-executable python3; %s is not", exe)
			}
			cfg.Python = "/usr/bin/python3"
		}
	}
	s, err := New(cfg, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	if err != nil {
		if isolation == "namespaces" {
			t.Skipf("namespace isolation unavailable on this machine: %v", err)
		}
		t.Fatal(err)
	}
	if s.pyErr != nil {
		t.Skipf("no python3: %v", s.pyErr)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// runLeftovers lists live processes that carry the run marker of s.
func runLeftovers(s *Sandbox) []int {
	prefix := []byte(markerEnv + "=" + s.markerPrefix())
	var pids []int
	for _, pid := range procPIDs() {
		env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err == nil && bytes.Contains(env, prefix) {
			if _, _, alive := procUID(pid); alive {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// childCount counts live processes whose parent is this test process.
func childCount() int {
	n := 0
	me := strconv.Itoa(os.Getpid())
	for _, pid := range procPIDs() {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[0] != "Z" && f[1] == me {
			n++
		}
	}
	return n
}

// sandboxUIDProcs counts live processes of the host uids sandboxed programs
// run as when troupe is root (65534 and the fallback's private range).
func sandboxUIDProcs() int {
	n := 0
	for _, pid := range procPIDs() {
		if u, _, ok := procUID(pid); ok && (u == nsHostID || u >= fallbackUID0 && u < fallbackUID0+fallbackUIDs) {
			n++
		}
	}
	return n
}

type hostileCase struct {
	name   string
	src    string
	limits Limits
	// want is the expected status per isolation mode ("" key: both).
	want map[string]Status
	// check inspects the result (may be nil); ns reports namespace mode.
	check func(t *testing.T, res Result, ns bool)
}

func TestHostile(t *testing.T) {
	for _, iso := range []string{"namespaces", "rlimits"} {
		t.Run(iso, func(t *testing.T) { hostileSuite(t, iso) })
	}
}

func hostileSuite(t *testing.T, iso string) {
	s := testSandbox(t, iso)
	// In the fallback as another user than root, programs run as that user:
	// its own files are theirs to read and write.
	sameUser := s.Isolation() == isolationRlim && s.uids == nil

	// Host secrets: a canary in $HOME and in a world-readable temp dir, and
	// a world-writable directory outside the sandbox.
	secret := fmt.Sprintf("troupe-canary-%d-%d", os.Getpid(), time.Now().UnixNano())
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	homeCanary := filepath.Join(home, ".troupe-sandbox-canary-"+strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(homeCanary, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(homeCanary) })
	open := t.TempDir()
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	tmpCanary := filepath.Join(open, "canary")
	if err := os.WriteFile(tmpCanary, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	hostPasswd, _ := os.ReadFile("/etc/passwd")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port

	// Cases that must time out get a short wall limit; the others a longer
	// one, so that a loaded machine does not turn their verdict into a
	// timeout (they finish early anyway).
	short := Limits{Wall: 1500 * time.Millisecond, MemoryBytes: 256 << 20, Procs: 32, OutputBytes: 64 << 10}
	long := short
	long.Wall = 5 * time.Second
	cases := []hostileCase{
		{name: "infinite loop", src: "while True:\n    pass\n", limits: short, want: map[string]Status{"": StatusTimeout}},
		{name: "cpu limit", src: "while True:\n    pass\n",
			limits: Limits{Wall: 8 * time.Second, CPU: time.Second, Procs: 32},
			want:   map[string]Status{"": StatusTimeout},
			check: func(t *testing.T, res Result, ns bool) {
				// On a machine so loaded that the loop got < 1 s of CPU in
				// 8 s, the wall limit rightly fires first.
				if !strings.Contains(res.Detail, "cpu") && res.CPU >= 900*time.Millisecond {
					t.Errorf("detail %q does not blame the CPU limit", res.Detail)
				}
			}},
		{name: "fork bomb", src: "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
			limits: short, want: map[string]Status{"": StatusTimeout}},
		{name: "memory bomb", src: "chunks = []\nwhile True:\n    chunks.append(b'x' * (32 << 20))\n",
			limits: long, want: map[string]Status{"": StatusMemory}},
		{name: "huge allocation", src: "x = bytearray(8 << 30)\n", limits: long, want: map[string]Status{"": StatusMemory}},
		{name: "1 GiB of output", src: "import sys\nb = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(b)\n",
			limits: long, want: map[string]Status{"": StatusOutputLimit},
			check: func(t *testing.T, res Result, ns bool) {
				if !res.Truncated || len(res.Stdout) != 64<<10 {
					t.Errorf("truncated=%v len(stdout)=%d, want true and %d", res.Truncated, len(res.Stdout), 64<<10)
				}
			}},
		{name: "write outside work dir", limits: long, want: map[string]Status{"": StatusOK},
			src: fmt.Sprintf(`import os
for p in ["/usr/troupe-escape", "/etc/troupe-escape", "/troupe-escape", %q, %q]:
    try:
        with open(p, "w") as f:
            f.write("x")
        print("WROTE", p)
    except OSError as e:
        print("blocked", p, e.errno)
`, filepath.Join(open, "escape"), filepath.Join(home, ".troupe-escape")),
			check: func(t *testing.T, res Result, ns bool) {
				for _, line := range strings.Split(string(res.Stdout), "\n") {
					if !strings.HasPrefix(line, "WROTE") {
						continue
					}
					if !ns && (strings.Contains(line, open) || sameUser && strings.Contains(line, home)) {
						t.Logf("fallback (expected, no filesystem isolation): %s", line)
						continue
					}
					t.Errorf("escaped: %s", line)
				}
				if _, err := os.Stat(filepath.Join(open, "escape")); err == nil && ns {
					t.Errorf("file appeared on the host")
				}
				os.Remove(filepath.Join(open, "escape"))
				os.Remove(filepath.Join(home, ".troupe-escape"))
			}},
		{name: "read host files", limits: long, want: map[string]Status{"": StatusOK},
			src: fmt.Sprintf(`for p in [%q, %q, "/etc/passwd", "/etc/shadow"]:
    try:
        print("READ", p, open(p).read().replace("\n", "|"))
    except OSError as e:
        print("blocked", p, e.errno)
`, homeCanary, tmpCanary),
			check: func(t *testing.T, res Result, ns bool) {
				out := string(res.Stdout)
				for _, line := range strings.Split(out, "\n") {
					if !strings.Contains(line, secret) {
						continue
					}
					if !ns && (strings.Contains(line, tmpCanary) || sameUser && strings.Contains(line, homeCanary)) {
						t.Logf("fallback (expected, no filesystem isolation): %s", line)
						continue
					}
					t.Errorf("host secret leaked: %s", line)
				}
				if strings.Contains(out, "READ /etc/shadow") {
					t.Errorf("/etc/shadow readable")
				}
				if ns && len(hostPasswd) > 0 {
					first := strings.SplitN(string(hostPasswd), "\n", 3)[1] // e.g. daemon:x:1:1:…
					if first != "" && strings.Contains(out, first) {
						t.Errorf("host /etc/passwd visible: %q", first)
					}
				}
			}},
		{name: "connect to host port", limits: long,
			want: map[string]Status{"": StatusOK},
			src: fmt.Sprintf(`import socket
s = socket.socket()
s.settimeout(1)
try:
    s.connect(("127.0.0.1", %d))
    print("CONNECTED")
except OSError as e:
    print("FAILED", e)
`, port),
			check: func(t *testing.T, res Result, ns bool) {
				connected := strings.Contains(string(res.Stdout), "CONNECTED")
				if ns && connected {
					t.Errorf("connected to the host's 127.0.0.1:%d", port)
				}
				if !ns && connected {
					t.Logf("fallback (expected, no network isolation): connected")
				}
			}},
		{name: "daemonised grandchild", limits: long, want: map[string]Status{"": StatusOK},
			src: `import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(60)
    os._exit(0)
time.sleep(0.1)
print("parent done")
`,
			check: func(t *testing.T, res Result, ns bool) {
				if res.Wall > 3*time.Second {
					t.Errorf("Run waited %v for the daemon", res.Wall)
				}
			}},
		{name: "child ignores SIGTERM", limits: short, want: map[string]Status{"": StatusTimeout},
			src: `import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
os.fork()
while True:
    time.sleep(1)
`},
		{name: "closes stdout early", limits: long, want: map[string]Status{"": StatusOK},
			src: "import os, sys, time\nprint('bye', flush=True)\nos.close(1)\ntime.sleep(0.3)\nsys.stderr.write('still here')\n",
			check: func(t *testing.T, res Result, ns bool) {
				if string(res.Stdout) != "bye\n" || string(res.Stderr) != "still here" {
					t.Errorf("stdout %q stderr %q", res.Stdout, res.Stderr)
				}
			}},
		{name: "privileges", limits: long, want: map[string]Status{"": StatusOK},
			src: `import os, socket
st = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines())
for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs"):
    print(k, st[k].strip())
print("hostname", socket.gethostname())
try:
    os.setuid(0)
    print("SETUID ok")
except OSError as e:
    print("setuid blocked", e.errno)
`,
			check: func(t *testing.T, res Result, ns bool) {
				out := string(res.Stdout)
				for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapAmb"} {
					if !strings.Contains(out, k+" 0000000000000000") {
						t.Errorf("%s not empty:\n%s", k, out)
					}
				}
				if !strings.Contains(out, "NoNewPrivs 1") {
					t.Errorf("no_new_privs not set:\n%s", out)
				}
				if ns && (!strings.Contains(out, "CapBnd 0000000000000000") || !strings.Contains(out, "hostname sandbox")) {
					t.Errorf("namespace mode: bounding set or hostname:\n%s", out)
				}
				if os.Geteuid() == 0 && strings.Contains(out, "SETUID ok") {
					t.Errorf("program could become root:\n%s", out)
				}
			}},
		{name: "big file", limits: Limits{Wall: 5 * time.Second, FileBytes: 1 << 20},
			want: map[string]Status{"": StatusExit},
			src:  "with open('big', 'wb') as f:\n    f.write(b'x' * (4 << 20))\n",
			check: func(t *testing.T, res Result, ns bool) {
				if !strings.Contains(string(res.Stderr), "File too large") {
					t.Errorf("stderr %q", res.Stderr)
				}
			}},
	}

	childrenBefore, sandboxUIDsBefore := childCount(), sandboxUIDProcs()
	t.Run("cases", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				if c.name == "fork bomb" && sameUser {
					t.Skip("fallback as a non-root user: RLIMIT_NPROC counts all of the user's processes, so a fork bomb would starve concurrent runs and the user's other programs; cannot hold without a private uid or a user namespace")
				}
				t.Parallel()
				start := time.Now()
				res, err := s.Run(context.Background(), Program{Lang: "python", Source: c.src}, c.limits)
				took := time.Since(start)
				if err != nil {
					t.Fatal(err)
				}
				want, ok := c.want[iso]
				if !ok {
					want = c.want[""]
				}
				if res.Status != want {
					t.Errorf("status %s (%s), want %s\nstdout: %.300s\nstderr: %.500s", res.Status, res.Detail, want, res.Stdout, res.Stderr)
				}
				if res.Isolation != iso {
					t.Errorf("isolation %q, want %q", res.Isolation, iso)
				}
				wall := c.limits.withDefaults(s.defaults).Wall
				if took > wall+time.Second {
					t.Errorf("Run took %v, limit %v + 1s", took, wall)
				}
				if c.check != nil {
					c.check(t, res, res.Isolation == isolationNS)
				}
				t.Logf("%s: %s in %v (cpu %v, rss %d MiB) %s", c.name, res.Status, took.Round(time.Millisecond), res.CPU, res.MaxRSS>>20, res.Detail)
			})
		}
	})
	// Nothing the programs started may still be alive, and no work
	// directory may remain.
	deadline := time.Now().Add(time.Second)
	for {
		left := runLeftovers(s)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("processes outlived their runs: %v", left)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := childCount(); n > childrenBefore {
		t.Errorf("%d child processes remain (had %d)", n, childrenBefore)
	}
	if n := sandboxUIDProcs(); n > sandboxUIDsBefore {
		t.Errorf("%d live processes of sandbox uids remain (had %d)", n, sandboxUIDsBefore)
	}
	ents, err := os.ReadDir(s.cfg.TempRoot)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Errorf("temp root not empty: %v", ents)
	}
}
