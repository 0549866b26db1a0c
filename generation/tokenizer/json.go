package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The parts of Hugging Face's tokenizer.json that this package reads.

type fileJSON struct {
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	PostProcessor json.RawMessage  `json:"post_processor"`
	Decoder       json.RawMessage  `json:"decoder"`
	Model         modelJSON        `json:"model"`
}

type addedTokenJSON struct {
	ID         int32  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type modelJSON struct {
	Type                    string           `json:"type"`
	Dropout                 *float64         `json:"dropout"`
	UnkToken                *string          `json:"unk_token"`
	ContinuingSubwordPrefix *string          `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string          `json:"end_of_word_suffix"`
	FuseUnk                 bool             `json:"fuse_unk"`
	ByteFallback            bool             `json:"byte_fallback"`
	IgnoreMerges            bool             `json:"ignore_merges"`
	Vocab                   map[string]int32 `json:"vocab"`
	Merges                  json.RawMessage  `json:"merges"`
}

// component is any normalizer, pre-tokenizer, decoder or post-processor node.
type component struct {
	Type string `json:"type"`
	// Sequence
	Normalizers   []json.RawMessage `json:"normalizers"`
	Pretokenizers []json.RawMessage `json:"pretokenizers"`
	Decoders      []json.RawMessage `json:"decoders"`
	Processors    []json.RawMessage `json:"processors"`
	// Split / Replace
	Pattern  *patternJSON `json:"pattern"`
	Behavior string       `json:"behavior"`
	Invert   bool         `json:"invert"`
	Content  string       `json:"content"`
	// ByteLevel
	AddPrefixSpace bool  `json:"add_prefix_space"`
	UseRegex       *bool `json:"use_regex"`
	// Digits
	IndividualDigits bool `json:"individual_digits"`
	// Strip (decoder)
	Start int `json:"start"`
	Stop  int `json:"stop"`
	// TemplateProcessing
	Single []json.RawMessage `json:"single"`
}

type patternJSON struct {
	Regex  *string `json:"Regex"`
	String *string `json:"String"`
}

// parseMerges accepts both merge formats: ["a b", ...] (older files) and
// [["a","b"], ...] (tokenizers ≥ 0.20).
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("not a list: %w", err)
	}
	out := make([][2]string, len(items))
	for i, it := range items {
		if len(it) > 0 && it[0] == '"' {
			var s string
			if err := json.Unmarshal(it, &s); err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			a, b, ok := strings.Cut(s, " ")
			if !ok || a == "" || b == "" {
				return nil, fmt.Errorf("[%d]: %q is not two tokens separated by a space", i, s)
			}
			out[i] = [2]string{a, b}
			continue
		}
		var pair []string
		if err := json.Unmarshal(it, &pair); err != nil || len(pair) != 2 {
			return nil, fmt.Errorf("[%d]: want \"a b\" or [\"a\", \"b\"], got %s", i, truncate(string(it), 40))
		}
		out[i] = [2]string{pair[0], pair[1]}
	}
	return out, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// tokenizerConfigJSON is the part of tokenizer_config.json this package reads.
// Special tokens may be strings or {"content": ...} objects.
type tokenizerConfigJSON struct {
	ChatTemplate json.RawMessage `json:"chat_template"`
	BOSToken     json.RawMessage `json:"bos_token"`
	EOSToken     json.RawMessage `json:"eos_token"`
	PadToken     json.RawMessage `json:"pad_token"`
	UnkToken     json.RawMessage `json:"unk_token"`
	AddBOSToken  *bool           `json:"add_bos_token"`
	AddEOSToken  *bool           `json:"add_eos_token"`
}

// tokenString decodes a special-token field: null, "str" or {"content": "str"}.
func tokenString(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var obj struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", fmt.Errorf("want a string or {\"content\": ...}: %w", err)
	}
	return obj.Content, nil
}

// chatTemplate decodes chat_template: a string, or a list of
// {"name", "template"} (the one named "default" is used, else the first).
func chatTemplate(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var list []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return "", fmt.Errorf("want a string or a list of {name, template}: %w", err)
	}
	for _, t := range list {
		if t.Name == "default" {
			return t.Template, nil
		}
	}
	if len(list) > 0 {
		return list[0].Template, nil
	}
	return "", nil
}
