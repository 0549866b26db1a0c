package server

import (
	"strings"

	"github.com/troupe-rl/troupe/generation/tokenizer"
	"github.com/troupe-rl/troupe/internal/hf"
)

// chatTemplateFor picks the chat renderer for a model.
func chatTemplateFor(tk *tokenizer.Tokenizer, cfg *hf.ModelConfig) (ChatTemplate, error) {
	return chatMLTemplate{}, nil
}

// chatMLTemplate renders ChatML (Qwen's format) with Qwen3's
// enable_thinking switch: the fallback for models without a usable
// chat_template.
type chatMLTemplate struct{}

func (chatMLTemplate) Render(msgs []Message, o RenderOptions) (string, error) {
	var sb strings.Builder
	for i, m := range msgs {
		sb.WriteString("<|im_start|>" + m.Role + "\n" + m.Content)
		if o.ContinueFinalMessage && i == len(msgs)-1 {
			return sb.String(), nil
		}
		sb.WriteString("<|im_end|>\n")
	}
	if o.AddGenerationPrompt {
		sb.WriteString("<|im_start|>assistant\n")
		if v, ok := o.Kwargs["enable_thinking"].(bool); ok && !v {
			sb.WriteString("<think>\n\n</think>\n\n")
		}
	}
	return sb.String(), nil
}
