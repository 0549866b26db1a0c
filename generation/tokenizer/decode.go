package tokenizer

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// tokenOp turns one token's text into bytes (one decoder stage).
type tokenOp func([]byte) []byte

// buildDecoder precomputes every token's decoded bytes. Supported decoders
// work token by token: ByteLevel, ByteFallback, Replace (string pattern),
// Fuse (no-op here) and Sequences of them. With no decoder, tokens decode
// to their own spelling, concatenated.
func (t *Tokenizer) buildDecoder(file string, raw json.RawMessage) error {
	var ops []tokenOp
	if err := collectDecoders(file, "decoder", raw, &ops); err != nil {
		return err
	}
	t.bytes = make([][]byte, len(t.tokens))
	for id, tok := range t.tokens {
		if !t.has[id] {
			continue
		}
		b := []byte(tok)
		for _, op := range ops {
			b = op(b)
		}
		t.bytes[id] = b
	}
	return nil
}

func collectDecoders(file, field string, raw json.RawMessage, ops *[]tokenOp) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return fileErr(file, field, "%w", err)
	}
	switch c.Type {
	case "Sequence":
		for i, d := range c.Decoders {
			if err := collectDecoders(file, fmt.Sprintf("%s.decoders[%d]", field, i), d, ops); err != nil {
				return err
			}
		}
	case "ByteLevel":
		*ops = append(*ops, func(b []byte) []byte { return byteLevelDecode(string(b)) })
	case "ByteFallback":
		*ops = append(*ops, func(b []byte) []byte {
			if len(b) == 6 && string(b[:3]) == "<0x" && b[5] == '>' {
				if v, err := strconv.ParseUint(string(b[3:5]), 16, 8); err == nil {
					return []byte{byte(v)}
				}
			}
			return b
		})
	case "Replace":
		if c.Pattern == nil || c.Pattern.String == nil {
			return fileErr(file, field+".pattern", "only {\"String\": ...} patterns are supported in decoders")
		}
		old, content := *c.Pattern.String, c.Content
		*ops = append(*ops, func(b []byte) []byte { return []byte(strings.ReplaceAll(string(b), old, content)) })
	case "Fuse":
	default:
		return fileErr(file, field+".type", "unsupported decoder %q (supported: ByteLevel, ByteFallback, Replace, Fuse, Sequence)", c.Type)
	}
	return nil
}

// DecodeBytes returns the exact bytes that ids stand for: the concatenation
// of each token's bytes, so ids that split a UTF-8 character yield its
// partial bytes. Special tokens are included; ids outside the vocabulary
// are skipped. It never panics.
func (t *Tokenizer) DecodeBytes(ids []int32) []byte { return t.AppendDecodeBytes(nil, ids) }

// AppendDecodeBytes appends DecodeBytes(ids) to dst.
func (t *Tokenizer) AppendDecodeBytes(dst []byte, ids []int32) []byte {
	for _, id := range ids {
		if t.valid(id) {
			dst = append(dst, t.bytes[id]...)
		}
	}
	return dst
}

// Decode returns the text of ids (special tokens included, like Hugging
// Face's decode(ids, skip_special_tokens=False,
// clean_up_tokenization_spaces=False)). Invalid UTF-8 is replaced by U+FFFD
// per maximal invalid subpart, as Rust's String::from_utf8_lossy does.
func (t *Tokenizer) Decode(ids []int32) string {
	return string(appendLossy(nil, t.DecodeBytes(ids)))
}

// DecodeSkipSpecial is Decode without the special tokens.
func (t *Tokenizer) DecodeSkipSpecial(ids []int32) string {
	var b []byte
	for _, id := range ids {
		if t.valid(id) && !t.spec[id] {
			b = append(b, t.bytes[id]...)
		}
	}
	return string(appendLossy(nil, b))
}

// utf8Status classifies the bytes at the start of b (len(b) > 0): a
// complete valid character of length n (valid), a truncated but so far
// valid prefix that more bytes could complete (n == len(b), !valid,
// incomplete), or a maximal invalid subpart of length n.
func utf8Status(b []byte) (n int, valid, incomplete bool) {
	c := b[0]
	if c < 0x80 {
		return 1, true, false
	}
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 2
	case c == 0xE0:
		need, lo = 3, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 3
	case c == 0xED:
		need, hi = 3, 0x9F
	case c == 0xF0:
		need, lo = 4, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 4
	case c == 0xF4:
		need, hi = 4, 0x8F
	default:
		return 1, false, false
	}
	n = 1
	for n < need {
		if n >= len(b) {
			return n, false, true
		}
		if b[n] < lo || b[n] > hi {
			return n, false, false
		}
		lo, hi = 0x80, 0xBF
		n++
	}
	return n, true, false
}

// appendLossy appends b to dst with every maximal invalid UTF-8 subpart
// (including a truncated character at the end) replaced by U+FFFD.
func appendLossy(dst, b []byte) []byte {
	for len(b) > 0 {
		if b[0] < utf8.RuneSelf {
			dst = append(dst, b[0])
			b = b[1:]
			continue
		}
		n, valid, _ := utf8Status(b)
		if valid {
			dst = append(dst, b[:n]...)
		} else {
			dst = append(dst, "\uFFFD"...)
		}
		b = b[n:]
	}
	return dst
}

// StreamDecoder turns ids into text incrementally: each call returns only
// text that is final (complete UTF-8 characters); bytes of a character
// split across tokens are held until it completes. The concatenation of
// every Add result and Flush equals Decode of all the ids. A StreamDecoder
// is not safe for concurrent use; make one per sequence.
type StreamDecoder struct {
	t           *Tokenizer
	pending     []byte
	skipSpecial bool
}

// NewStreamDecoder returns a decoder for one sequence. With skipSpecial,
// special tokens produce no text.
func (t *Tokenizer) NewStreamDecoder(skipSpecial bool) *StreamDecoder {
	return &StreamDecoder{t: t, skipSpecial: skipSpecial}
}

// Add consumes one id and returns the text it completes (often "").
func (d *StreamDecoder) Add(id int32) string {
	if !d.t.valid(id) || (d.skipSpecial && d.t.spec[id]) {
		return ""
	}
	d.pending = append(d.pending, d.t.bytes[id]...)
	return d.drain()
}

// AddBytes consumes raw bytes (e.g. from TokenBytes) and returns the text
// they complete.
func (d *StreamDecoder) AddBytes(b []byte) string {
	d.pending = append(d.pending, b...)
	return d.drain()
}

func (d *StreamDecoder) drain() string {
	b := d.pending
	cut := 0
	for cut < len(b) {
		n, _, incomplete := utf8Status(b[cut:])
		if incomplete {
			break
		}
		cut += n
	}
	if cut == 0 {
		return ""
	}
	out := string(appendLossy(nil, b[:cut]))
	d.pending = append(d.pending[:0], b[cut:]...)
	return out
}

// Pending reports how many bytes are held back waiting for the rest of a
// character (0–3).
func (d *StreamDecoder) Pending() int { return len(d.pending) }

// Flush returns the held bytes as text (U+FFFD for an incomplete
// character) and resets the decoder.
func (d *StreamDecoder) Flush() string {
	out := string(appendLossy(nil, d.pending))
	d.pending = d.pending[:0]
	return out
}
