package trajectory

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// fileWithFooter wraps a footer in the Parquet envelope.
func fileWithFooter(footer []byte) []byte {
	b := []byte("PAR1")
	b = append(b, footer...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(footer)))
	return append(b, "PAR1"...)
}

func TestCheckFooter(t *testing.T) {
	tests := []struct {
		name   string
		footer []byte
		want   string // "" = valid
	}{
		{"empty struct", []byte{0x00}, ""},
		{"i32 field", []byte{0x15, 0x04, 0x00}, ""},
		{"huge list", []byte{0x19, 0xfc, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00}, "list of"},
		{"huge binary", []byte{0x18, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00}, "exceeds"},
		{"huge map", []byte{0x1b, 0xff, 0xff, 0xff, 0x7f, 0x55, 0x00}, "map of"},
		{"unterminated", []byte{0x15, 0x04}, "unexpected end"},
		{"deep", bytes.Repeat([]byte{0x1c}, 100), "too deep"},
		{"long varint", append([]byte{0x15}, bytes.Repeat([]byte{0xff}, 12)...), "varint"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := fileWithFooter(tc.footer)
			err := checkFooter(bytes.NewReader(b), int64(len(b)))
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("checkFooter = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestLZ4Refused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lz4.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[Step](f, parquet.Compression(&parquet.Lz4Raw))
	if _, err := w.Write([]Step{{Role: "x"}}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	f.Close()
	_, err = Open(path, nil)
	checkBadFile(t, path, err)
	if !strings.Contains(err.Error(), "LZ4") {
		t.Fatalf("err = %v; want the LZ4 refusal", err)
	}
}
