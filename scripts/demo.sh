#!/usr/bin/env bash
# make demo: the whole loop on this machine's CPU, no GPU, network or Python.
# Builds troupe, writes a tiny random model, serves it with the embedded
# engine on a free 127.0.0.1 port, and runs configs/demo.yaml against it
# over HTTP with the same openai backend that talks to vLLM. Re-running
# resumes the run; DEMO_FRESH=1 starts over.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=bin/troupe
work=runs/demo-work
[ "${DEMO_FRESH:-0}" = 1 ] && rm -rf "$work" runs/demo
mkdir -p "$work"
if [ ! -f "$work/model/config.json" ]; then
  echo "== writing a tiny model to $work/model"
  $bin model init --out "$work/model" --layers 2 --dim 128 --heads 4 --kv-heads 2 --vocab 512 --seed 1 --force
fi
echo "== starting troupe serve"
$bin serve --model "$work/model" --addr 127.0.0.1:0 --served-model-name tiny >"$work/serve.log" 2>&1 &
srv=$!
trap 'kill $srv 2>/dev/null; wait $srv 2>/dev/null || true' EXIT
url=""
for _ in $(seq 1 100); do
  url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$work/serve.log" | head -1)
  [ -n "$url" ] && curl -sf "$url/health" >/dev/null 2>&1 && break
  sleep 0.2
done
[ -n "$url" ] || { cat "$work/serve.log"; echo "demo: troupe serve did not start" >&2; exit 1; }
echo "== serving at $url"
$bin run configs/demo.yaml "generation.base_urls=[$url/v1]" "generation.tokenizer=$work/model" "$@"
