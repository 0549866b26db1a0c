package trajectory

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// This file is the package's own atomic-file machinery (the package may not
// import troupe's internal/atomicfile): temporary files are named
// ".<final name>.tmp-<random>", are flock-ed by their writer for as long as
// it lives, and are only removed by others once that lock is free.

const tmpInfix = ".tmp-"

// isTemp reports whether a base name is one of this package's temporary
// files.
func isTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, tmpInfix)
}

// createTemp creates and locks a temporary file for final name base in dir.
func createTemp(dir, base string) (*os.File, error) {
	// A cleaner may lock and remove the file between its creation and our
	// lock; then the name is gone and we try again.
	for range 3 {
		f, err := createTemp1(dir, base)
		if err != nil {
			return nil, err
		}
		st1, err1 := f.Stat()
		st2, err2 := os.Lstat(f.Name())
		if err1 == nil && err2 == nil && os.SameFile(st1, st2) {
			return f, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("create temporary file in %s: removed by a concurrent cleaner", dir)
}

func createTemp1(dir, base string) (*os.File, error) {
	f, err := os.CreateTemp(dir, "."+base+tmpInfix+"*")
	if err != nil {
		return nil, err
	}
	if ok, err := tryLock(f); !ok || err != nil {
		f.Close()
		os.Remove(f.Name())
		if err == nil {
			err = errors.New("temporary file locked by another process")
		}
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

// commitTemp fsyncs and closes f, renames it to dir/base and fsyncs dir.
// When replace is false an existing dir/base is an error. On error the
// temporary file is removed.
func commitTemp(f *os.File, dir, base string, replace bool) error {
	tmp := f.Name()
	final := filepath.Join(dir, base)
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		return fail(fmt.Errorf("sync %s: %w", tmp, err))
	}
	if !replace {
		if _, err := os.Lstat(final); err == nil {
			return fail(fmt.Errorf("%s already exists", final))
		}
	}
	// Rename while still holding the lock, so that no cleaner can remove
	// the file between our close and our rename.
	if err := os.Rename(tmp, final); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", final, err)
	}
	return syncDir(dir)
}

// syncDir fsyncs a directory so that renames in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// CleanTemp removes temporary files left in dir by writers that died (a
// live writer holds a lock on its file, which is left alone). It returns
// the names removed.
func CleanTemp(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("trajectory: clean %s: %w", dir, err)
	}
	var removed []string
	for _, e := range ents {
		if e.IsDir() || !isTemp(e.Name()) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // committed or aborted meanwhile
		}
		if err != nil {
			return removed, fmt.Errorf("trajectory: clean %s: %w", p, err)
		}
		ok, err := tryLock(f)
		if ok {
			// Only remove if the name still refers to the file we locked.
			st1, err1 := f.Stat()
			st2, err2 := os.Lstat(p)
			if err1 == nil && err2 == nil && os.SameFile(st1, st2) {
				if err := os.Remove(p); err == nil {
					removed = append(removed, e.Name())
					slog.Info("trajectory: removed temporary file of a dead writer", "path", p)
				}
			}
		}
		f.Close()
		if err != nil {
			return removed, fmt.Errorf("trajectory: clean %s: %w", p, err)
		}
	}
	return removed, nil
}
