#!/usr/bin/env bash
# Runs every Fuzz* target in the module for $FUZZTIME (default 10s) each.
set -euo pipefail
t=${FUZZTIME:-10s}
fail=0
for pkg in $(go list ./...); do
  for f in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    echo "== $pkg $f ($t)"
    go test -run '^$' -fuzz "^$f\$" -fuzztime "$t" -fuzzminimizetime 5s "$pkg" || fail=1
  done
done
exit $fail
