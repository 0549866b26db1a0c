# Sourced by demo.sh and ablations.sh: writes a tiny model (once) and serves
# it with `troupe serve` on a free 127.0.0.1 port until the script exits.
# Sets $url (the server root) and $model (the model folder).
serve_tiny() {
  local work=$1
  model=$work/model
  mkdir -p "$work"
  if [ ! -f "$model/config.json" ]; then
    echo "== writing a tiny model to $model"
    bin/troupe model init --out "$model" --layers 2 --dim 128 --heads 4 --kv-heads 2 --vocab 512 --seed 1 --force
  fi
  echo "== starting troupe serve"
  bin/troupe serve --model "$model" --addr 127.0.0.1:0 --served-model-name tiny >"$work/serve.log" 2>&1 &
  srv=$!
  trap 'kill $srv 2>/dev/null; wait $srv 2>/dev/null || true' EXIT
  url=""
  for _ in $(seq 1 100); do
    url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$work/serve.log" | head -1)
    [ -n "$url" ] && curl -sf "$url/health" >/dev/null 2>&1 && break
    sleep 0.2
  done
  [ -n "$url" ] || { cat "$work/serve.log"; echo "troupe serve did not start" >&2; exit 1; }
  echo "== serving at $url"
}
