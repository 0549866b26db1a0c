// Package parse reads what models write: code blocks, "####" answers, the
// action list a tool program prints, and lenient list literals (JSON or
// Python: single or double quotes, bare words, trailing commas, trailing
// prose). Every function is total: it never panics, whatever the input, and
// reports failure as an error whose text is the reason recorded in an
// Outcome's Info.
package parse

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Code extracts a program from a completion: the last ```python (or py,
// python3) block, else the last fenced block of any language, else the
// whole text when it has no fence. An unterminated final fence (a completion
// cut at max tokens) counts as a block running to the end. how says which
// rule matched: "python_block", "block", "raw" or "" when the text is empty.
func Code(text string) (code, how string) {
	blocks := fences(text)
	for i := len(blocks) - 1; i >= 0; i-- {
		switch strings.ToLower(blocks[i].lang) {
		case "python", "py", "python3":
			return blocks[i].body, "python_block"
		}
	}
	if len(blocks) > 0 {
		return blocks[len(blocks)-1].body, "block"
	}
	if strings.TrimSpace(text) == "" {
		return "", ""
	}
	return text, "raw"
}

type fence struct{ lang, body string }

// fences returns the ``` blocks of text in order.
func fences(text string) []fence {
	var out []fence
	rest := text
	for {
		i := strings.Index(rest, "```")
		if i < 0 {
			return out
		}
		rest = rest[i+3:]
		nl := strings.IndexByte(rest, '\n')
		var lang string
		if nl < 0 {
			// "```" on the last line with nothing after: no body.
			return out
		}
		lang = strings.TrimSpace(rest[:nl])
		if strings.ContainsAny(lang, " \t`") {
			lang = ""
		}
		rest = rest[nl+1:]
		end := strings.Index(rest, "```")
		if end < 0 {
			out = append(out, fence{lang: lang, body: rest})
			return out
		}
		out = append(out, fence{lang: lang, body: rest[:end]})
		rest = rest[end+3:]
	}
}

// Answer returns the text after the last "####" marker, with surrounding
// whitespace, markdown emphasis and an opening code fence removed. ok is
// false when there is no marker or nothing after it.
func Answer(text string) (payload string, ok bool) {
	i := strings.LastIndex(text, "####")
	if i < 0 {
		return "", false
	}
	p := strings.TrimLeft(text[i+4:], "#")
	p = strings.TrimSpace(p)
	p = strings.TrimLeft(p, "*: \t")
	if strings.HasPrefix(p, "```") {
		p = p[3:]
		if nl := strings.IndexByte(p, '\n'); nl >= 0 && !strings.Contains(p[:nl], "[") {
			p = p[nl+1:]
		}
		p = strings.TrimSpace(strings.Split(p, "```")[0])
	}
	p = strings.TrimSpace(p)
	return p, p != ""
}

var (
	actionsListRe = regexp.MustCompile(`(?i)\*{0,2}actions?[ _]list\*{0,2}\s*\*{0,2}:\*{0,2}`)
	actionsRe     = regexp.MustCompile(`(?i)\bactions?\s*:`)
)

// ToolActions finds the action list in a tool program's stdout: after the
// last "**Actions List**:" (any case, emphasis optional), else after the last
// "Actions:", else the last line that starts with '[' and parses as a list.
// how names the rule that matched.
func ToolActions(stdout string) (v Value, how string, err error) {
	if loc := actionsListRe.FindAllStringIndex(stdout, -1); len(loc) > 0 {
		v, err := List(stdout[loc[len(loc)-1][1]:])
		return v, "actions_list", err
	}
	if loc := actionsRe.FindAllStringIndex(stdout, -1); len(loc) > 0 {
		v, err := List(stdout[loc[len(loc)-1][1]:])
		return v, "actions", err
	}
	lines := strings.Split(stdout, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "[") {
			if v, err := List(l); err == nil {
				return v, "list_line", nil
			}
		}
	}
	return Value{}, "", errors.New("no action list in the program's output (print a line `**Actions List**: [...]`)")
}

// Kind is the type of a parsed Value.
type Kind int

// The kinds of Value.
const (
	Invalid Kind = iota
	ListKind
	StringKind // quoted
	NumberKind // integer
	WordKind   // bare word such as U, up, None
)

// Value is a parsed literal.
type Value struct {
	Kind  Kind
	Str   string  // StringKind and WordKind
	Num   int64   // NumberKind
	Items []Value // ListKind
}

// Limits on what List accepts, so that hostile input stays cheap.
const (
	maxDepth = 6
	maxItems = 10000
)

// List parses a list literal at the start of s (after whitespace and
// emphasis), ignoring whatever follows it. When s does not start with '[',
// its first line is read as words separated by commas or spaces
// ("U, R, D" or "up right"), giving a list of words.
func List(s string) (Value, error) {
	s = strings.TrimSpace(s)
	s = strings.TrimLeft(s, "*` \t")
	if s == "" {
		return Value{}, errors.New("empty answer")
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if s[0] != '[' && s[0] != '(' {
		// "Final answer: [...]": start at the first bracket of the first line.
		line, _, _ := strings.Cut(s, "\n")
		if i := strings.IndexByte(line, '['); i > 0 {
			s = s[i:]
		}
	}
	if s[0] == '[' || s[0] == '(' {
		p := &parser{s: s}
		v, err := p.value(0)
		if err != nil {
			return Value{}, err
		}
		if v.Kind != ListKind {
			return Value{}, errors.New("answer is not a list")
		}
		return v, nil
	}
	line, _, _ := strings.Cut(s, "\n")
	var items []Value
	for _, f := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == ';' }) {
		f = strings.Trim(f, `.'"*`+"`")
		if f == "" {
			continue
		}
		if !isWord(f) {
			return Value{}, fmt.Errorf("answer is neither a list nor comma-separated words: %q", clip(line, 60))
		}
		items = append(items, Value{Kind: WordKind, Str: f})
		if len(items) > maxItems {
			return Value{}, errors.New("answer too long")
		}
	}
	if len(items) == 0 {
		return Value{}, errors.New("empty answer")
	}
	return Value{Kind: ListKind, Items: items}, nil
}

func isWord(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

type parser struct {
	s     string
	i     int
	items int
}

func (p *parser) skip() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *parser) value(depth int) (Value, error) {
	if depth > maxDepth {
		return Value{}, errors.New("list nested too deeply")
	}
	p.items++
	if p.items > maxItems {
		return Value{}, errors.New("answer too long")
	}
	p.skip()
	if p.i >= len(p.s) {
		return Value{}, errors.New("unexpected end of answer")
	}
	c := p.s[p.i]
	switch {
	case c == '[' || c == '(':
		closer := byte(']')
		if c == '(' {
			closer = ')'
		}
		p.i++
		var items []Value
		for {
			p.skip()
			if p.i >= len(p.s) {
				return Value{}, errors.New("unclosed list")
			}
			if p.s[p.i] == closer {
				p.i++
				return Value{Kind: ListKind, Items: items}, nil
			}
			if p.s[p.i] == ',' {
				p.i++
				continue
			}
			v, err := p.value(depth + 1)
			if err != nil {
				return Value{}, err
			}
			items = append(items, v)
		}
	case c == '"' || c == '\'':
		return p.str(c)
	case c == '-' || c == '+' || c >= '0' && c <= '9':
		j := p.i + 1
		for j < len(p.s) && (p.s[j] >= '0' && p.s[j] <= '9') {
			j++
		}
		n, err := strconv.ParseInt(p.s[p.i:j], 10, 64)
		if err != nil {
			return Value{}, fmt.Errorf("bad number %q", clip(p.s[p.i:j], 20))
		}
		if j < len(p.s) && p.s[j] == '.' { // 3.0 is 3; 3.5 is an error
			k := j + 1
			for k < len(p.s) && p.s[k] == '0' {
				k++
			}
			if k < len(p.s) && p.s[k] >= '1' && p.s[k] <= '9' {
				return Value{}, fmt.Errorf("not an integer: %q", clip(p.s[p.i:k+1], 20))
			}
			j = k
		}
		p.i = j
		return Value{Kind: NumberKind, Num: n}, nil
	case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		j := p.i
		for j < len(p.s) && (p.s[j] == '_' || p.s[j] >= 'a' && p.s[j] <= 'z' || p.s[j] >= 'A' && p.s[j] <= 'Z' || p.s[j] >= '0' && p.s[j] <= '9') {
			j++
		}
		w := p.s[p.i:j]
		p.i = j
		return Value{Kind: WordKind, Str: w}, nil
	}
	r, _ := utf8.DecodeRuneInString(p.s[p.i:])
	return Value{}, fmt.Errorf("unexpected %q in list", r)
}

func (p *parser) str(q byte) (Value, error) {
	p.i++
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == q:
			p.i++
			return Value{Kind: StringKind, Str: b.String()}, nil
		case c == '\\' && p.i+1 < len(p.s):
			p.i += 2
			switch e := p.s[p.i-1]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(e)
			}
		case c == '\n':
			return Value{}, errors.New("unclosed string")
		default:
			b.WriteByte(c)
			p.i++
		}
		if b.Len() > 1000 {
			return Value{}, errors.New("string too long")
		}
	}
	return Value{}, errors.New("unclosed string")
}

// Move is a grid move.
type Move byte

// The four moves, as the prompts write them.
const (
	Up    Move = 'U'
	Down  Move = 'D'
	Left  Move = 'L'
	Right Move = 'R'
)

// Delta returns the row and column change of m.
func (m Move) Delta() (dr, dc int) {
	switch m {
	case Up:
		return -1, 0
	case Down:
		return 1, 0
	case Left:
		return 0, -1
	case Right:
		return 0, 1
	}
	return 0, 0
}

func (m Move) String() string { return string(rune(m)) }

var moveWords = map[string]Move{
	"u": Up, "up": Up, "d": Down, "down": Down, "l": Left, "left": Left, "r": Right, "right": Right,
}

// MoveAction is Moves for the grid games' answers (stateful.Game.Parse):
// an empty list is an error too.
func MoveAction(v Value, max int) (any, error) {
	ms, err := Moves(v, max)
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, errors.New("empty move list")
	}
	return ms, nil
}

// Moves reads a list of moves from v: each item is U/D/L/R or up/down/left/
// right in any case, quoted or bare; an item made only of the letters UDLR
// ("RRD") is read as that sequence. At most max moves are accepted.
func Moves(v Value, max int) ([]Move, error) {
	if v.Kind != ListKind {
		return nil, errors.New("answer is not a list of moves")
	}
	var out []Move
	for i, it := range v.Items {
		if it.Kind != StringKind && it.Kind != WordKind {
			return nil, fmt.Errorf("move %d is not a string", i)
		}
		w := strings.ToLower(strings.TrimSpace(it.Str))
		if m, ok := moveWords[w]; ok {
			out = append(out, m)
		} else if w != "" && strings.Trim(w, "udlr") == "" {
			for _, c := range w {
				out = append(out, moveWords[string(c)])
			}
		} else {
			return nil, fmt.Errorf("move %d: %q is not one of U, D, L, R", i, clip(it.Str, 20))
		}
		if len(out) > max {
			return nil, fmt.Errorf("more than %d moves", max)
		}
	}
	return out, nil
}

// FormatMoves renders moves as the JSON list the prompts ask for: ["U","R"].
func FormatMoves(ms []Move) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + m.String() + `"`)
	}
	b.WriteByte(']')
	return b.String()
}

// Ints reads v as a list of lists of integers (a grid or a list of triples).
func Ints(v Value) ([][]int, error) {
	if v.Kind != ListKind {
		return nil, errors.New("answer is not a list")
	}
	out := make([][]int, 0, len(v.Items))
	for i, row := range v.Items {
		if row.Kind != ListKind {
			return nil, fmt.Errorf("item %d is not a list", i)
		}
		r := make([]int, 0, len(row.Items))
		for j, x := range row.Items {
			switch {
			case x.Kind == NumberKind && x.Num >= -1<<20 && x.Num <= 1<<20:
				r = append(r, int(x.Num))
			case x.Kind == StringKind || x.Kind == WordKind:
				n, err := strconv.Atoi(strings.TrimSpace(x.Str))
				if err != nil || n < -1<<20 || n > 1<<20 {
					return nil, fmt.Errorf("item %d,%d: %q is not a number", i, j, clip(x.Str, 20))
				}
				r = append(r, n)
			default:
				return nil, fmt.Errorf("item %d,%d is not a number", i, j)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// Excerpt returns at most n bytes of s (on a rune boundary), marking a cut.
func Excerpt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n… [%d bytes cut]", len(s)-cut)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
