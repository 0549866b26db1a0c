package tokenizer

import (
	"bytes"
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Defaults for Train and TrainByteLevelBPE.
var (
	// DefaultSpecials are Qwen's special tokens, in id order after the BPE vocabulary.
	DefaultSpecials = []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}
	// DefaultAddedTokens are non-special added tokens (Qwen3's thinking tags,
	// which its chat template writes).
	DefaultAddedTokens = []string{"<think>", "</think>"}
)

// TrainOptions configures Train.
type TrainOptions struct {
	// VocabSize is the total number of ids: 256 byte tokens + merges +
	// special and added tokens. Training stops earlier when no pair occurs
	// MinFrequency times. Must be ≥ 256 + len(Specials) + len(AddedTokens).
	VocabSize int
	// Specials are special added tokens (default DefaultSpecials); they are
	// recognised in text and never learned from.
	Specials []string
	// AddedTokens are non-special added tokens (nil: DefaultAddedTokens;
	// an empty non-nil slice: none).
	AddedTokens []string
	// MinFrequency is the minimum count of a pair to be merged (default 2).
	MinFrequency int
	// ChatTemplate goes to tokenizer_config.json (default Qwen3ChatTemplate).
	ChatTemplate string
	// EOSToken and PadToken name tokenizer_config.json's eos_token and
	// pad_token (defaults "<|im_end|>" and "<|endoftext|>" when those are
	// specials).
	EOSToken, PadToken string
	// ModelMaxLength goes to tokenizer_config.json (default 32768).
	ModelMaxLength int
}

// TrainByteLevelBPE trains a Qwen-style byte-level BPE tokenizer on corpus:
// NFC normaliser, Qwen2's split regex, ByteLevel pre-tokenizer and decoder,
// the 256 byte tokens (ids 0–255 in byte-level-rune order, as Qwen's),
// then merges in the order learned, then specials (nil: DefaultSpecials)
// and DefaultAddedTokens. vocabSize counts all ids. Training is
// deterministic: the same corpus and options give byte-identical files
// (ties between equally frequent pairs go to the smaller token ids).
// Save writes tokenizer.json and a Qwen3-style tokenizer_config.json.
func TrainByteLevelBPE(corpus []string, vocabSize int, specials []string) (*Tokenizer, error) {
	return Train(corpus, TrainOptions{VocabSize: vocabSize, Specials: specials})
}

// Train is TrainByteLevelBPE with all options.
func Train(corpus []string, o TrainOptions) (*Tokenizer, error) {
	if o.Specials == nil {
		o.Specials = DefaultSpecials
	}
	if o.AddedTokens == nil {
		o.AddedTokens = DefaultAddedTokens
	}
	if o.MinFrequency <= 0 {
		o.MinFrequency = 2
	}
	if o.ChatTemplate == "" {
		o.ChatTemplate = Qwen3ChatTemplate
	}
	if o.ModelMaxLength <= 0 {
		o.ModelMaxLength = 32768
	}
	seen := map[string]bool{}
	for _, s := range append(append([]string(nil), o.Specials...), o.AddedTokens...) {
		if s == "" || seen[s] {
			return nil, fmt.Errorf("tokenizer: train: special/added token %q is empty or repeated", s)
		}
		seen[s] = true
	}
	if o.EOSToken == "" && seen["<|im_end|>"] {
		o.EOSToken = "<|im_end|>"
	}
	if o.PadToken == "" && seen["<|endoftext|>"] {
		o.PadToken = "<|endoftext|>"
	}
	for _, s := range []string{o.EOSToken, o.PadToken} {
		if s != "" && !seen[s] {
			return nil, fmt.Errorf("tokenizer: train: eos/pad token %q is not among the special tokens", s)
		}
	}
	nAdded := len(o.Specials) + len(o.AddedTokens)
	if o.VocabSize < 256+nAdded {
		return nil, fmt.Errorf("tokenizer: train: vocab size %d < 256 byte tokens + %d special/added tokens", o.VocabSize, nAdded)
	}
	merges, tokens := learnMerges(corpus, o.Specials, o.AddedTokens, o.VocabSize-256-nAdded, o.MinFrequency)
	tj, cfg := writeTrained(merges, tokens, o)
	t, err := LoadBytes(tj, cfg)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: train: reloading the trained tokenizer: %w", err)
	}
	return t, nil
}

// byteOrder lists the bytes in the order of their byte-level runes; the
// base vocabulary uses this order (Qwen's and GPT-2's ids 0–255).
func byteOrder() [256]byte {
	var order [256]byte
	for i := range order {
		order[i] = byte(i)
	}
	sort.Slice(order[:], func(i, j int) bool { return byteToRune[order[i]] < byteToRune[order[j]] })
	return order
}

type trainWord struct {
	syms  []int32
	count int64
}

type pairCount struct {
	count int64
	pair  uint64
}

type pairHeap []pairCount

func (h pairHeap) Len() int { return len(h) }
func (h pairHeap) Less(i, j int) bool {
	if h[i].count != h[j].count {
		return h[i].count > h[j].count
	}
	return h[i].pair < h[j].pair
}
func (h pairHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pairHeap) Push(x any)   { *h = append(*h, x.(pairCount)) }
func (h *pairHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// learnMerges learns merges until the vocabulary holds 256+maxNew tokens;
// it returns the merges (pairs of token byte strings) and the tokens
// (bytes, in id order, the 256 byte tokens first). As in Hugging Face's
// trainer, a merge whose result already exists reuses that token.
func learnMerges(corpus, specials, added []string, maxNew, minFreq int) ([][2]string, [][]byte) {
	// Count words: NFC, drop special/added strings, split with Qwen2's regex.
	var toks []addedToken
	for i, s := range append(append([]string(nil), specials...), added...) {
		toks = append(toks, addedToken{id: int32(i), content: s})
	}
	am := newAddedMatcher(toks, nil)
	counts := map[string]int64{}
	for _, doc := range corpus {
		am.split(doc, false, func(seg string, id int32) {
			if id >= 0 {
				return
			}
			seg = norm.NFC.String(seg)
			for p := 0; p < len(seg); {
				e := scanCL100K(seg, p, 1)
				counts[seg[p:e]]++
				p = e
			}
		})
	}
	keys := make([]string, 0, len(counts))
	for w := range counts {
		keys = append(keys, w)
	}
	sort.Strings(keys)

	// Token ids during training: 0–255 are the bytes in byte-level order.
	order := byteOrder()
	var idOf [256]int32
	tokBytes := make([][]byte, 256, 256+maxNew)
	tokID := map[string]int32{}
	for i, b := range order {
		idOf[b] = int32(i)
		tokBytes[i] = []byte{b}
		tokID[string([]byte{b})] = int32(i)
	}
	words := make([]trainWord, len(keys))
	pairs := map[uint64]int64{}
	where := map[uint64][]int32{}
	for wi, w := range keys {
		syms := make([]int32, len(w))
		for i := 0; i < len(w); i++ {
			syms[i] = idOf[w[i]]
		}
		c := counts[w]
		words[wi] = trainWord{syms, c}
		for i := 0; i+1 < len(syms); i++ {
			k := pairKey(syms[i], syms[i+1])
			pairs[k] += c
			if l := where[k]; len(l) == 0 || l[len(l)-1] != int32(wi) {
				where[k] = append(l, int32(wi))
			}
		}
	}
	h := make(pairHeap, 0, len(pairs))
	for k, c := range pairs {
		h = append(h, pairCount{c, k})
	}
	heap.Init(&h)

	var merges [][2]string
	newPairs := map[uint64]bool{}
	for len(tokBytes) < 256+maxNew && h.Len() > 0 {
		top := heap.Pop(&h).(pairCount)
		if cur := pairs[top.pair]; cur != top.count {
			if cur > 0 {
				heap.Push(&h, pairCount{cur, top.pair})
			}
			continue
		}
		if top.count < int64(minFreq) {
			break
		}
		a, b := int32(top.pair>>32), int32(uint32(top.pair))
		nb := append(append([]byte(nil), tokBytes[a]...), tokBytes[b]...)
		nid, ok := tokID[string(nb)]
		if !ok {
			nid = int32(len(tokBytes))
			tokBytes = append(tokBytes, nb)
			tokID[string(nb)] = nid
		}
		merges = append(merges, [2]string{string(tokBytes[a]), string(tokBytes[b])})
		clear(newPairs)
		for _, wi := range where[top.pair] {
			w := &words[wi]
			s := w.syms
			found := false
			for i := 0; i+1 < len(s); i++ {
				if s[i] == a && s[i+1] == b {
					found = true
					break
				}
			}
			if !found {
				continue
			}
			for i := 0; i+1 < len(s); i++ {
				pairs[pairKey(s[i], s[i+1])] -= w.count
			}
			out := s[:0]
			for i := 0; i < len(s); i++ {
				if i+1 < len(s) && s[i] == a && s[i+1] == b {
					out = append(out, nid)
					i++
				} else {
					out = append(out, s[i])
				}
			}
			w.syms = out
			for i := 0; i+1 < len(out); i++ {
				k := pairKey(out[i], out[i+1])
				pairs[k] += w.count
				if out[i] == nid || out[i+1] == nid {
					newPairs[k] = true
					if l := where[k]; len(l) == 0 || l[len(l)-1] != wi {
						where[k] = append(l, wi)
					}
				}
			}
		}
		delete(pairs, top.pair)
		delete(where, top.pair)
		ks := make([]uint64, 0, len(newPairs))
		for k := range newPairs {
			ks = append(ks, k)
		}
		sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
		for _, k := range ks {
			if c := pairs[k]; c > 0 {
				heap.Push(&h, pairCount{c, k})
			}
		}
	}
	return merges, tokBytes
}

// jsonString encodes s as a JSON string without HTML escaping.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// writeTrained renders tokenizer.json and tokenizer_config.json.
func writeTrained(merges [][2]string, tokens [][]byte, o TrainOptions) (tokJSON, cfgJSON []byte) {
	vocab := make([]string, len(tokens))
	for i, tk := range tokens {
		vocab[i] = byteLevelString(tk)
	}
	type added struct {
		id      int
		content string
		special bool
	}
	var adds []added
	for _, s := range o.Specials {
		adds = append(adds, added{len(vocab) + len(adds), s, true})
	}
	for _, s := range o.AddedTokens {
		adds = append(adds, added{len(vocab) + len(adds), s, false})
	}

	var b bytes.Buffer
	b.WriteString("{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [")
	for i, a := range adds {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "\n    {\n      \"id\": %d,\n      \"content\": %s,\n      \"single_word\": false,\n      \"lstrip\": false,\n      \"rstrip\": false,\n      \"normalized\": false,\n      \"special\": %t\n    }", a.id, jsonString(a.content), a.special)
	}
	bl := `{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}`
	fmt.Fprintf(&b, "\n  ],\n  \"normalizer\": {\"type\": \"NFC\"},\n  \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": %s}, \"behavior\": \"Isolated\", \"invert\": false}, %s]},\n", jsonString(PatternQwen2), bl)
	fmt.Fprintf(&b, "  \"post_processor\": %s,\n  \"decoder\": %s,\n", bl, bl)
	b.WriteString("  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n    \"continuing_subword_prefix\": \"\",\n    \"end_of_word_suffix\": \"\",\n    \"fuse_unk\": false,\n    \"byte_fallback\": false,\n    \"ignore_merges\": false,\n    \"vocab\": {")
	for i, v := range vocab {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "\n      %s: %d", jsonString(v), i)
	}
	b.WriteString("\n    },\n    \"merges\": [")
	for i, m := range merges {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "\n      [%s, %s]", jsonString(byteLevelString([]byte(m[0]))), jsonString(byteLevelString([]byte(m[1]))))
	}
	b.WriteString("\n    ]\n  }\n}\n")
	tokJSON = b.Bytes()

	var c bytes.Buffer
	c.WriteString("{\n  \"add_bos_token\": false,\n  \"add_prefix_space\": false,\n  \"added_tokens_decoder\": {")
	for i, a := range adds {
		if i > 0 {
			c.WriteString(",")
		}
		fmt.Fprintf(&c, "\n    %q: {\n      \"content\": %s,\n      \"lstrip\": false,\n      \"normalized\": false,\n      \"rstrip\": false,\n      \"single_word\": false,\n      \"special\": %t\n    }", strconv.Itoa(a.id), jsonString(a.content), a.special)
	}
	c.WriteString("\n  },\n  \"additional_special_tokens\": [")
	n := 0
	for _, a := range adds {
		if a.special && a.content != o.EOSToken && a.content != o.PadToken {
			if n > 0 {
				c.WriteString(", ")
			}
			c.WriteString(jsonString(a.content))
			n++
		}
	}
	opt := func(s string) string {
		if s == "" {
			return "null"
		}
		return jsonString(s)
	}
	fmt.Fprintf(&c, "],\n  \"bos_token\": null,\n  \"chat_template\": %s,\n  \"clean_up_tokenization_spaces\": false,\n  \"eos_token\": %s,\n  \"errors\": \"replace\",\n  \"model_max_length\": %d,\n  \"pad_token\": %s,\n  \"split_special_tokens\": false,\n  \"tokenizer_class\": \"Qwen2Tokenizer\",\n  \"unk_token\": null\n}\n",
		jsonString(o.ChatTemplate), opt(o.EOSToken), o.ModelMaxLength, opt(o.PadToken))
	cfgJSON = c.Bytes()
	if !utf8.Valid(tokJSON) {
		panic("tokenizer: internal error: invalid UTF-8 in generated tokenizer.json")
	}
	return tokJSON, cfgJSON
}

// Save writes the tokenizer's tokenizer.json and, when it has one,
// tokenizer_config.json into dir (created if missing), each written to a
// temporary name and renamed.
func (t *Tokenizer) Save(dir string) error {
	if t.raw == nil {
		return errors.New("tokenizer: save: the tokenizer's source JSON was not kept")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("tokenizer: save: %w", err)
	}
	if err := writeAtomic(filepath.Join(dir, FileTokenizer), t.raw); err != nil {
		return err
	}
	if t.rawConfig != nil {
		return writeAtomic(filepath.Join(dir, FileTokenizerConfig), t.rawConfig)
	}
	return nil
}

// JSON returns the contents of the tokenizer.json the tokenizer was built
// from (shared; do not modify).
func (t *Tokenizer) JSON() []byte { return t.raw }

// ConfigJSON returns the contents of its tokenizer_config.json, or nil.
func (t *Tokenizer) ConfigJSON() []byte { return t.rawConfig }

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("tokenizer: save: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("tokenizer: save: %w", err)
	}
	return nil
}
