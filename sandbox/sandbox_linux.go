package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Sandbox is the Linux Runner. Build it with New; it is safe for concurrent
// use and runs at most Config.Workers programs at once.
type Sandbox struct {
	cfg      Config
	log      *slog.Logger
	defaults Limits
	sem      chan struct{}

	ns       bool   // namespace mode
	python   string // resolved interpreter, "" when none was found
	pyErr    error
	pyWant   string // Config.Python
	binds    []hostBind
	symlinks [][2]string
	stage    string // where the helper builds the new root (see pickStage)
	root     bool   // troupe runs as root
	uids     *uidPool
	id       uint64 // distinguishes this Sandbox's run markers from others'
}

// sandboxSeq and runSeq number Sandboxes and runs within the process: a
// run's marker is "pid-sandbox-run".
var sandboxSeq, runSeq atomic.Uint64

// hostBind is a host path bound read-only into every sandbox.
type hostBind struct {
	source string
	target string
	dir    bool
	dev    bool
}

const (
	nsHostID      = 65534 // host uid/gid of sandboxed processes when troupe is root
	fallbackUID0  = 1900000
	fallbackUIDs  = 4096
	markerEnv     = "TROUPE_SANDBOX_RUN"
	isolationNS   = "namespaces"
	isolationRlim = "rlimits"
)

// New builds a Sandbox from cfg (validated here; defaults are not filled:
// start from DefaultConfig or a loaded config). It resolves the python
// interpreter and probes whether namespace isolation works on this machine;
// see the package doc for what happens when it does not.
func New(cfg Config, logger *slog.Logger) (*Sandbox, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sandbox: config: %w", err)
	}
	if logger == nil {
		logger = slog.Default()
	}
	s := &Sandbox{
		cfg:      cfg,
		log:      logger,
		defaults: cfg.Limits(),
		sem:      make(chan struct{}, cfg.Workers),
		root:     os.Geteuid() == 0,
		id:       sandboxSeq.Add(1),
	}
	s.python, s.pyErr = resolvePython(cfg.Python)
	s.pyWant = cfg.Python
	if s.pyErr != nil {
		logger.Warn("sandbox: no python interpreter; python programs will fail with setup_error", "err", s.pyErr)
	}
	if cfg.Isolation == "rlimits" {
		s.initFallback()
		logger.Info("sandbox: namespace isolation disabled by config (isolation: rlimits); using rlimits and session kill")
		return s, nil
	}
	if err := s.initNamespaces(); err != nil {
		s.closeBinds()
		if cfg.Require || cfg.Isolation == "namespaces" {
			return nil, errorf("namespace isolation required but unavailable: %w", err)
		}
		s.initFallback()
		logger.Warn("sandbox: namespace isolation unavailable; falling back to rlimits and session kill (no filesystem or network isolation)", "err", err)
		return s, nil
	}
	logger.Debug("sandbox: namespace isolation enabled", "python", s.python)
	return s, nil
}

// markerPrefix starts the marker value of every run of s.
func (s *Sandbox) markerPrefix() string {
	return fmt.Sprintf("%d-%d-", os.Getpid(), s.id)
}

// Isolation names the mechanism runs get: "namespaces" or "rlimits".
func (s *Sandbox) Isolation() string {
	if s.ns {
		return isolationNS
	}
	return isolationRlim
}

// Python returns the resolved python interpreter.
func (s *Sandbox) Python() string { return s.python }

// Close releases what the sandbox holds (today only its bind list; kept so
// that callers defer it). Runs must have finished.
func (s *Sandbox) Close() error {
	s.closeBinds()
	return nil
}

func (s *Sandbox) closeBinds() {
	s.binds = nil
	s.symlinks = nil
}

func (s *Sandbox) initFallback() {
	s.ns = false
	if s.root {
		s.uids = newUIDPool(fallbackUID0, fallbackUIDs)
		if s.python != "" && !worldExecutable(s.python) {
			s.log.Warn("sandbox: the fallback runs programs under private uids, which cannot execute this python; python programs will fail with setup_error (set sandbox.python to a world-executable interpreter)", "python", s.python)
		}
	}
}

// worldExecutable reports whether every directory on p's path is searchable
// and p executable by other users.
func worldExecutable(p string) bool {
	for q := p; ; q = filepath.Dir(q) {
		fi, err := os.Stat(q)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if q == "/" {
			return true
		}
	}
}

// pythonInfo is what resolvePython learns about an interpreter.
type pythonInfo struct {
	exe  string   // real executable
	dirs []string // directories it needs: prefixes and the executable's
	err  error
}

var pythonCache sync.Map // "python3" or a configured path → *pythonInfo

// resolvePython finds the real python3 executable: pyenv shims and
// wrappers are shell scripts that cost tens of milliseconds per start and
// need files outside the sandbox. Answers are cached per process.
func resolvePython(want string) (string, error) {
	pi := lookupPython(want)
	return pi.exe, pi.err
}

// pythonDirs returns the directories the interpreter needs.
func pythonDirs(want string) []string { return lookupPython(want).dirs }

func lookupPython(want string) *pythonInfo {
	if want == "" {
		want = "python3"
	}
	if v, ok := pythonCache.Load(want); ok {
		return v.(*pythonInfo)
	}
	pi := &pythonInfo{}
	if p, err := exec.LookPath(want); err != nil {
		pi.err = errorf("python: %w", err)
	} else if out, err := exec.Command(p, "-c", "import os, sys\nfor p in (sys.executable, sys.prefix, sys.base_prefix): print(os.path.realpath(p))").Output(); err != nil {
		pi.err = errorf("python: ask %s for sys.executable: %w", p, err)
	} else if f := strings.Split(strings.TrimSpace(string(out)), "\n"); len(f) != 3 || !filepath.IsAbs(f[0]) {
		pi.err = errorf("python: %s reports %q", p, out)
	} else {
		pi.exe = f[0]
		pi.dirs = []string{f[1], f[2], filepath.Dir(f[0])}
	}
	v, _ := pythonCache.LoadOrStore(want, pi)
	return v.(*pythonInfo)
}

// initNamespaces opens the host paths to bind and probes a full setup.
func (s *Sandbox) initNamespaces() error {
	paths := []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime"}
	if s.python != "" {
		paths = append(paths, pythonDirs(s.pyWant)...)
	}
	seen := map[string]bool{}
	for _, p := range paths {
		p = filepath.Clean(p)
		if seen[p] || coveredBy(p, seen) {
			continue
		}
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		seen[p] = true
		if fi.Mode()&os.ModeSymlink != 0 {
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			s.symlinks = append(s.symlinks, [2]string{p, t})
			continue
		}
		if err := s.addBind(p, p, fi.IsDir(), false); err != nil {
			return err
		}
	}
	for _, d := range []string{"null", "zero", "full", "random", "urandom"} {
		if err := s.addBind("/dev/"+d, "/dev/"+d, false, true); err != nil {
			return err
		}
	}
	if s.stage = pickStage(s.binds); s.stage == "" {
		return errors.New("no directory to build the sandbox root on: every candidate holds a bind source")
	}
	s.ns = true
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	probe := s.defaults
	probe.Wall = 20 * time.Second
	res, err := s.exec(ctx, spec{Probe: true}, Program{}, probe, nil)
	if err != nil {
		s.ns = false
		return err
	}
	if res.Status != StatusOK {
		s.ns = false
		return fmt.Errorf("probe: %s: %s", res.Status, res.Detail)
	}
	return nil
}

// pickStage returns an existing host directory that no bind source lives
// under: the helper mounts the sandbox's root tmpfs over it (in its private
// mount namespace), which hides what was there.
func pickStage(binds []hostBind) string {
next:
	for _, d := range []string{"/tmp", "/mnt", "/run", "/var/tmp", "/opt", "/srv", "/media"} {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			continue
		}
		for _, b := range binds {
			if b.source == d || strings.HasPrefix(b.source, d+"/") {
				continue next
			}
		}
		return d
	}
	return ""
}

func coveredBy(p string, dirs map[string]bool) bool {
	for d := range dirs {
		if strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

func (s *Sandbox) addBind(src, target string, dir, dev bool) error {
	if _, err := os.Stat(src); err != nil {
		return err
	}
	s.binds = append(s.binds, hostBind{source: src, target: target, dir: dir, dev: dev})
	return nil
}

// Run runs p under l (zero fields take the config's limits). See Runner.
func (s *Sandbox) Run(ctx context.Context, p Program, l Limits) (Result, error) {
	lang, err := lookupLanguage(p.Lang)
	if err != nil {
		return Result{}, err
	}
	if err := checkFiles(p.Files, lang.file); err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, errorf("%w", err)
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return Result{}, errorf("%w", ctx.Err())
	}
	defer func() { <-s.sem }()

	l = l.withDefaults(s.defaults)
	interp := lang.interp
	if lang.python {
		if s.pyErr != nil {
			return Result{Status: StatusSetup, Detail: s.pyErr.Error(), ExitCode: -1, Isolation: s.Isolation()}, nil
		}
		interp = s.python
	}
	files := make(map[string][]byte, len(p.Files)+1)
	for k, v := range p.Files {
		files[path.Clean(k)] = v
	}
	files[lang.file] = []byte(p.Source)
	sp := spec{Path: interp, Argv: lang.argv(interp, lang.file), Files: files}
	res, err := s.exec(ctx, sp, p, l, lang)
	if err != nil {
		return res, err
	}
	if ctx.Err() != nil {
		return res, errorf("%w", ctx.Err())
	}
	return res, nil
}

// exec runs one helper with sp completed from s and l, and judges it.
func (s *Sandbox) exec(ctx context.Context, sp spec, p Program, l Limits, lang *language) (Result, error) {
	res := Result{Isolation: s.Isolation(), ExitCode: -1}
	id := fmt.Sprintf("%s%d", s.markerPrefix(), runSeq.Add(1))
	sp.Namespaces = s.ns
	sp.UID, sp.GID = -1, -1
	sp.DiskBytes = l.DiskBytes
	home := workDir
	cmd := &exec.Cmd{
		Path: "/proc/self/exe",
		Args: []string{"troupe-sandbox"},
		Env:  []string{helperEnv + "=1"},
	}
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.SysProcAttr = attr
	procs := uint64(l.Procs)
	runUID := -1
	if s.ns {
		attr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS |
			syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | unix.CLONE_NEWCGROUP
		if s.root {
			// The helper stays host root (without host capabilities) so that
			// it can reach bind sources such as /root/.pyenv; the program
			// runs as uid 1 inside, host nobody.
			attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}, {ContainerID: 1, HostID: nsHostID, Size: 1}}
			attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}, {ContainerID: 1, HostID: nsHostID, Size: 1}}
			attr.GidMappingsEnableSetgroups = true
			sp.UID, sp.GID = 1, 1
		} else {
			attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
			attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
			// One uid for helper and program: leave room for the helper's
			// threads.
			procs += 16
		}
		for _, b := range s.binds {
			sp.Binds = append(sp.Binds, bindSpec{Source: b.source, Target: b.target, Dir: b.dir, Dev: b.dev})
		}
		sp.Symlinks = s.symlinks
		sp.Stage = s.stage
	} else {
		attr.Setsid = true
		dir, err := s.fallbackDir(sp.Files)
		if err != nil {
			res.Status, res.Detail = StatusSetup, err.Error()
			return res, nil
		}
		defer removeAll(dir)
		sp.Dir, home, sp.Files = dir, dir, nil
		if s.root {
			runUID = s.uids.get()
			defer s.uids.put(runUID)
			if err := chownTree(dir, runUID); err != nil {
				res.Status, res.Detail = StatusSetup, err.Error()
				return res, nil
			}
			sp.UID, sp.GID = runUID, runUID
		} else {
			procs += uint64(countUserTasks(os.Getuid()))
		}
	}
	tmp := "/tmp"
	if !s.ns {
		tmp = home
	}
	sp.Env = []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + home,
		"TMPDIR=" + tmp,
		"LANG=C.UTF-8",
		"PYTHONDONTWRITEBYTECODE=1",
		markerEnv + "=" + id,
	}
	cpu := uint64(cpuLimit(l) / time.Second)
	sp.Rlimits = []rlimitSpec{
		{unix.RLIMIT_CORE, 0, 0},
		{unix.RLIMIT_NOFILE, 256, 256},
		{unix.RLIMIT_NPROC, procs, procs},
		// soft = hard: SIGKILL exactly at the limit (a PID 1 ignores SIGXCPU).
		{unix.RLIMIT_CPU, cpu, cpu},
		{unix.RLIMIT_FSIZE, uint64(l.FileBytes), uint64(l.FileBytes)},
		{unix.RLIMIT_AS, uint64(l.MemoryBytes), uint64(l.MemoryBytes)},
	}
	specData, err := json.Marshal(sp)
	if err != nil {
		return res, errorf("encode spec: %w", err)
	}

	// Pipes: spec and setup errors for the helper, stdio for the program.
	var closeLater []*os.File
	defer func() {
		for _, f := range closeLater {
			f.Close()
		}
	}()
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			closeLater = append(closeLater, r, w)
		}
		return
	}
	specR, specW, err1 := pipe()
	errR, errW, err2 := pipe()
	outR, outW, err3 := pipe()
	eR, eW, err4 := pipe()
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		res.Status, res.Detail = StatusSetup, err.Error()
		return res, nil
	}
	var stdinR, stdinW *os.File
	if len(p.Stdin) > 0 {
		stdinR, stdinW, err = pipe()
	} else {
		stdinR, err = os.Open(os.DevNull)
		if err == nil {
			closeLater = append(closeLater, stdinR)
		}
	}
	if err != nil {
		res.Status, res.Detail = StatusSetup, err.Error()
		return res, nil
	}
	// The helper's own stdio is /dev/null: it is a copy of this executable,
	// and the init functions of the packages linked into it (a PJRT plugin
	// search, for one) may log before the helper takes over. The program's
	// stdio travels on fds progFD.. and becomes 0-2 only at its execve.
	cmd.ExtraFiles = []*os.File{specR, errW, stdinR, outW, eW}

	start := time.Now()
	if err := cmd.Start(); err != nil {
		res.Status, res.Detail = StatusSetup, "start helper: "+err.Error()
		return res, nil
	}
	for _, f := range []*os.File{specR, errW, stdinR, outW, eW} {
		f.Close()
	}
	pid := cmd.Process.Pid
	var (
		why      atomic.Value // "timeout", "output", "cancel"
		killOnce sync.Once
	)
	kill := func(reason string) {
		killOnce.Do(func() {
			why.Store(reason)
			if !s.ns {
				syscall.Kill(-pid, syscall.SIGKILL)
			}
			cmd.Process.Kill()
		})
	}
	go func() {
		specW.Write(specData)
		specW.Close()
	}()
	if stdinW != nil {
		go func() {
			stdinW.Write(p.Stdin)
			stdinW.Close()
		}()
	}
	stdout := &capture{limit: l.OutputBytes, onFull: func() { kill("output") }}
	stderr := &capture{limit: l.OutputBytes, onFull: func() { kill("output") }}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); stdout.drain(outR) }()
	go func() { defer readers.Done(); stderr.drain(eR) }()
	timer := time.AfterFunc(l.Wall, func() { kill("timeout") })
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			kill("cancel")
		case <-done:
		}
	}()

	werr := cmd.Wait()
	res.Wall = time.Since(start)
	timer.Stop()
	close(done)
	if !s.ns {
		// Session members and escaped daemons.
		syscall.Kill(-pid, syscall.SIGKILL)
		if runUID >= 0 {
			killUID(runUID)
		} else {
			killMarked(markerEnv + "=" + id)
		}
		deadline := time.Now().Add(500 * time.Millisecond)
		outR.SetReadDeadline(deadline)
		eR.SetReadDeadline(deadline)
	}
	readers.Wait()
	var (
		setupMsg string
		relayed  *syscall.WaitStatus
	)
	msgs, _ := io.ReadAll(io.LimitReader(errR, 64<<10))
	for _, line := range bytes.Split(msgs, []byte("\n")) {
		var m helperMsg
		if len(line) == 0 || json.Unmarshal(line, &m) != nil {
			continue
		}
		if m.Error != "" && setupMsg == "" {
			setupMsg = m.Error
		}
		if m.Status != nil {
			ws := syscall.WaitStatus(m.Status.WaitStatus)
			relayed = &ws
			res.CPU = time.Duration(m.Status.CPU)
			res.MaxRSS = m.Status.MaxRSS
		}
	}

	res.Stdout, res.Stderr = stdout.buf.Bytes(), stderr.buf.Bytes()
	res.Truncated = stdout.full || stderr.full
	state := cmd.ProcessState
	if state == nil {
		res.Status, res.Detail = StatusSetup, fmt.Sprintf("wait: %v", werr)
		return res, nil
	}
	ws := state.Sys().(syscall.WaitStatus)
	if relayed != nil {
		ws = *relayed // the program's own status, relayed by the helper
	} else if ru, ok := state.SysUsage().(*syscall.Rusage); ok {
		// The helper was killed (timeout, output limit) or failed: its
		// usage includes the program only where it reaped it.
		res.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		res.MaxRSS = ru.Maxrss << 10
	}
	res.ExitCode = ws.ExitStatus()
	if ws.Signaled() {
		res.Signal = unix.SignalName(ws.Signal())
	}
	reason, _ := why.Load().(string)
	classify(&res, ws, reason, setupMsg, l, lang)
	return res, nil
}

// classify sets res.Status and res.Detail.
func classify(res *Result, ws syscall.WaitStatus, reason, setupMsg string, l Limits, lang *language) {
	switch {
	case reason == "output":
		res.Status = StatusOutputLimit
		res.Detail = fmt.Sprintf("output exceeded %d bytes", l.OutputBytes)
	case reason == "timeout":
		res.Status = StatusTimeout
		res.Detail = fmt.Sprintf("wall time limit %v exceeded", l.Wall)
	case reason == "cancel":
		res.Status = StatusSignal
		res.Detail = "cancelled"
	case setupMsg != "" || (ws.Exited() && ws.ExitStatus() == helperFailCode && setupMsg != ""):
		res.Status = StatusSetup
		res.Detail = setupMsg
	case ws.Signaled() && (ws.Signal() == syscall.SIGXCPU ||
		// A SIGKILL the runner did not send comes from RLIMIT_CPU (whose
		// accounting runs ahead of rusage's) or the kernel's OOM killer.
		(ws.Signal() == syscall.SIGKILL && res.CPU*5 >= cpuLimit(l)*4)):
		res.Status = StatusTimeout
		res.Detail = fmt.Sprintf("cpu time limit %v exceeded", cpuLimit(l))
	case ws.Exited() && ws.ExitStatus() == 0:
		res.Status = StatusOK
	case lang != nil && lang.memoryError(res.Stderr):
		res.Status = StatusMemory
		res.Detail = fmt.Sprintf("memory limit %d MiB exceeded", l.MemoryBytes>>20)
	case ws.Signaled():
		res.Status = StatusSignal
		res.Detail = "killed by " + res.Signal
		if ws.Signal() == syscall.SIGXFSZ {
			res.Detail += fmt.Sprintf(" (file size limit %d bytes)", l.FileBytes)
		}
	default:
		res.Status = StatusExit
		res.Detail = "exit status " + strconv.Itoa(ws.ExitStatus())
	}
}

// cpuLimit is the CPU time RLIMIT_CPU enforces for l (whole seconds).
func cpuLimit(l Limits) time.Duration {
	return (l.CPU + time.Second - 1) / time.Second * time.Second
}

// capture keeps up to limit bytes of a stream and discards the rest,
// calling onFull once when the limit is passed.
type capture struct {
	buf    bytes.Buffer
	limit  int64
	full   bool
	onFull func()
}

func (c *capture) drain(r io.Reader) {
	chunk := make([]byte, 32<<10)
	for {
		n, err := r.Read(chunk)
		if n > 0 && !c.full {
			room := c.limit - int64(c.buf.Len())
			if int64(n) > room {
				c.buf.Write(chunk[:room])
				c.full = true
				c.onFull()
			} else {
				c.buf.Write(chunk[:n])
			}
		}
		if err != nil {
			return
		}
	}
}

// fallbackDir writes the program's files into a fresh directory under the
// temp root.
func (s *Sandbox) fallbackDir(files map[string][]byte) (string, error) {
	root := s.cfg.TempRoot
	if root == "" {
		root = os.TempDir()
	}
	dir, err := os.MkdirTemp(root, "troupe-sandbox-")
	if err != nil {
		return "", errorf("work dir: %w", err)
	}
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			removeAll(dir)
			return "", errorf("work dir: %w", err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			removeAll(dir)
			return "", errorf("work dir: %w", err)
		}
	}
	return dir, nil
}

func chownTree(dir string, uid int) error {
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
}

// removeAll removes dir even where the program took write permission away
// from its own directories.
func removeAll(dir string) {
	if os.RemoveAll(dir) == nil {
		return
	}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	os.RemoveAll(dir)
}

// uidPool hands out private uids for fallback runs as root, least
// recently used first.
type uidPool struct {
	mu   sync.Mutex
	free []int
}

func newUIDPool(first, n int) *uidPool {
	p := &uidPool{}
	for i := n - 1; i >= 0; i-- {
		p.free = append(p.free, first+i)
	}
	return p
}

func (p *uidPool) get() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) == 0 {
		panic("sandbox: more concurrent runs than private uids")
	}
	u := p.free[0]
	p.free = p.free[1:]
	return u
}

func (p *uidPool) put(u int) {
	p.mu.Lock()
	p.free = append(p.free, u)
	p.mu.Unlock()
}

// procPIDs lists the numeric entries of /proc.
func procPIDs() []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	pids := make([]int, 0, len(names))
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procUID returns the real uid of pid and its thread count; ok is false for
// processes that are gone or zombies.
func procUID(pid int) (uid, threads int, ok bool) {
	uid, threads, zombie := procStatus(pid)
	return uid, threads, uid >= 0 && !zombie
}

// procStatus returns the real uid (-1 when gone), thread count and whether
// pid is a zombie.
func procStatus(pid int) (uid, threads int, zombie bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1, 0, false
	}
	uid = -1
	for _, line := range strings.Split(string(b), "\n") {
		if v, found := strings.CutPrefix(line, "Uid:"); found {
			if f := strings.Fields(v); len(f) > 0 {
				uid, _ = strconv.Atoi(f[0])
			}
		} else if v, found := strings.CutPrefix(line, "Threads:"); found {
			threads, _ = strconv.Atoi(strings.TrimSpace(v))
		} else if v, found := strings.CutPrefix(line, "State:"); found && strings.Contains(v, "Z") {
			zombie = true
		}
	}
	return uid, threads, zombie
}

// countUserTasks counts the threads of uid's processes (what RLIMIT_NPROC counts).
func countUserTasks(uid int) int {
	n := 0
	for _, pid := range procPIDs() {
		if u, t, ok := procUID(pid); ok && u == uid {
			n += t
		}
	}
	return n
}

// killUID SIGKILLs every process of uid until none is left alive. Their
// zombies, reaped by the host's init, still count towards the uid's
// RLIMIT_NPROC for a while: uidPool reuses uids least recently used first.
func killUID(uid int) {
	for range 100 {
		found := false
		for _, pid := range procPIDs() {
			if u, _, ok := procUID(pid); ok && u == uid {
				syscall.Kill(pid, syscall.SIGKILL)
				found = true
			}
		}
		if !found {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// killMarked SIGKILLs every process whose environment holds marker.
func killMarked(marker string) {
	m := []byte(marker + "\x00")
	for range 100 {
		found := false
		for _, pid := range procPIDs() {
			if pid == os.Getpid() {
				continue
			}
			env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
			if err == nil && bytes.Contains(env, m) {
				syscall.Kill(pid, syscall.SIGKILL)
				found = true
			}
		}
		if !found {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}
