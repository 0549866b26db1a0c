// Package atomicfile writes files so that a reader sees either the old
// content or the complete new content, never a partial file: data goes to a
// temporary name in the same directory, is fsynced, renamed over the target,
// and the directory is fsynced. A process killed at any moment leaves at most
// a stray temporary file (named ".<base>.tmp-*"), which [CleanTemp] removes.
package atomicfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// File is a file being written atomically. Write to it, then Commit; Abort
// (safe after Commit) removes the temporary file.
type File struct {
	*os.File
	target string
	done   bool
}

// Create starts writing path. The directory must exist.
func Create(path string, perm os.FileMode) (*File, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("atomicfile: %w", err)
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("atomicfile: %w", err)
	}
	return &File{File: f, target: path}, nil
}

// Commit fsyncs, closes and renames the file into place, then fsyncs the
// directory so the rename survives a power loss.
func (f *File) Commit() error {
	if f.done {
		return fmt.Errorf("atomicfile: %s: already committed or aborted", f.target)
	}
	f.done = true
	tmp := f.Name()
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("atomicfile: sync %s: %w", f.target, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("atomicfile: close %s: %w", f.target, err)
	}
	if err := os.Rename(tmp, f.target); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("atomicfile: %w", err)
	}
	return SyncDir(filepath.Dir(f.target))
}

// Abort discards the temporary file. It is a no-op after Commit.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.Close()
	os.Remove(f.Name())
}

// WriteFile atomically replaces path with data.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Write atomically replaces path with what fn writes; if fn fails nothing
// changes.
func Write(path string, perm os.FileMode, fn func(io.Writer) error) error {
	f, err := Create(path, perm)
	if err != nil {
		return err
	}
	defer f.Abort()
	if err := fn(f); err != nil {
		return fmt.Errorf("atomicfile: writing %s: %w", path, err)
	}
	return f.Commit()
}

// SyncDir fsyncs a directory (making renames and creations in it durable).
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("atomicfile: sync dir %s: %w", dir, err)
	}
	return nil
}

// IsTemp reports whether name (a base name) is a temporary file of this
// package; readers listing a directory skip such files.
func IsTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-")
}

// CleanTemp removes leftover temporary files in dir (from a killed writer).
// Call it only when no writer is active in dir.
func CleanTemp(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() && IsTemp(e.Name()) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("atomicfile: %w", err)
			}
		}
	}
	return nil
}
