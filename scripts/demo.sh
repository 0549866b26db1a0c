#!/usr/bin/env bash
# make demo: the whole loop on this machine's CPU, no GPU, network or Python.
# Writes a tiny random model, serves it with the embedded engine on a free
# 127.0.0.1 port, and runs configs/demo.yaml against it over HTTP with the
# same openai backend that talks to vLLM. Re-running resumes the run;
# DEMO_FRESH=1 starts over.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib-serve.sh
work=runs/demo-work
[ "${DEMO_FRESH:-0}" = 1 ] && rm -rf "$work" runs/demo
serve_tiny "$work"
bin/troupe run configs/demo.yaml "generation.base_urls=[$url/v1]" "generation.tokenizer=$model" "$@"
