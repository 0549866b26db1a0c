package server

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/troupe-rl/troupe/generation/chat"
	"github.com/troupe-rl/troupe/generation/tokenizer"
)

// chatTemplateFor picks the chat renderer for a model: its own
// chat_template (rendered with gonja by package chat) when it has one,
// else ChatML; name ("auto" or "") can force a built-in renderer (qwen3,
// chatml, llama3, plain).
func chatTemplateFor(tk *tokenizer.Tokenizer, name string) (ChatTemplate, error) {
	r, err := chat.Select(tk, name)
	if err != nil {
		return nil, err
	}
	bos, eos := tk.BOSToken(), tk.EOSToken()
	return chatRenderer{r: r, bos: bos, eos: eos}, nil
}

// chatRenderer adapts a chat.Renderer to ChatTemplate.
type chatRenderer struct {
	r        chat.Renderer
	bos, eos string
}

func (c chatRenderer) Render(msgs []Message, o RenderOptions) (string, error) {
	in := make([]chat.Message, len(msgs))
	for i, m := range msgs {
		in[i] = chat.Message{Role: m.Role, Content: m.Content, ReasoningContent: m.ReasoningContent, ToolCallID: m.ToolCallID, Name: m.Name}
		if len(m.ToolCalls) > 0 {
			data, err := json.Marshal(m.ToolCalls)
			if err == nil {
				err = json.Unmarshal(data, &in[i].ToolCalls)
			}
			if err != nil {
				return "", fmt.Errorf("messages[%d].tool_calls: %w", i, err)
			}
		}
	}
	opt := chat.Options{AddGenerationPrompt: o.AddGenerationPrompt && !o.ContinueFinalMessage, BOSToken: c.bos, EOSToken: c.eos}
	for _, t := range o.Tools {
		data, err := json.Marshal(t)
		if err != nil {
			return "", fmt.Errorf("tools: %w", err)
		}
		opt.Tools = append(opt.Tools, data)
	}
	for k, v := range o.Kwargs {
		if k == "enable_thinking" {
			b, ok := v.(bool)
			if !ok {
				return "", fmt.Errorf("chat_template_kwargs.enable_thinking must be a boolean")
			}
			opt.EnableThinking = &b
			continue
		}
		if opt.Extra == nil {
			opt.Extra = map[string]any{}
		}
		opt.Extra[k] = v
	}
	text, err := c.r.Render(in, opt)
	if err != nil || !o.ContinueFinalMessage {
		return text, err
	}
	// continue_final_message: cut after the last message's content, as
	// Hugging Face's apply_chat_template does.
	last := strings.TrimSpace(msgs[len(msgs)-1].Content)
	i := strings.LastIndex(text, last)
	if last == "" || i < 0 {
		return "", fmt.Errorf("continue_final_message: the final message's content does not appear in the rendered prompt")
	}
	return text[:i+len(last)], nil
}
