package sandbox

import (
	"bytes"
	"errors"
	"path"
	"sort"
	"strings"
)

// ErrUnknownLanguage is returned (wrapped) by Run for a Program.Lang that no
// language handles.
var ErrUnknownLanguage = errors.New("unknown language")

// language says how to run source of one language.
type language struct {
	name string
	file string // name of the source file in the working directory
	// argv builds the command line from the interpreter and the file.
	argv func(interp, file string) []string
	// memoryError recognises the language's out-of-memory report.
	memoryError func(stderr []byte) bool
	// python marks languages whose interpreter is the configured python.
	python bool
	// interp is the fixed interpreter path for the others.
	interp string
}

var languages = map[string]*language{}

func addLanguage(l *language, aliases ...string) {
	for _, n := range append([]string{l.name}, aliases...) {
		languages[n] = l
	}
}

func init() {
	addLanguage(&language{
		name:   "python",
		file:   "main.py",
		python: true,
		argv: func(interp, file string) []string {
			// -B: no .pyc files; -s: no user site-packages.
			return []string{interp, "-B", "-s", file}
		},
		memoryError: func(stderr []byte) bool {
			// The traceback's last line, or a fatal error from C code.
			return bytes.Contains(stderr, []byte("MemoryError")) ||
				bytes.Contains(stderr, []byte("Cannot allocate memory"))
		},
	}, "python3", "py")
	addLanguage(&language{
		name:   "sh",
		file:   "main.sh",
		interp: "/bin/sh",
		argv:   func(interp, file string) []string { return []string{interp, file} },
		memoryError: func(stderr []byte) bool {
			return bytes.Contains(stderr, []byte("Cannot allocate memory"))
		},
	})
}

// Languages lists the accepted Program.Lang names (aliases included).
func Languages() []string {
	out := make([]string, 0, len(languages))
	for n := range languages {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func lookupLanguage(name string) (*language, error) {
	l, ok := languages[strings.ToLower(name)]
	if !ok {
		return nil, errorf("%w %q (have %s)", ErrUnknownLanguage, name, strings.Join(Languages(), ", "))
	}
	return l, nil
}

// checkFiles rejects extra-file names that are absolute, escape the working
// directory, or collide with the source file.
func checkFiles(files map[string][]byte, source string) error {
	for name := range files {
		clean := path.Clean(name)
		switch {
		case name == "" || strings.ContainsRune(name, 0):
			return errorf("bad file name %q", name)
		case path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") || clean == ".":
			return errorf("file name %q must be relative and stay in the working directory", name)
		case clean == source:
			return errorf("file name %q collides with the program's source file", name)
		}
	}
	return nil
}
