package trajectory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// ManifestName is the manifest's file name in a trajectories directory.
const ManifestName = "manifest.json"

// lockName is the lock file that serialises manifest updates.
const lockName = "manifest.lock"

// Manifest is the ledger of one run's trajectories directory: which shards
// exist and which the learner has consumed. It is the JSON file
// manifest.json next to the shards, always replaced atomically (temporary
// file, fsync, rename, fsync dir).
//
// Protocol:
//
//  1. Rollout writes a shard with a [Writer] and calls [Writer.Commit]: the
//     shard appears under its final name, complete.
//  2. Rollout calls [Manifest.Commit] with the returned [ShardInfo]; the
//     shard is now listed as pending.
//  3. The learner takes [Manifest.Pending], trains on those shards, writes
//     its own checkpoint atomically — recording the names of the shards
//     the step consumed — and then calls [Manifest.MarkConsumed].
//
// Crash windows and what heals them:
//
//   - Writer dies before its rename (step 1): only a hidden temporary file
//     remains; no reader or directory scan ever sees it as a shard.
//     [OpenManifest] removes it once its writer's flock is released, which
//     the kernel does when the writer dies.
//   - Writer dies between rename and manifest commit (between 1 and 2): the
//     shard is complete but unlisted. [OpenManifest] (and
//     [Manifest.Reconcile]) scans the directory, validates such shards
//     (footer, row count, CRC-32C) and lists them as pending, so nothing is
//     lost. An unreadable file with a shard name is left alone, logged and
//     not listed.
//   - Learner dies between its checkpoint and MarkConsumed (between 3's
//     steps): the shards still look pending. To avoid counting them twice,
//     the learner re-applies MarkConsumed with the names stored in its
//     checkpoint when it resumes (MarkConsumed is idempotent), before it
//     asks for Pending.
//   - A listed shard whose file is gone is flagged Missing (logged) and no
//     longer offered by Pending; consumed shards may be deleted freely.
//
// Every update re-reads the file under an exclusive flock on manifest.lock,
// so a rollout process and a learner process on one machine may update the
// manifest concurrently. On a shared filesystem without working flock,
// give each machine its own trajectories directory or let one process own
// the manifest. Methods are safe for concurrent use.
type Manifest struct {
	dir string
	mu  sync.Mutex
}

// ShardState is a shard as the manifest records it.
type ShardState struct {
	ShardInfo
	// CommittedAt is when the shard was listed.
	CommittedAt time.Time `json:"committed_at"`
	// Reconciled is true when a directory scan listed the shard (its
	// writer died before committing it to the manifest).
	Reconciled bool `json:"reconciled,omitempty"`
	// Consumed is true once the learner has trained on the shard.
	Consumed bool `json:"consumed"`
	// ConsumedAt is when MarkConsumed first recorded it.
	ConsumedAt time.Time `json:"consumed_at,omitzero"`
	// Missing is true when the file disappeared before it was consumed.
	Missing bool `json:"missing,omitempty"`
}

type manifestDoc struct {
	Version int          `json:"version"`
	Shards  []ShardState `json:"shards"`
}

// OpenManifest opens (creating if needed) the manifest of the trajectories
// directory dir (created too), removes temporary files of dead writers and
// reconciles the manifest with the shards present.
func OpenManifest(ctx context.Context, dir string) (*Manifest, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("trajectory: manifest: %w", err)
	}
	m := &Manifest{dir: dir}
	if err := m.Reconcile(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// Dir returns the trajectories directory.
func (m *Manifest) Dir() string { return m.dir }

// Path returns the manifest file's path.
func (m *Manifest) Path() string { return filepath.Join(m.dir, ManifestName) }

// Reconcile removes temporary files of dead writers, lists complete shards
// that are in the directory but not in the manifest, and flags listed,
// unconsumed shards whose file is gone.
func (m *Manifest) Reconcile(ctx context.Context) error {
	return m.update(ctx, func(doc *manifestDoc) (bool, error) {
		if _, err := CleanTemp(m.dir); err != nil {
			return false, err
		}
		ents, err := os.ReadDir(m.dir)
		if err != nil {
			return false, err
		}
		listed := map[string]int{}
		for i, s := range doc.Shards {
			listed[s.Name] = i
		}
		present := map[string]bool{}
		changed := false
		for _, e := range ents {
			it, _, ok := ParseShardName(e.Name())
			if !ok || !e.Type().IsRegular() {
				continue
			}
			present[e.Name()] = true
			if _, ok := listed[e.Name()]; ok {
				continue
			}
			if err := ctx.Err(); err != nil {
				return false, err
			}
			info, err := inspectShard(ctx, filepath.Join(m.dir, e.Name()), it)
			if err != nil {
				slog.Warn("trajectory: unreadable shard left out of the manifest", "err", err)
				continue
			}
			slog.Info("trajectory: listing shard found in the directory", "shard", info.Name, "rows", info.Rows)
			doc.Shards = append(doc.Shards, ShardState{ShardInfo: info, CommittedAt: time.Now().UTC(), Reconciled: true})
			changed = true
		}
		for i := range doc.Shards {
			s := &doc.Shards[i]
			gone := !present[s.Name]
			if gone && !s.Consumed && !s.Missing {
				slog.Warn("trajectory: pending shard is missing", "shard", s.Name, "dir", m.dir)
			}
			if s.Missing != (gone && !s.Consumed) {
				s.Missing = gone && !s.Consumed
				changed = true
			}
		}
		return changed, nil
	})
}

// inspectShard validates a shard and computes its ShardInfo.
func inspectShard(ctx context.Context, path string, iteration int64) (ShardInfo, error) {
	r, err := Open(path, &ReadOptions{Columns: []string{}})
	if err != nil {
		return ShardInfo{}, err
	}
	rows := r.NumRows()
	r.Close()
	f, err := os.Open(path)
	if err != nil {
		return ShardInfo{}, osFileError(path, err)
	}
	defer f.Close()
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	n, err := io.Copy(h, f)
	if err != nil {
		return ShardInfo{}, osFileError(path, err)
	}
	return ShardInfo{Name: filepath.Base(path), Iteration: iteration, Rows: rows, Bytes: n, CRC32C: h.Sum32()}, nil
}

// Commit lists a shard written by [Writer.Commit]. The file must exist with
// the recorded size. Committing the same shard again is a no-op (a
// reconciliation may have listed it first).
func (m *Manifest) Commit(ctx context.Context, info ShardInfo) error {
	if _, _, ok := ParseShardName(info.Name); !ok || info.Name != filepath.Base(info.Name) {
		return fmt.Errorf("trajectory: manifest: %q is not a shard name", info.Name)
	}
	st, err := os.Stat(filepath.Join(m.dir, info.Name))
	if err != nil {
		return fmt.Errorf("trajectory: manifest: commit %s: %w", info.Name, err)
	}
	if st.Size() != info.Bytes {
		return fmt.Errorf("trajectory: manifest: commit %s: file has %d bytes, info says %d", info.Name, st.Size(), info.Bytes)
	}
	return m.update(ctx, func(doc *manifestDoc) (bool, error) {
		for _, s := range doc.Shards {
			if s.Name == info.Name {
				if s.ShardInfo != info {
					return false, fmt.Errorf("commit %s: listed with different info %+v", info.Name, s.ShardInfo)
				}
				return false, nil
			}
		}
		doc.Shards = append(doc.Shards, ShardState{ShardInfo: info, CommittedAt: time.Now().UTC()})
		return true, nil
	})
}

// MarkConsumed records that the learner has consumed the named shards. It
// is idempotent; an unlisted name is an error and nothing is recorded.
func (m *Manifest) MarkConsumed(ctx context.Context, names ...string) error {
	return m.update(ctx, func(doc *manifestDoc) (bool, error) {
		idx := map[string]int{}
		for i, s := range doc.Shards {
			idx[s.Name] = i
		}
		var unknown []string
		for _, n := range names {
			if _, ok := idx[n]; !ok {
				unknown = append(unknown, n)
			}
		}
		if unknown != nil {
			return false, fmt.Errorf("mark consumed: not in the manifest: %s", strings.Join(unknown, ", "))
		}
		now, changed := time.Now().UTC(), false
		for _, n := range names {
			s := &doc.Shards[idx[n]]
			if !s.Consumed {
				s.Consumed, s.ConsumedAt, s.Missing, changed = true, now, false, true
			}
		}
		return changed, nil
	})
}

// Shards returns every listed shard, ordered by iteration then name.
func (m *Manifest) Shards(ctx context.Context) ([]ShardState, error) {
	var out []ShardState
	err := m.view(ctx, func(doc *manifestDoc) {
		out = slices.Clone(doc.Shards)
	})
	return out, err
}

// Pending returns the listed shards not yet consumed (and not missing),
// ordered by iteration then name.
func (m *Manifest) Pending(ctx context.Context) ([]ShardState, error) {
	var out []ShardState
	err := m.view(ctx, func(doc *manifestDoc) {
		for _, s := range doc.Shards {
			if !s.Consumed && !s.Missing {
				out = append(out, s)
			}
		}
	})
	return out, err
}

// view runs fn on the current manifest under the lock.
func (m *Manifest) view(ctx context.Context, fn func(*manifestDoc)) error {
	return m.update(ctx, func(doc *manifestDoc) (bool, error) {
		fn(doc)
		return false, nil
	})
}

// update runs fn on the manifest under the lock and writes the result
// atomically when fn reports a change.
func (m *Manifest) update(ctx context.Context, fn func(*manifestDoc) (bool, error)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	unlock, err := m.lock(ctx)
	if err != nil {
		return fmt.Errorf("trajectory: manifest %s: %w", m.Path(), err)
	}
	defer unlock()
	doc, err := m.load()
	if err != nil {
		return err
	}
	changed, err := fn(doc)
	if err != nil {
		return fmt.Errorf("trajectory: manifest %s: %w", m.Path(), err)
	}
	slices.SortStableFunc(doc.Shards, func(a, b ShardState) int {
		if a.Iteration != b.Iteration {
			return int(min(max(a.Iteration-b.Iteration, -1), 1))
		}
		return strings.Compare(a.Name, b.Name)
	})
	if !changed {
		return nil
	}
	if err := m.save(doc); err != nil {
		return fmt.Errorf("trajectory: manifest %s: %w", m.Path(), err)
	}
	return nil
}

// lock takes the cross-process lock, polling so that ctx can cancel.
func (m *Manifest) lock(ctx context.Context) (func(), error) {
	f, err := os.OpenFile(filepath.Join(m.dir, lockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	delay := time.Millisecond
	for {
		ok, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, err
		}
		if ok {
			return func() { f.Close() }, nil
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(delay):
			delay = min(2*delay, 100*time.Millisecond)
		}
	}
}

func (m *Manifest) load() (*manifestDoc, error) {
	doc := &manifestDoc{Version: 1}
	data, err := os.ReadFile(m.Path())
	if errors.Is(err, fs.ErrNotExist) {
		return doc, nil
	}
	if err != nil {
		return nil, osFileError(m.Path(), err)
	}
	if err := json.Unmarshal(data, doc); err != nil {
		return nil, badFile(m.Path(), fmt.Errorf("corrupt manifest: %w", err))
	}
	if doc.Version != 1 {
		return nil, badFile(m.Path(), fmt.Errorf("manifest version %d, want 1", doc.Version))
	}
	return doc, nil
}

func (m *Manifest) save(doc *manifestDoc) error {
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	f, err := createTemp(m.dir, ManifestName)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	return commitTemp(f, m.dir, ManifestName, true)
}

// VerifyShard checks that the shard at path has the size and CRC-32C that
// info records (e.g. before a learner trusts a shard copied between
// machines). A mismatch is a *FileError with BadInput() true.
func VerifyShard(path string, info ShardInfo) error {
	f, err := os.Open(path)
	if err != nil {
		return osFileError(path, err)
	}
	defer f.Close()
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	n, err := io.Copy(h, f)
	if err != nil {
		return osFileError(path, err)
	}
	if n != info.Bytes || h.Sum32() != info.CRC32C {
		return badFile(path, fmt.Errorf("checksum mismatch: %d bytes crc32c %08x, manifest says %d bytes crc32c %08x", n, h.Sum32(), info.Bytes, info.CRC32C))
	}
	return nil
}
