package sandbox

// The init helper. The runner starts its own executable (/proc/self/exe) with
// helperEnv=1, inside fresh namespaces (namespace mode) or a fresh session
// (rlimit fallback). This file's init function notices the variable before
// main runs, reads a spec from fd 3, prepares the file system and starts the
// executable once more with helperEnv=2 ("stage 2") under the program's uid,
// without capabilities or new privileges. Stage 2 sets the rlimits on itself
// — RLIMIT_AS cannot be set on a Go process that keeps running — and
// execve's the program. The helper stays PID 1 of the namespace: it reaps
// orphans, lets the program have ordinary signal semantics (a PID 1 ignores
// default-action signals), and reports the program's wait status on fd 4.
// Setup failures are reported on fd 4 too, as JSON lines (helperMsg).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	helperEnv      = "TROUPE_SANDBOX_HELPER"
	helperFailCode = 127
	specFD         = 3
	errFD          = 4
	// progFD, progFD+1 and progFD+2 are the program's stdin, stdout and
	// stderr until stage 2 moves them to 0-2 just before execve; the
	// helpers' own 0-2 are /dev/null.
	progFD = 5
	// sandbox-side paths
	workDir = "/work"
)

// spec is what the parent tells the helper, as JSON on fd 3.
type spec struct {
	Namespaces bool              `json:"ns"`
	Stage      string            `json:"stage,omitempty"` // host directory to build the new root on
	Probe      bool              `json:"probe,omitempty"` // set everything up, then exit 0
	Path       string            `json:"path"`            // executable to execve
	Argv       []string          `json:"argv"`
	Env        []string          `json:"env"`
	Dir        string            `json:"dir,omitempty"` // fallback: host working directory
	Files      map[string][]byte `json:"files,omitempty"`
	Binds      []bindSpec        `json:"binds,omitempty"`
	Symlinks   [][2]string       `json:"symlinks,omitempty"` // {target path in sandbox, link text}
	Rlimits    []rlimitSpec      `json:"rlimits"`
	DiskBytes  int64             `json:"disk"`
	// UID and GID, when ≥ 0, are the identity the program runs as: a private
	// host uid in the fallback as root, uid 1 inside the namespace (host
	// nobody) in namespace mode as root. -1 keeps the helper's.
	UID int `json:"uid"`
	GID int `json:"gid"`
}

type bindSpec struct {
	Source string `json:"source"` // host path
	Target string `json:"target"` // absolute path inside the sandbox
	Dir    bool   `json:"dir"`
	Dev    bool   `json:"dev,omitempty"` // device node: keep writable, no nodev
}

type rlimitSpec struct {
	Resource int    `json:"r"`
	Cur      uint64 `json:"cur"`
	Max      uint64 `json:"max"`
}

// stage2 is what the helper tells the process that becomes the program,
// in the stage2Env variable.
type stage2 struct {
	Path    string       `json:"path"`
	Argv    []string     `json:"argv"`
	Env     []string     `json:"env"`
	Rlimits []rlimitSpec `json:"rlimits"`
}

// helperMsg is one JSON line the helper or stage 2 writes on fd 4.
type helperMsg struct {
	Error  string `json:"error,omitempty"` // setup failed
	Status *struct {
		WaitStatus uint32 `json:"ws"`
		CPU        int64  `json:"cpu_ns"`
		MaxRSS     int64  `json:"maxrss"`
	} `json:"status,omitempty"` // how the program ended
}

const stage2Env = "TROUPE_SANDBOX_EXEC"

func init() {
	stage := os.Getenv(helperEnv)
	if stage != "1" && stage != "2" {
		return
	}
	// Credentials are per thread: the thread that trimmed them must be the
	// one that forks or execve's.
	runtime.LockOSThread()
	debug.SetGCPercent(-1)
	var err error
	if stage == "1" {
		err = helperMain()
	} else {
		err = stage2Main()
	}
	if err != nil {
		writeMsg(helperMsg{Error: err.Error()})
		os.Exit(helperFailCode)
	}
	os.Exit(0)
}

func writeMsg(m helperMsg) {
	b, _ := json.Marshal(m)
	unix.Write(errFD, append(b, '\n'))
}

// helperMain is the init helper: PID 1 of the sandbox in namespace mode, a
// session leader and child subreaper in the fallback. It prepares the file
// system, starts stage 2 (which sets the rlimits and execve's the program),
// reaps every process that is reparented to it, and reports the program's
// wait status and CPU time on fd 4 when the program exits. Its own exit then
// ends the run: in namespace mode the kernel kills everything left in the
// PID namespace.
func helperMain() error {
	syscall.CloseOnExec(errFD)
	f := os.NewFile(specFD, "spec")
	data, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("read spec: %w", err)
	}
	var s spec
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("decode spec: %w", err)
	}
	if s.Namespaces {
		if err := setupMounts(&s); err != nil {
			return err
		}
		if err := unix.Sethostname([]byte("sandbox")); err != nil {
			return fmt.Errorf("sethostname: %w", err)
		}
		if err := unix.Setdomainname([]byte("sandbox")); err != nil {
			return fmt.Errorf("setdomainname: %w", err)
		}
	} else {
		if err := os.Chdir(s.Dir); err != nil {
			return fmt.Errorf("chdir: %w", err)
		}
		// Orphans (double-forked daemons) are reparented to us, not to the
		// host's init, so that we can kill them.
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("subreaper: %w", err)
		}
	}
	if s.Probe {
		return nil
	}
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	st, err := json.Marshal(stage2{Path: s.Path, Argv: s.Argv, Env: s.Env, Rlimits: s.Rlimits})
	if err != nil {
		return err
	}
	// Inherited by stage 2 through fork: no new privileges, and (in the
	// namespace) no capabilities on execve even as uid 0.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if s.Namespaces {
		if err := dropBoundingCaps(); err != nil {
			return err
		}
	}
	sys := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if s.UID >= 0 {
		sys.Credential = &syscall.Credential{Uid: uint32(s.UID), Gid: uint32(s.GID), Groups: []uint32{}}
	}
	pid, err := syscall.ForkExec("/proc/self/exe", []string{"troupe-sandbox-exec"}, &syscall.ProcAttr{
		Dir:   cwd,
		Env:   []string{helperEnv + "=2", stage2Env + "=" + string(st)},
		Files: []uintptr{0, 1, 2, ^uintptr(0), errFD, progFD, progFD + 1, progFD + 2},
		Sys:   sys,
	})
	if err != nil {
		return fmt.Errorf("start stage 2: %w", err)
	}
	// Close our copies of the program's stdio: EOF reaches the runner when
	// the program's side closes.
	for fd := progFD; fd <= progFD+2; fd++ {
		unix.Close(fd)
	}
	var ws syscall.WaitStatus
	for {
		wpid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("wait: %w", err)
		}
		if wpid == pid {
			break
		}
	}
	if !s.Namespaces {
		killDescendants()
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	m := helperMsg{}
	m.Status = &struct {
		WaitStatus uint32 `json:"ws"`
		CPU        int64  `json:"cpu_ns"`
		MaxRSS     int64  `json:"maxrss"`
	}{uint32(ws), ru.Utime.Nano() + ru.Stime.Nano(), ru.Maxrss << 10}
	writeMsg(m)
	return nil
}

// killDescendants (fallback mode) SIGKILLs and reaps our remaining
// children, including orphans reparented to us, until none is left.
func killDescendants() {
	me := strconv.Itoa(os.Getpid())
	for range 500 {
		d, err := os.Open("/proc")
		if err != nil {
			return
		}
		names, _ := d.Readdirnames(-1)
		d.Close()
		for _, n := range names {
			b, err := os.ReadFile("/proc/" + n + "/stat")
			if err != nil {
				continue
			}
			if i := bytes.LastIndexByte(b, ')'); i > 0 {
				if f := strings.Fields(string(b[i+1:])); len(f) > 1 && f[1] == me {
					if pid, err := strconv.Atoi(n); err == nil {
						unix.Kill(pid, unix.SIGKILL)
					}
				}
			}
		}
		for {
			var ws syscall.WaitStatus
			wpid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if err == syscall.ECHILD {
				return
			}
			if err != nil && err != syscall.EINTR || wpid == 0 {
				break
			}
		}
		time.Sleep(time.Millisecond)
	}
}

// stage2Main runs in the child of the helper, already with the program's
// uid, no_new_privs and no capabilities: it sets the rlimits and execve's
// the program. RLIMIT_AS goes last, just before execve; nothing in between
// allocates.
func stage2Main() error {
	syscall.CloseOnExec(errFD)
	var st stage2
	if err := json.Unmarshal([]byte(os.Getenv(stage2Env)), &st); err != nil {
		return fmt.Errorf("decode stage 2: %w", err)
	}
	argv, err := syscall.SlicePtrFromStrings(st.Argv)
	if err != nil {
		return err
	}
	envv, err := syscall.SlicePtrFromStrings(st.Env)
	if err != nil {
		return err
	}
	path, err := syscall.BytePtrFromString(st.Path)
	if err != nil {
		return err
	}
	for _, rl := range st.Rlimits {
		lim := unix.Rlimit{Cur: rl.Cur, Max: rl.Max}
		if err := unix.Prlimit(0, rl.Resource, &lim, nil); err != nil {
			return fmt.Errorf("setrlimit %d: %w", rl.Resource, err)
		}
	}
	for fd := range 3 {
		if err := unix.Dup3(progFD+fd, fd, 0); err != nil {
			return fmt.Errorf("stdio: %w", err)
		}
		unix.Close(progFD + fd)
	}
	_, _, e := unix.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(path)), uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])))
	return fmt.Errorf("execve %s: %w", st.Path, e)
}

// dropBoundingCaps leaves this thread no way to regain capabilities: the
// bounding and ambient sets are emptied and securebits stop root from
// getting capabilities on execve. The caller then clears its own sets
// (setuid to non-root does, capset does for root).
func dropBoundingCaps() error {
	last := 63
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(string(trimSpace(b))); err == nil {
			last = n
		}
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop bounding capability %d: %w", c, err)
		}
	}
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	// linux/securebits.h: NOROOT, NO_SETUID_FIXUP, KEEP_CAPS,
	// NO_CAP_AMBIENT_RAISE — each with its lock bit (KEEP_CAPS itself off).
	const (
		secbitNoroot                  = 1 << 0
		secbitNorootLocked            = 1 << 1
		secbitNoSetuidFixupLocked     = 1 << 3
		secbitKeepCapsLocked          = 1 << 5
		secbitNoCapAmbientRaise       = 1 << 6
		secbitNoCapAmbientRaiseLocked = 1 << 7
		bits                          = secbitNoroot | secbitNorootLocked | secbitNoSetuidFixupLocked |
			secbitKeepCapsLocked | secbitNoCapAmbientRaise | secbitNoCapAmbientRaiseLocked
	)
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, bits, 0, 0, 0); err != nil {
		return fmt.Errorf("securebits: %w", err)
	}
	return nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

// setupMounts builds the sandbox's root file system on a tmpfs and pivots
// into it: read-only binds of the host paths the interpreter needs, a fresh
// /proc for the new PID namespace, a minimal /dev and /etc, and writable
// size-limited tmpfs mounts at /work (the program's files) and /tmp.
func setupMounts(s *spec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	root := s.Stage // an existing directory no bind source lives under
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=4m,nr_inodes=4096"); err != nil {
		return fmt.Errorf("mount root tmpfs: %w", err)
	}
	for _, b := range s.Binds {
		dst := filepath.Join(root, b.Target)
		if err := makeMountPoint(dst, b.Dir); err != nil {
			return err
		}
		if err := unix.Mount(b.Source, dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s: %w", b.Target, err)
		}
		if b.Dev {
			continue
		}
		if err := remountReadOnly(dst); err != nil {
			return fmt.Errorf("read-only %s: %w", b.Target, err)
		}
	}
	for _, l := range s.Symlinks {
		dst := filepath.Join(root, l[0])
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(l[1], dst); err != nil {
			return fmt.Errorf("symlink %s: %w", l[0], err)
		}
	}
	etc := map[string]string{
		"etc/passwd":   "root:x:0:0:root:/root:/bin/sh\nsandbox:x:1:1:sandbox:/work:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"etc/group":    "root:x:0:\nsandbox:x:1:\nnogroup:x:65534:\n",
		"etc/hostname": "sandbox\n",
		"etc/hosts":    "127.0.0.1 localhost sandbox\n",
	}
	for name, text := range etc {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			return err
		}
	}
	for _, d := range []string{"dev/shm", "proc", "work", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	for _, l := range [][2]string{{"dev/fd", "/proc/self/fd"}, {"dev/stdin", "/proc/self/fd/0"}, {"dev/stdout", "/proc/self/fd/1"}, {"dev/stderr", "/proc/self/fd/2"}} {
		if err := os.Symlink(l[1], filepath.Join(root, l[0])); err != nil {
			return err
		}
	}
	size := s.DiskBytes
	if size <= 0 {
		size = 64 << 20
	}
	for _, d := range []string{"work", "tmp", "dev/shm"} {
		opts := fmt.Sprintf("mode=%s,size=%d,nr_inodes=16384", map[bool]string{true: "1777", false: "0755"}[d != "work"], size)
		if d == "work" && s.UID >= 0 {
			opts += fmt.Sprintf(",uid=%d,gid=%d", s.UID, s.GID)
		}
		if err := unix.Mount("tmpfs", filepath.Join(root, d), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("mount /%s: %w", d, err)
		}
	}
	for name, data := range s.Files {
		p := filepath.Join(root, workDir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		if s.UID >= 0 {
			for q := p; q != filepath.Join(root, workDir); q = filepath.Dir(q) {
				if err := os.Lchown(q, s.UID, s.GID); err != nil {
					return err
				}
			}
		}
	}
	if err := unix.Mount("proc", filepath.Join(root, "proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	old := filepath.Join(root, ".old")
	if err := os.Mkdir(old, 0o700); err != nil {
		return err
	}
	if err := unix.PivotRoot(root, old); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Unmount("/.old", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	if err := os.Remove("/.old"); err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("remount / read-only: %w", err)
	}
	return os.Chdir(workDir)
}

func makeMountPoint(p string, dir bool) error {
	if dir {
		return os.MkdirAll(p, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// remountReadOnly makes the bind mount at p read-only, keeping the flags the
// kernel locks for mounts inherited into a user namespace.
func remountReadOnly(p string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return err
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV)
	for _, m := range [][2]int64{
		{unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME},
		{unix.ST_NODIRATIME, unix.MS_NODIRATIME},
		{unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if st.Flags&m[0] != 0 {
			flags |= uintptr(m[1])
		}
	}
	return unix.Mount("", p, "", flags, "")
}
