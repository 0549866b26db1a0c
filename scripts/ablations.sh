#!/usr/bin/env bash
# make ablations: the paper's ablations at toy scale. Every
# configs/ablations/*.yaml starts from the demo's warm start (built here if
# `make demo` has not run yet) and trains against its `troupe serve`
# (single-agent configs against the single-agent warm start); one comparison
# report with an ablation table goes to runs/ablations.html. Runs resume when
# re-run. ABLATIONS="at-grpo no-tree" picks a subset; arguments are
# key=value overrides for every run (e.g. iterations=2).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib-serve.sh
. scripts/lib-demo.sh
warm_start
serve_warm
names=${ABLATIONS:-$(cd configs/ablations && ls *.yaml | sed 's/\.yaml$//')}
runs=()
for n in $names; do
  stamp "ablation $n"
  args=("${multi_args[@]}")
  grep -q "mode: single" "configs/ablations/$n.yaml" && args=("${single_args[@]}")
  bin/troupe run "configs/ablations/$n.yaml" "${args[@]}" "$@"
  runs+=("runs/abl-$n")
done
bin/troupe report "${runs[@]}" --out runs/ablations.html
stamp "done: runs/ablations.html"
