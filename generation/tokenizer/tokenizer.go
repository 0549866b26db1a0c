package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// Tokenizer is a loaded Hugging Face BPE tokenizer. It is immutable after
// Load apart from an internal, synchronised cache, so one value may be
// used from any number of goroutines.
type Tokenizer struct {
	file      string // tokenizer.json path (for messages)
	raw       []byte // tokenizer.json contents (for Save)
	rawConfig []byte // tokenizer_config.json contents, or nil

	model  bpeModel
	norm   normalizer
	pre    preTokenizer
	added  addedMatcher
	tokens []string // id → token as spelled in the file ("" for holes)
	bytes  [][]byte // id → decoded bytes (decoder applied per token)
	has    []bool   // id → defined
	spec   []bool   // id → special added token
	specs  []int32  // special ids, ascending

	// From tokenizer_config.json / generation_config.json.
	chatTemplate string
	bos, eos     string
	pad, unk     string
	addBOS       bool
	eosIDs       []int32
}

// Files that Load reads from a model folder.
const (
	FileTokenizer        = "tokenizer.json"
	FileTokenizerConfig  = "tokenizer_config.json"
	FileGenerationConfig = "generation_config.json"
)

// Load reads a tokenizer. path is a model folder holding tokenizer.json, or
// the tokenizer.json file itself; tokenizer_config.json (chat template,
// special-token names, add_bos_token) and generation_config.json
// (eos_token_id) are read from the same folder when present.
func Load(path string) (*Tokenizer, error) {
	dir, file := path, filepath.Join(path, FileTokenizer)
	if st, err := os.Stat(path); err != nil {
		return nil, &FileError{File: path, Err: err}
	} else if !st.IsDir() {
		dir, file = filepath.Dir(path), path
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, &FileError{File: file, Err: err}
	}
	cfgFile := filepath.Join(dir, FileTokenizerConfig)
	cfg, err := os.ReadFile(cfgFile)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, &FileError{File: cfgFile, Err: err}
	}
	if err != nil {
		cfg, cfgFile = nil, ""
	}
	t, err := parse(file, data, cfgFile, cfg)
	if err != nil {
		return nil, err
	}
	genFile := filepath.Join(dir, FileGenerationConfig)
	if gen, err := os.ReadFile(genFile); err == nil {
		if err := t.readGenerationConfig(genFile, gen); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// LoadBytes builds a tokenizer from the contents of tokenizer.json and,
// optionally (nil), tokenizer_config.json.
func LoadBytes(tokenizerJSON, tokenizerConfigJSON []byte) (*Tokenizer, error) {
	cfgName := ""
	if tokenizerConfigJSON != nil {
		cfgName = FileTokenizerConfig
	}
	return parse(FileTokenizer, tokenizerJSON, cfgName, tokenizerConfigJSON)
}

func parse(file string, data []byte, cfgFile string, cfg []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fileErr(file, "", "invalid JSON: %w", err)
	}
	t := &Tokenizer{file: file, raw: data, rawConfig: cfg}
	if err := t.buildModel(file, &f); err != nil {
		return nil, err
	}
	var err error
	if t.norm, err = buildNormalizer(file, "normalizer", f.Normalizer); err != nil {
		return nil, err
	}
	var added []addedToken
	for _, a := range f.AddedTokens {
		added = append(added, addedToken{id: a.ID, content: a.Content, lstrip: a.LStrip, rstrip: a.RStrip,
			singleWord: a.SingleWord, normalized: a.Normalized, special: a.Special})
	}
	t.added = newAddedMatcher(added, t.norm)
	if err := buildPreTokenizer(file, "pre_tokenizer", f.PreTokenizer, &t.pre); err != nil {
		return nil, err
	}
	t.model.byteLevel = t.pre.byteLevel
	for b := range 256 {
		t.model.byteIDs[b] = -1
		if id, ok := t.model.vocab[string(byteToRune[b])]; ok {
			t.model.byteIDs[b] = id
		}
	}
	if err := t.buildDecoder(file, f.Decoder); err != nil {
		return nil, err
	}
	if t.model.ignoreMerges {
		t.model.wordIDs = make(map[string]int32, len(t.model.vocab))
		for tok, id := range t.model.vocab {
			if t.pre.byteLevel {
				t.model.wordIDs[string(byteLevelDecode(tok))] = id
			} else {
				t.model.wordIDs[tok] = id
			}
		}
	}
	t.addBOS = postProcessorAddsBOS(f.PostProcessor)
	if cfg != nil {
		if err := t.readConfig(cfgFile, cfg); err != nil {
			return nil, err
		}
	}
	t.computeEOS(nil)
	return t, nil
}

func (t *Tokenizer) buildModel(file string, f *fileJSON) error {
	m := &f.Model
	if m.Type != "" && m.Type != "BPE" {
		return fileErr(file, "model.type", "unsupported model %q (only BPE)", m.Type)
	}
	if m.Vocab == nil {
		return fileErr(file, "model.vocab", "missing")
	}
	if m.Dropout != nil && *m.Dropout > 0 {
		return fileErr(file, "model.dropout", "BPE dropout %v is not supported", *m.Dropout)
	}
	if m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" {
		return fileErr(file, "model.continuing_subword_prefix", "%q is not supported", *m.ContinuingSubwordPrefix)
	}
	if m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "" {
		return fileErr(file, "model.end_of_word_suffix", "%q is not supported", *m.EndOfWordSuffix)
	}
	size := int32(0)
	for tok, id := range m.Vocab {
		if id < 0 {
			return fileErr(file, "model.vocab", "token %q has negative id %d", tok, id)
		}
		size = max(size, id+1)
	}
	for i, a := range f.AddedTokens {
		if a.ID < 0 {
			return fileErr(file, fmt.Sprintf("added_tokens[%d].id", i), "negative id %d", a.ID)
		}
		if a.Content == "" {
			return fileErr(file, fmt.Sprintf("added_tokens[%d].content", i), "empty")
		}
		size = max(size, a.ID+1)
	}
	if size > 1<<26 {
		return fileErr(file, "model.vocab", "ids up to %d: too large", size-1)
	}
	t.tokens = make([]string, size)
	t.has = make([]bool, size)
	t.spec = make([]bool, size)
	for tok, id := range m.Vocab {
		t.tokens[id], t.has[id] = tok, true
	}
	t.model.vocab = m.Vocab
	t.model.unk = -1
	if m.UnkToken != nil && *m.UnkToken != "" {
		id, ok := m.Vocab[*m.UnkToken]
		if !ok {
			return fileErr(file, "model.unk_token", "%q is not in the vocabulary", *m.UnkToken)
		}
		t.model.unk = id
	}
	t.model.fuseUnk = m.FuseUnk
	t.model.byteFallback = m.ByteFallback
	t.model.ignoreMerges = m.IgnoreMerges
	for b := range 256 {
		t.model.byteFB[b] = -1
		if id, ok := m.Vocab[fmt.Sprintf("<0x%02X>", b)]; ok {
			t.model.byteFB[b] = id
		}
	}
	merges, err := parseMerges(m.Merges)
	if err != nil {
		return fileErr(file, "model.merges", "%w", err)
	}
	t.model.merges = make(map[uint64]merge, len(merges))
	for i, mg := range merges {
		a, okA := m.Vocab[mg[0]]
		b, okB := m.Vocab[mg[1]]
		c, okC := m.Vocab[mg[0]+mg[1]]
		if !okA || !okB || !okC {
			return fileErr(file, fmt.Sprintf("model.merges[%d]", i), "merge %q + %q: a token is not in the vocabulary", mg[0], mg[1])
		}
		k := pairKey(a, b)
		if _, dup := t.model.merges[k]; !dup { // the first (lowest rank) wins
			t.model.merges[k] = merge{rank: int32(i), id: c}
		}
	}
	for _, a := range f.AddedTokens {
		t.tokens[a.ID], t.has[a.ID] = a.Content, true
		if a.Special {
			t.spec[a.ID] = true
		}
	}
	for id, s := range t.spec {
		if s {
			t.specs = append(t.specs, int32(id))
		}
	}
	return nil
}

// postProcessorAddsBOS reports whether a TemplateProcessing post-processor
// puts a special token before the sequence (Llama 3's <|begin_of_text|>).
func postProcessorAddsBOS(raw json.RawMessage) bool {
	var c component
	if json.Unmarshal(raw, &c) != nil {
		return false
	}
	if c.Type == "Sequence" {
		for _, p := range c.Processors {
			if postProcessorAddsBOS(p) {
				return true
			}
		}
		return false
	}
	if c.Type != "TemplateProcessing" || len(c.Single) == 0 {
		return false
	}
	var first map[string]json.RawMessage
	if json.Unmarshal(c.Single[0], &first) != nil {
		return false
	}
	_, ok := first["SpecialToken"]
	return ok
}

func (t *Tokenizer) readConfig(file string, data []byte) error {
	var c tokenizerConfigJSON
	if err := json.Unmarshal(data, &c); err != nil {
		return fileErr(file, "", "invalid JSON: %w", err)
	}
	var err error
	if t.chatTemplate, err = chatTemplate(c.ChatTemplate); err != nil {
		return fileErr(file, "chat_template", "%w", err)
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  *string
	}{{"bos_token", c.BOSToken, &t.bos}, {"eos_token", c.EOSToken, &t.eos}, {"pad_token", c.PadToken, &t.pad}, {"unk_token", c.UnkToken, &t.unk}} {
		if *f.dst, err = tokenString(f.raw); err != nil {
			return fileErr(file, f.name, "%w", err)
		}
		if *f.dst != "" {
			if _, ok := t.TokenID(*f.dst); !ok {
				return fileErr(file, f.name, "%q is not a token of the tokenizer", *f.dst)
			}
		}
	}
	if c.AddBOSToken != nil {
		t.addBOS = *c.AddBOSToken && t.bos != ""
	}
	return nil
}

func (t *Tokenizer) readGenerationConfig(file string, data []byte) error {
	var g struct {
		EOS json.RawMessage `json:"eos_token_id"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		return fileErr(file, "", "invalid JSON: %w", err)
	}
	if len(g.EOS) == 0 || string(g.EOS) == "null" {
		return nil
	}
	var ids []int32
	var one int32
	if err := json.Unmarshal(g.EOS, &one); err == nil {
		ids = []int32{one}
	} else if err := json.Unmarshal(g.EOS, &ids); err != nil {
		return fileErr(file, "eos_token_id", "want an id or a list of ids: %w", err)
	}
	for _, id := range ids {
		if !t.valid(id) {
			return fileErr(file, "eos_token_id", "id %d is not in the vocabulary", id)
		}
	}
	t.computeEOS(ids)
	return nil
}

// endOfTurn are special tokens that end a completion in the model families
// this package serves; EOSIDs includes those that exist.
var endOfTurn = []string{"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "<|eom_id|>"}

func (t *Tokenizer) computeEOS(extra []int32) {
	set := map[int32]bool{}
	for _, id := range t.eosIDs {
		set[id] = true
	}
	for _, id := range extra {
		set[id] = true
	}
	if id, ok := t.TokenID(t.eos); ok && t.eos != "" {
		set[id] = true
	}
	for _, s := range endOfTurn {
		if id, ok := t.TokenID(s); ok && t.spec[id] {
			set[id] = true
		}
	}
	t.eosIDs = t.eosIDs[:0]
	for id := range set {
		t.eosIDs = append(t.eosIDs, id)
	}
	sort.Slice(t.eosIDs, func(i, j int) bool { return t.eosIDs[i] < t.eosIDs[j] })
}

func (t *Tokenizer) valid(id int32) bool { return id >= 0 && int(id) < len(t.has) && t.has[id] }

// VocabSize is one more than the largest token id (model vocabulary and
// added tokens). An embedding matrix may be larger (padded); ids in
// between are holes that decode to nothing.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// TokenID returns the id of a token spelled as in tokenizer.json (byte-level
// spelling, e.g. "Ġthe", or an added token such as "<|im_end|>").
func (t *Tokenizer) TokenID(tok string) (int32, bool) {
	if id, ok := t.added.byContent[tok]; ok {
		return id, true
	}
	id, ok := t.model.vocab[tok]
	return id, ok
}

// IDToken returns the token spelled as in tokenizer.json, or "" and false
// for an id outside the vocabulary.
func (t *Tokenizer) IDToken(id int32) (string, bool) {
	if !t.valid(id) {
		return "", false
	}
	return t.tokens[id], true
}

// TokenBytes returns the bytes that id decodes to (nil for an unknown id).
// The slice is shared: do not modify it.
func (t *Tokenizer) TokenBytes(id int32) []byte {
	if !t.valid(id) {
		return nil
	}
	return t.bytes[id]
}

// IsSpecial reports whether id is an added token marked special.
func (t *Tokenizer) IsSpecial(id int32) bool { return t.valid(id) && t.spec[id] }

// SpecialIDs returns the ids of the special added tokens, ascending.
func (t *Tokenizer) SpecialIDs() []int32 { return append([]int32(nil), t.specs...) }

// AddedTokens returns the contents of all added tokens (special or not),
// in id order.
func (t *Tokenizer) AddedTokens() []string {
	ids := make([]int32, 0, len(t.added.byContent))
	for _, id := range t.added.byContent {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = t.tokens[id]
	}
	return out
}

// EOSIDs returns the ids that end a generation, ascending: generation_config's
// eos_token_id, tokenizer_config's eos_token, and whichever of the special
// tokens <|im_end|>, <|endoftext|>, <|eot_id|>, <|end_of_text|>, <|eom_id|>
// exist.
func (t *Tokenizer) EOSIDs() []int32 { return append([]int32(nil), t.eosIDs...) }

// ChatTemplate returns tokenizer_config.json's chat_template ("" if none).
func (t *Tokenizer) ChatTemplate() string { return t.chatTemplate }

// BOSToken, EOSToken, PadToken return tokenizer_config.json's token names
// ("" when unset).
func (t *Tokenizer) BOSToken() string { return t.bos }
func (t *Tokenizer) EOSToken() string { return t.eos }
func (t *Tokenizer) PadToken() string { return t.pad }

// BOSID returns the id of the BOS token, if the tokenizer has one.
func (t *Tokenizer) BOSID() (int32, bool) {
	if t.bos == "" {
		return 0, false
	}
	return t.TokenID(t.bos)
}

// PadID returns the id of the padding token, if the tokenizer has one.
func (t *Tokenizer) PadID() (int32, bool) {
	if t.pad == "" {
		return 0, false
	}
	return t.TokenID(t.pad)
}

// AddBOS reports whether Hugging Face would prepend the BOS token when
// encoding with add_special_tokens=True (tokenizer_config's add_bos_token,
// else a TemplateProcessing post-processor). Encode never adds it; chat
// templates write it themselves.
func (t *Tokenizer) AddBOS() bool { return t.addBOS }

// File returns the path of the tokenizer.json this tokenizer was loaded from.
func (t *Tokenizer) File() string { return t.file }

// Encode returns the token ids of text, like Hugging Face's
// encode(text, add_special_tokens=False): added tokens (special or not,
// e.g. <|im_start|>) written in the text are recognised first, the rest is
// normalised, pre-tokenised and BPE-encoded. It never adds BOS/EOS.
// Any string is accepted; invalid UTF-8 bytes are encoded as their raw bytes
// by byte-level tokenizers.
func (t *Tokenizer) Encode(text string) []int32 {
	return t.AppendEncode(make([]int32, 0, len(text)/3+4), text)
}

// AppendEncode appends the ids of text to dst and returns the result.
func (t *Tokenizer) AppendEncode(dst []int32, text string) []int32 {
	t.added.split(text, false, func(seg string, id int32) {
		if id >= 0 {
			dst = append(dst, id)
			return
		}
		if t.norm != nil {
			seg = t.norm(seg)
		}
		t.added.split(seg, true, func(seg string, id int32) {
			if id >= 0 {
				dst = append(dst, id)
				return
			}
			t.pre.split(seg, func(word string) {
				dst = t.model.encodeWord(dst, word)
			})
		})
	})
	return dst
}

// EncodeOrdinary encodes text treating added-token strings as plain text
// (Hugging Face's split_special_tokens=True), e.g. for untrusted content.
func (t *Tokenizer) EncodeOrdinary(text string) []int32 {
	var dst []int32
	if t.norm != nil {
		text = t.norm(text)
	}
	t.pre.split(text, func(word string) { dst = t.model.encodeWord(dst, word) })
	return dst
}

// Pretokenize returns the words that text splits into before BPE (after
// normalisation; added tokens are returned as words of their own).
func (t *Tokenizer) Pretokenize(text string) []string {
	var out []string
	t.added.split(text, false, func(seg string, id int32) {
		if id >= 0 {
			out = append(out, seg)
			return
		}
		if t.norm != nil {
			seg = t.norm(seg)
		}
		t.added.split(seg, true, func(seg string, id int32) {
			if id >= 0 {
				out = append(out, seg)
				return
			}
			t.pre.split(seg, func(w string) { out = append(out, w) })
		})
	})
	return out
}

// Normalize applies the tokenizer's normalizer (identity if none). For a
// byte-level tokenizer Decode(Encode(s)) == Normalize(s) whenever the added
// tokens found in s are not affected by normalisation.
func (t *Tokenizer) Normalize(s string) string {
	if t.norm == nil {
		return s
	}
	return t.norm(s)
}
