package tokenizer

import "unicode/utf8"

// byteToRune is GPT-2's bytes_to_unicode table: every byte maps to a
// printable rune; printable Latin-1 bytes map to themselves and the rest to
// U+0100 upwards in byte order.
var byteToRune [256]rune

// runeToByte inverts byteToRune.
var runeToByte = map[rune]byte{}

func init() {
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = rune(256 + n)
			n++
		}
		runeToByte[byteToRune[b]] = byte(b)
	}
}

// byteLevelString maps raw bytes to their byte-level spelling.
func byteLevelString(b []byte) string {
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = utf8.AppendRune(out, byteToRune[c])
	}
	return string(out)
}

// byteLevelDecode applies the ByteLevel decoder to one token the way Hugging
// Face does: when every rune of the token is in the byte-level alphabet the
// token stands for those bytes; otherwise (an added token such as "é" spelled
// outside the alphabet) the token's own UTF-8 bytes are used.
func byteLevelDecode(tok string) []byte {
	out := make([]byte, 0, len(tok))
	for _, r := range tok {
		b, ok := runeToByte[r]
		if !ok {
			return []byte(tok)
		}
		out = append(out, b)
	}
	return out
}
