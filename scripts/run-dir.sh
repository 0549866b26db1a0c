#!/usr/bin/env bash
# Runs every executable *.sh in a directory in name order; fails if any fails.
set -uo pipefail
dir=$1; rc=0
for f in "$dir"/*.sh; do
  [ -e "$f" ] || continue
  echo "== $f" >&2
  bash "$f" || { echo "FAILED: $f" >&2; rc=1; }
done
exit $rc
