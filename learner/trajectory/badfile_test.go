package trajectory

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goodShard writes a small multi-row-group shard and returns its bytes.
func goodShard(t testing.TB) []byte {
	t.Helper()
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(9, 9))
	var steps []Step
	for range 40 {
		steps = append(steps, randStep(r, 5, 200))
	}
	info := writeShard(t, dir, 5, &WriterOptions{RowGroupBytes: 16 << 10}, steps)
	data, err := os.ReadFile(filepath.Join(dir, info.Name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func checkBadFile(t *testing.T, path string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", path)
	}
	var fe *FileError
	if !errors.As(err, &fe) || !fe.BadInput() {
		t.Fatalf("%s: err %v (%T) is not a bad-input FileError", path, err, err)
	}
	var bi interface{ BadInput() bool }
	if !errors.As(err, &bi) || !bi.BadInput() {
		t.Fatalf("%v: no BadInput method found by errors.As", err)
	}
	if !strings.Contains(err.Error(), path) || !strings.HasPrefix(err.Error(), "trajectory: ") {
		t.Fatalf("error %q does not name %s", err, path)
	}
}

func TestBadFiles(t *testing.T) {
	good := goodShard(t)
	flip := func(at int) []byte {
		b := bytes.Clone(good)
		for i := at; i < at+16 && i < len(b); i++ {
			b[i] ^= 0x5a
		}
		return b
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"text", []byte("this is not parquet at all\n")},
		{"magic only", []byte("PAR1PAR1")},
		{"truncated to 4 bytes", good[:4]},
		{"truncated to half", good[:len(good)/2]},
		{"truncated by 1", good[:len(good)-1]},
		{"truncated by 8", good[:len(good)-8]},
		{"no header magic", good[4:]},
		{"flipped at 25%", flip(len(good) / 4)},
		{"flipped at 50%", flip(len(good) / 2)},
		{"flipped in page data", flip(len(good) / 3)},
		{"flipped footer length", flip(len(good) - 8)},
	}
	dir := t.TempDir()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".parquet")
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadFile(context.Background(), path, nil)
			checkBadFile(t, path, err)
		})
	}
	t.Run("missing file", func(t *testing.T) {
		path := filepath.Join(dir, "nope.parquet")
		_, err := Open(path, nil)
		checkBadFile(t, path, err)
	})
	t.Run("projected missing column", func(t *testing.T) {
		path := filepath.Join(dir, "good.parquet")
		os.WriteFile(path, good, 0o644)
		_, err := Open(path, &ReadOptions{Columns: []string{"no_such"}})
		checkBadFile(t, path, err)
	})
}

// TestFlippedBytesEverywhere flips bytes across the whole file: each result
// must be an error naming the file or rows, never a panic or hang.
func TestFlippedBytesEverywhere(t *testing.T) {
	good := goodShard(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "x.parquet")
	step := max(1, len(good)/200)
	for at := 0; at < len(good); at += step {
		b := bytes.Clone(good)
		b[at] ^= 0xff
		os.WriteFile(path, b, 0o644)
		if _, err := ReadFile(context.Background(), path, nil); err != nil {
			checkBadFile(t, path, err)
		}
	}
}
