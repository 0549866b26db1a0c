package tokenizer

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// trainCorpus is testdata/train.txt split into paragraphs.
func trainCorpus(t testing.TB) []string {
	t.Helper()
	data, err := os.ReadFile("testdata/train.txt")
	if err != nil {
		t.Fatal(err)
	}
	return strings.SplitAfter(string(data), "\n\n")
}

func readCorpus(t testing.TB) []string {
	t.Helper()
	data, err := os.ReadFile("testdata/corpus.json")
	if err != nil {
		t.Fatal(err)
	}
	var c []string
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

var (
	tinyOnce sync.Once
	tiny     *Tokenizer
	tinyErr  error
)

// tinyTokenizer is testdata/tiny (trained from train.txt, 1024 ids).
func tinyTokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	tinyOnce.Do(func() { tiny, tinyErr = Load("testdata/tiny") })
	if tinyErr != nil {
		t.Fatal(tinyErr)
	}
	return tiny
}

// TestTrainGolden trains on testdata/train.txt and compares the files with
// testdata/tiny (go test -update rewrites them).
func TestTrainGolden(t *testing.T) {
	tk, err := TrainByteLevelBPE(trainCorpus(t), 1024, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tk.VocabSize() != 1024 {
		t.Errorf("VocabSize = %d, want 1024", tk.VocabSize())
	}
	if *update {
		if err := tk.Save("testdata/tiny"); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []struct {
		name string
		got  []byte
	}{{FileTokenizer, tk.JSON()}, {FileTokenizerConfig, tk.ConfigJSON()}} {
		want, err := os.ReadFile(filepath.Join("testdata/tiny", f.name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(f.got, want) {
			t.Errorf("%s differs from testdata/tiny (run go test -update after checking why)", f.name)
		}
	}
	// Deterministic: a second run gives the same bytes.
	tk2, err := TrainByteLevelBPE(trainCorpus(t), 1024, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tk.JSON(), tk2.JSON()) {
		t.Error("training twice gave different tokenizer.json")
	}
}

// TestEncodeGolden compares the encodings of testdata/corpus.json by the
// tiny tokenizer with testdata/tiny_encodings.json. The tiny tokenizer's
// encodings were checked against transformers.js (scripts/integration.d).
func TestEncodeGolden(t *testing.T) {
	tk := tinyTokenizer(t)
	type row struct {
		Text string  `json:"text"`
		IDs  []int32 `json:"ids"`
	}
	var got []row
	for _, s := range readCorpus(t) {
		got = append(got, row{s, tk.Encode(s)})
	}
	const golden = "testdata/tiny_encodings.json"
	if *update {
		var b bytes.Buffer
		b.WriteString("[\n")
		for i, r := range got {
			ids, _ := json.Marshal(r.IDs)
			fmt.Fprintf(&b, "  {\"text\": %s, \"ids\": %s}", jsonString(r.Text), ids)
			if i < len(got)-1 {
				b.WriteString(",")
			}
			b.WriteString("\n")
		}
		b.WriteString("]\n")
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	var want []row
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != len(got) {
		t.Fatalf("%s has %d rows, corpus %d", golden, len(want), len(got))
	}
	for i := range got {
		if got[i].Text != want[i].Text || !slices.Equal(got[i].IDs, want[i].IDs) {
			t.Errorf("%q:\n got %v\nwant %v", got[i].Text, got[i].IDs, want[i].IDs)
		}
	}
}

func TestTrainSpeed(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	c := trainCorpus(t)
	var big []string
	for len(strings.Join(big, "")) < 1<<20 {
		big = append(big, c...)
	}
	tk, err := TrainByteLevelBPE(big, 2048, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = tk
}
