package trajectory

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
)

func TestProjectionAndFilters(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(4, 4))
	var in []Step
	for range 300 {
		in = append(in, randStep(r, 9, 30))
	}
	info := writeShard(t, dir, 9, &WriterOptions{RowGroupBytes: 8 << 10}, in)
	path := filepath.Join(dir, info.Name)

	project := func(s Step, cols []string) Step {
		var out Step
		ov, sv := reflect.ValueOf(&out).Elem(), reflect.ValueOf(s)
		for i := range sv.NumField() {
			name, _, _ := cutComma(sv.Type().Field(i).Tag.Get("parquet"))
			if slices.Contains(cols, name) {
				ov.Field(i).Set(sv.Field(i))
			}
		}
		return out
	}
	tests := []struct {
		name string
		opts ReadOptions
		keep func(Step) bool
	}{
		{"learner columns", ReadOptions{Columns: LearnerColumns}, nil},
		{"replay columns", ReadOptions{Columns: ReplayColumns}, nil},
		{"no columns", ReadOptions{Columns: []string{}}, nil},
		{"role filter", ReadOptions{Roles: []string{"planner", "coder"}}, func(s Step) bool { return s.Role == "planner" || s.Role == "coder" }},
		{"split filter projected", ReadOptions{Columns: []string{ColReward, ColSplit}, Split: SplitEval}, func(s Step) bool { return s.Split == SplitEval }},
		{"iteration hit", ReadOptions{Iterations: []int64{9}}, nil},
		{"iteration miss", ReadOptions{Iterations: []int64{8, 10}}, func(Step) bool { return false }},
		{"sequential", ReadOptions{Parallelism: 1, Roles: []string{"tester"}}, func(s Step) bool { return s.Role == "tester" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := readAll(t, path, &tc.opts)
			var want []Step
			for _, s := range in {
				if tc.keep != nil && !tc.keep(s) {
					continue
				}
				if tc.opts.Columns != nil {
					cols := slices.Clone(tc.opts.Columns)
					if tc.opts.Split != "" {
						cols = append(cols, ColSplit)
					}
					if tc.opts.Roles != nil {
						cols = append(cols, ColRole)
					}
					s = project(s, cols)
				}
				want = append(want, s)
			}
			if len(got) != len(want) {
				t.Fatalf("got %d rows, want %d", len(got), len(want))
			}
			for i := range want {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Fatalf("row %d:\n got %+v\nwant %+v", i, brief(got[i]), brief(want[i]))
				}
			}
		})
	}
}

func cutComma(s string) (string, string, bool) {
	for i := range len(s) {
		if s[i] == ',' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func TestEarlyBreakAndCancel(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(5, 5))
	var in []Step
	for range 200 {
		in = append(in, randStep(r, 1, 50))
	}
	info := writeShard(t, dir, 1, &WriterOptions{RowGroupBytes: 4 << 10}, in)
	rd, err := Open(filepath.Join(dir, info.Name), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if rd.NumRowGroups() < 5 {
		t.Fatalf("want several row groups, got %d", rd.NumRowGroups())
	}
	n := 0
	for _, err := range rd.All(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 3 {
			break
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var gotErr error
	for _, err := range rd.All(ctx) {
		gotErr = err
	}
	if gotErr == nil {
		t.Fatal("cancelled read gave no error")
	}
}

// foreignRow is a shard as another tool might write it: optional columns,
// other integer widths, an extra column, and columns missing.
type foreignRow struct {
	Iteration *int32    `parquet:"iteration,optional"`
	Turn      int64     `parquet:"turn"`
	Role      *string   `parquet:"role,optional"`
	PromptIDs []int64   `parquet:"prompt_ids,list"`
	Logprobs  []float64 `parquet:"logprobs"` // repeated, no LIST wrapper
	Reward    float32   `parquet:"reward"`
	Extra     string    `parquet:"extra_column"`
	CreatedAt int64     `parquet:"created_at,timestamp(millisecond)"`
}

func TestForeignSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "foreign.parquet")
	it, role := int32(3), "coder"
	rows := []foreignRow{
		{Iteration: &it, Turn: 2, Role: &role, PromptIDs: []int64{1, 2, 3}, Logprobs: []float64{-0.5}, Reward: 1.5, Extra: "x", CreatedAt: 1700000000123},
		{Turn: 1},
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := parquet.Write(f, rows); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got := readAll(t, path, nil)
	want := []Step{
		{Iteration: 3, Turn: 2, Role: "coder", PromptIDs: []int32{1, 2, 3}, Logprobs: []float32{-0.5}, Reward: 1.5, CreatedAt: time.UnixMilli(1700000000123).UTC()},
		{Turn: 1, CreatedAt: time.UnixMilli(0).UTC()},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	// Projecting a column the file lacks is an error.
	if _, err := Open(path, &ReadOptions{Columns: []string{ColCompletionIDs}}); err == nil {
		t.Fatal("projection of a missing column accepted")
	}
}
