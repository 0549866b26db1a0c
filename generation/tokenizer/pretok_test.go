package tokenizer

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A reference for the lookahead patterns built on Go's regexp: at each
// position the pattern is matched anchored, with \s spelled out as Unicode
// White_Space (RE2's \s is ASCII) and \s+(?!\S) rewritten as
// `\s+$|(\s+)\s`, whose group 1 is the match when it takes part. This is
// slow (quadratic) but obviously equivalent to the backtracking regex.
const (
	ws    = `\t\n\v\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}`
	sp    = `[` + ws + `]`
	other = `[^` + ws + `\p{L}\p{N}]`
)

var refPatterns = map[string]*regexp.Regexp{
	PatternQwen2:  regexp.MustCompile(`^(?:(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?` + other + `+[\r\n]*|` + sp + `*[\r\n]+|` + sp + `+$|(` + sp + `+)` + sp + `|` + sp + `+)`),
	PatternLlama3: regexp.MustCompile(`^(?:(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?` + other + `+[\r\n]*|` + sp + `*[\r\n]+|` + sp + `+$|(` + sp + `+)` + sp + `|` + sp + `+)`),
	PatternGPT2:   regexp.MustCompile(`^(?:'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?` + other + `+|` + sp + `+$|(` + sp + `+)` + sp + `|` + sp + `+)`),
}

func refSplit(pattern, s string) []string {
	re := refPatterns[pattern]
	var out []string
	for p := 0; p < len(s); {
		m := re.FindStringSubmatchIndex(s[p:])
		if m == nil || m[1] == 0 {
			panic("reference pattern does not tile the input")
		}
		end := m[1]
		if m[2] >= 0 {
			end = m[3]
		}
		out = append(out, s[p:p+end])
		p += end
	}
	return out
}

func scannerSplit(pattern, s string) []string {
	m, err := newRegexMatcher(pattern)
	if err != nil {
		panic(err)
	}
	var out []string
	splitIsolated(s, m, func(w string) { out = append(out, w) })
	return out
}

var pretokCases = []struct {
	in   string
	want []string // for PatternQwen2
}{
	{"Hello world", []string{"Hello", " world"}},
	{"a  b", []string{"a", " ", " b"}},
	{"a   b", []string{"a", "  ", " b"}},
	{"trailing  ", []string{"trailing", "  "}},
	{"x\n\n  y", []string{"x", "\n\n", " ", " y"}},
	{"x \n y", []string{"x", " \n", " y"}},
	{"a\t\tb", []string{"a", "\t", "\tb"}},
	{"a\t 1", []string{"a", "\t", " ", "1"}},
	{"a \t1", []string{"a", " ", "\t", "1"}},
	{"a 1", []string{"a", " ", "1"}},
	{"12345", []string{"1", "2", "3", "4", "5"}},
	{"I'm you'RE 'sup", []string{"I", "'m", " you", "'RE", " '", "sup"}},
	{"don't", []string{"don", "'t"}},
	{"...hello", []string{"...", "hello"}},
	{" ...\n\nx", []string{" ...\n\n", "x"}},
	{"(x)", []string{"(x", ")"}},
	{"中文，你好！", []string{"中文", "，你好", "！"}},
	{"a\r\nb", []string{"a", "\r\n", "b"}},
	{"\u00a0\u00a0x", []string{"\u00a0", "\u00a0x"}},
	{"  ", []string{"  "}},
	{"", nil},
}

func TestScannerQwen2(t *testing.T) {
	for _, c := range pretokCases {
		if got := scannerSplit(PatternQwen2, c.in); !slices.Equal(got, c.want) {
			t.Errorf("%q: got %q, want %q", c.in, got, c.want)
		}
	}
}

func TestScannerMatchesReference(t *testing.T) {
	inputs := []string{}
	for _, c := range pretokCases {
		inputs = append(inputs, c.in)
	}
	inputs = append(inputs, corpusStrings(t)...)
	for pat := range refPatterns {
		for _, s := range inputs {
			if got, want := scannerSplit(pat, s), refSplit(pat, s); !slices.Equal(got, want) {
				t.Errorf("pattern %.20q… on %q:\n got %q\nwant %q", pat, s, got, want)
			}
		}
	}
}

func corpusStrings(t testing.TB) []string {
	c := readCorpus(t)
	c = append(c, "a\u0085 b", "x\u2028\u2029 y", "'ſ 'S 'Re 'LL", "1234567", " 12", "a\xffb\xfe", "\xe4\xb8", "x  \xff")
	return c
}

func FuzzPretokenize(f *testing.F) {
	for _, s := range readCorpus(f) {
		f.Add(s)
	}
	f.Add("a\u0085 b\xff  \t\n 'Ll 12345")
	f.Fuzz(func(t *testing.T, s string) {
		for pat := range refPatterns {
			got, want := scannerSplit(pat, s), refSplit(pat, s)
			if !slices.Equal(got, want) {
				t.Fatalf("pattern %.20q… on %q:\n got %q\nwant %q", pat, s, got, want)
			}
			if strings.Join(got, "") != s {
				t.Fatalf("pieces do not tile %q", s)
			}
		}
	})
}
