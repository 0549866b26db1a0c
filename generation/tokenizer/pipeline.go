package tokenizer

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites a text segment before pre-tokenization.
type normalizer func(string) string

func buildNormalizer(file, field string, raw json.RawMessage) (normalizer, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fileErr(file, field, "%w", err)
	}
	switch c.Type {
	case "NFC":
		return norm.NFC.String, nil
	case "NFD":
		return norm.NFD.String, nil
	case "NFKC":
		return norm.NFKC.String, nil
	case "NFKD":
		return norm.NFKD.String, nil
	case "Lowercase":
		return strings.ToLower, nil
	case "Prepend":
		var obj struct {
			Prepend string `json:"prepend"`
		}
		_ = json.Unmarshal(raw, &obj)
		p := obj.Prepend
		return func(s string) string {
			if s == "" {
				return s
			}
			return p + s
		}, nil
	case "Replace":
		rep, err := buildReplace(file, field, c)
		if err != nil {
			return nil, err
		}
		return rep, nil
	case "Sequence":
		var seq []normalizer
		for i, r := range c.Normalizers {
			n, err := buildNormalizer(file, fmt.Sprintf("%s.normalizers[%d]", field, i), r)
			if err != nil {
				return nil, err
			}
			if n != nil {
				seq = append(seq, n)
			}
		}
		switch len(seq) {
		case 0:
			return nil, nil
		case 1:
			return seq[0], nil
		}
		return func(s string) string {
			for _, n := range seq {
				s = n(s)
			}
			return s
		}, nil
	}
	return nil, fileErr(file, field+".type", "unsupported normalizer %q (supported: NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Sequence)", c.Type)
}

func buildReplace(file, field string, c component) (func(string) string, error) {
	if c.Pattern == nil {
		return nil, fileErr(file, field+".pattern", "missing")
	}
	content := c.Content
	if c.Pattern.String != nil {
		old := *c.Pattern.String
		return func(s string) string { return strings.ReplaceAll(s, old, content) }, nil
	}
	if c.Pattern.Regex != nil {
		re, err := regexp.Compile(*c.Pattern.Regex)
		if err != nil {
			return nil, fileErr(file, field+".pattern.Regex", "%w", err)
		}
		return func(s string) string { return re.ReplaceAllLiteralString(s, content) }, nil
	}
	return nil, fileErr(file, field+".pattern", "want {\"String\": ...} or {\"Regex\": ...}")
}

// splitStep splits one piece into sub-pieces.
type splitStep func(piece string, emit func(string))

// preTokenizer is the compiled pre-tokenizer: a sequence of split steps,
// and whether a ByteLevel step is present (words are then byte-level).
type preTokenizer struct {
	steps     []splitStep
	byteLevel bool
}

func (p *preTokenizer) split(s string, emit func(string)) {
	switch len(p.steps) {
	case 0:
		emit(s)
		return
	case 1:
		p.steps[0](s, emit)
		return
	}
	pieces := []string{s}
	var next []string
	for _, st := range p.steps {
		next = next[:0]
		for _, pc := range pieces {
			st(pc, func(x string) { next = append(next, x) })
		}
		pieces, next = next, pieces
	}
	for _, pc := range pieces {
		emit(pc)
	}
}

func buildPreTokenizer(file, field string, raw json.RawMessage, pt *preTokenizer) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return fileErr(file, field, "%w", err)
	}
	switch c.Type {
	case "Sequence":
		for i, r := range c.Pretokenizers {
			if err := buildPreTokenizer(file, fmt.Sprintf("%s.pretokenizers[%d]", field, i), r, pt); err != nil {
				return err
			}
		}
		return nil
	case "ByteLevel":
		pt.byteLevel = true
		useRegex := c.UseRegex == nil || *c.UseRegex
		prefix := c.AddPrefixSpace
		var m matcher
		if useRegex {
			m, _ = newRegexMatcher(PatternGPT2)
		}
		if !useRegex && !prefix {
			return nil // identity split
		}
		pt.steps = append(pt.steps, func(s string, emit func(string)) {
			if prefix && !strings.HasPrefix(s, " ") {
				s = " " + s
			}
			if m == nil {
				emit(s)
				return
			}
			splitIsolated(s, m, emit)
		})
		return nil
	case "Split":
		if c.Pattern == nil {
			return fileErr(file, field+".pattern", "missing")
		}
		var m matcher
		switch {
		case c.Pattern.Regex != nil:
			var err error
			if m, err = newRegexMatcher(*c.Pattern.Regex); err != nil {
				return fileErr(file, field+".pattern.Regex", "%w", err)
			}
		case c.Pattern.String != nil:
			m = literalMatcher(*c.Pattern.String)
		default:
			return fileErr(file, field+".pattern", "want {\"Regex\": ...} or {\"String\": ...}")
		}
		if c.Behavior == "Isolated" && !c.Invert {
			pt.steps = append(pt.steps, func(s string, emit func(string)) { splitIsolated(s, m, emit) })
			return nil
		}
		switch c.Behavior {
		case "Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous":
		default:
			return fileErr(file, field+".behavior", "unsupported split behavior %q", c.Behavior)
		}
		behavior, invert := c.Behavior, c.Invert
		pt.steps = append(pt.steps, func(s string, emit func(string)) { splitGeneral(s, m, behavior, invert, emit) })
		return nil
	case "Digits":
		individual := c.IndividualDigits
		pt.steps = append(pt.steps, func(s string, emit func(string)) { splitDigits(s, individual, emit) })
		return nil
	}
	return fileErr(file, field+".type", "unsupported pre-tokenizer %q (supported: Split, ByteLevel, Digits, Sequence)", c.Type)
}

// splitIsolated emits the matches of m and the gaps between them.
func splitIsolated(s string, m matcher, emit func(string)) {
	pos := 0
	for pos < len(s) {
		a, b := m.find(s, pos)
		if a < 0 {
			break
		}
		if a > pos {
			emit(s[pos:a])
		}
		emit(s[a:b])
		pos = b
	}
	if pos < len(s) {
		emit(s[pos:])
	}
}

// splitGeneral implements the other SplitDelimiterBehavior values.
func splitGeneral(s string, m matcher, behavior string, invert bool, emit func(string)) {
	type span struct {
		a, b  int
		match bool
	}
	var spans []span
	pos := 0
	for pos < len(s) {
		a, b := m.find(s, pos)
		if a < 0 {
			break
		}
		if a > pos {
			spans = append(spans, span{pos, a, invert})
		}
		spans = append(spans, span{a, b, !invert})
		pos = b
	}
	if pos < len(s) {
		spans = append(spans, span{pos, len(s), invert})
	}
	switch behavior {
	case "Isolated":
		for _, sp := range spans {
			emit(s[sp.a:sp.b])
		}
	case "Removed":
		for _, sp := range spans {
			if !sp.match {
				emit(s[sp.a:sp.b])
			}
		}
	case "MergedWithPrevious":
		start := 0
		for _, sp := range spans {
			if sp.match {
				emit(s[start:sp.b])
				start = sp.b
			}
		}
		if start < len(s) {
			emit(s[start:])
		}
	case "MergedWithNext":
		start := 0
		for _, sp := range spans {
			if sp.match && sp.a > start {
				emit(s[start:sp.a])
				start = sp.a
			}
		}
		if start < len(s) {
			emit(s[start:])
		}
	case "Contiguous":
		start := 0
		for i, sp := range spans {
			if i > 0 && sp.match != spans[i-1].match {
				emit(s[start:sp.a])
				start = sp.a
			}
		}
		if start < len(s) {
			emit(s[start:])
		}
	}
}

// splitDigits is the Digits pre-tokenizer: digit runs (or single digits)
// isolated from the rest.
func splitDigits(s string, individual bool, emit func(string)) {
	start := 0
	isD := func(c byte) bool { return c >= '0' && c <= '9' }
	for i := 0; i < len(s); {
		if !isD(s[i]) {
			i++
			continue
		}
		if i > start {
			emit(s[start:i])
		}
		j := i + 1
		if !individual {
			for j < len(s) && isD(s[j]) {
				j++
			}
		}
		emit(s[i:j])
		i, start = j, j
	}
	if start < len(s) {
		emit(s[start:])
	}
}
