package chat

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-rl/troupe/generation/tokenizer"
)

var update = flag.Bool("update", false, "rewrite testdata/golden")

type testCase struct {
	Name                string            `json:"name"`
	Messages            []Message         `json:"messages"`
	AddGenerationPrompt bool              `json:"add_generation_prompt"`
	EnableThinking      *bool             `json:"enable_thinking"`
	Tools               []json.RawMessage `json:"tools"`
}

func (c testCase) options() Options {
	return Options{AddGenerationPrompt: c.AddGenerationPrompt, EnableThinking: c.EnableThinking, Tools: c.Tools}
}

func loadCases(t *testing.T) []testCase {
	t.Helper()
	data, err := os.ReadFile("testdata/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cs []testCase
	if err := json.Unmarshal(data, &cs); err != nil {
		t.Fatal(err)
	}
	return cs
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGolden renders every case with every built-in renderer and compares
// with testdata/golden/RENDERER/CASE.txt (go test -update rewrites them).
func TestGolden(t *testing.T) {
	for _, name := range []string{"qwen3", "chatml", "llama3", "plain"} {
		r, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range loadCases(t) {
			got, err := r.Render(c.Messages, c.options())
			if err != nil {
				t.Errorf("%s/%s: %v", name, c.Name, err)
				continue
			}
			path := filepath.Join("testdata/golden", name, c.Name+".txt")
			if *update {
				os.MkdirAll(filepath.Dir(path), 0o755)
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if want := readFile(t, path); got != want {
				t.Errorf("%s/%s:\n got %q\nwant %q", name, c.Name, got, want)
			}
		}
	}
}

// TestTemplatesMatchJinja2 renders the real Qwen3 and Llama 3 templates
// with gonja and with the hand-written renderers, and compares both with
// Python Jinja2's output in testdata/jinja2 (made by
// testdata/jinja2_render.py, Hugging Face's environment).
func TestTemplatesMatchJinja2(t *testing.T) {
	for _, tc := range []struct {
		name, src, bos, eos string
	}{{"qwen3", Qwen3Template, "", "<|im_end|>"}, {"llama3", Llama3Template, "<|begin_of_text|>", "<|eot_id|>"}} {
		if src := readFile(t, "testdata/templates/"+tc.name+".jinja"); src != tc.src {
			t.Fatalf("testdata/templates/%s.jinja differs from the constant", tc.name)
		}
		tpl, err := NewTemplate(tc.name, tc.src)
		if err != nil {
			t.Fatal(err)
		}
		hand, _ := Lookup(tc.name)
		for _, c := range loadCases(t) {
			want := readFile(t, filepath.Join("testdata/jinja2", tc.name, c.Name+".txt"))
			opt := c.options()
			opt.BOSToken, opt.EOSToken = tc.bos, tc.eos
			got, err := tpl.Render(c.Messages, opt)
			if err != nil {
				t.Errorf("gonja %s/%s: %v", tc.name, c.Name, err)
			} else if got != want {
				t.Errorf("gonja %s/%s:\n got %q\nwant %q", tc.name, c.Name, got, want)
			}
			if tc.name == "llama3" && len(c.Tools) > 0 {
				continue // the hand-written llama3 ignores tools, like the template
			}
			got, err = hand.Render(c.Messages, opt)
			if err != nil {
				t.Errorf("hand-written %s/%s: %v", tc.name, c.Name, err)
			} else if got != want {
				t.Errorf("hand-written %s/%s:\n got %q\nwant %q", tc.name, c.Name, got, want)
			}
		}
	}
}

func TestLookupAndSelect(t *testing.T) {
	if _, err := Lookup("QWEN3"); err != nil {
		t.Errorf("Lookup is case-insensitive: %v", err)
	}
	_, err := Lookup("nope")
	var ce *Error
	if !errors.As(err, &ce) || !ce.BadInput() || !strings.Contains(err.Error(), "chatml") {
		t.Errorf("Lookup(nope) = %v", err)
	}
	if got := strings.Join(Names(), ","); got != "chatml,llama3,plain,qwen3" {
		t.Errorf("Names = %s", got)
	}
	tok, err := tokenizer.Load("../tokenizer/testdata/tiny")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Select(tok, "auto")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.Name(), "model:") {
		t.Errorf("Select(auto) with a template = %s", r.Name())
	}
	msgs := []Message{{Role: "user", Content: "hi"}}
	got, err := r.Render(msgs, Options{AddGenerationPrompt: true, EnableThinking: Bool(false)})
	if err != nil {
		t.Fatal(err)
	}
	if want := "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"; got != want {
		t.Errorf("model template: %q", got)
	}
	// The rendered prompt tokenizes with the special tokens recognised.
	ids := tok.Encode(got)
	start, _ := tok.TokenID("<|im_start|>")
	if ids[0] != start {
		t.Errorf("first id %d, want <|im_start|> %d", ids[0], start)
	}
	if r, _ := Select(tok, "plain"); r.Name() != "plain" {
		t.Errorf("a named fallback should win, got %s", r.Name())
	}
	if r, _ := Select(nil, ""); r.Name() != "chatml" {
		t.Errorf("Select without a tokenizer = %s", r.Name())
	}
}

func TestTemplateErrors(t *testing.T) {
	if _, err := NewTemplate("bad", "{% if %}"); err == nil {
		t.Error("bad template: no error")
	}
	tpl, err := NewTemplate("raise", "{{ raise_exception('only user and assistant roles') }}")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tpl.Render(nil, Options{})
	if err == nil || !strings.Contains(err.Error(), "only user and assistant roles") {
		t.Errorf("raise_exception: %v", err)
	}
	_, err = qwen3Tpl.Render([]Message{{Role: "assistant", ToolCalls: []ToolCall{{Function: FunctionCall{Name: "f", Arguments: json.RawMessage("{bad")}}}}}, Options{})
	var ce *Error
	if !errors.As(err, &ce) {
		t.Errorf("bad arguments JSON: %v", err)
	}
}

func TestStrftimeAndToJSON(t *testing.T) {
	tpl, err := NewTemplate("t", `{{ strftime_now("%d %b %Y") }}|{{ x | tojson }}|{{ x | tojson(indent=2) }}`)
	if err != nil {
		t.Fatal(err)
	}
	old := Now
	defer func() { Now = old }()
	Now = func() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) }
	x, _ := decodeOrdered([]byte(`{"b": [1, "é<>&'"], "a": {}}`))
	got, err := tpl.Render(nil, Options{Extra: map[string]any{"x": x}})
	if err != nil {
		t.Fatal(err)
	}
	want := "02 Jan 2025|{\"b\": [1, \"é<>&'\"], \"a\": {}}|{\n  \"b\": [\n    1,\n    \"é<>&'\"\n  ],\n  \"a\": {}\n}"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestConcurrentRender(t *testing.T) {
	cs := loadCases(t)
	want := make([]string, len(cs))
	for i, c := range cs {
		want[i], _ = qwen3Tpl.Render(c.Messages, c.options())
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range cs {
				i := (k + g) % len(cs)
				if got, _ := qwen3Tpl.Render(cs[i].Messages, cs[i].options()); got != want[i] {
					t.Errorf("concurrent render of %s differs", cs[i].Name)
				}
			}
		}()
	}
	wg.Wait()
}
