package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"

	"github.com/troupe-rl/troupe/generation/tokenizer"
)

type templateValue = exec.Value

var asValue = exec.AsValue

// Qwen3Template is Qwen3's chat_template, verbatim.
const Qwen3Template = tokenizer.Qwen3ChatTemplate

// Llama3Template is Llama 3 Instruct's chat_template (Llama 3 Community
// License), verbatim.
const Llama3Template = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"

// Template renders a Jinja2 chat template with gonja.
type Template struct {
	name     string
	tpl      *exec.Template
	bos, eos string
}

// Now is the clock behind strftime_now (tests may replace it).
var Now = time.Now

// errRaise carries a template's raise_exception message.
type errRaise struct{ msg string }

func (e errRaise) Error() string { return "template raised: " + e.msg }

func newEnvironment() *exec.Environment {
	filters := exec.NewFilterSet(map[string]exec.FilterFunction{}).Update(builtins.Filters)
	_ = filters.Replace("tojson", filterToJSON)
	ctx := exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables)
	ctx.Set("raise_exception", func(_ *exec.Evaluator, params *exec.VarArgs) (string, error) {
		msg := ""
		if len(params.Args) > 0 {
			msg = params.Args[0].String()
		}
		return "", errRaise{msg}
	})
	ctx.Set("strftime_now", func(_ *exec.Evaluator, params *exec.VarArgs) (string, error) {
		if len(params.Args) != 1 {
			return "", errors.New("strftime_now takes one format argument")
		}
		return strftime(Now(), params.Args[0].String()), nil
	})
	return &exec.Environment{
		Context:           ctx,
		Filters:           filters,
		Tests:             builtins.Tests,
		ControlStructures: builtins.ControlStructures,
		Methods:           builtins.Methods,
	}
}

// filterToJSON is Hugging Face's tojson: json.dumps(x, ensure_ascii=False,
// indent=indent), no HTML escaping.
func filterToJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	indent := -1
	if v, ok := params.KwArgs["indent"]; ok && v.IsInteger() {
		indent = v.Integer()
	} else if len(params.Args) > 0 && params.Args[0].IsInteger() {
		indent = params.Args[0].Integer()
	}
	out, err := pyJSON(unwrapValue(in.Interface()), indent)
	if err != nil {
		return exec.AsValue(fmt.Errorf("tojson: %w", err))
	}
	return exec.AsSafeValue(out)
}

// unwrapValue unwraps gonja values nested in containers built by templates.
func unwrapValue(v any) any {
	switch t := v.(type) {
	case *exec.Value:
		return unwrapValue(t.Interface())
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = unwrapValue(x)
		}
		return m
	case []any:
		l := make([]any, len(t))
		for i, x := range t {
			l[i] = unwrapValue(x)
		}
		return l
	}
	return v
}

// NewTemplate compiles a Jinja2 chat template with Hugging Face's
// environment settings (trim_blocks, lstrip_blocks).
func NewTemplate(name, source string) (*Template, error) {
	cfg := config.New()
	cfg.TrimBlocks = true
	cfg.LeftStripBlocks = true
	loader, err := loaders.NewFileSystemLoader("")
	if err != nil {
		return nil, &Error{What: name, Err: err}
	}
	root := "chat_template"
	shifted, err := loaders.NewShiftedLoader(root, bytes.NewReader([]byte(source)), loader)
	if err != nil {
		return nil, &Error{What: name, Err: err}
	}
	tpl, err := exec.NewTemplate(root, cfg, shifted, newEnvironment())
	if err != nil {
		return nil, &Error{What: name, Err: fmt.Errorf("parsing the template: %w", err)}
	}
	return &Template{name: name, tpl: tpl}, nil
}

// Name is the name given to NewTemplate ("model:PATH" from FromTokenizer).
func (t *Template) Name() string { return t.name }

// Render renders the template. Variables: messages, add_generation_prompt,
// tools (when any), enable_thinking (when set), bos_token, eos_token and
// Options.Extra.
func (t *Template) Render(msgs []Message, opt Options) (string, error) {
	data := map[string]any{
		"add_generation_prompt": opt.AddGenerationPrompt,
		"bos_token":             first(opt.BOSToken, t.bos),
		"eos_token":             first(opt.EOSToken, t.eos),
	}
	ms := make([]*object, len(msgs))
	for i, m := range msgs {
		o, err := messageObject(m)
		if err != nil {
			return "", &Error{What: fmt.Sprintf("%s: messages[%d]", t.name, i), Err: err}
		}
		ms[i] = o
	}
	data["messages"] = ms
	if opt.EnableThinking != nil {
		data["enable_thinking"] = *opt.EnableThinking
	}
	if len(opt.Tools) > 0 {
		tools := make([]any, len(opt.Tools))
		for i, raw := range opt.Tools {
			v, err := decodeOrdered(raw)
			if err != nil {
				return "", &Error{What: fmt.Sprintf("%s: tools[%d]", t.name, i), Err: err}
			}
			tools[i] = v
		}
		data["tools"] = tools
	}
	for k, v := range opt.Extra {
		data[k] = v
	}
	out, err := t.tpl.ExecuteToString(exec.NewContext(data))
	if err != nil {
		return "", &Error{What: t.name, Err: err}
	}
	return out, nil
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// messageObject gives a message to templates with only the keys that are
// set, so `message.reasoning_content is defined` and `message.tool_calls`
// behave as with Python dicts.
func messageObject(m Message) (*object, error) {
	o := &object{vals: map[string]any{}}
	set := func(k string, v any) {
		o.keys = append(o.keys, k)
		o.vals[k] = v
	}
	set("role", m.Role)
	set("content", m.Content)
	if m.ReasoningContent != "" {
		set("reasoning_content", m.ReasoningContent)
	}
	if m.Name != "" {
		set("name", m.Name)
	}
	if m.ToolCallID != "" {
		set("tool_call_id", m.ToolCallID)
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]any, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			args, err := arguments(c.Function.Arguments)
			if err != nil {
				return nil, fmt.Errorf("tool_calls[%d].function.arguments: %w", i, err)
			}
			fn := &object{keys: []string{"name", "arguments"}, vals: map[string]any{"name": c.Function.Name, "arguments": args}}
			call := &object{vals: map[string]any{}}
			if c.ID != "" {
				call.keys = append(call.keys, "id")
				call.vals["id"] = c.ID
			}
			call.keys = append(call.keys, "type", "function")
			call.vals["type"] = first(c.Type, "function")
			call.vals["function"] = fn
			calls[i] = call
		}
		set("tool_calls", calls)
	}
	return o, nil
}

// arguments decodes tool-call arguments: a JSON object (kept in order), a
// JSON string (the string), or nothing ({}).
func arguments(raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return &object{vals: map[string]any{}}, nil
	}
	return decodeOrdered(raw)
}

// strftime implements the C strftime directives chat templates use.
func strftime(t time.Time, f string) string {
	var b bytes.Buffer
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 == len(f) {
			b.WriteByte(f[i])
			continue
		}
		i++
		switch f[i] {
		case 'Y':
			fmt.Fprintf(&b, "%04d", t.Year())
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'b':
			b.WriteString(t.Format("Jan"))
		case 'B':
			b.WriteString(t.Format("January"))
		case 'a':
			b.WriteString(t.Format("Mon"))
		case 'A':
			b.WriteString(t.Format("Monday"))
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(f[i])
		}
	}
	return b.String()
}
