package trajectory

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// maxFooterBytes bounds the Parquet footer (troupe's are a few KiB).
const maxFooterBytes = 64 << 20

// checkFooter validates the structure of a Parquet file's footer (Thrift
// compact protocol) before parquet-go decodes it: parquet-go v0.32.0
// allocates list lengths as read, so a corrupt footer could request
// gigabytes (a fatal out-of-memory, not a recoverable panic). Every list,
// map and binary length must fit in the bytes that remain.
func checkFooter(ra interface {
	ReadAt([]byte, int64) (int, error)
}, size int64) error {
	if size < 12 {
		return fmt.Errorf("not a parquet file (%d bytes)", size)
	}
	var tail [8]byte
	if _, err := ra.ReadAt(tail[:], size-8); err != nil {
		return fmt.Errorf("read footer: %w", err)
	}
	if string(tail[4:]) != "PAR1" {
		return errors.New("not a parquet file (no PAR1 magic at the end; truncated?)")
	}
	n := int64(binary.LittleEndian.Uint32(tail[:4]))
	if n <= 0 || n > size-12 || n > maxFooterBytes {
		return fmt.Errorf("footer length %d does not fit a %d-byte file (truncated?)", n, size)
	}
	buf := make([]byte, n)
	if _, err := ra.ReadAt(buf, size-8-n); err != nil {
		return fmt.Errorf("read footer: %w", err)
	}
	c := compactChecker{b: buf}
	if err := c.structure(0); err != nil {
		return fmt.Errorf("corrupt footer: %w", err)
	}
	return nil
}

// compactChecker walks Thrift compact-protocol data without allocating.
type compactChecker struct {
	b   []byte
	pos int
}

var errFooterShort = errors.New("unexpected end of data")

func (c *compactChecker) byte() (byte, error) {
	if c.pos >= len(c.b) {
		return 0, errFooterShort
	}
	c.pos++
	return c.b[c.pos-1], nil
}

func (c *compactChecker) varint() (uint64, error) {
	var x uint64
	for shift := 0; shift < 70; shift += 7 {
		b, err := c.byte()
		if err != nil {
			return 0, err
		}
		x |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return x, nil
		}
	}
	return 0, errors.New("varint too long")
}

func (c *compactChecker) remaining() uint64 { return uint64(len(c.b) - c.pos) }

func (c *compactChecker) skip(n uint64) error {
	if n > c.remaining() {
		return fmt.Errorf("length %d exceeds the %d bytes left", n, c.remaining())
	}
	c.pos += int(n)
	return nil
}

func (c *compactChecker) structure(depth int) error {
	if depth > 64 {
		return errors.New("nesting too deep")
	}
	for {
		h, err := c.byte()
		if err != nil {
			return err
		}
		if h == 0 {
			return nil // stop
		}
		if h>>4 == 0 { // long-form field id
			if _, err := c.varint(); err != nil {
				return err
			}
		}
		t := h & 0x0f
		if t == 1 || t == 2 { // boolean true/false, no payload
			continue
		}
		if err := c.value(t, depth); err != nil {
			return err
		}
	}
}

func (c *compactChecker) value(t byte, depth int) error {
	switch t {
	case 1, 2, 3: // boolean (in containers), byte
		_, err := c.byte()
		return err
	case 4, 5, 6: // i16, i32, i64
		_, err := c.varint()
		return err
	case 7: // double
		return c.skip(8)
	case 8: // binary
		n, err := c.varint()
		if err != nil {
			return err
		}
		return c.skip(n)
	case 9, 10: // list, set
		h, err := c.byte()
		if err != nil {
			return err
		}
		n := uint64(h >> 4)
		if n == 15 {
			if n, err = c.varint(); err != nil {
				return err
			}
		}
		if n > c.remaining() {
			return fmt.Errorf("list of %d elements in %d bytes", n, c.remaining())
		}
		for range n {
			if err := c.value(h&0x0f, depth+1); err != nil {
				return err
			}
		}
		return nil
	case 11: // map
		n, err := c.varint()
		if err != nil || n == 0 {
			return err
		}
		kv, err := c.byte()
		if err != nil {
			return err
		}
		if n > c.remaining()/2 {
			return fmt.Errorf("map of %d entries in %d bytes", n, c.remaining())
		}
		for range n {
			if err := c.value(kv>>4, depth+1); err != nil {
				return err
			}
			if err := c.value(kv&0x0f, depth+1); err != nil {
				return err
			}
		}
		return nil
	case 12: // struct
		return c.structure(depth + 1)
	case 13: // uuid
		return c.skip(16)
	default:
		return fmt.Errorf("unknown thrift type %d", t)
	}
}
