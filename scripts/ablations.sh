#!/usr/bin/env bash
# make ablations: runs every configs/ablations/*.yaml (the paper's ablations
# at toy scale) against one embedded server, then writes one comparison
# report with an ablation table (runs/compare.html). Runs resume
# when re-run. ABLATIONS="at-grpo no-tree" picks a subset; arguments are
# key=value overrides for every run (e.g. iterations=2).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib-serve.sh
serve_tiny runs/ablations-work
names=${ABLATIONS:-$(cd configs/ablations && ls *.yaml | sed 's/\.yaml$//')}
runs=()
for n in $names; do
  echo "== ablation $n"
  bin/troupe run "configs/ablations/$n.yaml" "generation.base_urls=[$url/v1]" "generation.tokenizer=$model" "$@"
  runs+=("runs/abl-$n")
done
bin/troupe report "${runs[@]}"
