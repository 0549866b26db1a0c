package trajectory

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestManifestLifecycle(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "runs", "r1", "trajectories")
	m, err := OpenManifest(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	var infos []ShardInfo
	for it := int64(2); it >= 0; it-- {
		info := writeShard(t, dir, it, &WriterOptions{Tag: "w0"}, []Step{randStep(r, it, 5), randStep(r, it, 5)})
		if err := m.Commit(ctx, info); err != nil {
			t.Fatal(err)
		}
		if err := m.Commit(ctx, info); err != nil { // idempotent
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	p, err := m.Pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 3 || p[0].Iteration != 0 || p[2].Iteration != 2 {
		t.Fatalf("pending = %+v; want 3 shards ordered by iteration", p)
	}
	if err := m.MarkConsumed(ctx, p[0].Name, "iter-000099-nope.parquet"); err == nil {
		t.Fatal("MarkConsumed accepted an unlisted shard")
	}
	if p2, _ := m.Pending(ctx); len(p2) != 3 {
		t.Fatal("a failed MarkConsumed changed the manifest")
	}
	for range 2 { // idempotent: a learner re-applies its checkpoint's names
		if err := m.MarkConsumed(ctx, p[0].Name, p[1].Name); err != nil {
			t.Fatal(err)
		}
	}
	// A restart (new Manifest over the same dir) sees the same state.
	m2, err := OpenManifest(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err = m2.Pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 1 || p[0].Iteration != 2 || p[0].ShardInfo != infos[0] {
		t.Fatalf("pending after restart = %+v", p)
	}
	// A consumed shard may be deleted; a pending one that vanishes is
	// flagged missing and not offered.
	all, _ := m2.Shards(ctx)
	os.Remove(filepath.Join(dir, all[0].Name))
	os.Remove(filepath.Join(dir, p[0].Name))
	m3, err := OpenManifest(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := m3.Pending(ctx); len(p) != 0 {
		t.Fatalf("pending = %+v; want none (missing)", p)
	}
	all, _ = m3.Shards(ctx)
	if len(all) != 3 || !all[2].Missing || all[0].Missing {
		t.Fatalf("shards = %+v", all)
	}
}

func TestManifestConcurrentUpdates(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(2, 2))
	var infos []ShardInfo
	for i := range 8 {
		infos = append(infos, writeShard(t, dir, int64(i), &WriterOptions{Tag: "c"}, []Step{randStep(r, int64(i), 3)}))
	}
	// Two Manifest values (as two processes would have) commit concurrently.
	a, err := OpenManifest(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(a.Path()); err != nil { // forget the reconciled listing
		t.Fatal(err)
	}
	b := &Manifest{dir: dir}
	var wg sync.WaitGroup
	for i, info := range infos {
		m := a
		if i%2 == 1 {
			m = b
		}
		wg.Go(func() {
			if err := m.Commit(ctx, info); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if all, _ := a.Shards(ctx); len(all) != len(infos) {
		t.Fatalf("lost updates: %d of %d shards listed", len(all), len(infos))
	}
}

func TestManifestCorrupt(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ManifestName), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := OpenManifest(ctx, dir)
	var fe *FileError
	if !errors.As(err, &fe) || !fe.BadInput() || fe.Path != filepath.Join(dir, ManifestName) {
		t.Fatalf("err = %v; want a bad-input FileError naming the manifest", err)
	}
}

func TestReconcileSkipsCorruptShard(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ShardName(1, "bad")), []byte("PAR1garbagePAR1"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := OpenManifest(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := m.Pending(ctx); len(p) != 0 {
		t.Fatalf("corrupt shard listed: %+v", p)
	}
}

func TestShardName(t *testing.T) {
	tests := []struct {
		name string
		it   int64
		tag  string
		ok   bool
	}{
		{"iter-000042-w0.parquet", 42, "w0", true},
		{"iter-1234567-a_b-C.parquet", 1234567, "a_b-C", true},
		{".iter-000042-w0.parquet.tmp-123", 0, "", false},
		{"iter-42-w0.parquet", 0, "", false},
		{"iter-000042-.parquet", 0, "", false},
		{"iter-000042-a.b.parquet", 0, "", false},
		{ManifestName, 0, "", false},
	}
	for _, tc := range tests {
		it, tag, ok := ParseShardName(tc.name)
		if it != tc.it || tag != tc.tag || ok != tc.ok {
			t.Errorf("ParseShardName(%q) = %d, %q, %v", tc.name, it, tag, ok)
		}
	}
	if got := ShardName(42, "w0"); got != "iter-000042-w0.parquet" {
		t.Errorf("ShardName = %q", got)
	}
	if _, _, ok := ParseShardName(ShardName(3, newTag())); !ok {
		t.Error("generated tag does not parse")
	}
}
