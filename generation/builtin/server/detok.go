package server

import (
	"strings"
	"unicode/utf8"
)

// detokenizer turns one sample's token stream into text incrementally and
// finds stop strings in it. It decodes a small window of tokens each step
// (the "prefix offset / read offset" scheme of Hugging Face's
// text-generation-inference), so that multi-token characters and
// byte-level merges come out right, and it holds back text that may still
// grow into a stop string. The concatenation of everything take returns
// equals the full text up to (not including) the first stop string.
type detokenizer struct {
	tok   decoder
	stops []string

	ids          []int32
	prefix, read int // ids[prefix:read] is decoded context already in text
	text         string
	stopAt       int // index in text where the matched stop string starts; -1 if none
	stopStr      string
	taken        int // bytes of text already handed out by take
}

func newDetokenizer(tok decoder, stops []string) *detokenizer {
	return &detokenizer{tok: tok, stops: stops, stopAt: -1}
}

// decoder decodes token ids to text.
type decoder interface{ Decode(ids []int32) string }

// push adds a token and reports whether the text now contains a stop
// string (further tokens are ignored).
func (d *detokenizer) push(id int32) bool {
	if d.stopAt >= 0 {
		d.ids = append(d.ids, id)
		return true
	}
	d.ids = append(d.ids, id)
	prev := d.tok.Decode(d.ids[d.prefix:d.read])
	cur := d.tok.Decode(d.ids[d.prefix:])
	if len(cur) <= len(prev) || !strings.HasPrefix(cur, prev) || incomplete(cur) {
		// An unfinished character (or a merge that rewrote the tail):
		// wait for more tokens.
		return false
	}
	old := len(d.text)
	d.text += cur[len(prev):]
	d.prefix, d.read = d.read, len(d.ids)
	return d.findStop(old)
}

// flush decodes whatever is still pending (at the end of generation, an
// unfinished character comes out as Decode renders it).
func (d *detokenizer) flush() {
	if d.stopAt >= 0 || d.read == len(d.ids) {
		return
	}
	prev := d.tok.Decode(d.ids[d.prefix:d.read])
	cur := d.tok.Decode(d.ids[d.prefix:])
	if len(cur) > len(prev) && strings.HasPrefix(cur, prev) {
		old := len(d.text)
		d.text += cur[len(prev):]
		d.findStop(old)
	}
	d.prefix, d.read = d.read, len(d.ids)
}

// incomplete reports whether s ends inside a UTF-8 sequence or with the
// replacement character a decoder puts there.
func incomplete(s string) bool {
	if s == "" {
		return false
	}
	r, _ := utf8.DecodeLastRuneInString(s)
	return r == utf8.RuneError
}

func (d *detokenizer) findStop(old int) bool {
	best, bestStr := -1, ""
	for _, s := range d.stops {
		from := max(0, old-len(s)+1)
		if i := strings.Index(d.text[from:], s); i >= 0 && (best < 0 || from+i < best) {
			best, bestStr = from+i, s
		}
	}
	if best >= 0 {
		d.stopAt, d.stopStr = best, bestStr
		return true
	}
	return false
}

// stopped reports whether a stop string was found.
func (d *detokenizer) stopped() bool { return d.stopAt >= 0 }

// final returns the text up to the first stop string.
func (d *detokenizer) final() string {
	if d.stopAt >= 0 {
		return d.text[:d.stopAt]
	}
	return d.text
}

// take returns the text not yet taken that can be shown: with end false
// it holds back a tail that may be the start of a stop string.
func (d *detokenizer) take(end bool) string {
	limit := len(d.text)
	switch {
	case d.stopAt >= 0:
		limit = d.stopAt
	case !end:
		limit -= d.holdback()
	}
	if limit <= d.taken {
		return ""
	}
	s := d.text[d.taken:limit]
	d.taken = limit
	return s
}

// holdback is the length of the longest suffix of text that is a proper
// prefix of a stop string.
func (d *detokenizer) holdback() int {
	h := 0
	for _, s := range d.stops {
		for k := min(len(s)-1, len(d.text)); k > h; k-- {
			if strings.HasSuffix(d.text, s[:k]) {
				h = k
				break
			}
		}
	}
	return h
}
