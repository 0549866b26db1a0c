#!/usr/bin/env bash
# make demo: the whole pipeline on this machine's CPU, with no GPU, network
# or Python ML stack (configs/demo.yaml):
#   1. a tokenizer trained on the demonstrations' text and a random tiny
#      model; the warm start: SFT on solver demonstrations, once per mode
#      (the tool + plan team's prompts, the single agent's), merged into
#      the weights (scripts/lib-demo.sh);
#   2. both warm-started models served by `troupe serve` on 127.0.0.1 and
#      reached over HTTP by the same openai backend that talks to vLLM;
#   3. AT-GRPO on the multi-agent team (per-role LoRA adapters, tree
#      sampling), evaluated before training (the multi-agent baseline) and
#      every eval.every iterations;
#   4. single-agent GRPO from its warm start on the same number of trained
#      completion tokens (train_tokens), evaluated the same way (its step-0
#      evaluation is the single-agent baseline);
#   5. runs/demo/report.html, runs/demo-single/report.html and the
#      comparison runs/demo-compare.html.
# Every step resumes when the script is re-run; DEMO_FRESH=1 starts over.
# Arguments are key=value overrides for every step (e.g. iterations=4);
# DEMO_NAME=x puts a variant in runs/x* instead of runs/demo*.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib-serve.sh
. scripts/lib-demo.sh
if [ "${DEMO_FRESH:-0}" = 1 ]; then
  rm -rf "$work" "runs/$demo-corpus" "runs/$demo" "runs/$demo-single" "runs/$demo-sft-multi" "runs/$demo-sft-single" \
    "runs/$demo-compare.html" "runs/$demo-compare-plots"
fi
warm_start "$@"
serve_warm

stamp "AT-GRPO, multi-agent team"
bin/troupe run "$cfg" name=$demo "${multi_args[@]}" "$@"
# Completion tokens the team trained on: the "tokens" total of each learner
# step line of metrics.jsonl.
tokens=$(sed -n 's/^{"step":[0-9]*,[^{]*"tokens":\([0-9]*\),.*/\1/p' "runs/$demo/metrics.jsonl" | awk '{s += $1} END {print s + 0}')
stamp "single-agent GRPO on the same $tokens completion tokens"
# The single agent answers in about 20 tokens: 64 caps runaway samples as 256
# does for the tool agent's ~165-token program.
bin/troupe run "$cfg" name=$demo-single env.mode=single iterations=1000 train_tokens="$tokens" \
  generation.train.max_tokens=64 generation.eval.max_tokens=64 "${single_args[@]}" "$@"
bin/troupe report "runs/$demo" "runs/$demo-single" --out "runs/$demo-compare.html"
stamp "done: runs/$demo/report.html, runs/$demo-single/report.html, runs/$demo-compare.html"
