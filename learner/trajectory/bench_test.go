//go:build unix

package trajectory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The benchmarks run a fixed workload per op: 100k rows shaped like a
// rollout batch (~500 prompt tokens of which 200 are a per-problem shared
// prefix, ~300 completion tokens with logprobs, texts of ~4 bytes per
// token, 64 problems, 3 roles). With -benchtime 1s each runs once.
const benchRows = 100_000

var bench struct {
	once    sync.Once
	rows    []Step
	logical int64
	dir     string
	file    string // written once for the read benchmarks
	size    int64
}

var words = strings.Fields("the of and to a in is that for it as was with be by on not he I this are or his from at which but have an they you were her she there been one all we their has would when if so no out up said what its about into than them can only other time new some could these two may first then do any like my now over such our man me even most made after also did many before must through back years where much your way well down should because each just those people how too little state good very make world still see own men work long get here between both life being under never day same another know while last might us great old year off come since against go came right used take three states himself few house use during without again place around however home small found thought went say part once general high upon school every don't does got united left number course war until always away something fact though water less public put think almost hand enough far took head yet government system better set told nothing night end why called didn't eyes find going look asked later knew point next program city business give group toward young days let room president side social given present several order national possible rather second face per among form important often things looked early white case john become large big need four within felt children along saw best church ever least power development light thing seemed family interest want members mind country area others done turn open although problem became help sense kind began thus")

func benchText(r *rand.Rand, tokens int) string {
	var b strings.Builder
	b.Grow(tokens * 5)
	for range tokens {
		b.WriteString(words[r.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.String()
}

func benchData(b *testing.B) {
	bench.once.Do(func() {
		r := rand.New(rand.NewPCG(42, 42))
		prefixes := make([][]int32, 64)
		for i := range prefixes {
			prefixes[i] = randInts(r, 200)
		}
		zipf := rand.NewZipf(r, 1.1, 8, 151_999)
		bench.rows = make([]Step, benchRows)
		for i := range bench.rows {
			p := r.IntN(64)
			np := 450 + r.IntN(101)
			nc := 250 + r.IntN(101)
			prompt := make([]int32, np)
			copy(prompt, prefixes[p])
			for j := 200; j < np; j++ {
				prompt[j] = int32(zipf.Uint64())
			}
			comp := make([]int32, nc)
			lp := make([]float32, nc)
			for j := range comp {
				comp[j] = int32(zipf.Uint64())
				lp[j] = -float32(r.ExpFloat64())
			}
			role := []string{"planner", "coder", "tester"}[i%3]
			bench.rows[i] = Step{
				RunID: "bench", Iteration: 42, PolicyVersion: 41,
				EpisodeID: fmt.Sprintf("ep-%06d", i/24), ProblemID: fmt.Sprintf("problem-%02d", p),
				Env: "code", Split: SplitTrain, Branch: int32(i % 4), Chosen: i%4 == 0, Turn: int32(i / 12 % 2),
				Role: role, Policy: role, Backend: "openai", Model: "Qwen/Qwen3-0.6B",
				PromptText: benchText(r, np), CompletionText: benchText(r, nc),
				PromptIDs: prompt, CompletionIDs: comp, Logprobs: lp,
				FinishReason: "stop", Temperature: 1, TopP: 1, TopK: -1, Seed: int64(i),
				RewardLocal: r.Float64(), RewardTeam: r.Float64(), Reward: r.Float64(),
				Done: i%12 == 11, Success: r.IntN(2) == 0,
				GroupKey:  fmt.Sprintf("problem-%02d/%d/%s", p, i/12%2, role),
				LatencyMS: r.Float64() * 2000, CreatedAt: time.UnixMicro(1_790_000_000_000_000 + int64(i)).UTC(),
				Info: `{"tests_passed":3}`,
			}
			bench.logical += logicalSize(&bench.rows[i])
		}
		dir, err := os.MkdirTemp("", "traj-bench-")
		if err != nil {
			panic(err)
		}
		bench.dir = dir
		w, err := Create(dir, 42, &WriterOptions{Tag: "bench"})
		if err != nil {
			panic(err)
		}
		if err := w.Write(bench.rows...); err != nil {
			panic(err)
		}
		info, err := w.Commit()
		if err != nil {
			panic(err)
		}
		bench.file, bench.size = filepath.Join(dir, info.Name), info.Bytes
	})
	b.ResetTimer()
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// report prints the workload metrics. cpu0 is cpuTime() at the start of
// the timed loop: cpu-s/op shows the work independent of other load on
// the machine (wall-clock rows/s suffer when other processes compete).
func report(b *testing.B, cpu0 time.Duration, rows int, logical, disk int64) {
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
	s := b.Elapsed().Seconds()
	b.ReportMetric(float64(rows)*float64(b.N)/s, "rows/s")
	b.ReportMetric(float64(logical)*float64(b.N)/s/1e6, "MB/s")
	b.ReportMetric(float64(disk)/float64(rows), "disk-B/row")
}

// BenchmarkWrite100k writes the 100k-row shard (buffer, zstd, fsync,
// rename) per op at several zstd levels.
func BenchmarkWrite100k(b *testing.B) {
	for _, level := range []int{1, 3} {
		b.Run(fmt.Sprintf("zstd%d", level), func(b *testing.B) {
			benchData(b)
			dir := b.TempDir()
			var size int64
			cpu0 := cpuTime()
			for i := range b.N {
				w, err := Create(dir, 42, &WriterOptions{Tag: fmt.Sprintf("w%d", i), ZstdLevel: level})
				if err != nil {
					b.Fatal(err)
				}
				for j := 0; j < len(bench.rows); j += 1000 { // rollout batches
					if err := w.Write(bench.rows[j:min(j+1000, len(bench.rows))]...); err != nil {
						b.Fatal(err)
					}
				}
				info, err := w.Commit()
				if err != nil {
					b.Fatal(err)
				}
				size = info.Bytes
				b.StopTimer()
				os.Remove(filepath.Join(dir, info.Name))
				b.StartTimer()
			}
			b.StopTimer()
			report(b, cpu0, benchRows, bench.logical, size)
		})
	}
}

func benchRead(b *testing.B, opts *ReadOptions) {
	benchData(b)
	cpu0 := cpuTime()
	for range b.N {
		r, err := Open(bench.file, opts)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for s, err := range r.All(context.Background()) {
			if err != nil {
				b.Fatal(err)
			}
			n += len(s.CompletionIDs)*0 + 1
		}
		r.Close()
		if n != benchRows {
			b.Fatalf("read %d rows", n)
		}
	}
	b.StopTimer()
	report(b, cpu0, benchRows, bench.logical, bench.size)
}

// BenchmarkRead100k reads every column of the 100k-row shard per op.
func BenchmarkRead100k(b *testing.B) {
	b.Run("parallel", func(b *testing.B) { benchRead(b, nil) })
	b.Run("serial", func(b *testing.B) { benchRead(b, &ReadOptions{Parallelism: 1}) })
}

// BenchmarkRead100kProjected reads the learner's columns (ids, logprobs,
// rewards, grouping keys; no texts) per op.
func BenchmarkRead100kProjected(b *testing.B) {
	benchRead(b, &ReadOptions{Columns: LearnerColumns})
}

// TestMain removes the benchmarks' shared shard.
func TestMain(m *testing.M) {
	code := m.Run()
	if bench.dir != "" {
		os.RemoveAll(bench.dir)
	}
	os.Exit(code)
}
