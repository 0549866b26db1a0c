package tokenizer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// handmade builds a small tokenizer.json. Byte-level vocab "a","b","c","Ġ"
// … plus merges; mergeFmt picks the merges format.
func handmade(t testing.TB, mergesJSON string, extra string) *Tokenizer {
	t.Helper()
	var vocab []string
	for b := range 256 {
		vocab = append(vocab, fmt.Sprintf("%s: %d", jsonString(string(byteToRune[b])), b))
	}
	vocab = append(vocab, `"ab": 256`, `"abc": 257`, `"Ġa": 258`, `"Ġab": 259`, `"aa": 260`)
	js := `{"added_tokens": [
	  {"id": 300, "content": "<|im_start|>", "special": true},
	  {"id": 301, "content": "<|im_end|>", "special": true},
	  {"id": 302, "content": "[L]", "lstrip": true, "special": false},
	  {"id": 303, "content": "[R]", "rstrip": true, "special": false}],
	 "normalizer": null,
	 "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": ` + jsonString(PatternQwen2) + `}, "behavior": "Isolated"}, {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
	 "decoder": {"type": "ByteLevel"},
	 "model": {"type": "BPE", ` + extra + ` "vocab": {` + strings.Join(vocab, ",") + `}, "merges": ` + mergesJSON + `}}`
	tk, err := LoadBytes([]byte(js), nil)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestMergeFormats(t *testing.T) {
	// Ids of single bytes are the byte values here.
	str := handmade(t, `["Ġ a", "a b", "ab c", "Ġa b", "a a"]`, "")
	list := handmade(t, `[["Ġ","a"], ["a","b"], ["ab","c"], ["Ġa","b"], ["a","a"]]`, "")
	cases := []struct {
		in   string
		want []int32
	}{
		{"abc", []int32{257}},
		{"ab ab", []int32{256, 259}},
		{"aaa", []int32{260, 'a'}}, // leftmost pair merges first
		{"aaaa", []int32{260, 260}},
		{"cab", []int32{'c', 256}},
		{" abc", []int32{259, 'c'}}, // Ġa+b (rank 3) comes before ab+c is possible
		{"<|im_start|>ab<|im_end|>", []int32{300, 256, 301}},
		{"x  [L]y", []int32{'x', 302, 'y'}}, // lstrip eats the spaces before
		{"x[R]  y", []int32{'x', 303, 'y'}}, // rstrip eats the spaces after
	}
	for _, c := range cases {
		for name, tk := range map[string]*Tokenizer{"string": str, "list": list} {
			if got := tk.Encode(c.in); !slices.Equal(got, c.want) {
				t.Errorf("%s merges: Encode(%q) = %v, want %v", name, c.in, got, c.want)
			}
		}
	}
	// An unfinished added token is plain text.
	if got := str.Decode(str.Encode("<|im_start")); got != "<|im_start" {
		t.Errorf("round trip of %q = %q", "<|im_start", got)
	}
}

func TestIgnoreMerges(t *testing.T) {
	// With ignore_merges a word in the vocabulary is one token even when
	// the merges would split it differently ("Ġab" exists; merges lack Ġ+a).
	tk := handmade(t, `["a b"]`, `"ignore_merges": true,`)
	if got := tk.Encode(" ab"); !slices.Equal(got, []int32{259}) {
		t.Errorf("ignore_merges: got %v, want [259]", got)
	}
	tk = handmade(t, `["a b"]`, "")
	if got := tk.Encode(" ab"); !slices.Equal(got, []int32{' ', 256}) {
		t.Errorf("merges only: got %v", got)
	}
}

func TestByteFallback(t *testing.T) {
	// A non-byte-level (SentencePiece-style) BPE with <0xXX> tokens.
	var vocab []string
	vocab = append(vocab, `"<unk>": 0`)
	for b := range 256 {
		vocab = append(vocab, fmt.Sprintf(`"<0x%02X>": %d`, b, b+1))
	}
	vocab = append(vocab, `"h": 257`, `"i": 258`, `"hi": 259`, `"▁": 260`, `"▁hi": 261`)
	js := `{"added_tokens": [], "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
	  "pre_tokenizer": null,
	  "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}]},
	  "model": {"type": "BPE", "byte_fallback": true, "fuse_unk": true, "unk_token": "<unk>", "vocab": {` + strings.Join(vocab, ",") + `}, "merges": ["h i", "▁ hi"]}}`
	tk, err := LoadBytes([]byte(js), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := tk.Encode("hi é")
	want := []int32{261, 260, 0xC3 + 1, 0xA9 + 1}
	if !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
	if d := tk.Decode(got); d != " hi é" {
		t.Errorf("Decode = %q", d)
	}
}

func TestLoadDirAndConfig(t *testing.T) {
	tk, err := Load("testdata/tiny")
	if err != nil {
		t.Fatal(err)
	}
	tk2, err := Load("testdata/tiny/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	if tk.VocabSize() != tk2.VocabSize() || tk2.ChatTemplate() != Qwen3ChatTemplate {
		t.Error("loading by file and by folder differ")
	}
	if tk.EOSToken() != "<|im_end|>" || tk.PadToken() != "<|endoftext|>" || tk.BOSToken() != "" || tk.AddBOS() {
		t.Errorf("config: eos %q pad %q bos %q addBOS %v", tk.EOSToken(), tk.PadToken(), tk.BOSToken(), tk.AddBOS())
	}
	endoftext, _ := tk.TokenID("<|endoftext|>")
	imEnd, _ := tk.TokenID("<|im_end|>")
	if got := tk.EOSIDs(); !slices.Equal(got, []int32{endoftext, imEnd}) {
		t.Errorf("EOSIDs = %v", got)
	}
	if got := tk.SpecialIDs(); len(got) != 3 || !tk.IsSpecial(imEnd) {
		t.Errorf("SpecialIDs = %v", got)
	}
	think, ok := tk.TokenID("<think>")
	if !ok || tk.IsSpecial(think) {
		t.Error("<think> should be a non-special added token")
	}
	if s, ok := tk.IDToken(imEnd); !ok || s != "<|im_end|>" {
		t.Errorf("IDToken = %q %v", s, ok)
	}
	if _, ok := tk.IDToken(int32(tk.VocabSize())); ok {
		t.Error("IDToken out of range should fail")
	}
	if id, ok := tk.TokenID("Ġ"); !ok || id != 220 {
		t.Errorf("TokenID(Ġ) = %d %v", id, ok)
	}
	if pad, ok := tk.PadID(); !ok || pad != endoftext {
		t.Errorf("PadID = %d %v", pad, ok)
	}

	// generation_config.json adds its eos ids.
	dir := t.TempDir()
	if err := tk.Save(dir); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, FileGenerationConfig), []byte(`{"eos_token_id": [5, 6]}`), 0o644)
	tk3, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := tk3.EOSIDs(); !slices.Equal(got, []int32{5, 6, endoftext, imEnd}) {
		t.Errorf("EOSIDs with generation_config = %v", got)
	}
}

func TestBadFiles(t *testing.T) {
	good, _ := os.ReadFile("testdata/tiny/tokenizer.json")
	cases := []struct {
		name, json, field string
	}{
		{"not json", `{`, ""},
		{"model type", `{"model": {"type": "Unigram", "vocab": {}}}`, "model.type"},
		{"missing vocab", `{"model": {"type": "BPE"}}`, "model.vocab"},
		{"bad merge", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}}`, "model.merges[0]"},
		{"bad merge format", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["ab"]}}`, "model.merges"},
		{"lookahead regex", strings.Replace(string(good), `\\s+(?!\\S)|\\s+`, `\\s+(?!\\S)|\\s*`, 1), "pre_tokenizer.pretokenizers[0].pattern.Regex"},
		{"normalizer", `{"normalizer": {"type": "BertNormalizer"}, "model": {"type": "BPE", "vocab": {}}}`, "normalizer.type"},
		{"decoder", `{"decoder": {"type": "WordPiece"}, "model": {"type": "BPE", "vocab": {}}}`, "decoder.type"},
	}
	for _, c := range cases {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, FileTokenizer), []byte(c.json), 0o644)
		_, err := Load(dir)
		var fe *FileError
		if !errors.As(err, &fe) || !fe.BadInput() {
			t.Errorf("%s: err = %v, want a *FileError", c.name, err)
			continue
		}
		if fe.Field != c.field || !strings.Contains(err.Error(), dir) || !strings.HasPrefix(err.Error(), "tokenizer: ") {
			t.Errorf("%s: field %q (want %q), message %q", c.name, fe.Field, c.field, err)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("missing folder: no error")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, FileTokenizer), good, 0o644)
	os.WriteFile(filepath.Join(dir, FileTokenizerConfig), []byte(`{"eos_token": "<|nope|>"}`), 0o644)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "eos_token") {
		t.Errorf("unknown eos_token: err = %v", err)
	}
}

func TestDecodeLossy(t *testing.T) {
	cases := []struct{ in, want string }{
		{"abc", "abc"},
		{"\xe2\x82", "\ufffd"},                 // truncated 3-byte char: one U+FFFD
		{"\xe2\x82x", "\ufffdx"},               //
		{"\xff\xfe", "\ufffd\ufffd"},           // two invalid bytes
		{"\xed\xa0\x80", "\ufffd\ufffd\ufffd"}, // surrogate: E D then A0 is out of range
		{"\xf0\x9f\x98", "\ufffd"},             // truncated emoji
		{"\xf0\x9f\x98\x80", "😀"},
		{"\xc0\xaf", "\ufffd\ufffd"},
	}
	for _, c := range cases {
		if got := string(appendLossy(nil, []byte(c.in))); got != c.want {
			t.Errorf("lossy(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestStreamDecoder(t *testing.T) {
	tk := tinyTokenizer(t)
	text := "Emoji 👨‍👩‍👧 and 中文 and <|im_end|> done"
	ids := tk.Encode(text)
	d := tk.NewStreamDecoder(false)
	var parts []string
	for _, id := range ids {
		s := d.Add(id)
		if !utf8.ValidString(s) {
			t.Fatalf("Add returned invalid UTF-8 %q", s)
		}
		parts = append(parts, s)
	}
	parts = append(parts, d.Flush())
	if got := strings.Join(parts, ""); got != text {
		t.Errorf("stream = %q, want %q", got, text)
	}
	// Emoji bytes are split across several byte tokens: some Adds return "".
	if slices.Index(parts, "") < 0 {
		t.Error("expected some tokens to complete no character")
	}
	d = tk.NewStreamDecoder(true)
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(d.Add(id))
	}
	if got := b.String() + d.Flush(); got != tk.DecodeSkipSpecial(ids) || strings.Contains(got, "<|im_end|>") {
		t.Errorf("skip special stream = %q", got)
	}
}

// expectRoundTrip is what Decode(Encode(s)) must return: s with each
// stretch between added tokens normalised (NFC for the tiny tokenizer).
func expectRoundTrip(tk *Tokenizer, s string) string {
	var b strings.Builder
	tk.added.split(s, false, func(seg string, id int32) {
		if id >= 0 {
			b.WriteString(seg)
		} else {
			b.WriteString(tk.Normalize(seg))
		}
	})
	return b.String()
}

func FuzzRoundTrip(f *testing.F) {
	for _, s := range readCorpus(f) {
		f.Add(s)
	}
	f.Add("a\u0301\u0300 \xff\xfe  x<|im_end|>\u0338")
	tk := tinyTokenizer(f)
	f.Fuzz(func(t *testing.T, s string) {
		ids := tk.Encode(s)
		want := expectRoundTrip(tk, s)
		if got := string(tk.DecodeBytes(ids)); got != want {
			t.Fatalf("DecodeBytes(Encode(%q)) = %q, want %q", s, got, want)
		}
		if utf8.ValidString(s) {
			if got := tk.Decode(ids); got != want {
				t.Fatalf("Decode(Encode(%q)) = %q, want %q", s, got, want)
			}
			if norm.NFC.IsNormalString(s) && !strings.ContainsAny(s, "<") && want != s {
				t.Fatalf("NFC input %q came back as %q", s, want)
			}
		}
		// The linear and heap merge loops agree on every word.
		for _, w := range tk.Pretokenize(s) {
			syms := tk.model.initialSymbols(nil, w)
			a, b := slices.Clone(syms), slices.Clone(syms)
			na := tk.model.mergeSymbols(a)
			if len(b) <= linearMergeLimit {
				nb := tk.model.mergeHeap(b)
				if !slices.Equal(a[:na], b[:nb]) {
					t.Fatalf("word %q: linear %v, heap %v", w, a[:na], b[:nb])
				}
			}
		}
	})
}

func FuzzDecodeBytes(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x10, 0, 0, 0})
	tk := tinyTokenizer(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		ids := make([]int32, len(raw)/2)
		for i := range ids {
			ids[i] = int32(int16(uint16(raw[2*i]) | uint16(raw[2*i+1])<<8)) // includes negatives and ids past the vocab
		}
		b := tk.DecodeBytes(ids)
		s := tk.Decode(ids)
		if !utf8.ValidString(s) {
			t.Fatalf("Decode returned invalid UTF-8")
		}
		if string(appendLossy(nil, b)) != s {
			t.Fatalf("Decode != lossy(DecodeBytes)")
		}
		d := tk.NewStreamDecoder(false)
		var out strings.Builder
		for _, id := range ids {
			out.WriteString(d.Add(id))
			if d.Pending() > 3 {
				t.Fatalf("pending %d bytes", d.Pending())
			}
		}
		out.WriteString(d.Flush())
		if out.String() != s {
			t.Fatalf("stream %q != Decode %q", out.String(), s)
		}
	})
}

func TestConcurrentEncode(t *testing.T) {
	tk := tinyTokenizer(t)
	corpus := readCorpus(t)
	want := make([][]int32, len(corpus))
	for i, s := range corpus {
		want[i] = tk.Encode(s)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range corpus {
				i := (k + g*7) % len(corpus)
				if got := tk.Encode(corpus[i]); !slices.Equal(got, want[i]) {
					t.Errorf("concurrent Encode(%q) differs", corpus[i])
					return
				}
				_ = tk.Decode(want[i])
			}
		}()
	}
	wg.Wait()
}

func TestLongWords(t *testing.T) {
	// Long runs take the heap path and stay linear-ish.
	tk := tinyTokenizer(t)
	for _, s := range []string{strings.Repeat("=", 100000), strings.Repeat(" ", 100000) + "x", strings.Repeat("ab", 50000)} {
		ids := tk.Encode(s)
		if got := tk.Decode(ids); got != s {
			t.Errorf("round trip of a %d-byte run failed", len(s))
		}
	}
}
