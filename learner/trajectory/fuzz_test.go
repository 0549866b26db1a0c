package trajectory

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadShard feeds arbitrary bytes to the reader as a shard: it must
// return rows or an error, never panic (library panics are recovered into
// errors, which must name the data).
func FuzzReadShard(f *testing.F) {
	// Small seeds: the fuzzer minimises every new interesting input, which
	// takes minutes on a large shard (no execs are counted meanwhile).
	good := smallShard(f)
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(good[len(good)-64:])
	f.Add([]byte("PAR1PAR1"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := openReaderAt("fuzz.parquet", bytes.NewReader(data), int64(len(data)), &ReadOptions{Parallelism: 1})
		if err != nil {
			checkBadFile(t, "fuzz.parquet", err)
			return
		}
		if _, err := r.ReadAll(context.Background()); err != nil {
			checkBadFile(t, "fuzz.parquet", err)
		}
	})
}

// smallShard returns a ~3 KB shard with two row groups, dictionary pages,
// lists and texts.
func smallShard(t testing.TB) []byte {
	t.Helper()
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(1, 3))
	steps := []Step{randStep(r, 1, 4), randStep(r, 1, 4), {Iteration: 1}}
	steps[0].PromptText, steps[1].CompletionText = "héllo 🙂", "x"
	info := writeShard(t, dir, 1, &WriterOptions{RowGroupBytes: 1}, steps)
	data, err := os.ReadFile(filepath.Join(dir, info.Name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}
