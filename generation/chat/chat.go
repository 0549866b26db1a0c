// Package chat turns chat messages into prompt text: pure functions from
// []Message and Options to the string a model is prompted with.
//
// The general way is a model's own chat_template (tokenizer_config.json),
// rendered with gonja (a Go Jinja2): Template/FromTokenizer. It runs with
// Hugging Face's settings (trim_blocks, lstrip_blocks, a tojson that writes
// like Python's json.dumps(ensure_ascii=False), raise_exception,
// strftime_now) and matches Python's Jinja2 byte for byte on Qwen3's
// template (testdata/jinja2 holds Jinja2's own output).
//
// Hand-written renderers are the fallback for models without a template
// and for tests: "qwen3" (Qwen3's template re-implemented, without the
// tools system block), "chatml", "llama3" and "plain". Lookup finds a
// renderer by name; Select picks the model's template when it has one and
// a named renderer otherwise.
//
// Renderers are safe for concurrent use.
package chat

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/troupe-rl/troupe/generation/tokenizer"
)

// Message is one chat turn.
type Message struct {
	Role    string `json:"role"` // system, user, assistant or tool
	Content string `json:"content"`
	// ReasoningContent is an assistant turn's thinking, when kept apart from
	// Content (else Qwen3's template takes it from <think>…</think> in Content).
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string     `json:"tool_call_id,omitempty"`
	Name             string     `json:"name,omitempty"`
}

// ToolCall is a function call made by an assistant turn (OpenAI layout).
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"` // "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and its arguments: a JSON object (given
// to templates as an object, so tojson rewrites it Python-style in its own
// key order) or a JSON string (given verbatim).
type FunctionCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Options are the rendering switches.
type Options struct {
	// AddGenerationPrompt appends the opening of an assistant turn.
	AddGenerationPrompt bool
	// EnableThinking, when set, is passed as enable_thinking (Qwen3: false
	// writes an empty <think></think> block after the generation prompt).
	EnableThinking *bool
	// Tools are tool definitions (JSON objects, OpenAI layout) for
	// templates that take "tools".
	Tools []json.RawMessage
	// BOSToken and EOSToken are passed as bos_token/eos_token (Select and
	// FromTokenizer fill them from the tokenizer).
	BOSToken, EOSToken string
	// Extra holds further template variables (e.g. "date_string").
	Extra map[string]any
}

// Bool returns a pointer to b, for Options.EnableThinking.
func Bool(b bool) *bool { return &b }

// Renderer renders messages to prompt text.
type Renderer interface {
	Name() string
	Render(msgs []Message, opt Options) (string, error)
}

// Error is a rendering or lookup failure caused by the input (unknown
// renderer name, bad template, a template's raise_exception, bad tool
// JSON). BadInput reports true (CLI exit 2).
type Error struct {
	What string // e.g. `renderer "foo"`, `chat_template of models/x/tokenizer_config.json`
	Err  error
}

func (e *Error) Error() string  { return fmt.Sprintf("chat: %s: %v", e.What, e.Err) }
func (e *Error) Unwrap() error  { return e.Err }
func (e *Error) BadInput() bool { return true }

var (
	regMu    sync.RWMutex
	registry = map[string]Renderer{}
)

// Register adds a renderer under its Name, replacing any of that name.
func Register(r Renderer) {
	regMu.Lock()
	registry[r.Name()] = r
	regMu.Unlock()
}

// Lookup returns the renderer registered under name: built in are
// "qwen3", "chatml", "llama3" and "plain" (case-insensitive).
func Lookup(name string) (Renderer, error) {
	regMu.RLock()
	r, ok := registry[strings.ToLower(name)]
	regMu.RUnlock()
	if !ok {
		return nil, &Error{What: fmt.Sprintf("renderer %q", name), Err: fmt.Errorf("unknown (known: %s)", strings.Join(Names(), ", "))}
	}
	return r, nil
}

// Names lists the registered renderers, sorted.
func Names() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	var out []string
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func init() {
	Register(qwen3{})
	Register(chatML{})
	Register(llama3{})
	Register(plain{})
}

// Select returns the renderer for a model: its own chat_template when the
// tokenizer has one (and fallback is "" or "auto"), else the renderer named
// fallback (default "chatml"). A fallback naming a registered renderer
// other than "auto" always wins, so a config can force a format.
func Select(tok *tokenizer.Tokenizer, fallback string) (Renderer, error) {
	if fallback == "" || strings.EqualFold(fallback, "auto") {
		if tok != nil && tok.ChatTemplate() != "" {
			return FromTokenizer(tok)
		}
		return Lookup("chatml")
	}
	return Lookup(fallback)
}

// FromTokenizer compiles the tokenizer's chat_template; bos_token and
// eos_token default to the tokenizer's.
func FromTokenizer(tok *tokenizer.Tokenizer) (*Template, error) {
	if tok.ChatTemplate() == "" {
		return nil, &Error{What: "chat_template of " + tok.File(), Err: fmt.Errorf("the tokenizer has none")}
	}
	t, err := NewTemplate("model:"+tok.File(), tok.ChatTemplate())
	if err != nil {
		return nil, err
	}
	t.bos, t.eos = tok.BOSToken(), tok.EOSToken()
	return t, nil
}
