package sandbox

import (
	"context"
	"time"
)

// Runner runs one program to completion under limits. Implementations are
// safe for concurrent use. Run returns an error only when the program could
// not be judged at all (e.g. ctx cancelled before start); everything the
// program did — crash, timeout, memory, output flood — is reported in Result.
type Runner interface {
	Run(ctx context.Context, p Program, l Limits) (Result, error)
}

// Program is what to run.
type Program struct {
	Lang   string            // "python" (python3); other languages may be added
	Source string            // the program text
	Stdin  []byte            // standard input
	Files  map[string][]byte // extra files placed in the working directory (relative names)
}

// Limits bound one run. Zero fields take the runner's defaults.
type Limits struct {
	Wall        time.Duration // wall-clock timeout
	CPU         time.Duration // CPU time
	MemoryBytes int64         // address space and/or cgroup memory
	Procs       int           // max processes/threads
	OutputBytes int64         // stdout and stderr are each captured up to this
	FileBytes   int64         // max size of any file written
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
	// Truncated is true when stdout or stderr was cut at OutputBytes.
	Truncated bool   `json:"truncated,omitempty"`
	Detail    string `json:"detail,omitempty"` // human-readable reason for non-ok statuses
}
