package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/troupe-rl/troupe/learner/trajectory"
)

func init() {
	register(&command{
		name:    "inspect",
		args:    "FILE.parquet [--rows N] [--stats=false]",
		summary: "print a Parquet file's schema, first rows and column statistics",
		detail: `Works on any Parquet file; trajectory shards get their troupe metadata shown.
Long texts and token lists are shortened. Statistics read every value: min/max/mean
for numbers, null counts, distinct counts for short string columns, and the average
length of list columns. A truncated or corrupt file exits with code 2.`,
		run: runInspect,
	})
}

func runInspect(ctx context.Context, env *cliEnv, args []string) error {
	c := commands["inspect"]
	fs := newFlags(env, c)
	nrows := fs.Int("rows", 5, "number of rows to print")
	stats := fs.Bool("stats", true, "scan every value for per-column statistics")
	pos, err := parseFlags(env, c, fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want exactly one FILE.parquet")
	}
	if *nrows < 0 {
		return usagef("--rows must be >= 0")
	}
	return inspectFile(ctx, env.stdout, pos[0], *nrows, *stats)
}

// badParquet blames the file for err.
func badParquet(path string, err error) error {
	return &trajectory.FileError{Path: path, Err: err, Bad: true}
}

func inspectFile(ctx context.Context, w io.Writer, path string, nrows int, stats bool) (err error) {
	pf, closer, err := trajectory.OpenParquet(path)
	if err != nil {
		return err
	}
	defer closer.Close()
	// parquet-go may panic on corrupt pages; the file is to blame.
	defer func() {
		if v := recover(); v != nil {
			err = badParquet(path, fmt.Errorf("corrupt parquet data: %v", v))
		}
	}()
	md := pf.Metadata()
	fmt.Fprintf(w, "file:       %s\n", path)
	fmt.Fprintf(w, "size:       %s, %d rows, %d row groups\n", humanBytes(pf.Size()), pf.NumRows(), len(pf.RowGroups()))
	if md.CreatedBy != "" {
		fmt.Fprintf(w, "created by: %s\n", md.CreatedBy)
	}
	for _, kv := range md.KeyValueMetadata {
		if strings.HasPrefix(kv.Key, "ARROW:") {
			continue
		}
		fmt.Fprintf(w, "metadata:   %s=%s\n", kv.Key, shorten(kv.Value, 80))
	}
	fmt.Fprintf(w, "\nschema:\n%s\n", pf.Schema())

	leaves := leafColumns(pf.Root())
	if nrows > 0 {
		fmt.Fprintf(w, "\nfirst %d rows:\n", min(int64(nrows), pf.NumRows()))
		if err := printRows(ctx, w, pf, leaves, nrows); err != nil {
			return badParquet(path, err)
		}
	}
	if stats {
		cs, err := columnStats(ctx, pf, leaves)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return badParquet(path, err)
		}
		fmt.Fprintln(w, "\ncolumns:")
		printStats(w, cs)
	}
	return nil
}

// leaf is a leaf column and how to show it.
type leaf struct {
	col  *parquet.Column
	name string // top-level name for lists (prompt_ids), dotted path otherwise
	list bool
	unit time.Duration // timestamps; 0 otherwise
}

func leafColumns(root *parquet.Column) []leaf {
	var out []leaf
	var walk func(c *parquet.Column, top string)
	walk = func(c *parquet.Column, top string) {
		if c.Leaf() {
			l := leaf{col: c, list: c.MaxRepetitionLevel() > 0}
			if l.list {
				l.name = top
			} else {
				l.name = strings.Join(c.Path(), ".")
			}
			if lt := c.Type().LogicalType(); lt != nil {
				if ts, ok := lt.Value.(*format.TimestampType); ok && ts.Unit.Value != nil {
					l.unit = ts.Unit.Value.Duration()
				}
			}
			out = append(out, l)
			return
		}
		for _, k := range c.Columns() {
			t := top
			if t == "" {
				t = k.Name()
			}
			walk(k, t)
		}
	}
	walk(root, "")
	slices.SortStableFunc(out, func(a, b leaf) int { return a.col.Index() - b.col.Index() })
	return out
}

func printRows(ctx context.Context, w io.Writer, pf *parquet.File, leaves []leaf, n int) error {
	width := 0
	for _, l := range leaves {
		width = max(width, len(l.name))
	}
	printed := 0
	buf := make([]parquet.Row, 1)
	for _, rg := range pf.RowGroups() {
		rows := rg.Rows()
		for printed < n {
			if err := ctx.Err(); err != nil {
				rows.Close()
				return err
			}
			k, err := rows.ReadRows(buf)
			if k == 1 {
				fmt.Fprintf(w, "-- row %d\n", printed)
				byCol := make([][]parquet.Value, len(leaves))
				buf[0].Range(func(ci int, vals []parquet.Value) bool {
					if ci < len(byCol) {
						byCol[ci] = vals
					}
					return true
				})
				for i, l := range leaves {
					fmt.Fprintf(w, "  %-*s  %s\n", width, l.name, formatCell(l, byCol[i]))
				}
				printed++
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				rows.Close()
				return err
			}
		}
		rows.Close()
		if printed >= n {
			break
		}
	}
	return nil
}

func formatCell(l leaf, vals []parquet.Value) string {
	if !l.list {
		if len(vals) == 0 || vals[0].IsNull() {
			return "null"
		}
		return formatValue(l, vals[0])
	}
	var elems []string
	total := 0
	for _, v := range vals {
		if v.DefinitionLevel() < l.col.MaxDefinitionLevel() {
			continue // an empty or null list, or a null element
		}
		total++
		if len(elems) < 8 {
			elems = append(elems, formatValue(l, v))
		}
	}
	s := "[" + strings.Join(elems, " ")
	if total > len(elems) {
		s += fmt.Sprintf(" … %d more", total-len(elems))
	}
	return s + fmt.Sprintf("] (len %d)", total)
}

func formatValue(l leaf, v parquet.Value) string {
	switch v.Kind() {
	case parquet.Boolean:
		return strconv.FormatBool(v.Boolean())
	case parquet.Int32:
		return strconv.FormatInt(int64(v.Int32()), 10)
	case parquet.Int64:
		if l.unit != 0 {
			return time.Unix(0, 0).Add(time.Duration(v.Int64()) * l.unit).UTC().Format(time.RFC3339Nano)
		}
		return strconv.FormatInt(v.Int64(), 10)
	case parquet.Float:
		return strconv.FormatFloat(float64(v.Float()), 'g', 6, 32)
	case parquet.Double:
		return strconv.FormatFloat(v.Double(), 'g', 8, 64)
	case parquet.ByteArray, parquet.FixedLenByteArray:
		return strconv.Quote(shorten(string(v.ByteArray()), 72))
	default:
		return v.String()
	}
}

// shorten cuts s to about n runes, saying how much was left out.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + fmt.Sprintf("… (%d bytes)", len(s))
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// colStats accumulates one leaf column's statistics.
type colStats struct {
	leaf
	physical       string
	values, nulls  int64
	rows, elements int64 // lists: rows and present elements
	numeric        bool
	min, max, sum  float64
	distinct       map[string]struct{}
	tooMany        bool // distinct stopped counting
	bytes          int64
}

const maxDistinct = 1000

func columnStats(ctx context.Context, pf *parquet.File, leaves []leaf) ([]*colStats, error) {
	out := make([]*colStats, len(leaves))
	for i, l := range leaves {
		out[i] = &colStats{leaf: l, physical: l.col.Type().Kind().String(), min: math.Inf(1), max: math.Inf(-1), distinct: map[string]struct{}{}}
	}
	buf := make([]parquet.Value, 4096)
	for _, rg := range pf.RowGroups() {
		chunks := rg.ColumnChunks()
		for _, s := range out {
			idx := s.col.Index()
			if idx >= len(chunks) {
				return nil, fmt.Errorf("row group has no chunk for column %s", s.name)
			}
			if err := s.scan(ctx, chunks[idx], buf); err != nil {
				return nil, fmt.Errorf("column %s: %w", s.name, err)
			}
		}
	}
	return out, nil
}

func (s *colStats) scan(ctx context.Context, cc parquet.ColumnChunk, buf []parquet.Value) error {
	pages := cc.Pages()
	defer pages.Close()
	maxDef := s.col.MaxDefinitionLevel()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		r := p.Values()
		for {
			n, err := r.ReadValues(buf)
			for _, v := range buf[:n] {
				s.add(v, maxDef)
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				parquet.Release(p)
				return err
			}
			if n == 0 {
				parquet.Release(p)
				return io.ErrNoProgress
			}
		}
		parquet.Release(p)
	}
}

func (s *colStats) add(v parquet.Value, maxDef int) {
	if s.list {
		if v.RepetitionLevel() == 0 {
			s.rows++
		}
		if v.DefinitionLevel() < maxDef {
			return // an empty or null list, or a null element
		}
		s.elements++
	} else {
		s.values++
		if v.IsNull() {
			s.nulls++
			return
		}
	}
	var x float64
	switch v.Kind() {
	case parquet.Boolean:
		if v.Boolean() {
			x = 1
		}
	case parquet.Int32:
		x = float64(v.Int32())
	case parquet.Int64:
		x = float64(v.Int64())
	case parquet.Float:
		x = float64(v.Float())
	case parquet.Double:
		x = v.Double()
	case parquet.ByteArray, parquet.FixedLenByteArray:
		b := v.ByteArray()
		s.bytes += int64(len(b))
		if !s.tooMany && !s.list {
			if _, ok := s.distinct[string(b)]; !ok {
				if len(s.distinct) >= maxDistinct || len(b) > 256 {
					s.tooMany, s.distinct = true, nil
				} else {
					s.distinct[string(b)] = struct{}{}
				}
			}
		}
		return
	default:
		return
	}
	s.numeric = true
	s.min, s.max, s.sum = math.Min(s.min, x), math.Max(s.max, x), s.sum+x
}

func printStats(w io.Writer, cs []*colStats) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "column\ttype\trows\tnulls\tmin\tmax\tmean\tdistinct\tavg len")
	num := func(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }
	for _, s := range cs {
		var lo, hi, mean, distinct, avg string
		n := s.values
		if s.list {
			n = s.elements
		}
		if s.numeric && n > 0 {
			lo, hi, mean = num(s.min), num(s.max), num(s.sum/float64(n))
			if s.unit != 0 {
				lo = time.Unix(0, 0).Add(time.Duration(s.min) * s.unit).UTC().Format(time.RFC3339)
				hi = time.Unix(0, 0).Add(time.Duration(s.max) * s.unit).UTC().Format(time.RFC3339)
				mean = ""
			}
		}
		switch {
		case s.list:
			if s.rows > 0 {
				avg = fmt.Sprintf("%.1f elems", float64(s.elements)/float64(s.rows))
			}
		case s.physical == "BYTE_ARRAY" || s.physical == "FIXED_LEN_BYTE_ARRAY":
			if s.tooMany {
				distinct = "many"
			} else {
				distinct = strconv.Itoa(len(s.distinct))
			}
			if present := s.values - s.nulls; present > 0 {
				avg = fmt.Sprintf("%.1f bytes", float64(s.bytes)/float64(present))
			}
		}
		rows := s.values
		if s.list {
			rows = s.rows
		}
		typ := s.physical
		if s.list {
			typ = "LIST<" + typ + ">"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", s.name, typ, rows, s.nulls, lo, hi, mean, distinct, avg)
	}
	tw.Flush()
}
