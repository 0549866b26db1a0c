package trajectory

import (
	"bytes"
	"context"
	"testing"
)

// FuzzReadShard feeds arbitrary bytes to the reader as a shard: it must
// return rows or an error, never panic (library panics are recovered into
// errors, which must name the data).
func FuzzReadShard(f *testing.F) {
	good := goodShard(f)
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
