package trajectory

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	pqzstd "github.com/parquet-go/parquet-go/compress/zstd"
)

// SchemaVersion is written to every shard's key/value metadata under
// "troupe.schema_version".
const SchemaVersion = "1"

// DefaultRowGroupBytes is the default logical (uncompressed) size at which a
// row group is closed.
const DefaultRowGroupBytes = 64 << 20

// DefaultZstdLevel is the default zstd level of shard pages (see
// [WriterOptions.ZstdLevel]).
const DefaultZstdLevel = 1

// WriterOptions configure a [Writer]. The zero value is usable.
type WriterOptions struct {
	// Tag is the unique part of the shard name ([A-Za-z0-9_-]+); "" picks a
	// time-ordered random tag. Two writers of one iteration must use
	// different tags.
	Tag string
	// RowGroupBytes closes a row group once the rows buffered in it hold
	// this many logical bytes (texts, 4 bytes per token id and logprob, the
	// scalars); 0 = DefaultRowGroupBytes. The writer buffers one row group
	// (compressed) in memory.
	RowGroupBytes int64
	// ZstdLevel is the compression level on the zstd command line's scale
	// (1–2 fastest, 3–5 default, 6–9 better, ≥10 best); 0 = DefaultZstdLevel.
	ZstdLevel int
	// Metadata is added to the file's key/value metadata.
	Metadata map[string]string
	// Parallelism is how many row groups are encoded and compressed at once
	// (0 = GOMAXPROCS, at most 8). Each holds one row group in memory.
	Parallelism int
}

// ShardInfo describes a committed shard.
type ShardInfo struct {
	// Name is the file's base name in the trajectories directory.
	Name string `json:"name"`
	// Iteration is the rollout iteration of every row.
	Iteration int64 `json:"iteration"`
	// Rows is the number of rows.
	Rows int64 `json:"rows"`
	// Bytes is the file size.
	Bytes int64 `json:"bytes"`
	// CRC32C is the Castagnoli CRC-32 of the whole file.
	CRC32C uint32 `json:"crc32c"`
}

var tagRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
var nameRE = regexp.MustCompile(`^iter-(\d{6,})-([A-Za-z0-9_-]{1,64})\.parquet$`)

// ShardName returns the file name of a shard: iter-NNNNNN-TAG.parquet.
func ShardName(iteration int64, tag string) string {
	return fmt.Sprintf("iter-%06d-%s.parquet", iteration, tag)
}

// ParseShardName is the inverse of ShardName; ok is false for any other
// name (temporary files, the manifest, foreign files).
func ParseShardName(name string) (iteration int64, tag string, ok bool) {
	m := nameRE.FindStringSubmatch(name)
	if m == nil {
		return 0, "", false
	}
	it, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, "", false
	}
	return it, m[2], true
}

// newTag returns a tag that sorts by creation time and is unique.
func newTag() string {
	var b [4]byte
	rand.Read(b[:])
	now := time.Now().UTC()
	return fmt.Sprintf("%sZ%06d-%s", now.Format("20060102T150405"), now.Nanosecond()/1000, hex.EncodeToString(b[:]))
}

// Writer writes one shard. Rows are buffered into row groups of about
// RowGroupBytes; full row groups are encoded and compressed in background
// goroutines (up to Parallelism at once, each into memory) and spliced, in
// order and without re-encoding, into a locked temporary file in the target
// directory. [Writer.Commit] makes the shard visible atomically,
// [Writer.Abort] discards it. Write copies the rows' slices, so callers may
// reuse them. A Writer is not safe for concurrent use.
type Writer struct {
	dir, name string
	iteration int64
	file      *os.File
	buf       *bufio.Writer
	count     *countingWriter
	pw        *parquet.GenericWriter[Step] // the file; receives whole row groups
	wopts     []parquet.WriterOption
	rgBytes   int64
	cur       []Step // the open row group
	curBytes  int64  // its logical size
	rows      int64
	done      bool

	sem     chan struct{}       // bounds concurrent encoders
	queue   chan chan encodedRG // encoded row groups, in file order, to the splicer
	spliced chan struct{}       // closed when the splicer has exited
	mu      sync.Mutex
	err     error // sticky; set by Write or the splicer
}

// encodedRG is one row group encoded as a complete in-memory Parquet file.
type encodedRG struct {
	data []byte
	err  error
}

// Create starts the shard of the given iteration in dir (which must
// exist).
func Create(dir string, iteration int64, opts *WriterOptions) (*Writer, error) {
	var o WriterOptions
	if opts != nil {
		o = *opts
	}
	if iteration < 0 {
		return nil, fmt.Errorf("trajectory: negative iteration %d", iteration)
	}
	if o.Tag == "" {
		o.Tag = newTag()
	} else if !tagRE.MatchString(o.Tag) {
		return nil, fmt.Errorf("trajectory: shard tag %q: want [A-Za-z0-9_-]{1,64}", o.Tag)
	}
	if o.RowGroupBytes <= 0 {
		o.RowGroupBytes = DefaultRowGroupBytes
	}
	if o.ZstdLevel <= 0 {
		o.ZstdLevel = DefaultZstdLevel
	}
	if o.Parallelism <= 0 {
		o.Parallelism = min(runtime.GOMAXPROCS(0), 8)
	}
	name := ShardName(iteration, o.Tag)
	f, err := createTemp(dir, name)
	if err != nil {
		return nil, fmt.Errorf("trajectory: create shard %s: %w", filepath.Join(dir, name), err)
	}
	w := &Writer{dir: dir, name: name, iteration: iteration, file: f, rgBytes: o.RowGroupBytes}
	w.count = &countingWriter{w: f, crc: crc32.New(crc32.MakeTable(crc32.Castagnoli))}
	w.buf = bufio.NewWriterSize(w.count, 1<<20)
	codec := &pqzstd.Codec{Level: zstd.EncoderLevelFromZstd(o.ZstdLevel)}
	w.wopts = []parquet.WriterOption{
		parquet.Compression(codec),
		parquet.CreatedBy("troupe", "trajectory-schema-"+SchemaVersion, "parquet-go"),
		parquet.PageBufferSize(1 << 20),
		parquet.KeyValueMetadata("troupe.schema_version", SchemaVersion),
	}
	for k, v := range o.Metadata {
		w.wopts = append(w.wopts, parquet.KeyValueMetadata(k, v))
	}
	w.pw = parquet.NewGenericWriter[Step](w.buf, w.wopts...)
	w.sem = make(chan struct{}, o.Parallelism)
	w.queue = make(chan chan encodedRG, o.Parallelism)
	w.spliced = make(chan struct{})
	go w.splice()
	return w, nil
}

// Name returns the shard's final base name.
func (w *Writer) Name() string { return w.name }

// Path returns the shard's final path.
func (w *Writer) Path() string { return filepath.Join(w.dir, w.name) }

// Rows returns the number of rows written so far.
func (w *Writer) Rows() int64 { return w.rows }

func (w *Writer) setErr(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
}

func (w *Writer) getErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Write appends rows. Every row must carry the writer's iteration; Logprobs
// must be empty or as long as CompletionIDs; Info must be "" or valid JSON.
// An invalid row rejects the whole call and leaves the writer usable; an
// encoding or I/O failure poisons it (Commit then fails and removes the
// temporary file).
func (w *Writer) Write(steps ...Step) error {
	if w.done {
		return fmt.Errorf("trajectory: %s: write after commit or abort", w.name)
	}
	if err := w.getErr(); err != nil {
		return err
	}
	for i := range steps {
		if err := validate(&steps[i], w.iteration); err != nil {
			return fmt.Errorf("trajectory: %s: row %d: %w", w.name, w.rows+int64(i), err)
		}
	}
	for i := range steps {
		s := steps[i]
		s.PromptIDs = slices.Clone(s.PromptIDs)
		s.CompletionIDs = slices.Clone(s.CompletionIDs)
		s.Logprobs = slices.Clone(s.Logprobs)
		w.cur = append(w.cur, s)
		w.curBytes += logicalSize(&s)
		w.rows++
		if w.curBytes >= w.rgBytes {
			w.flushRowGroup()
		}
	}
	return w.getErr()
}

// flushRowGroup hands the open row group to an encoder goroutine.
func (w *Writer) flushRowGroup() {
	if len(w.cur) == 0 {
		return
	}
	rows := w.cur
	w.cur, w.curBytes = nil, 0
	fut := make(chan encodedRG, 1)
	w.sem <- struct{}{} // backpressure: at most Parallelism row groups encoding
	go func() {
		defer func() { <-w.sem }()
		fut <- w.encode(rows)
	}()
	w.queue <- fut
}

// encode writes rows as a complete Parquet file in memory.
func (w *Writer) encode(rows []Step) (res encodedRG) {
	defer func() {
		if v := recover(); v != nil {
			res = encodedRG{err: fmt.Errorf("encode row group: %v", v)}
		}
	}()
	var b bytes.Buffer
	pw := parquet.NewGenericWriter[Step](&b, w.wopts...)
	if _, err := pw.Write(rows); err != nil {
		return encodedRG{err: err}
	}
	if err := pw.Close(); err != nil {
		return encodedRG{err: err}
	}
	return encodedRG{data: b.Bytes()}
}

// splice appends encoded row groups to the file in order. The compressed
// pages are copied verbatim (parquet-go's copy path for row groups written
// with the same configuration), so this costs little more than the I/O.
func (w *Writer) splice() {
	defer close(w.spliced)
	for fut := range w.queue {
		e := <-fut
		if e.err != nil {
			w.setErr(fmt.Errorf("trajectory: %s: %w", w.name, e.err))
		}
		if w.getErr() != nil {
			continue // drain
		}
		f, err := parquet.OpenFile(bytes.NewReader(e.data), int64(len(e.data)))
		if err == nil {
			for _, rg := range f.RowGroups() {
				if _, err = w.pw.WriteRowGroup(rg); err != nil {
					break
				}
			}
		}
		if err != nil {
			w.setErr(fmt.Errorf("trajectory: %s: write row group: %w", w.name, err))
		}
	}
}

// finish stops the pipeline and waits for it.
func (w *Writer) finish() {
	close(w.queue)
	<-w.spliced
}

func validate(s *Step, iteration int64) error {
	if s.Iteration != iteration {
		return fmt.Errorf("iteration %d in a shard of iteration %d", s.Iteration, iteration)
	}
	if len(s.Logprobs) != 0 && len(s.Logprobs) != len(s.CompletionIDs) {
		return fmt.Errorf("%d logprobs for %d completion tokens", len(s.Logprobs), len(s.CompletionIDs))
	}
	if s.Info != "" && !json.Valid([]byte(s.Info)) {
		return errors.New("info is not valid JSON")
	}
	return nil
}

// logicalSize estimates a row's uncompressed size in bytes.
func logicalSize(s *Step) int64 {
	n := 4*len(s.PromptIDs) + 4*len(s.CompletionIDs) + 4*len(s.Logprobs)
	n += len(s.RunID) + len(s.EpisodeID) + len(s.ProblemID) + len(s.Env) + len(s.Split) +
		len(s.Role) + len(s.Policy) + len(s.Backend) + len(s.Model) + len(s.PromptText) +
		len(s.CompletionText) + len(s.FinishReason) + len(s.GroupKey) + len(s.Info)
	return int64(n) + 160 // scalars, levels, length prefixes
}

// Commit finishes the file (remaining row group, footer), fsyncs it,
// renames it to its final name and fsyncs the directory. It fails if a file
// of that name exists. On any error the temporary file is removed and
// nothing becomes visible.
func (w *Writer) Commit() (ShardInfo, error) {
	if w.done {
		return ShardInfo{}, fmt.Errorf("trajectory: %s: already committed or aborted", w.name)
	}
	w.done = true
	fail := func(err error) (ShardInfo, error) {
		w.file.Close()
		os.Remove(w.file.Name())
		return ShardInfo{}, fmt.Errorf("trajectory: commit %s: %w", w.Path(), err)
	}
	if w.getErr() == nil {
		w.flushRowGroup()
	}
	w.finish()
	if err := w.getErr(); err != nil {
		w.file.Close()
		os.Remove(w.file.Name())
		return ShardInfo{}, err
	}
	if err := w.pw.Close(); err != nil {
		return fail(err)
	}
	if err := w.buf.Flush(); err != nil {
		return fail(err)
	}
	info := ShardInfo{Name: w.name, Iteration: w.iteration, Rows: w.rows, Bytes: w.count.n, CRC32C: w.count.crc.Sum32()}
	if err := commitTemp(w.file, w.dir, w.name, false); err != nil {
		return ShardInfo{}, fmt.Errorf("trajectory: commit %s: %w", w.Path(), err)
	}
	return info, nil
}

// Abort discards the shard: background encoders are drained and the
// temporary file is closed and removed. It is a no-op after Commit or
// Abort.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.setErr(errors.New("aborted"))
	w.finish()
	w.file.Close()
	os.Remove(w.file.Name())
}

// countingWriter counts and checksums what goes to the file.
type countingWriter struct {
	w   io.Writer
	crc hash.Hash32
	n   int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.crc.Write(p[:n])
	c.n += int64(n)
	return n, err
}
