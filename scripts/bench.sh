#!/usr/bin/env bash
# make bench: runs every Go benchmark once-through (heavy benchmarks do a
# fixed workload per op and report their own metrics), then every peer
# script in scripts/bench.d (which print lines in Go's benchmark format, e.g.
# PyTorch baselines), and prints all of it as one table. The raw output is
# kept in bench.out.
set -uo pipefail
out=${BENCH_OUT:-bench.out}
: >"$out"
rc=0
go test -p 1 -run '^$' -bench "${BENCH:-.}" -benchtime "${BENCHTIME:-1s}" -timeout 90m ./... 2>&1 | tee -a "$out" || rc=1
for f in scripts/bench.d/*.sh; do
  [ -e "$f" ] || continue
  echo "== $f" | tee -a "$out"
  bash "$f" 2>&1 | tee -a "$out" || rc=1
done
echo
go run ./scripts/benchtab <"$out"
exit $rc
