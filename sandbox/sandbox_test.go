package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/troupe-rl/troupe/internal/config"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mut  func(*Config)
		key  string // "" = valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"bad isolation", func(c *Config) { c.Isolation = "chroot" }, "isolation"},
		{"require without namespaces", func(c *Config) { c.Require, c.Isolation = true, "rlimits" }, "require"},
		{"zero timeout", func(c *Config) { c.Timeout = 0 }, "timeout"},
		{"negative cpu", func(c *Config) { c.CPU = -time.Second }, "cpu"},
		{"tiny memory", func(c *Config) { c.MemoryMB = 8 }, "memory_mb"},
		{"no procs", func(c *Config) { c.Procs = 0 }, "procs"},
		{"no output", func(c *Config) { c.OutputKB = 0 }, "output_kb"},
		{"no file", func(c *Config) { c.FileMB = 0 }, "file_mb"},
		{"no disk", func(c *Config) { c.DiskMB = 0 }, "disk_mb"},
		{"no workers", func(c *Config) { c.Workers = 0 }, "workers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.mut(&c)
			err := c.Validate()
			if tt.key == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var fe *config.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.key {
				t.Fatalf("got %v, want an error naming %q", err, tt.key)
			}
		})
	}
}

func TestConfigLoad(t *testing.T) {
	var doc struct {
		Sandbox Config `yaml:"sandbox"`
	}
	err := config.Decode("x.yaml", []byte("sandbox:\n  timeout: 2s\n  memory_mb: 256\n  workers: 8\n"), &doc, "sandbox.require=true")
	if err != nil {
		t.Fatal(err)
	}
	l := doc.Sandbox.Limits()
	if l.Wall != 2*time.Second || l.CPU != 2*time.Second || l.MemoryBytes != 256<<20 || !doc.Sandbox.Require || doc.Sandbox.Workers != 8 || l.Procs != 64 {
		t.Fatalf("%+v %+v", doc.Sandbox, l)
	}
	err = config.Decode("x.yaml", []byte("sandbox:\n  memory_mb: 4\n"), &doc)
	if err == nil || !strings.Contains(err.Error(), "sandbox.memory_mb") || !strings.Contains(err.Error(), "x.yaml:2") {
		t.Fatalf("got %v", err)
	}
}

func TestLimitsDefaults(t *testing.T) {
	d := DefaultConfig().Limits()
	l := Limits{Wall: time.Second}.withDefaults(d)
	if l.CPU != time.Second {
		t.Errorf("a shorter wall limit should shorten the default CPU limit: %v", l.CPU)
	}
	l = Limits{}.withDefaults(d)
	if l != d {
		t.Errorf("%+v != %+v", l, d)
	}
}

func TestNormalize(t *testing.T) {
	tests := []struct{ a, b string }{
		{"1 2\n3\n", "1  2\r\n3"},
		{"  hello\tworld  \n\n\n", "hello world"},
		{"", "\n \n"},
	}
	for _, tt := range tests {
		if Normalize(tt.a) != Normalize(tt.b) {
			t.Errorf("%q and %q differ: %q vs %q", tt.a, tt.b, Normalize(tt.a), Normalize(tt.b))
		}
	}
	if Normalize("1 2") == Normalize("1\n2") {
		t.Error("line breaks must matter")
	}
}

func TestCheckFiles(t *testing.T) {
	for _, name := range []string{"/etc/x", "../x", "a/../../x", "", "main.py", "./main.py", "."} {
		if err := checkFiles(map[string][]byte{name: nil}, "main.py"); err == nil {
			t.Errorf("%q accepted", name)
		}
	}
	if err := checkFiles(map[string][]byte{"data/in.txt": nil, "lib.py": nil}, "main.py"); err != nil {
		t.Error(err)
	}
}

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"512M", 512 << 20, true}, {"512MiB", 512 << 20, true}, {"512mb", 512 << 20, true},
		{"1G", 1 << 30, true}, {"1.5g", 3 << 29, true}, {"64k", 64 << 10, true}, {"100", 100, true},
		{"100b", 100, true}, {" 2T ", 2 << 40, true}, {"0", 0, true},
		{"", 0, false}, {"M", 0, false}, {"-1M", 0, false}, {"1e3", 0, false}, {"12X", 0, false},
		{"5kk", 0, false}, {"1ib", 0, false}, {"NaN", 0, false}, {"inf", 0, false}, {"99999999T", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseBytes(tt.in)
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"512M", "1.5GiB", "64k", "100", "", "-1", "1e9", "0x10", "∞"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseBytes(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "sandbox: ") {
				t.Fatalf("error without prefix: %v", err)
			}
			return
		}
		if n < 0 {
			t.Fatalf("ParseBytes(%q) = %d < 0", s, n)
		}
		back, err := ParseBytes(FormatBytes(n))
		if err != nil || back != n {
			t.Fatalf("round trip of %d via %q: %d, %v", n, FormatBytes(n), back, err)
		}
	})
}

func TestUnknownLanguage(t *testing.T) {
	_, err := lookupLanguage("cobol")
	if !errors.Is(err, ErrUnknownLanguage) || !strings.HasPrefix(err.Error(), "sandbox: ") {
		t.Fatal(err)
	}
}

// fakeRunner answers from a function, for harness tests without processes.
type fakeRunner func(p Program) Result

func (f fakeRunner) Run(ctx context.Context, p Program, l Limits) (Result, error) {
	return f(p), nil
}

func TestRunCasesFake(t *testing.T) {
	echo := fakeRunner(func(p Program) Result {
		if string(p.Stdin) == "boom" {
			return Result{Status: StatusTimeout}
		}
		return Result{Status: StatusOK, Stdout: p.Stdin}
	})
	cases := []Case{{Stdin: "1 2", Want: "1  2\n"}, {Stdin: "x", Want: "y"}, {Stdin: "boom", Want: ""}, {Stdin: "z", Want: "z"}}
	rep, err := RunCases(context.Background(), echo, Program{Lang: "python"}, cases, CaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := []Verdict{}
	for _, c := range rep.Cases {
		got = append(got, c.Verdict)
	}
	want := []Verdict{VerdictPass, VerdictWrongAnswer, Verdict(StatusTimeout), VerdictPass}
	if rep.Passed != 2 || rep.Total != 4 || rep.AllPassed() || rep.Fraction() != 0.5 || !equal(got, want) {
		t.Fatalf("%+v %v", rep, got)
	}
	rep, _ = RunCases(context.Background(), echo, Program{Lang: "python"}, cases, CaseOptions{StopOnFailure: true})
	got = got[:0]
	for _, c := range rep.Cases {
		got = append(got, c.Verdict)
	}
	if want := []Verdict{VerdictPass, VerdictWrongAnswer, VerdictSkipped, VerdictSkipped}; !equal(got, want) || rep.Passed != 1 {
		t.Fatalf("stop on failure: %v", got)
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
