// Package tokenizer reads and writes Hugging Face tokenizer.json files for
// byte-level BPE tokenizers (Qwen2/2.5/3, Llama 3, GPT-2 style) and trains
// small ones for tiny models. It has no cgo and no regexp with lookahead.
//
// # Loading
//
// Load takes a model folder (or a tokenizer.json path) and also reads
// tokenizer_config.json (chat_template, bos/eos/pad tokens, add_bos_token)
// and generation_config.json (eos_token_id) when present. Supported parts:
// model BPE (merges as "a b" strings or ["a","b"] lists; byte_fallback with
// <0xXX> tokens; unk_token and fuse_unk; ignore_merges); normalizers NFC,
// NFD, NFKC, NFKD, Lowercase, Prepend, Replace and Sequence; pre-tokenizers
// Split (any behaviour), ByteLevel (add_prefix_space, use_regex), Digits and
// Sequence; decoders ByteLevel, ByteFallback, Replace, Fuse and Sequence;
// added tokens with lstrip, rstrip, single_word and normalized. Anything
// else is refused with a *FileError that names the file and the JSON field
// (BadInput() is true, so the CLI exits with status 2).
//
// Split regexes: the Qwen2 (PatternQwen2), Llama 3 (PatternLlama3) and
// GPT-2 (PatternGPT2) patterns use `\s+(?!\S)`, which Go's RE2 cannot
// express; they are matched by hand-written scanners that reproduce the
// backtracking regex exactly (leftmost-first alternation, greedy runs,
// \s = Unicode White_Space, (?i) with Unicode simple case folding). A
// differential fuzz test checks them against an RE2 rewrite of the pattern.
// Other patterns must compile with Go's regexp.
//
// # Exactness
//
// Encode(text) equals Hugging Face's encode(text, add_special_tokens=False):
// added tokens in the text (special or not, e.g. <|im_start|>) are matched
// first, leftmost-longest; the text between them is normalised,
// pre-tokenised and BPE-merged (lowest merge rank first, leftmost on ties).
// It never adds BOS/EOS (see AddBOS). Checked id for id against
// transformers.js on Qwen3's and Llama 3's real files and on a trained
// tokenizer (scripts/integration.d/20-tokenizer-*.sh). Known deliberate
// differences from transformers.js, where troupe follows the Rust
// tokenizers library instead: U+0085 counts as whitespace and U+FEFF does
// not, and (?i:'s) also matches 'ſ (U+017F).
//
// DecodeBytes(ids) is the exact concatenation of each token's bytes:
// DecodeBytes(Encode(s)) == s for any s (even invalid UTF-8) when the
// tokenizer has no normaliser, and == s with each stretch between added
// tokens normalised otherwise (for NFC tokenizers: NFC(s) when s has no
// added tokens). Ids outside the vocabulary are skipped; nothing panics.
// Decode returns DecodeBytes as text with each maximal invalid UTF-8
// subpart replaced by U+FFFD (Rust's from_utf8_lossy), like HF's decode
// with skip_special_tokens=False and no clean-up of spaces.
// StreamDecoder emits text incrementally and only in whole characters; the
// concatenation of its outputs equals Decode.
//
// # Concurrency and speed
//
// A *Tokenizer is immutable after Load apart from a sharded, mutex-guarded
// cache of BPE results per word (words up to 256 bytes; a shard is cleared
// when it holds 8192 words), so it may be shared by any number of
// goroutines. A StreamDecoder belongs to one sequence. On the 2-core dev
// machine: encode ≈ 10–25 MB/s, decode ≈ 100 MB/s (BenchmarkEncode,
// BenchmarkDecode).
//
// # Training
//
// TrainByteLevelBPE / Train learn a Qwen-style tokenizer (same normaliser,
// pre-tokenizer and decoder as Qwen3, byte tokens at ids 0–255, merges, then
// special and added tokens) deterministically in well under a second for a
// 1 MB corpus; Save writes tokenizer.json and a Qwen3-style
// tokenizer_config.json with Qwen3's chat template.
package tokenizer
