package tokenizer

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

type addedToken struct {
	id             int32
	content        string
	lstrip, rstrip bool
	singleWord     bool
	normalized     bool
	special        bool
}

// addedMatcher finds added tokens in text, leftmost-longest, as Hugging
// Face's AddedVocabulary does (tokens with normalized=false are matched in
// the raw text, those with normalized=true in the normalised text).
type addedMatcher struct {
	byContent map[string]int32
	sets      [2]matchSet // [0] raw, [1] normalised
}

type matchSet struct {
	byFirst [256][]*addedToken // by first byte, longest first
	any     bool
}

// newAddedMatcher indexes the added tokens; the content of normalized ones
// is normalised with norm (if not nil) before matching, as in HF.
func newAddedMatcher(tokens []addedToken, norm normalizer) addedMatcher {
	m := addedMatcher{byContent: map[string]int32{}}
	for i := range tokens {
		tk := &tokens[i]
		m.byContent[tk.content] = tk.id
		set := &m.sets[0]
		if tk.normalized {
			set = &m.sets[1]
			if norm != nil {
				tk.content = norm(tk.content)
			}
			if tk.content == "" {
				continue
			}
		}
		set.any = true
		c := tk.content[0]
		set.byFirst[c] = append(set.byFirst[c], tk)
	}
	for si := range m.sets {
		for _, l := range m.sets[si].byFirst {
			sort.SliceStable(l, func(i, j int) bool { return len(l[i].content) > len(l[j].content) })
		}
	}
	return m
}

// split calls fn for each piece of s in order: plain text with id -1, or an
// added token with its id.
func (m *addedMatcher) split(s string, normalized bool, fn func(seg string, id int32)) {
	set := &m.sets[0]
	if normalized {
		set = &m.sets[1]
	}
	if !set.any {
		if s != "" {
			fn(s, -1)
		}
		return
	}
	prev := 0
	for i := 0; i < len(s); i++ {
		cands := set.byFirst[s[i]]
		if cands == nil {
			continue
		}
		var hit *addedToken
		for _, tk := range cands {
			if strings.HasPrefix(s[i:], tk.content) && (!tk.singleWord || wordBoundaries(s, i, i+len(tk.content))) {
				hit = tk
				break
			}
		}
		if hit == nil {
			continue
		}
		start, end := i, i+len(hit.content)
		if hit.lstrip {
			for start > prev {
				r, w := utf8.DecodeLastRuneInString(s[prev:start])
				if !unicode.IsSpace(r) {
					break
				}
				start -= w
			}
		}
		if hit.rstrip {
			for end < len(s) {
				r, w := utf8.DecodeRuneInString(s[end:])
				if !unicode.IsSpace(r) {
					break
				}
				end += w
			}
		}
		if start > prev {
			fn(s[prev:start], -1)
		}
		fn(s[start:end], hit.id)
		prev = end
		i = end - 1
	}
	if prev < len(s) {
		fn(s[prev:], -1)
	}
}

func isWordChar(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

func wordBoundaries(s string, a, b int) bool {
	if a > 0 {
		if r, _ := utf8.DecodeLastRuneInString(s[:a]); isWordChar(r) {
			return false
		}
	}
	if b < len(s) {
		if r, _ := utf8.DecodeRuneInString(s[b:]); isWordChar(r) {
			return false
		}
	}
	return true
}
