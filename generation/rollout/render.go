package rollout

import (
	"fmt"

	"github.com/troupe-rl/troupe/envs"
	"github.com/troupe-rl/troupe/generation"
	"github.com/troupe-rl/troupe/generation/chat"
	"github.com/troupe-rl/troupe/generation/tokenizer"
)

// NewRenderer returns the prompt renderer a generation config asks for:
// the chat template of cfg.Tokenizer's model (chat_template: auto) or a
// named built-in format, always with the generation prompt appended.
func NewRenderer(cfg generation.Config) (func(envs.Prompt) (string, error), error) {
	var tok *tokenizer.Tokenizer
	if cfg.Tokenizer != "" {
		t, err := tokenizer.Load(cfg.Tokenizer)
		if err != nil {
			return nil, fmt.Errorf("rollout: generation.tokenizer: %w", err)
		}
		tok = t
	}
	r, err := chat.Select(tok, cfg.ChatTemplate)
	if err != nil {
		return nil, fmt.Errorf("rollout: generation.chat_template: %w", err)
	}
	opts := chat.Options{AddGenerationPrompt: true, EnableThinking: chat.Bool(cfg.EnableThinking)}
	return func(p envs.Prompt) (string, error) {
		msgs := p.Messages()
		cm := make([]chat.Message, len(msgs))
		for i, m := range msgs {
			cm[i] = chat.Message{Role: m.Role, Content: m.Content}
		}
		return r.Render(cm, opts)
	}, nil
}
