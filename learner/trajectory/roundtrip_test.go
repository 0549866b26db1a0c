package trajectory

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestRoundTripProperty(t *testing.T) {
	tests := []struct {
		name   string
		rows   int
		maxTok int
		rgB    int64
	}{
		{"empty file", 0, 0, 0},
		{"one zero row", -1, 0, 0},
		{"small", 50, 40, 0},
		{"many row groups", 400, 200, 32 << 10},
		{"huge lists", 6, 100_000, 0},
		{"huge lists small groups", 6, 100_000, 256 << 10},
	}
	for seed := range uint64(3) {
		for _, tc := range tests {
			t.Run(fmt.Sprintf("%s/seed%d", tc.name, seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, 7))
				var in []Step
				if tc.rows < 0 {
					in = []Step{{}}
				}
				for range tc.rows {
					in = append(in, randStep(r, 42, tc.maxTok))
				}
				if tc.maxTok >= 100_000 {
					in[0].PromptIDs = randInts(r, 100_000)
					in[0].CompletionIDs = randInts(r, 100_000)
					in[0].Logprobs = randFloats(r, 100_000)
				}
				if tc.rows < 0 {
					in[0].Iteration = 42
				}
				dir := t.TempDir()
				info := writeShard(t, dir, 42, &WriterOptions{RowGroupBytes: tc.rgB}, in)
				if info.Rows != int64(len(in)) {
					t.Fatalf("info.Rows = %d, want %d", info.Rows, len(in))
				}
				got := readAll(t, filepath.Join(dir, info.Name), nil)
				if len(got) != len(in) {
					t.Fatalf("read %d rows, wrote %d", len(got), len(in))
				}
				for i := range in {
					if !reflect.DeepEqual(got[i], in[i]) {
						t.Fatalf("row %d differs:\n got %+v\nwant %+v", i, brief(got[i]), brief(in[i]))
					}
				}
			})
		}
	}
}

// brief shortens a row for failure messages.
func brief(s Step) Step {
	if len(s.PromptIDs) > 8 {
		s.PromptIDs = s.PromptIDs[:8]
	}
	if len(s.CompletionIDs) > 8 {
		s.CompletionIDs = s.CompletionIDs[:8]
	}
	if len(s.Logprobs) > 8 {
		s.Logprobs = s.Logprobs[:8]
	}
	return s
}

func TestCreatedAtPrecision(t *testing.T) {
	dir := t.TempDir()
	local := time.FixedZone("X", 3600)
	ts := time.Date(2026, 11, 22, 10, 0, 0, 123456789, local)
	info := writeShard(t, dir, 0, nil, []Step{{CreatedAt: ts}})
	got := readAll(t, filepath.Join(dir, info.Name), nil)[0].CreatedAt
	want := ts.Truncate(time.Microsecond).UTC()
	if !got.Equal(want) || got.Location() != time.UTC {
		t.Fatalf("created_at = %v, want %v (UTC, µs)", got, want)
	}
}
