package tokenizer

import (
	"os"
	"strings"
	"testing"
)

// benchTokenizers: the shipped tiny tokenizer, plus the one named by
// TROUPE_TOKENIZER_JSON (e.g. Qwen3's 151k vocabulary) when set.
func benchTokenizers(b *testing.B) map[string]*Tokenizer {
	m := map[string]*Tokenizer{"tiny1k": tinyTokenizer(b)}
	if f := os.Getenv("TROUPE_TOKENIZER_JSON"); f != "" {
		tk, err := Load(f)
		if err != nil {
			b.Fatal(err)
		}
		m["env"] = tk
	}
	return m
}

// mixedText is train.txt (prose, Go code, CJK, emoji) plus corpus.json.
func mixedText(b *testing.B) string {
	return strings.Join(trainCorpus(b), "") + strings.Join(readCorpus(b), "\n")
}

func BenchmarkEncode(b *testing.B) {
	text := mixedText(b)
	for name, tk := range benchTokenizers(b) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			var n int
			for b.Loop() {
				n = len(tk.Encode(text))
			}
			b.ReportMetric(float64(len(text))*float64(b.N)/b.Elapsed().Seconds()/1e6, "MB/s_enc")
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// BenchmarkEncodeCold measures encoding without the word cache's help.
func BenchmarkEncodeCold(b *testing.B) {
	text := mixedText(b)
	for name, tk := range benchTokenizers(b) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				for i := range tk.model.cache.shards {
					tk.model.cache.shards[i].m = nil
				}
				tk.Encode(text)
			}
			b.ReportMetric(float64(len(text))*float64(b.N)/b.Elapsed().Seconds()/1e6, "MB/s_enc")
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	text := mixedText(b)
	for name, tk := range benchTokenizers(b) {
		ids := tk.Encode(text)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				tk.Decode(ids)
			}
			b.ReportMetric(float64(len(text))*float64(b.N)/b.Elapsed().Seconds()/1e6, "MB/s_dec")
		})
	}
}

func BenchmarkStreamDecode(b *testing.B) {
	text := mixedText(b)
	tk := tinyTokenizer(b)
	ids := tk.Encode(text)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		d := tk.NewStreamDecoder(false)
		for _, id := range ids {
			d.Add(id)
		}
		d.Flush()
	}
	b.ReportMetric(float64(len(ids))*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkTrain trains a 2048-id tokenizer on ~1 MB (train.txt repeated
// with a per-copy suffix so that words vary).
func BenchmarkTrain(b *testing.B) {
	base := trainCorpus(b)
	var corpus []string
	size := 0
	for k := 0; size < 1<<20; k++ {
		for _, p := range base {
			s := p + strings.Repeat("x", k%7) + " v" + strings.Repeat("ab", k%5) + "\n"
			corpus = append(corpus, s)
			size += len(s)
		}
	}
	b.SetBytes(int64(size))
	for b.Loop() {
		if _, err := TrainByteLevelBPE(corpus, 2048, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/train")
}
