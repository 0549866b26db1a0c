package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

type inner struct {
	Size  int           `yaml:"size"`
	Alpha float64       `yaml:"alpha"`
	Wait  time.Duration `yaml:"wait"`
	Tags  []string      `yaml:"tags"`
}

func (c *inner) SetDefaults() { c.Size = 4; c.Alpha = 0.7; c.Wait = time.Second }

func (c *inner) Validate() error {
	if !(c.Alpha >= 0 && c.Alpha <= 1) {
		return Errorf("alpha", "must be in [0, 1], got %v", c.Alpha)
	}
	return nil
}

type item struct {
	URL string `yaml:"url"`
}

type root struct {
	Name  string          `yaml:"name"`
	Env   inner           `yaml:"env"`
	Items []item          `yaml:"items"`
	Extra map[string]item `yaml:"extra"`
}

func (r *root) SetDefaults() { r.Name = "default" }

func TestDecode(t *testing.T) {
	tests := []struct {
		name      string
		yaml      string
		overrides []string
		check     func(*root) bool
		wantErr   string // substring of the error; "" for success
		wantLine  int
	}{
		{name: "defaults", yaml: "", check: func(r *root) bool {
			return r.Name == "default" && r.Env.Size == 4 && r.Env.Alpha == 0.7 && r.Env.Wait == time.Second
		}},
		{name: "file over defaults", yaml: "env:\n  size: 6\n  wait: 30s\n", check: func(r *root) bool {
			return r.Env.Size == 6 && r.Env.Alpha == 0.7 && r.Env.Wait == 30*time.Second
		}},
		{name: "override number", yaml: "env:\n  size: 6\n", overrides: []string{"env.alpha=1e-1", "env.size=8"},
			check: func(r *root) bool { return r.Env.Size == 8 && r.Env.Alpha == 0.1 }},
		{name: "override creates section", yaml: "name: x\n", overrides: []string{"env.size=9"},
			check: func(r *root) bool { return r.Env.Size == 9 && r.Name == "x" }},
		{name: "override null section", yaml: "env:\n", overrides: []string{"env.size=3"},
			check: func(r *root) bool { return r.Env.Size == 3 }},
		{name: "override list", yaml: "", overrides: []string{"env.tags=[a, b]"},
			check: func(r *root) bool { return strings.Join(r.Env.Tags, ",") == "a,b" }},
		{name: "override list index", yaml: "items:\n  - url: a\n  - url: b\n", overrides: []string{"items.1.url=c"},
			check: func(r *root) bool { return r.Items[1].URL == "c" }},
		{name: "override quoted string", yaml: "", overrides: []string{"name='3'"},
			check: func(r *root) bool { return r.Name == "3" }},
		{name: "unknown key", yaml: "name: a\nenv:\n  sise: 3\n", wantErr: `env.sise: unknown key (did you mean "env.size"?)`, wantLine: 3},
		{name: "unknown top key", yaml: "nmae: a\n", wantErr: `nmae: unknown key (did you mean "name"?)`, wantLine: 1},
		{name: "unknown key in list", yaml: "items:\n  - url: a\n  - uri: b\n", wantErr: `items.1.uri: unknown key`, wantLine: 3},
		{name: "unknown key in map value", yaml: "extra:\n  x:\n    urll: b\n", wantErr: `extra.x.urll: unknown key`, wantLine: 3},
		{name: "unknown override", yaml: "", overrides: []string{"env.sise=3"}, wantErr: `override "env.sise=3": env.sise: unknown key`},
		{name: "validation names key and line", yaml: "name: a\nenv:\n  alpha: 1.5\n", wantErr: "env.alpha: must be in [0, 1], got 1.5", wantLine: 3},
		{name: "validation after override", yaml: "", overrides: []string{"env.alpha=-1"}, wantErr: "env.alpha: must be in [0, 1]"},
		{name: "type error", yaml: "env:\n  size: big\n", wantErr: "cannot unmarshal", wantLine: 2},
		{name: "bad duration", yaml: "env:\n  wait: soon\n", wantErr: "cannot unmarshal", wantLine: 2},
		{name: "syntax error", yaml: "env: [1,\n", wantErr: "config: test.yaml"},
		{name: "not a mapping", yaml: "- a\n- b\n", wantErr: "top level must be a mapping", wantLine: 1},
		{name: "override into scalar", yaml: "name: a\n", overrides: []string{"name.x=1"}, wantErr: "name is a single value"},
		{name: "override bad index", yaml: "items:\n  - url: a\n", overrides: []string{"items.5.url=c"}, wantErr: "out of range"},
		{name: "override no equals", yaml: "", overrides: []string{"env.size"}, wantErr: "want key=value"},
		{name: "override bad key", yaml: "", overrides: []string{"env..size=1"}, wantErr: "empty part"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r root
			err := Decode("test.yaml", []byte(tt.yaml), &r, tt.overrides...)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if !tt.check(&r) {
					t.Fatalf("wrong result: %+v", r)
				}
				return
			}
			if err == nil {
				t.Fatalf("want error containing %q, got none (%+v)", tt.wantErr, r)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tt.wantErr)
			}
			var ce *Error
			if !errors.As(err, &ce) || !ce.BadInput() {
				t.Fatalf("error %v is not a *config.Error", err)
			}
			if tt.wantLine != 0 && ce.Line != tt.wantLine {
				t.Fatalf("error %q: line %d, want %d", err, ce.Line, tt.wantLine)
			}
			if !strings.HasPrefix(err.Error(), "config: test.yaml") {
				t.Fatalf("error %q does not name the file", err)
			}
		})
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	var r root
	if err := Decode("a.yaml", []byte("env:\n  size: 7\n  wait: 2m\n"), &r); err != nil {
		t.Fatal(err)
	}
	out, err := Marshal(&r)
	if err != nil {
		t.Fatal(err)
	}
	var r2 root
	if err := Decode("b.yaml", out, &r2); err != nil {
		t.Fatalf("re-decoding printed config: %v\n%s", err, out)
	}
	if r2.Env.Size != 7 || r2.Env.Wait != 2*time.Minute || r2.Name != "default" {
		t.Fatalf("round trip lost values: %+v\n%s", r2, out)
	}
}

func TestValidateStandalone(t *testing.T) {
	r := root{Env: inner{Alpha: 2}}
	err := Validate(&r)
	var ce *Error
	if !errors.As(err, &ce) || ce.Key != "env.alpha" {
		t.Fatalf("got %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{"", "name: a\n", "env:\n  size: 3\n  tags: [a]\n", "items:\n - url: x\n", "&a {x: *a}", "env: !!binary xx", "- [", "extra: {a: {url: b}}"} {
		f.Add(s, "env.size=3")
	}
	f.Fuzz(func(t *testing.T, doc, ov string) {
		var r root
		err := Decode("fuzz.yaml", []byte(doc), &r, ov)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error is not a *config.Error: %v", err)
			}
		}
	})
}

func FuzzParseOverride(f *testing.F) {
	for _, s := range []string{"a=1", "a.b.c=[1,2]", "a=", "=1", "a..b=2", "x={y: 1}", "a=*b", "a.0=1", "a=&x 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ov, err := ParseOverride(s)
		if err == nil && (len(ov.Path) == 0 || ov.Value == nil) {
			t.Fatalf("%q: ok but empty result", s)
		}
		var r root
		_ = Decode("fuzz.yaml", []byte("name: a\nitems:\n  - url: x\n"), &r, s)
	})
}
