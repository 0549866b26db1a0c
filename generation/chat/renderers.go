package chat

import (
	"fmt"
	"strings"
	"unicode"
)

// qwen3 re-implements Qwen3's chat template (Qwen3Template) for messages
// without a tools list: the system turn, user/assistant/tool turns, the
// <think> handling of assistant turns after the last user query, tool
// calls and enable_thinking. With Options.Tools it renders the real
// template instead.
type qwen3 struct{}

func (qwen3) Name() string { return "qwen3" }

var qwen3Tpl = mustTemplate("qwen3", Qwen3Template)

func mustTemplate(name, src string) *Template {
	t, err := NewTemplate(name, src)
	if err != nil {
		panic(err)
	}
	return t
}

func (q qwen3) Render(msgs []Message, opt Options) (string, error) {
	if len(opt.Tools) > 0 {
		return qwen3Tpl.Render(msgs, opt)
	}
	if len(msgs) == 0 {
		return "", &Error{What: "qwen3", Err: fmt.Errorf("no messages")}
	}
	var b strings.Builder
	if msgs[0].Role == "system" {
		b.WriteString("<|im_start|>system\n" + msgs[0].Content + "<|im_end|>\n")
	}
	lastQuery := len(msgs) - 1
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role == "user" && !(strings.HasPrefix(m.Content, "<tool_response>") && strings.HasSuffix(m.Content, "</tool_response>")) {
			lastQuery = i
			break
		}
	}
	for i, m := range msgs {
		switch {
		case m.Role == "user" || (m.Role == "system" && i > 0):
			b.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n")
		case m.Role == "assistant":
			content, reasoning := m.Content, ""
			if m.ReasoningContent != "" {
				reasoning = m.ReasoningContent
			} else if strings.Contains(m.Content, "</think>") {
				parts := strings.Split(m.Content, "</think>")
				content = strings.TrimLeft(parts[len(parts)-1], "\n")
				think := strings.Split(strings.TrimRight(parts[0], "\n"), "<think>")
				reasoning = strings.TrimLeft(think[len(think)-1], "\n")
			}
			if i > lastQuery && (i == len(msgs)-1 || reasoning != "") {
				b.WriteString("<|im_start|>" + m.Role + "\n<think>\n" + strings.Trim(reasoning, "\n") + "\n</think>\n\n" + strings.TrimLeft(content, "\n"))
			} else {
				b.WriteString("<|im_start|>" + m.Role + "\n" + content)
			}
			for k, c := range m.ToolCalls {
				if (k == 0 && content != "") || k > 0 {
					b.WriteString("\n")
				}
				args, err := arguments(c.Function.Arguments)
				if err != nil {
					return "", &Error{What: fmt.Sprintf("qwen3: messages[%d].tool_calls[%d].function.arguments", i, k), Err: err}
				}
				b.WriteString("<tool_call>\n{\"name\": \"" + c.Function.Name + "\", \"arguments\": ")
				if s, ok := args.(string); ok {
					b.WriteString(s)
				} else {
					js, err := pyJSON(args, -1)
					if err != nil {
						return "", &Error{What: "qwen3", Err: err}
					}
					b.WriteString(js)
				}
				b.WriteString("}\n</tool_call>")
			}
			b.WriteString("<|im_end|>\n")
		case m.Role == "tool":
			if i == 0 || msgs[i-1].Role != "tool" {
				b.WriteString("<|im_start|>user")
			}
			b.WriteString("\n<tool_response>\n" + m.Content + "\n</tool_response>")
			if i == len(msgs)-1 || msgs[i+1].Role != "tool" {
				b.WriteString("<|im_end|>\n")
			}
		}
	}
	if opt.AddGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
		if opt.EnableThinking != nil && !*opt.EnableThinking {
			b.WriteString("<think>\n\n</think>\n\n")
		}
	}
	return b.String(), nil
}

// chatML is plain ChatML: <|im_start|>ROLE\nCONTENT<|im_end|>\n per
// message, then <|im_start|>assistant\n as the generation prompt. With
// EnableThinking set to false the prompt is followed by an empty think
// block, as in Qwen3.
type chatML struct{}

func (chatML) Name() string { return "chatml" }

func (chatML) Render(msgs []Message, opt Options) (string, error) {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n")
	}
	if opt.AddGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
		if opt.EnableThinking != nil && !*opt.EnableThinking {
			b.WriteString("<think>\n\n</think>\n\n")
		}
	}
	return b.String(), nil
}

// llama3 is Llama 3 Instruct's format (Llama3Template): bos_token
// (default <|begin_of_text|>), then per message
// <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|> with the
// content trimmed of surrounding whitespace.
type llama3 struct{}

func (llama3) Name() string { return "llama3" }

func (llama3) Render(msgs []Message, opt Options) (string, error) {
	var b strings.Builder
	bos := first(opt.BOSToken, "<|begin_of_text|>")
	for i, m := range msgs {
		if i == 0 {
			b.WriteString(bos)
		}
		b.WriteString("<|start_header_id|>" + m.Role + "<|end_header_id|>\n\n" + strings.TrimFunc(m.Content, pyIsSpace) + "<|eot_id|>")
	}
	if opt.AddGenerationPrompt {
		b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
	}
	return b.String(), nil
}

// plain is for base models without chat tokens: "Role: content\n\n" per
// message (role capitalised) and "Assistant:" as the generation prompt.
type plain struct{}

func (plain) Name() string { return "plain" }

func (plain) Render(msgs []Message, opt Options) (string, error) {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(capitalise(m.Role) + ": " + m.Content + "\n\n")
	}
	if opt.AddGenerationPrompt {
		b.WriteString("Assistant:")
	}
	return b.String(), nil
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	r := []rune(s)
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}

// pyIsSpace is Python's str.isspace for one character (Jinja's trim).
func pyIsSpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }
