package tokenizer

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Pre-tokenizer patterns that this package matches with hand-written
// scanners. Their `\s+(?!\S)` needs lookahead, which Go's RE2 lacks; the
// scanners reproduce leftmost-first backtracking semantics exactly (see
// scanCL100K).
const (
	// PatternQwen2 is the Split regex of Qwen2, Qwen2.5 and Qwen3.
	PatternQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// PatternLlama3 is the Split regex of Llama 3 (cl100k-style, digits in groups of up to 3).
	PatternLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// PatternGPT2 is the regex of the ByteLevel pre-tokenizer with use_regex=true.
	PatternGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// matcher finds the next match of a split pattern in s at or after start;
// it returns -1, -1 when there is none.
type matcher interface {
	find(s string, start int) (int, int)
}

// tilingScanner is a matcher for a pattern that matches at every position
// (the known byte-level patterns do): next returns the end of the match
// starting at p (> p for p < len(s)).
type tilingScanner func(s string, p int) int

func (f tilingScanner) find(s string, start int) (int, int) {
	if start >= len(s) {
		return -1, -1
	}
	return start, f(s, start)
}

// reMatcher wraps a Go regexp for patterns that RE2 can compile.
type reMatcher struct{ re *regexp.Regexp }

func (m reMatcher) find(s string, start int) (int, int) {
	for start <= len(s) {
		loc := m.re.FindStringIndex(s[start:])
		if loc == nil {
			return -1, -1
		}
		a, b := start+loc[0], start+loc[1]
		if b > a {
			return a, b
		}
		// Skip empty matches, as Hugging Face's split does.
		if a >= len(s) {
			return -1, -1
		}
		_, w := utf8.DecodeRuneInString(s[a:])
		start = a + w
	}
	return -1, -1
}

// literalMatcher finds a fixed string.
type literalMatcher string

func (m literalMatcher) find(s string, start int) (int, int) {
	if m == "" {
		return -1, -1
	}
	i := strings.Index(s[start:], string(m))
	if i < 0 {
		return -1, -1
	}
	return start + i, start + i + len(m)
}

// newRegexMatcher returns a matcher for a Hugging Face split regex.
func newRegexMatcher(pattern string) (matcher, error) {
	switch pattern {
	case PatternQwen2:
		return tilingScanner(func(s string, p int) int { return scanCL100K(s, p, 1) }), nil
	case PatternLlama3:
		return tilingScanner(func(s string, p int) int { return scanCL100K(s, p, 3) }), nil
	case PatternGPT2:
		return tilingScanner(scanGPT2), nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("regex %q is neither a known pattern nor valid RE2: %w", pattern, err)
	}
	return reMatcher{re}, nil
}

// Character classes, as Oniguruma/Rust regex define them in Unicode mode:
// \s is the White_Space property, \p{L} and \p{N} the general categories.
func isSpace(r rune) bool  { return unicode.IsSpace(r) }
func isLetter(r rune) bool { return unicode.IsLetter(r) }
func isNumber(r rune) bool { return unicode.IsNumber(r) }

// isOther is [^\s\p{L}\p{N}]. Invalid UTF-8 bytes decode to U+FFFD, a
// symbol, so they count as "other" one byte at a time.
func isOther(r rune) bool { return !isSpace(r) && !isLetter(r) && !isNumber(r) }

func decodeAt(s string, p int) (rune, int) {
	c := s[p]
	if c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[p:])
}

// contraction matches (?i:'s|'t|'re|'ve|'m|'ll|'d) after the apostrophe at
// s[p-1]; it returns the bytes matched after the apostrophe (0 if none).
// Case folding follows Unicode simple folding, so U+017F (ſ) matches s.
func contraction(s string, p int) int {
	if p >= len(s) {
		return 0
	}
	r, w := decodeAt(s, p)
	switch unicode.ToLower(r) {
	case 's', 't', 'm', 'd', 'ſ':
		return w
	case 'r', 'v':
		if p+w < len(s) {
			if r2, w2 := decodeAt(s, p+w); unicode.ToLower(r2) == 'e' {
				return w + w2
			}
		}
	case 'l':
		if p+w < len(s) {
			if r2, w2 := decodeAt(s, p+w); unicode.ToLower(r2) == 'l' {
				return w + w2
			}
		}
	}
	return 0
}

// scanLetters returns the end of the run of letters starting at p.
func scanLetters(s string, p int) int {
	for p < len(s) {
		r, w := decodeAt(s, p)
		if !isLetter(r) {
			break
		}
		p += w
	}
	return p
}

// scanCL100K returns the end of the match at p (< len(s)) of
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,maxDigits}|
//	 ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// under leftmost-first (Perl/Oniguruma) semantics. The pattern matches at
// every position, so successive calls tile the input. For a whitespace run
// (none of the earlier alternatives applying):
//   - \s*[\r\n]+ backtracks to the last \r or \n in the run and ends after it;
//   - \s+(?!\S) takes the whole run at the end of input, otherwise the run
//     minus its last character when that leaves at least one;
//   - \s+ takes a single whitespace character followed by a non-space.
func scanCL100K(s string, p, maxDigits int) int {
	r, w := decodeAt(s, p)
	if r == '\'' {
		if n := contraction(s, p+1); n > 0 {
			return p + 1 + n
		}
	}
	if isLetter(r) {
		return scanLetters(s, p+w)
	}
	if r != '\r' && r != '\n' && !isNumber(r) && p+w < len(s) {
		if r2, w2 := decodeAt(s, p+w); isLetter(r2) {
			return scanLetters(s, p+w+w2)
		}
	}
	if isNumber(r) {
		q := p + w
		for n := 1; n < maxDigits && q < len(s); n++ {
			r2, w2 := decodeAt(s, q)
			if !isNumber(r2) {
				break
			}
			q += w2
		}
		return q
	}
	q := p
	if r == ' ' {
		q = p + 1
	}
	if q < len(s) {
		if r2, w2 := decodeAt(s, q); isOther(r2) {
			q += w2
			for q < len(s) {
				r3, w3 := decodeAt(s, q)
				if !isOther(r3) {
					break
				}
				q += w3
			}
			for q < len(s) && (s[q] == '\r' || s[q] == '\n') {
				q++
			}
			return q
		}
	}
	// r is whitespace.
	return scanSpaceRun(s, p, true)
}

// scanSpaceRun handles the whitespace alternatives at p: with newlines set,
// \s*[\r\n]+ first; then \s+(?!\S) and \s+.
func scanSpaceRun(s string, p int, newlines bool) int {
	e, last, lastNL := p, p, -1
	for e < len(s) {
		r, w := decodeAt(s, e)
		if !isSpace(r) {
			break
		}
		if r == '\r' || r == '\n' {
			lastNL = e
		}
		last = e
		e += w
	}
	if newlines && lastNL >= 0 {
		return lastNL + 1
	}
	if e == len(s) || last == p {
		return e
	}
	return last
}

// scanGPT2 returns the end of the match at p of PatternGPT2:
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// (case-sensitive contractions).
func scanGPT2(s string, p int) int {
	r, _ := decodeAt(s, p)
	if r == '\'' && p+1 < len(s) {
		switch s[p+1] {
		case 's', 't', 'm', 'd':
			return p + 2
		case 'r', 'v':
			if p+2 < len(s) && s[p+2] == 'e' {
				return p + 3
			}
		case 'l':
			if p+2 < len(s) && s[p+2] == 'l' {
				return p + 3
			}
		}
	}
	q, r1 := p, r
	if r == ' ' && p+1 < len(s) {
		q = p + 1
		r1, _ = decodeAt(s, q)
	}
	for _, class := range [...]func(rune) bool{isLetter, isNumber, isOther} {
		if class(r1) {
			for q < len(s) {
				r2, w2 := decodeAt(s, q)
				if !class(r2) {
					break
				}
				q += w2
			}
			return q
		}
	}
	return scanSpaceRun(s, p, false)
}
