// Package sandbox runs model-written programs in isolation with limits on
// time, memory, processes, output and files.
//
// # Use
//
//	sb, err := sandbox.New(cfg.Sandbox, logger) // once; probes the machine
//	defer sb.Close()
//	res, err := sb.Run(ctx, sandbox.Program{Lang: "python", Source: src, Stdin: in}, sandbox.Limits{})
//	// err != nil only for caller mistakes (unknown language, bad file name, ctx done)
//	// res.Status says why the program stopped; res.Stdout/Stderr are capped.
//
// *Sandbox implements [Runner]; at most Config.Workers runs execute at once
// (further calls wait, honouring ctx). [RunCases] judges a program on
// stdin/stdout test cases; [RunAll] fans a batch out.
//
// # Security model
//
// Each run starts the current executable again (/proc/self/exe) as a small
// init helper; this package's init function recognises it before main runs
// (binaries that import sandbox must not do heavy work in init). In
// namespace mode (the default wherever the kernel allows it) the helper is
// created in new user, PID, mount, network, IPC, UTS and cgroup namespaces
// and:
//
//   - builds a new root on a tmpfs and pivot_roots into it. Visible:
//     read-only binds of /usr, /bin, /lib*, /sbin, /etc/ld.so.cache,
//     /etc/alternatives, /etc/localtime and the interpreter's installation
//     (e.g. /root/.pyenv/versions/3.11.7); a synthetic /etc/passwd, group,
//     hosts; /dev/{null,zero,full,random,urandom}; a fresh /proc of the new
//     PID namespace; writable size-limited tmpfs at /work (the cwd, holding
//     the source and Program.Files), /tmp and /dev/shm. Everything else of
//     the host (home directories, /etc, other runs' files, the host /tmp) is
//     invisible; the root itself is read-only. Nothing touches the host disk;
//   - has only a loopback interface that is down: no network at all;
//   - starts the program (through a second, short-lived stage of the same
//     executable that sets the rlimits and execve's) as an unprivileged uid:
//     uid 1 inside, host uid 65534 (nobody), when troupe runs as root — the
//     helper itself keeps uid 0 inside, host root without host capabilities,
//     to reach bind sources such as /root/.pyenv —, or the invoking user
//     (uid 0 inside) otherwise. The program has no_new_privs, empty
//     capability sets (bounding set dropped, securebits locked so that uid 0
//     gains nothing on execve) and rlimits: CPU (SIGKILL at the limit),
//     address space, processes (RLIMIT_NPROC, which the user namespace makes
//     per run), file size, 256 open files, no core files;
//   - stays PID 1 of the namespace: it reaps orphans and, when the program
//     exits, reports its wait status and CPU time and exits, whereupon the
//     kernel kills every other process in the namespace before the runner's
//     wait returns. On wall timeout, output limit or ctx cancellation the
//     runner SIGKILLs the helper, with the same effect. Double-forked
//     daemons, SIGTERM-ignoring children and fork bombs do not outlive the
//     run, and if troupe itself dies the parent-death signal kills the run.
//
// Not isolated in namespace mode: CPU and memory bandwidth (no cgroups — the
// cgroup v2 hierarchy of the development machines has no controllers, so
// memory is bounded per process by RLIMIT_AS, i.e. at most Procs × MemoryMB
// per run plus the tmpfs contents, and CPU only by time); the kernel's
// attack surface (no seccomp filter); and the programs can read the host's
// system directories listed above. Each run has its own namespaces, so runs
// cannot see or signal each other.
//
// # Fallback
//
// Where namespace isolation is unavailable (a kernel or container that
// forbids user namespaces), New logs one warning and falls back to rlimits
// and a fresh session, in a fresh host directory under Config.TempRoot that
// is removed afterwards — unless Config.Require is set (or Isolation is
// "namespaces"), in which case New returns an error. In the fallback the
// program sees the host file system and network with the permissions of
// the uid it runs as. The helper is a child subreaper: orphans are
// reparented to it and killed when the program exits; the runner also kills
// the session. When troupe runs as root, each program runs under a private
// uid (from 1900000 up; the interpreter and TempRoot must be usable by
// it) so that RLIMIT_NPROC is per run, the host's private files stay
// unreadable, and every process of that uid is killed after the run. As
// another user programs run as that user: they can read and write the
// user's files, RLIMIT_NPROC counts all of the user's processes, and escaped
// processes are found by a marker environment variable, which a hostile
// program can clear. Result.Isolation says which mode a run had.
package sandbox

import (
	"fmt"
	"time"

	"github.com/troupe-rl/troupe/internal/config"
)

// *Sandbox is the Runner env and rollout code get from New.
var _ Runner = (*Sandbox)(nil)

// Config is the "sandbox:" section of an experiment config.
type Config struct {
	// Require refuses to run without namespace isolation (default false:
	// fall back to rlimits and process-group kill, with a log line).
	Require bool `yaml:"require"`
	// Isolation picks the mechanism: "auto" (namespaces when the machine
	// allows them, else the rlimit fallback), "namespaces" (error when
	// unavailable) or "rlimits" (never use namespaces; for tests and
	// machines where namespaces misbehave). Default "auto".
	Isolation string `yaml:"isolation"`
	// Timeout is the wall-clock limit per run (default 5s).
	Timeout time.Duration `yaml:"timeout"`
	// CPU is the CPU-time limit per run; 0 means the same as Timeout.
	CPU time.Duration `yaml:"cpu"`
	// MemoryMB is the address-space limit per process in MiB (default 512).
	MemoryMB int `yaml:"memory_mb"`
	// Procs bounds the processes and threads of one run (default 64).
	Procs int `yaml:"procs"`
	// OutputKB caps stdout and stderr, each, in KiB (default 1024); a run
	// that writes more is stopped with status output_limit.
	OutputKB int `yaml:"output_kb"`
	// FileMB is the largest file a program may write, in MiB (default 16).
	FileMB int `yaml:"file_mb"`
	// DiskMB bounds each of /work and /tmp in namespace mode (default 64).
	DiskMB int `yaml:"disk_mb"`
	// Workers bounds concurrent runs (default 4).
	Workers int `yaml:"workers"`
	// Python is the python3 interpreter to use; empty means "python3" on
	// PATH, resolved to the real executable (pyenv shims are skipped).
	Python string `yaml:"python"`
	// TempRoot holds the fallback mode's per-run directories (default: the
	// system temp directory).
	TempRoot string `yaml:"temp_root"`
}

// SetDefaults fills the documented defaults.
func (c *Config) SetDefaults() {
	c.Isolation = "auto"
	c.Timeout = 5 * time.Second
	c.MemoryMB = 512
	c.Procs = 64
	c.OutputKB = 1024
	c.FileMB = 16
	c.DiskMB = 64
	c.Workers = 4
}

// Validate checks the section.
func (c *Config) Validate() error {
	switch {
	case c.Isolation != "auto" && c.Isolation != "namespaces" && c.Isolation != "rlimits":
		return config.Errorf("isolation", "must be auto, namespaces or rlimits, got %q", c.Isolation)
	case c.Require && c.Isolation == "rlimits":
		return config.Errorf("require", "require: true contradicts isolation: rlimits")
	case c.Timeout <= 0:
		return config.Errorf("timeout", "must be > 0, got %v", c.Timeout)
	case c.CPU < 0:
		return config.Errorf("cpu", "must be ≥ 0, got %v", c.CPU)
	case c.MemoryMB < 16:
		return config.Errorf("memory_mb", "must be ≥ 16, got %d", c.MemoryMB)
	case c.Procs < 1:
		return config.Errorf("procs", "must be ≥ 1, got %d", c.Procs)
	case c.OutputKB < 1:
		return config.Errorf("output_kb", "must be ≥ 1, got %d", c.OutputKB)
	case c.FileMB < 1:
		return config.Errorf("file_mb", "must be ≥ 1, got %d", c.FileMB)
	case c.DiskMB < 1:
		return config.Errorf("disk_mb", "must be ≥ 1, got %d", c.DiskMB)
	case c.Workers < 1:
		return config.Errorf("workers", "must be ≥ 1, got %d", c.Workers)
	}
	return nil
}

// DefaultConfig returns a Config with the documented defaults.
func DefaultConfig() Config {
	var c Config
	c.SetDefaults()
	return c
}

// Limits returns the config's limits for one run.
func (c Config) Limits() Limits {
	cpu := c.CPU
	if cpu == 0 {
		cpu = c.Timeout
	}
	return Limits{
		Wall:        c.Timeout,
		CPU:         cpu,
		MemoryBytes: int64(c.MemoryMB) << 20,
		Procs:       c.Procs,
		OutputBytes: int64(c.OutputKB) << 10,
		FileBytes:   int64(c.FileMB) << 20,
		DiskBytes:   int64(c.DiskMB) << 20,
	}
}

// withDefaults fills l's zero fields from d.
func (l Limits) withDefaults(d Limits) Limits {
	if l.Wall <= 0 {
		l.Wall = d.Wall
	}
	if l.CPU <= 0 {
		l.CPU = d.CPU
		if l.Wall < d.Wall && l.CPU > l.Wall { // a shorter wall limit also shortens the default CPU limit
			l.CPU = l.Wall
		}
	}
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = d.MemoryBytes
	}
	if l.Procs <= 0 {
		l.Procs = d.Procs
	}
	if l.OutputBytes <= 0 {
		l.OutputBytes = d.OutputBytes
	}
	if l.FileBytes <= 0 {
		l.FileBytes = d.FileBytes
	}
	if l.DiskBytes <= 0 {
		l.DiskBytes = d.DiskBytes
	}
	return l
}

// errorf prefixes errors with "sandbox: ".
func errorf(format string, args ...any) error {
	return fmt.Errorf("sandbox: "+format, args...)
}
