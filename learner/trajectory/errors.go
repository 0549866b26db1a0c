package trajectory

import (
	"errors"
	"fmt"
	"io/fs"
)

// FileError is an error caused by one file: it names the file. When Bad is
// true the file's content (or its absence) is to blame — truncated,
// corrupt, not Parquet, an unusable schema — and BadInput reports true, so
// troupe's CLI exits with code 2; I/O failures of the machine itself have
// Bad false.
type FileError struct {
	Path string
	Err  error
	Bad  bool
}

func (e *FileError) Error() string { return fmt.Sprintf("trajectory: %s: %v", e.Path, e.Err) }

// Unwrap returns the cause.
func (e *FileError) Unwrap() error { return e.Err }

// BadInput reports whether the file's content is to blame.
func (e *FileError) BadInput() bool { return e.Bad }

// badFile wraps err as a FileError blaming the file at path.
func badFile(path string, err error) error {
	var fe *FileError
	if errors.As(err, &fe) && fe.Path == path {
		return err
	}
	return &FileError{Path: path, Err: err, Bad: true}
}

// osFileError wraps an error from the operating system about path; a file
// that does not exist is bad input (the caller named it), anything else is
// not.
func osFileError(path string, err error) error {
	return &FileError{Path: path, Err: err, Bad: errors.Is(err, fs.ErrNotExist)}
}

// recovered turns a panic value from the Parquet library into an error.
func recovered(v any) error {
	if err, ok := v.(error); ok {
		return fmt.Errorf("corrupt parquet data (library panic: %w)", err)
	}
	return fmt.Errorf("corrupt parquet data (library panic: %v)", v)
}
