# Sourced by demo.sh and ablations.sh: serves model folders with
# `troupe serve` on free 127.0.0.1 ports until the script exits.

servers=()
trap 'for p in "${servers[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null || true' EXIT

# serve_model DIR NAME LOG: serves the model folder DIR as NAME, logging to
# LOG, and sets $url (the server root) once /health answers.
serve_model() {
  local dir=$1 name=$2 log=$3
  echo "== serving $dir as $name"
  bin/troupe serve --model "$dir" --addr 127.0.0.1:0 --served-model-name "$name" >"$log" 2>&1 &
  servers+=($!)
  url=""
  for _ in $(seq 1 150); do
    url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$log" | head -1)
    [ -n "$url" ] && curl -sf "$url/health" >/dev/null 2>&1 && break
    url=""
    sleep 0.2
  done
  [ -n "$url" ] || { cat "$log"; echo "troupe serve did not start" >&2; exit 1; }
  echo "== $name at $url"
}
