package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// object is a JSON object that keeps its key order: templates read it by
// attribute or item, and tojson writes it in order.
type object struct {
	keys []string
	vals map[string]any
}

// GetAttribute lets templates write obj.key (gonja's AttributeGetter).
func (o *object) GetAttribute(name string) (*templateValue, bool) { return o.get(name) }

// GetItem lets templates write obj['key'] (gonja's ItemGetter).
func (o *object) GetItem(key any) (*templateValue, bool) {
	s, ok := key.(string)
	if !ok {
		return asValue(nil), false
	}
	return o.get(s)
}

func (o *object) get(k string) (*templateValue, bool) {
	v, ok := o.vals[k]
	if !ok {
		return asValue(nil), false
	}
	return asValue(v), true
}

// MarshalJSON writes the object in key order.
func (o *object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		vb, err := json.Marshal(o.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// decodeOrdered parses JSON into objects (*object), []any, json.Number,
// string, bool and nil, keeping key order.
func decodeOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &object{vals: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				if _, dup := o.vals[k]; !dup {
					o.keys = append(o.keys, k)
				}
				o.vals[k] = v
			}
			_, err := dec.Token()
			return o, err
		case '[':
			l := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			_, err := dec.Token()
			return l, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return t, nil
	}
}

// pyJSON writes v as Python's json.dumps(v, ensure_ascii=False) does:
// separators ", " and ": " (or "," and ": " with indent ≥ 0), object keys
// in order. v is first marshalled with encoding/json (struct fields in
// declaration order, map keys sorted, *object in its order).
func pyJSON(v any, indent int) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	tree, err := decodeOrdered(buf.Bytes())
	if err != nil {
		return "", err
	}
	var b strings.Builder
	writePy(&b, tree, indent, 0)
	return b.String(), nil
}

func writePy(b *strings.Builder, v any, indent, depth int) {
	nl := func(d int) {
		if indent >= 0 {
			b.WriteByte('\n')
			b.WriteString(strings.Repeat(" ", indent*d))
		}
	}
	sep := ", "
	if indent >= 0 {
		sep = ","
	}
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case json.Number:
		b.WriteString(string(t))
	case string:
		writePyString(b, t)
	case []any:
		if len(t) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteByte('[')
		for i, x := range t {
			if i > 0 {
				b.WriteString(sep)
			}
			nl(depth + 1)
			writePy(b, x, indent, depth+1)
		}
		nl(depth)
		b.WriteByte(']')
	case *object:
		if len(t.keys) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteByte('{')
		for i, k := range t.keys {
			if i > 0 {
				b.WriteString(sep)
			}
			nl(depth + 1)
			writePyString(b, k)
			b.WriteString(": ")
			writePy(b, t.vals[k], indent, depth+1)
		}
		nl(depth)
		b.WriteByte('}')
	default:
		fmt.Fprint(b, t)
	}
}

// writePyString quotes s like Python's json with ensure_ascii=False: only
// '"', '\\' and control characters below U+0020 are escaped.
func writePyString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			if c < utf8.RuneSelf {
				b.WriteByte(c)
				i++
				continue
			}
			r, w := utf8.DecodeRuneInString(s[i:])
			b.WriteRune(r) // invalid bytes become U+FFFD
			i += w
			continue
		}
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			fmt.Fprintf(b, `\u%04x`, c)
		}
		i++
	}
	b.WriteByte('"')
}
