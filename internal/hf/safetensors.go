package hf

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/troupe-rl/troupe/internal/atomicfile"
)

// Tensor is a dense float32 tensor in row-major order.
type Tensor struct {
	Shape []int
	Data  []float32
}

// NewTensor allocates a zero tensor of the given shape.
func NewTensor(shape ...int) *Tensor {
	return &Tensor{Shape: append([]int(nil), shape...), Data: make([]float32, numel(shape))}
}

// Numel is the number of elements.
func (t *Tensor) Numel() int { return numel(t.Shape) }

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// Dtypes accepted on read; WriteSafetensors writes F32, or BF16 when asked.
const (
	DtypeF32  = "F32"
	DtypeF16  = "F16"
	DtypeBF16 = "BF16"
)

type stEntry struct {
	Dtype   string   `json:"dtype"`
	Shape   []int    `json:"shape"`
	Offsets [2]int64 `json:"data_offsets"`
}

// maxHeader bounds the JSON header (safetensors itself caps it at 100 MB).
const maxHeader = 100 << 20

// ReadSafetensors reads every tensor of one .safetensors file as float32.
// Metadata ("__metadata__") is returned separately.
func ReadSafetensors(path string) (map[string]*Tensor, map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("hf: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("hf: %w", err)
	}
	size := st.Size()
	var hlen uint64
	if err := binary.Read(f, binary.LittleEndian, &hlen); err != nil {
		return nil, nil, formatErr(path, err, "not a safetensors file (no header length)")
	}
	if hlen == 0 || hlen > maxHeader || int64(hlen)+8 > size {
		return nil, nil, formatErr(path, nil, "not a safetensors file (header length %d, file size %d)", hlen, size)
	}
	hdr := make([]byte, hlen)
	if _, err := io.ReadFull(f, hdr); err != nil {
		return nil, nil, formatErr(path, err, "truncated header")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return nil, nil, formatErr(path, err, "header is not JSON")
	}
	meta := map[string]string{}
	if m, ok := raw["__metadata__"]; ok {
		if err := json.Unmarshal(m, &meta); err != nil {
			return nil, nil, formatErr(path, err, "__metadata__ is not a string map")
		}
		delete(raw, "__metadata__")
	}
	dataStart := 8 + int64(hlen)
	dataLen := size - dataStart
	names := make([]string, 0, len(raw))
	for n := range raw {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	out := make(map[string]*Tensor, len(raw))
	for _, name := range names {
		var e stEntry
		if err := json.Unmarshal(raw[name], &e); err != nil {
			return nil, nil, formatErr(path, err, "tensor %q: bad header entry", name)
		}
		width := 0
		switch e.Dtype {
		case DtypeF32:
			width = 4
		case DtypeF16, DtypeBF16:
			width = 2
		default:
			return nil, nil, formatErr(path, nil, "tensor %q: dtype %s is not supported (want F32, BF16 or F16)", name, e.Dtype)
		}
		n := int64(1)
		for _, d := range e.Shape {
			if d < 0 || (d > 0 && n > math.MaxInt32/int64(d)) {
				return nil, nil, formatErr(path, nil, "tensor %q: bad shape %v", name, e.Shape)
			}
			n *= int64(d)
		}
		begin, end := e.Offsets[0], e.Offsets[1]
		if begin < 0 || end < begin || end > dataLen || end-begin != n*int64(width) {
			return nil, nil, formatErr(path, nil, "tensor %q: data offsets %v do not fit shape %v %s in %d data bytes", name, e.Offsets, e.Shape, e.Dtype, dataLen)
		}
		buf := make([]byte, end-begin)
		if _, err := f.ReadAt(buf, dataStart+begin); err != nil {
			return nil, nil, formatErr(path, err, "tensor %q: reading data", name)
		}
		t := &Tensor{Shape: append([]int{}, e.Shape...), Data: make([]float32, n)}
		decode(t.Data, buf, e.Dtype)
		out[name] = t
	}
	return out, meta, nil
}

func decode(dst []float32, src []byte, dtype string) {
	switch dtype {
	case DtypeF32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case DtypeBF16:
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
		}
	case DtypeF16:
		for i := range dst {
			dst[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	}
}

// F16ToF32 widens an IEEE half-precision value.
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := int32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal
		for mant&0x400 == 0 {
			mant <<= 1
			exp--
		}
		exp++
		mant &= 0x3ff
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | uint32(exp+127-15)<<23 | mant<<13)
}

// F32ToBF16 rounds to bfloat16 (round to nearest even).
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f { // NaN
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// WriteSafetensors writes tensors atomically to path in dtype (F32 or BF16),
// with tensors in name order and optional metadata.
func WriteSafetensors(path string, tensors map[string]*Tensor, meta map[string]string, dtype string) error {
	width := 4
	switch dtype {
	case DtypeF32:
	case DtypeBF16:
		width = 2
	default:
		return fmt.Errorf("hf: WriteSafetensors: dtype %s not supported", dtype)
	}
	names := make([]string, 0, len(tensors))
	for n, t := range tensors {
		if t.Numel() != len(t.Data) {
			return fmt.Errorf("hf: WriteSafetensors: tensor %q: shape %v has %d elements, data %d", n, t.Shape, t.Numel(), len(t.Data))
		}
		names = append(names, n)
	}
	sort.Strings(names)
	header := map[string]any{}
	if len(meta) > 0 {
		header["__metadata__"] = meta
	}
	var off int64
	for _, n := range names {
		t := tensors[n]
		sz := int64(len(t.Data) * width)
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		header[n] = stEntry{Dtype: dtype, Shape: shape, Offsets: [2]int64{off, off + sz}}
		off += sz
	}
	hdr, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("hf: %w", err)
	}
	for len(hdr)%8 != 0 { // align the data section, as the Python writer does
		hdr = append(hdr, ' ')
	}
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 1<<20)
		if err := binary.Write(bw, binary.LittleEndian, uint64(len(hdr))); err != nil {
			return err
		}
		if _, err := bw.Write(hdr); err != nil {
			return err
		}
		var b [4]byte
		for _, n := range names {
			for _, v := range tensors[n].Data {
				if width == 4 {
					binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
				} else {
					binary.LittleEndian.PutUint16(b[:], F32ToBF16(v))
				}
				if _, err := bw.Write(b[:width]); err != nil {
					return err
				}
			}
		}
		return bw.Flush()
	})
}

// LoadWeights reads all tensors of a model folder: model.safetensors, or
// the shards listed in model.safetensors.index.json.
func LoadWeights(dir string) (map[string]*Tensor, error) {
	single := filepath.Join(dir, "model.safetensors")
	if _, err := os.Stat(single); err == nil {
		t, _, err := ReadSafetensors(single)
		return t, err
	}
	indexPath := filepath.Join(dir, "model.safetensors.index.json")
	data, err := os.ReadFile(indexPath)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, formatErr(dir, nil, "no model.safetensors or model.safetensors.index.json")
		}
		return nil, fmt.Errorf("hf: %w", err)
	}
	var index struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(data, &index); err != nil {
		return nil, formatErr(indexPath, err, "not JSON")
	}
	if len(index.WeightMap) == 0 {
		return nil, formatErr(indexPath, nil, "weight_map is empty")
	}
	shards := map[string]bool{}
	for _, s := range index.WeightMap {
		if filepath.Base(s) != s {
			return nil, formatErr(indexPath, nil, "shard name %q must be a plain file name", s)
		}
		shards[s] = true
	}
	all := map[string]*Tensor{}
	for s := range shards {
		ts, _, err := ReadSafetensors(filepath.Join(dir, s))
		if err != nil {
			return nil, err
		}
		for n, t := range ts {
			if want, ok := index.WeightMap[n]; ok && want != s {
				continue
			}
			all[n] = t
		}
	}
	for n, s := range index.WeightMap {
		if all[n] == nil {
			return nil, formatErr(indexPath, nil, "tensor %q listed in shard %s is missing", n, s)
		}
	}
	return all, nil
}
