package trajectory

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding"
	"github.com/parquet-go/parquet-go/format"
)

// kind is how a Step field is stored and decoded.
type kind uint8

const (
	kInt       kind = iota // INT32 or INT64
	kFloat                 // FLOAT or DOUBLE (integers accepted)
	kBool                  // BOOLEAN
	kString                // BYTE_ARRAY
	kTime                  // INT64 TIMESTAMP
	kIntList               // LIST of INT32/INT64
	kFloatList             // LIST of FLOAT/DOUBLE
)

func (k kind) String() string {
	return [...]string{"integer", "float", "boolean", "string", "timestamp", "list<int32>", "list<float32>"}[k]
}

func (k kind) isList() bool { return k == kIntList || k == kFloatList }

// field binds a column name to a Step field.
type field struct {
	name string
	kind kind
	set  func(s *Step, c *vector, i int)
}

// fields lists Step's columns in on-disk order.
var fields = []field{
	{ColRunID, kString, func(s *Step, c *vector, i int) { s.RunID = c.strs[i] }},
	{ColIteration, kInt, func(s *Step, c *vector, i int) { s.Iteration = c.ints[i] }},
	{ColPolicyVersion, kInt, func(s *Step, c *vector, i int) { s.PolicyVersion = c.ints[i] }},
	{ColEpisodeID, kString, func(s *Step, c *vector, i int) { s.EpisodeID = c.strs[i] }},
	{ColProblemID, kString, func(s *Step, c *vector, i int) { s.ProblemID = c.strs[i] }},
	{ColEnv, kString, func(s *Step, c *vector, i int) { s.Env = c.strs[i] }},
	{ColSplit, kString, func(s *Step, c *vector, i int) { s.Split = c.strs[i] }},
	{ColBranch, kInt, func(s *Step, c *vector, i int) { s.Branch = int32(c.ints[i]) }},
	{ColChosen, kBool, func(s *Step, c *vector, i int) { s.Chosen = c.bools[i] }},
	{ColTurn, kInt, func(s *Step, c *vector, i int) { s.Turn = int32(c.ints[i]) }},
	{ColRole, kString, func(s *Step, c *vector, i int) { s.Role = c.strs[i] }},
	{ColPolicy, kString, func(s *Step, c *vector, i int) { s.Policy = c.strs[i] }},
	{ColBackend, kString, func(s *Step, c *vector, i int) { s.Backend = c.strs[i] }},
	{ColModel, kString, func(s *Step, c *vector, i int) { s.Model = c.strs[i] }},
	{ColPromptText, kString, func(s *Step, c *vector, i int) { s.PromptText = c.strs[i] }},
	{ColCompletionText, kString, func(s *Step, c *vector, i int) { s.CompletionText = c.strs[i] }},
	{ColPromptIDs, kIntList, func(s *Step, c *vector, i int) { s.PromptIDs = c.intList(i) }},
	{ColCompletionIDs, kIntList, func(s *Step, c *vector, i int) { s.CompletionIDs = c.intList(i) }},
	{ColLogprobs, kFloatList, func(s *Step, c *vector, i int) { s.Logprobs = c.floatList(i) }},
	{ColRetokenized, kBool, func(s *Step, c *vector, i int) { s.Retokenized = c.bools[i] }},
	{ColFinishReason, kString, func(s *Step, c *vector, i int) { s.FinishReason = c.strs[i] }},
	{ColTemperature, kFloat, func(s *Step, c *vector, i int) { s.Temperature = c.floats[i] }},
	{ColTopP, kFloat, func(s *Step, c *vector, i int) { s.TopP = c.floats[i] }},
	{ColTopK, kInt, func(s *Step, c *vector, i int) { s.TopK = int32(c.ints[i]) }},
	{ColSeed, kInt, func(s *Step, c *vector, i int) { s.Seed = c.ints[i] }},
	{ColRewardLocal, kFloat, func(s *Step, c *vector, i int) { s.RewardLocal = c.floats[i] }},
	{ColRewardTeam, kFloat, func(s *Step, c *vector, i int) { s.RewardTeam = c.floats[i] }},
	{ColReward, kFloat, func(s *Step, c *vector, i int) { s.Reward = c.floats[i] }},
	{ColDone, kBool, func(s *Step, c *vector, i int) { s.Done = c.bools[i] }},
	{ColSuccess, kBool, func(s *Step, c *vector, i int) { s.Success = c.bools[i] }},
	{ColGroupKey, kString, func(s *Step, c *vector, i int) { s.GroupKey = c.strs[i] }},
	{ColLatencyMS, kFloat, func(s *Step, c *vector, i int) { s.LatencyMS = c.floats[i] }},
	{ColCreatedAt, kTime, func(s *Step, c *vector, i int) { s.CreatedAt = c.time(i) }},
	{ColInfo, kString, func(s *Step, c *vector, i int) { s.Info = c.strs[i] }},
}

func fieldByName(name string) *field {
	for i := range fields {
		if fields[i].name == name {
			return &fields[i]
		}
	}
	return nil
}

// vector is one column of one row group, decoded.
type vector struct {
	ints   []int64
	floats []float64
	bools  []bool
	strs   []string
	i32    []int32   // kIntList elements, all rows
	f32    []float32 // kFloatList elements, all rows
	offs   []int     // list rows: row i is elements offs[i]:offs[i+1]
	unit   time.Duration
}

func (c *vector) intList(i int) []int32 {
	a, b := c.offs[i], c.offs[i+1]
	if a == b {
		return nil
	}
	return c.i32[a:b:b]
}

func (c *vector) floatList(i int) []float32 {
	a, b := c.offs[i], c.offs[i+1]
	if a == b {
		return nil
	}
	return c.f32[a:b:b]
}

func (c *vector) time(i int) time.Time {
	v := c.ints[i]
	switch c.unit {
	case time.Millisecond:
		return time.UnixMilli(v).UTC()
	case time.Nanosecond:
		return time.Unix(0, v).UTC()
	default:
		return time.UnixMicro(v).UTC()
	}
}

// rows is the number of rows decoded so far.
func (c *vector) rows(k kind) int {
	switch k {
	case kInt, kTime:
		return len(c.ints)
	case kFloat:
		return len(c.floats)
	case kBool:
		return len(c.bools)
	case kString:
		return len(c.strs)
	default:
		return len(c.offs)
	}
}

// binding is a Step field matched to a leaf column of one file.
type binding struct {
	f       *field
	leaf    *parquet.Column // nil: the file lacks the column; it reads as zero values
	index   int             // leaf column index in row groups
	maxRep  int
	maxDef  int
	elemDef int // lists: definition level at which a list element exists
	phys    parquet.Kind
	unit    time.Duration
}

// bind finds the leaf column of f in the file's schema and checks that its
// type can be read as f.
func bind(root *parquet.Column, f *field) (*binding, error) {
	b := &binding{f: f}
	col := root.Column(f.name)
	if col == nil {
		return b, nil
	}
	def := 0
	for {
		if col.Optional() || col.Repeated() {
			def++
		}
		if col.Repeated() && b.elemDef == 0 {
			b.elemDef = def
		}
		if col.Leaf() {
			break
		}
		kids := col.Columns()
		if len(kids) != 1 {
			return nil, fmt.Errorf("column %s: group with %d fields cannot be read as %s", f.name, len(kids), f.kind)
		}
		col = kids[0]
	}
	b.leaf, b.index = col, col.Index()
	b.maxRep, b.maxDef = col.MaxRepetitionLevel(), col.MaxDefinitionLevel()
	b.phys = col.Type().Kind()
	if f.kind.isList() != (b.maxRep == 1) || b.maxRep > 1 {
		return nil, fmt.Errorf("column %s: repetition level %d cannot be read as %s", f.name, b.maxRep, f.kind)
	}
	if b.maxDef > 255 {
		return nil, fmt.Errorf("column %s: definition level %d too deep", f.name, b.maxDef)
	}
	ok := false
	switch f.kind {
	case kInt, kIntList:
		ok = b.phys == parquet.Int32 || b.phys == parquet.Int64
	case kFloat:
		ok = b.phys == parquet.Float || b.phys == parquet.Double || b.phys == parquet.Int32 || b.phys == parquet.Int64
	case kFloatList:
		ok = b.phys == parquet.Float || b.phys == parquet.Double
	case kBool:
		ok = b.phys == parquet.Boolean
	case kString:
		ok = b.phys == parquet.ByteArray
	case kTime:
		ok = b.phys == parquet.Int64
		b.unit = time.Microsecond
		if lt := col.Type().LogicalType(); lt != nil {
			if ts, isTS := lt.Value.(*format.TimestampType); isTS && ts.Unit.Value != nil {
				b.unit = ts.Unit.Value.Duration()
			}
		}
	}
	if !ok {
		return nil, fmt.Errorf("column %s: physical type %s cannot be read as %s", f.name, b.phys, f.kind)
	}
	return b, nil
}

// maxPrealloc caps allocations sized from (possibly corrupt) metadata.
const maxPrealloc = 1 << 24

// decodeChunk decodes one column chunk of n rows into a new vector.
func (b *binding) decodeChunk(cc parquet.ColumnChunk, n int, stop func() error) (*vector, error) {
	v := &vector{unit: b.unit}
	if b.leaf == nil {
		switch b.f.kind {
		case kInt, kTime:
			v.ints = make([]int64, n)
		case kFloat:
			v.floats = make([]float64, n)
		case kBool:
			v.bools = make([]bool, n)
		case kString:
			v.strs = make([]string, n)
		default:
			v.offs = make([]int, n+1)
		}
		return v, nil
	}
	capRows := min(n, maxPrealloc)
	switch b.f.kind {
	case kInt, kTime:
		v.ints = make([]int64, 0, capRows)
	case kFloat:
		v.floats = make([]float64, 0, capRows)
	case kBool:
		v.bools = make([]bool, 0, capRows)
	case kString:
		v.strs = make([]string, 0, capRows)
	case kIntList:
		v.offs = make([]int, 0, capRows+1)
		v.i32 = make([]int32, 0, min(cc.NumValues(), maxPrealloc))
	case kFloatList:
		v.offs = make([]int, 0, capRows+1)
		v.f32 = make([]float32, 0, min(cc.NumValues(), maxPrealloc))
	}
	d := chunkDecoder{b: b, v: v}
	pages := cc.Pages()
	defer pages.Close()
	for {
		if err := stop(); err != nil {
			return nil, err
		}
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", b.f.name, err)
		}
		err = d.page(p)
		parquet.Release(p)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", b.f.name, err)
		}
	}
	if b.f.kind.isList() {
		if len(v.offs) != n {
			return nil, fmt.Errorf("column %s: %d rows, row group has %d", b.f.name, len(v.offs), n)
		}
		switch b.f.kind {
		case kIntList:
			v.offs = append(v.offs, len(v.i32))
		case kFloatList:
			v.offs = append(v.offs, len(v.f32))
		}
	} else if got := v.rows(b.f.kind); got != n {
		return nil, fmt.Errorf("column %s: %d rows, row group has %d", b.f.name, got, n)
	}
	return v, nil
}

// chunkDecoder decodes the pages of one column chunk, caching the decoded
// dictionary.
type chunkDecoder struct {
	b        *binding
	v        *vector
	dict     parquet.Dictionary
	dictStrs []string
	scratch  []string
}

var errLevels = errors.New("definition/repetition levels do not match the values")

func (d *chunkDecoder) page(p parquet.Page) error {
	b := d.b
	rep, def := p.RepetitionLevels(), p.DefinitionLevels()
	n := int(p.NumValues())
	if (b.maxDef > 0 && len(def) != n) || (b.maxRep > 0 && len(rep) != n) {
		return errLevels
	}
	v := d.v
	var err error
	switch b.f.kind {
	case kInt, kTime:
		var vals []int64
		if vals, err = d.int64s(p); err == nil {
			v.ints, err = scatter(v.ints, vals, def, b.maxDef, n)
		}
	case kFloat:
		var vals []float64
		if vals, err = d.float64s(p); err == nil {
			v.floats, err = scatter(v.floats, vals, def, b.maxDef, n)
		}
	case kBool:
		var vals []bool
		if vals, err = bools(p); err == nil {
			v.bools, err = scatter(v.bools, vals, def, b.maxDef, n)
		}
	case kString:
		var vals []string
		if vals, err = d.strings(p); err == nil {
			v.strs, err = scatter(v.strs, vals, def, b.maxDef, n)
		}
	case kIntList:
		var vals []int32
		if vals, err = d.int32s(p); err == nil {
			v.i32, v.offs, err = appendList(v.i32, v.offs, vals, rep, def, b.maxDef, b.elemDef)
		}
	case kFloatList:
		var vals []float32
		if vals, err = d.float32s(p); err == nil {
			v.f32, v.offs, err = appendList(v.f32, v.offs, vals, rep, def, b.maxDef, b.elemDef)
		}
	}
	return err
}

// values returns the page's plain values, resolving a dictionary: for an
// indexed page it returns the dictionary's values and the indexes.
func values(p parquet.Page) (vals *encoding.Values, idx []int32) {
	data := p.Data()
	if dict := p.Dictionary(); dict != nil {
		dv := dict.Page().Data()
		return &dv, data.Int32()
	}
	return &data, nil
}

// lookup maps dictionary indexes to values.
func lookup[T any](dict []T, idx []int32) ([]T, error) {
	out := make([]T, len(idx))
	for i, k := range idx {
		if k < 0 || int(k) >= len(dict) {
			return nil, fmt.Errorf("dictionary index %d out of range [0,%d)", k, len(dict))
		}
		out[i] = dict[k]
	}
	return out, nil
}

func widen[S, T int32 | int64 | float32 | float64](s []S) []T {
	out := make([]T, len(s))
	for i, x := range s {
		out[i] = T(x)
	}
	return out
}

func (d *chunkDecoder) int64s(p parquet.Page) ([]int64, error) {
	data, idx := values(p)
	var vals []int64
	if p.Type().Kind() == parquet.Int32 {
		vals = widen[int32, int64](data.Int32())
	} else {
		vals = data.Int64()
	}
	if idx != nil {
		return lookup(vals, idx)
	}
	return vals, nil
}

func (d *chunkDecoder) int32s(p parquet.Page) ([]int32, error) {
	data, idx := values(p)
	var vals []int32
	if p.Type().Kind() == parquet.Int64 {
		vals = widen[int64, int32](data.Int64())
	} else {
		vals = data.Int32()
	}
	if idx != nil {
		return lookup(vals, idx)
	}
	return vals, nil
}

func (d *chunkDecoder) float64s(p parquet.Page) ([]float64, error) {
	data, idx := values(p)
	var vals []float64
	switch p.Type().Kind() {
	case parquet.Float:
		vals = widen[float32, float64](data.Float())
	case parquet.Int32:
		vals = widen[int32, float64](data.Int32())
	case parquet.Int64:
		vals = widen[int64, float64](data.Int64())
	default:
		vals = data.Double()
	}
	if idx != nil {
		return lookup(vals, idx)
	}
	return vals, nil
}

func (d *chunkDecoder) float32s(p parquet.Page) ([]float32, error) {
	data, idx := values(p)
	var vals []float32
	if p.Type().Kind() == parquet.Double {
		vals = widen[float64, float32](data.Double())
	} else {
		vals = data.Float()
	}
	if idx != nil {
		return lookup(vals, idx)
	}
	return vals, nil
}

// strings returns the page's present values. Plain pages are copied into
// one string per page that the values slice (so one allocation per page);
// dictionaries are decoded once per column chunk.
func (d *chunkDecoder) strings(p parquet.Page) ([]string, error) {
	if dict := p.Dictionary(); dict != nil {
		if dict != d.dict {
			dv := dict.Page().Data()
			data, offs := dv.ByteArray()
			strs, err := splitStrings(data, offs, nil)
			if err != nil {
				return nil, fmt.Errorf("dictionary: %w", err)
			}
			d.dict, d.dictStrs = dict, strs
		}
		ix := p.Data()
		return lookup(d.dictStrs, ix.Int32())
	}
	pd := p.Data()
	data, offs := pd.ByteArray()
	var err error
	d.scratch, err = splitStrings(data, offs, d.scratch[:0])
	return d.scratch, err
}

func splitStrings(data []byte, offs []uint32, dst []string) ([]string, error) {
	if len(offs) == 0 {
		return dst, nil
	}
	s := string(data)
	for i := 0; i+1 < len(offs); i++ {
		a, b := offs[i], offs[i+1]
		if a > b || int(b) > len(s) {
			return nil, fmt.Errorf("byte array offsets [%d,%d) out of range", a, b)
		}
		dst = append(dst, s[a:b])
	}
	return dst, nil
}

// bools reads a boolean page's present values through the generic value
// reader (boolean pages are bit-packed with an offset; they are few).
func bools(p parquet.Page) ([]bool, error) {
	out := make([]bool, 0, p.NumValues()-p.NumNulls())
	buf := make([]parquet.Value, 256)
	r := p.Values()
	for {
		n, err := r.ReadValues(buf)
		for _, v := range buf[:n] {
			if !v.IsNull() {
				out = append(out, v.Boolean())
			}
		}
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, io.ErrNoProgress
		}
	}
}

// scatter appends the n rows of a page of a non-repeated column: vals are
// the present values; rows whose definition level is below maxDef (nulls)
// read as the zero value.
func scatter[T any](dst, vals []T, def []byte, maxDef, n int) ([]T, error) {
	if maxDef == 0 {
		if len(vals) != n {
			return nil, errLevels
		}
		return append(dst, vals...), nil
	}
	var zero T
	j := 0
	for _, d := range def {
		if int(d) == maxDef {
			if j >= len(vals) {
				return nil, errLevels
			}
			dst = append(dst, vals[j])
			j++
		} else {
			dst = append(dst, zero)
		}
	}
	if j != len(vals) {
		return nil, errLevels
	}
	return dst, nil
}

// appendList appends the rows of a page of a list column. A level with
// repetition 0 starts a row; definition maxDef is an element, one in
// [elemDef, maxDef) a null element (read as zero), one below elemDef an
// empty or null list.
func appendList[T any](flat []T, offs []int, vals []T, rep, def []byte, maxDef, elemDef int) ([]T, []int, error) {
	if len(rep) != len(def) {
		return nil, nil, errLevels
	}
	if len(rep) > 0 && rep[0] != 0 && len(offs) == 0 {
		return nil, nil, errors.New("list column does not start at a row boundary")
	}
	present, nulls := 0, false
	for _, d := range def {
		if int(d) == maxDef {
			present++
		} else if int(d) >= elemDef {
			nulls = true
		}
	}
	if present != len(vals) {
		return nil, nil, errLevels
	}
	if !nulls {
		base := len(flat)
		flat = append(flat, vals...)
		k := 0
		md := byte(maxDef)
		for i, r := range rep {
			if r == 0 {
				offs = append(offs, base+k)
			}
			if def[i] == md {
				k++
			}
		}
		return flat, offs, nil
	}
	var zero T
	j := 0
	for i, r := range rep {
		if r == 0 {
			offs = append(offs, len(flat))
		}
		switch d := int(def[i]); {
		case d == maxDef:
			flat = append(flat, vals[j])
			j++
		case d >= elemDef:
			flat = append(flat, zero)
		}
	}
	return flat, offs, nil
}
