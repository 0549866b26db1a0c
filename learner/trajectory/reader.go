package trajectory

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// ReadOptions select what a [Reader] decodes. The zero value reads every
// column of every row.
type ReadOptions struct {
	// Columns is the projection: only these columns are decoded, the other
	// Step fields stay zero. Nil means all of Step's columns. Naming a column
	// that the file lacks is an error; unprojected missing columns are fine.
	Columns []string
	// Iterations keeps only rows whose iteration is listed (nil = all). Row
	// groups whose iteration statistics exclude every listed value are
	// skipped without decoding.
	Iterations []int64
	// Roles keeps only rows whose role is listed (nil = all).
	Roles []string
	// Split keeps only rows of this split ("" = all).
	Split string
	// Parallelism is how many row groups are decoded at once (0 = GOMAXPROCS,
	// at most 8). Each in-flight row group holds its decoded rows in memory.
	Parallelism int
}

// Reader reads one shard. Open validates the footer and schema; rows are
// decoded column by column, one row group at a time, in parallel. A Reader
// is safe for concurrent use by several goroutines.
type Reader struct {
	path     string
	file     *os.File
	pf       *parquet.File
	bindings []*binding // decoded columns (projection ∪ filter columns)
	opts     ReadOptions
	iterCol  int // leaf index of iteration (-1 if absent), for row-group skipping
}

// Open opens the shard at path. Errors are *FileError values naming the
// file; a file that is not a readable shard (truncated, corrupt, wrong
// column types) has BadInput() true.
func Open(path string, opts *ReadOptions) (r *Reader, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, osFileError(path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, osFileError(path, err)
	}
	if st.IsDir() {
		f.Close()
		return nil, badFile(path, errors.New("is a directory"))
	}
	r, err = openReaderAt(path, f, st.Size(), opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.file = f
	return r, nil
}

// OpenParquet opens any Parquet file with the reader's safety checks
// (footer structure, codecs, chunk bounds; library panics recovered) for
// tools that walk it with parquet-go directly, such as `troupe inspect`.
// Close the returned closer when done. Errors are *FileError values.
func OpenParquet(path string) (*parquet.File, io.Closer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, osFileError(path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, osFileError(path, err)
	}
	if st.IsDir() {
		f.Close()
		return nil, nil, badFile(path, errors.New("is a directory"))
	}
	pf, err := openParquet(path, f, st.Size())
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return pf, f, nil
}

// openParquet validates and opens the footer of a Parquet file.
func openParquet(path string, ra io.ReaderAt, size int64) (pf *parquet.File, err error) {
	defer func() {
		if v := recover(); v != nil {
			pf, err = nil, badFile(path, recovered(v))
		}
	}()
	if err := checkFooter(ra, size); err != nil {
		return nil, badFile(path, err)
	}
	pf, err = parquet.OpenFile(ra, size, parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		return nil, badFile(path, fmt.Errorf("not a readable parquet file: %w", err))
	}
	if err := checkShape(pf, size); err != nil {
		return nil, badFile(path, err)
	}
	return pf, nil
}

// openReaderAt builds a Reader over any ReaderAt (the fuzz tests use
// memory); path only names the data in errors.
func openReaderAt(path string, ra io.ReaderAt, size int64, opts *ReadOptions) (r *Reader, err error) {
	pf, err := openParquet(path, ra, size)
	if err != nil {
		return nil, err
	}
	r = &Reader{path: path, pf: pf, iterCol: -1}
	if opts != nil {
		r.opts = *opts
	}
	want := r.opts.Columns
	if want == nil {
		want = Columns()
	}
	need := slices.Clone(want)
	if r.opts.Iterations != nil {
		need = append(need, ColIteration)
	}
	if r.opts.Roles != nil {
		need = append(need, ColRole)
	}
	if r.opts.Split != "" {
		need = append(need, ColSplit)
	}
	seen := map[string]bool{}
	for _, name := range need {
		if seen[name] {
			continue
		}
		seen[name] = true
		fd := fieldByName(name)
		if fd == nil {
			return nil, &FileError{Path: path, Err: fmt.Errorf("unknown column %q", name), Bad: true}
		}
		b, err := bind(pf.Root(), fd)
		if err != nil {
			return nil, badFile(path, err)
		}
		if b.leaf == nil && r.opts.Columns != nil && slices.Contains(r.opts.Columns, name) {
			return nil, badFile(path, fmt.Errorf("no column %q", name))
		}
		if name == ColIteration && b.leaf != nil {
			r.iterCol = b.index
		}
		r.bindings = append(r.bindings, b)
	}
	return r, nil
}

// checkShape rejects metadata that cannot describe a file of this size
// before anything is allocated from it.
func checkShape(pf *parquet.File, size int64) error {
	md := pf.Metadata()
	if md.NumRows < 0 {
		return fmt.Errorf("negative row count %d", md.NumRows)
	}
	var total int64
	for i, rg := range md.RowGroups {
		if rg.NumRows < 0 {
			return fmt.Errorf("row group %d: negative row count", i)
		}
		total += rg.NumRows
		for _, cc := range rg.Columns {
			m := cc.MetaData
			if err := checkCodec(m.Codec); err != nil {
				return fmt.Errorf("row group %d: column %s: %w", i, strings.Join(m.PathInSchema, "."), err)
			}
			if m.TotalCompressedSize < 0 || m.TotalCompressedSize > size || m.DataPageOffset < 0 || m.DataPageOffset > size {
				return fmt.Errorf("row group %d: column chunk outside the file", i)
			}
		}
	}
	if total != md.NumRows {
		return fmt.Errorf("row groups hold %d rows, footer says %d", total, md.NumRows)
	}
	return nil
}

// checkCodec rejects compression codecs the reader cannot decode safely.
// parquet-go v0.32.0 retries a failed LZ4_RAW block decode forever with a
// doubling buffer, so a corrupt LZ4_RAW page would hang the reader and
// exhaust memory; such files are refused (troupe writes ZSTD).
func checkCodec(c format.CompressionCodec) error {
	switch c {
	case format.Uncompressed, format.Snappy, format.Gzip, format.Brotli, format.Zstd:
		return nil
	case format.Lz4Raw, format.Lz4:
		return fmt.Errorf("codec %s not supported (parquet-go hangs on corrupt LZ4 data); rewrite the file with ZSTD", c)
	default:
		return fmt.Errorf("unknown compression codec %d", int32(c))
	}
}

// Path returns the file's path.
func (r *Reader) Path() string { return r.path }

// NumRows returns the number of rows in the file (before filtering).
func (r *Reader) NumRows() int64 { return r.pf.NumRows() }

// NumRowGroups returns the number of row groups.
func (r *Reader) NumRowGroups() int { return len(r.pf.RowGroups()) }

// Parquet exposes the underlying parquet-go file (schema, metadata,
// statistics) for tools such as `troupe inspect`.
func (r *Reader) Parquet() *parquet.File { return r.pf }

// Close closes the file.
func (r *Reader) Close() error {
	if r.file == nil {
		return nil
	}
	err := r.file.Close()
	r.file = nil
	return err
}

func (r *Reader) parallelism() int {
	p := r.opts.Parallelism
	if p <= 0 {
		p = min(runtime.GOMAXPROCS(0), 8)
	}
	return max(1, min(p, r.NumRowGroups()))
}

// All returns the rows that pass the filters, in file order. Row groups are
// decoded ahead in parallel; breaking out of the loop stops the decoding.
// After an error the sequence ends. List fields of different rows share
// backing arrays but have capacity equal to their length, so appending to
// one never overwrites another.
func (r *Reader) All(ctx context.Context) iter.Seq2[Step, error] {
	return func(yield func(Step, error) bool) {
		n := r.NumRowGroups()
		if n == 0 {
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		type result struct {
			rows []Step
			err  error
		}
		results := make([]chan result, n)
		for i := range results {
			results[i] = make(chan result, 1)
		}
		sem := make(chan struct{}, r.parallelism())
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := range n {
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					results[i] <- result{err: ctx.Err()}
					continue
				}
				wg.Go(func() {
					rows, err := r.ReadRowGroup(ctx, i)
					results[i] <- result{rows, err}
				})
			}
		})
		defer func() {
			cancel() // stops the dispatcher and the decoders on an early return
			wg.Wait()
		}()
		for i := range n {
			res := <-results[i]
			<-sem
			if res.err != nil {
				yield(Step{}, res.err)
				return
			}
			for _, s := range res.rows {
				if !yield(s, nil) {
					return
				}
			}
		}
	}
}

// ReadAll reads every row that passes the filters.
func (r *Reader) ReadAll(ctx context.Context) ([]Step, error) {
	out := make([]Step, 0, r.NumRows())
	for s, err := range r.All(ctx) {
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// ReadFile opens path, reads every row that passes opts' filters and closes
// the file.
func ReadFile(ctx context.Context, path string, opts *ReadOptions) ([]Step, error) {
	r, err := Open(path, opts)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.ReadAll(ctx)
}

// ReadRowGroup decodes row group i (0-based) and returns its rows that pass
// the filters.
func (r *Reader) ReadRowGroup(ctx context.Context, i int) (rows []Step, err error) {
	defer func() {
		if v := recover(); v != nil {
			rows, err = nil, badFile(r.path, fmt.Errorf("row group %d: %w", i, recovered(v)))
		}
	}()
	rgs := r.pf.RowGroups()
	if i < 0 || i >= len(rgs) {
		return nil, fmt.Errorf("trajectory: %s: row group %d out of range [0,%d)", r.path, i, len(rgs))
	}
	rg := rgs[i]
	if r.skipRowGroup(rg) {
		return nil, nil
	}
	n64 := rg.NumRows()
	if n64 > int64(^uint32(0)>>1) {
		return nil, badFile(r.path, fmt.Errorf("row group %d: %d rows", i, n64))
	}
	n := int(n64)
	chunks := rg.ColumnChunks()
	vecs := make([]*vector, len(r.bindings))
	stop := ctx.Err
	for k, b := range r.bindings {
		var cc parquet.ColumnChunk
		if b.leaf != nil {
			if b.index >= len(chunks) {
				return nil, badFile(r.path, fmt.Errorf("row group %d: no chunk for column %s", i, b.f.name))
			}
			cc = chunks[b.index]
		}
		v, err := b.decodeChunk(cc, n, stop)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, badFile(r.path, fmt.Errorf("row group %d: %w", i, err))
		}
		vecs[k] = v
	}
	keep := r.keep(vecs, n)
	rows = make([]Step, 0, n)
	for j := range n {
		if keep != nil && !keep[j] {
			continue
		}
		rows = append(rows, Step{})
		s := &rows[len(rows)-1]
		for k, b := range r.bindings {
			b.f.set(s, vecs[k], j)
		}
	}
	return rows, nil
}

// skipRowGroup reports whether the iteration statistics of rg exclude every
// wanted iteration.
func (r *Reader) skipRowGroup(rg parquet.RowGroup) bool {
	if r.opts.Iterations == nil || r.iterCol < 0 {
		return false
	}
	if len(r.opts.Iterations) == 0 {
		return true
	}
	chunks := rg.ColumnChunks()
	if r.iterCol >= len(chunks) {
		return false
	}
	bc, isBounded := chunks[r.iterCol].(interface {
		Bounds() (min, max parquet.Value, ok bool)
	})
	if !isBounded {
		return false
	}
	lo, hi, ok := bc.Bounds()
	if !ok || lo.IsNull() || hi.IsNull() {
		return false
	}
	var a, b int64
	switch lo.Kind() {
	case parquet.Int32:
		a, b = int64(lo.Int32()), int64(hi.Int32())
	case parquet.Int64:
		a, b = lo.Int64(), hi.Int64()
	default:
		return false
	}
	for _, it := range r.opts.Iterations {
		if it >= a && it <= b {
			return false
		}
	}
	return true
}

// keep evaluates the row filters; nil means keep every row.
func (r *Reader) keep(vecs []*vector, n int) []bool {
	o := &r.opts
	if o.Iterations == nil && o.Roles == nil && o.Split == "" {
		return nil
	}
	keep := make([]bool, n)
	for j := range keep {
		keep[j] = true
	}
	for k, b := range r.bindings {
		v := vecs[k]
		switch {
		case b.f.name == ColIteration && o.Iterations != nil:
			for j := range keep {
				keep[j] = keep[j] && slices.Contains(o.Iterations, v.ints[j])
			}
		case b.f.name == ColRole && o.Roles != nil:
			for j := range keep {
				keep[j] = keep[j] && slices.Contains(o.Roles, v.strs[j])
			}
		case b.f.name == ColSplit && o.Split != "":
			for j := range keep {
				keep[j] = keep[j] && v.strs[j] == o.Split
			}
		}
	}
	return keep
}
