package sandbox

import (
	"context"
	"log/slog"
	"os"
	"testing"
)

func TestSmoke(t *testing.T) {
	cfg := DefaultConfig()
	if v := os.Getenv("ISO"); v != "" {
		cfg.Isolation = v
	}
	s, err := New(cfg, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, src := range []string{
		"print('hello'); import os; print(os.getcwd(), os.getuid(), os.getpid(), os.listdir('/'))",
		"import sys; print(sys.stdin.read().upper())",
		"print(open('/etc/passwd').read())",
	} {
		res, err := s.Run(context.Background(), Program{Lang: "python", Source: src, Stdin: []byte("abc")}, Limits{})
		t.Logf("%+v err=%v\nstdout=%s\nstderr=%s", res, err, res.Stdout, res.Stderr)
	}
}
