package tokenizer

import "fmt"

// FileError is a problem with a tokenizer file: unreadable JSON, a missing
// or unsupported field. It names the file and the field; BadInput reports
// true so the CLI exits with status 2.
type FileError struct {
	File  string // path of the file
	Field string // JSON path of the offending field, e.g. "pre_tokenizer.pretokenizers[0].pattern"
	Err   error
}

func (e *FileError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("tokenizer: %s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("tokenizer: %s: %s: %v", e.File, e.Field, e.Err)
}

func (e *FileError) Unwrap() error { return e.Err }

// BadInput marks the error as caused by the user's files (CLI exit 2).
func (e *FileError) BadInput() bool { return true }

func fileErr(file, field string, format string, args ...any) error {
	return &FileError{File: file, Field: field, Err: fmt.Errorf(format, args...)}
}
