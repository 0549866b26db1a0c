package modelgen

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/troupe-rl/troupe/generation/tokenizer"
	"github.com/troupe-rl/troupe/internal/atomicfile"
	"github.com/troupe-rl/troupe/internal/hf"
)

// tokInfo is what the model config needs from the tokenizer.
type tokInfo struct {
	vocab  int // vocab_size for config.json (≥ tokens)
	tokens int // ids the tokenizer defines
	eos    []int
	bos    *int
}

// Llama 3's special tokens and chat template (Qwen3's come from the
// tokenizer package's defaults).
var llamaSpecials = []string{"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}

const templateLlama = `{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}{%- endfor %}` +
	`{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{%- endif %}`

// writeTokenizer trains a byte-level BPE tokenizer (tokenizer.Train) on the
// corpus and writes tokenizer.json and tokenizer_config.json into dir, or
// copies the tokenizer named by o.Tokenizer.
func writeTokenizer(dir string, c *hf.ModelConfig, o Options) (*tokInfo, error) {
	if o.Tokenizer != "" {
		return copyTokenizer(dir, o.Tokenizer)
	}
	corpus := builtinCorpus
	if o.Corpus != "" {
		data, err := os.ReadFile(o.Corpus)
		if err != nil {
			return nil, badf("corpus: %v", err)
		}
		corpus = string(data)
	}
	to := tokenizer.TrainOptions{VocabSize: o.Vocab, ModelMaxLength: o.MaxPositions}
	if o.Arch == ArchLlama {
		to.Specials, to.AddedTokens = llamaSpecials, []string{}
		to.ChatTemplate, to.EOSToken, to.PadToken = templateLlama, "<|eot_id|>", "<|end_of_text|>"
	}
	if min := 256 + max(len(to.Specials), len(tokenizer.DefaultSpecials)+len(tokenizer.DefaultAddedTokens)); o.Vocab < min {
		return nil, badf("vocab %d is too small: a byte-level tokenizer needs 256 byte tokens plus its special tokens (at least %d)", o.Vocab, min)
	}
	tk, err := tokenizer.Train(strings.SplitAfter(corpus, "\n"), to)
	if err != nil {
		return nil, badf("training the tokenizer: %v", err)
	}
	if err := tk.Save(dir); err != nil {
		return nil, fmt.Errorf("modelgen: %w", err)
	}
	if o.Arch == ArchLlama {
		// Llama 3 prepends <|begin_of_text|> when encoding with special tokens.
		if err := patchJSON(filepath.Join(dir, tokenizer.FileTokenizerConfig), map[string]any{
			"add_bos_token": true, "bos_token": "<|begin_of_text|>", "tokenizer_class": "PreTrainedTokenizerFast",
		}); err != nil {
			return nil, err
		}
	}
	tk, err = tokenizer.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("modelgen: the trained tokenizer does not load: %w", err)
	}
	info := &tokInfo{tokens: tk.VocabSize(), vocab: max(o.Vocab, tk.VocabSize())}
	eosNames := []string{"<|im_end|>", "<|endoftext|>"}
	if o.Arch == ArchLlama {
		eosNames = []string{"<|eot_id|>", "<|end_of_text|>"}
		bos, _ := tk.TokenID("<|begin_of_text|>")
		b := int(bos)
		info.bos = &b
	}
	for _, s := range eosNames {
		id, ok := tk.TokenID(s)
		if !ok {
			return nil, fmt.Errorf("modelgen: trained tokenizer lacks %s", s)
		}
		info.eos = append(info.eos, int(id))
	}
	return info, nil
}

// patchJSON sets keys in a JSON object file.
func patchJSON(path string, set map[string]any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("modelgen: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("modelgen: %s: %w", path, err)
	}
	for k, v := range set {
		m[k] = v
	}
	return writeJSON(path, m)
}

// copyTokenizer copies a tokenizer.json (path is the file or a folder
// holding it) and, if present beside it, tokenizer_config.json.
func copyTokenizer(dir, path string) (*tokInfo, error) {
	t, err := tokenizer.Load(path)
	if err != nil {
		return nil, fmt.Errorf("modelgen: --tokenizer: %w", err)
	}
	src := t.File()
	srcDir := filepath.Dir(src)
	for _, name := range []string{tokenizer.FileTokenizer, tokenizer.FileTokenizerConfig} {
		from := filepath.Join(srcDir, name)
		if name == tokenizer.FileTokenizer {
			from = src
		}
		data, err := os.ReadFile(from)
		if os.IsNotExist(err) && name != tokenizer.FileTokenizer {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("modelgen: %w", err)
		}
		if err := atomicfile.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return nil, fmt.Errorf("modelgen: %w", err)
		}
	}
	info := &tokInfo{tokens: t.VocabSize(), vocab: t.VocabSize()}
	for _, id := range t.EOSIDs() {
		info.eos = append(info.eos, int(id))
	}
	if len(info.eos) == 0 {
		for _, s := range []string{"<|im_end|>", "<|eot_id|>", "<|endoftext|>", "<|end_of_text|>", "</s>"} {
			if id, ok := t.TokenID(s); ok {
				info.eos = append(info.eos, int(id))
			}
		}
	}
	if id, ok := t.BOSID(); ok && t.AddBOS() {
		b := int(id)
		info.bos = &b
	}
	return info, nil
}
