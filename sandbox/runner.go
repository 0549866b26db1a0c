package sandbox

import (
	"context"
	"time"
)

// Runner runs one program to completion under limits. Implementations are
// safe for concurrent use. Run returns an error only when the program could
// not be judged at all (unknown language, bad file names, ctx cancelled);
// everything the program did — crash, timeout, memory, output flood — is
// reported in Result.
type Runner interface {
	Run(ctx context.Context, p Program, l Limits) (Result, error)
}

// Program is what to run.
type Program struct {
	Lang   string            // "python" (python3; "python3" and "py" are aliases); see Languages
	Source string            // the program text
	Stdin  []byte            // standard input
	Files  map[string][]byte // extra files placed in the working directory (relative names)
}

// Limits bound one run. Zero fields take the runner's defaults (see Config).
type Limits struct {
	Wall        time.Duration // wall-clock timeout
	CPU         time.Duration // CPU time (RLIMIT_CPU, whole seconds, rounded up)
	MemoryBytes int64         // address space per process (RLIMIT_AS)
	Procs       int           // max processes+threads of the run (RLIMIT_NPROC)
	OutputBytes int64         // stdout and stderr are each captured up to this; more stops the run
	FileBytes   int64         // max size of any file written (RLIMIT_FSIZE)
	// DiskBytes bounds each of the private /work and /tmp file systems
	// (tmpfs) in namespace mode; ignored in the rlimit fallback.
	DiskBytes int64
}

// Status says why a run stopped.
type Status string

// The statuses a Result can carry.
const (
	StatusOK          Status = "ok"           // exited 0
	StatusExit        Status = "exit"         // exited non-zero
	StatusTimeout     Status = "timeout"      // wall or CPU limit
	StatusMemory      Status = "memory"       // memory limit
	StatusOutputLimit Status = "output_limit" // output exceeded OutputBytes
	StatusSignal      Status = "signal"       // killed by a signal
	StatusSetup       Status = "setup_error"  // the sandbox could not start the program
)

// Result is the outcome of one run.
type Result struct {
	Status   Status        `json:"status"`
	ExitCode int           `json:"exit_code"`
	Signal   string        `json:"signal,omitempty"`
	Stdout   []byte        `json:"-"`
	Stderr   []byte        `json:"-"`
	Wall     time.Duration `json:"wall_ns"`
	CPU      time.Duration `json:"cpu_ns"`
	// MaxRSS is the peak resident set size of the largest process (bytes).
	MaxRSS int64 `json:"max_rss_bytes,omitempty"`
	// Truncated is true when stdout or stderr was cut at OutputBytes.
	Truncated bool   `json:"truncated,omitempty"`
	Detail    string `json:"detail,omitempty"` // human-readable reason for non-ok statuses
	// Isolation is the mechanism the run had: "namespaces" or "rlimits".
	Isolation string `json:"isolation,omitempty"`
}

// OK reports whether the program exited 0 within its limits.
func (r Result) OK() bool { return r.Status == StatusOK }
