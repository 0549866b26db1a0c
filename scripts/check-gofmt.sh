#!/usr/bin/env bash
# Fails, listing the files, when gofmt would change any tracked Go file.
set -euo pipefail
files=$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.git/*')
[ -n "$files" ] || exit 0
bad=$(gofmt -l $files)
if [ -n "$bad" ]; then
  echo "gofmt would change these files (run gofmt -w):" >&2
  echo "$bad" >&2
  exit 1
fi
