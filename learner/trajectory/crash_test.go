//go:build unix

package trajectory

import (
	"bufio"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The crash tests re-execute the test binary as a writer process (selected
// by these variables), let it write, and SIGKILL it.
const (
	envCrashDir  = "TROUPE_TRAJ_CRASH_DIR"
	envCrashMode = "TROUPE_TRAJ_CRASH_MODE"
)

// TestCrashWriterHelper is the child process; it does nothing in a normal
// test run.
func TestCrashWriterHelper(t *testing.T) {
	dir := os.Getenv(envCrashDir)
	if dir == "" {
		t.Skip("helper process for TestCrash*")
	}
	r := rand.New(rand.NewPCG(1, 2))
	w, err := Create(dir, 7, &WriterOptions{RowGroupBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	batch := make([]Step, 20)
	for i := range batch {
		batch[i] = randStep(r, 7, 300)
	}
	if os.Getenv(envCrashMode) == "after-rename" {
		if err := w.Write(batch...); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("RENAMED\n")
		time.Sleep(time.Minute) // killed here, before the manifest commit
		return
	}
	for i := 0; ; i++ { // writes slowly until killed
		if err := w.Write(batch...); err != nil {
			t.Fatal(err)
		}
		if st, err := w.file.Stat(); err == nil && st.Size() > 0 && i >= 5 {
			os.Stdout.WriteString("WRITING\n") // partial data is on disk
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runAndKill starts the helper in mode, waits for it to print want, and
// SIGKILLs it.
func runAndKill(t *testing.T, dir, mode, want string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashWriterHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), envCrashDir+"="+dir, envCrashMode+"="+mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(30 * time.Second)
wait:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("helper exited before printing %s: %v", want, cmd.Wait())
			}
			if strings.Contains(l, want) {
				break wait
			}
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("helper did not print %s", want)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("helper was not killed by SIGKILL: %v", err)
	}
	go func() {
		for range lines {
		}
	}()
}

func listNames(t *testing.T, dir string) (shards, temps []string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if _, _, ok := ParseShardName(e.Name()); ok {
			shards = append(shards, e.Name())
		}
		if isTemp(e.Name()) {
			temps = append(temps, e.Name())
		}
	}
	return shards, temps
}

func TestCrashMidShardLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	runAndKill(t, dir, "mid-shard", "WRITING")
	shards, temps := listNames(t, dir)
	if len(shards) != 0 {
		t.Fatalf("killed writer left visible shards %v", shards)
	}
	if len(temps) != 1 {
		t.Fatalf("want the dead writer's temporary file, got %v", temps)
	}
	if st, err := os.Stat(filepath.Join(dir, temps[0])); err != nil || st.Size() == 0 {
		t.Fatalf("temporary file should hold partial data: %v %v", st, err)
	}
	if m, err := filepath.Glob(filepath.Join(dir, "*.parquet")); err != nil || len(m) != 0 {
		t.Fatalf("a *.parquet glob (what DuckDB would read) matches %v", m)
	}
	ctx := context.Background()
	m, err := OpenManifest(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := m.Pending(ctx); err != nil || len(p) != 0 {
		t.Fatalf("pending after crash = %v, %v; want none", p, err)
	}
	if _, temps := listNames(t, dir); len(temps) != 0 {
		t.Fatalf("OpenManifest left temporary files %v", temps)
	}
}

func TestCrashAfterRenameIsReconciled(t *testing.T) {
	dir := t.TempDir()
	runAndKill(t, dir, "after-rename", "RENAMED")
	ctx := context.Background()
	m, err := OpenManifest(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 1 || !p[0].Reconciled || p[0].Rows != 20 || p[0].Iteration != 7 {
		t.Fatalf("pending = %+v; want the one reconciled shard of 20 rows", p)
	}
	if err := VerifyShard(filepath.Join(dir, p[0].Name), p[0].ShardInfo); err != nil {
		t.Fatal(err)
	}
	// Reopening neither duplicates nor loses it.
	m2, err := OpenManifest(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if p2, _ := m2.Pending(ctx); len(p2) != 1 {
		t.Fatalf("after reopen pending = %+v", p2)
	}
}

func TestLiveWriterTempSurvivesCleanup(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	if err := w.Write(randStep(r, 1, 10)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := OpenManifest(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if _, temps := listNames(t, dir); len(temps) != 1 {
		t.Fatalf("cleanup removed a live writer's temporary file: %v", temps)
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

func TestAbortLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	if err := w.Write(randStep(r, 3, 10)); err != nil {
		t.Fatal(err)
	}
	w.Abort()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("abort left %v", ents)
	}
	// A failed Write (wrong iteration) poisons nothing visible either.
	w, err = Create(dir, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(randStep(r, 4, 10)); err == nil {
		t.Fatal("row of another iteration accepted")
	}
	w.Abort()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("abort left %v", ents)
	}
}
