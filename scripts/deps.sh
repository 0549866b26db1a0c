#!/usr/bin/env bash
# Installs what `make test` needs beyond Go itself, only when it is missing.
set -euo pipefail
need=()
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
# The sandbox runs the tool agents' programs (and its tests) with python3.
command -v python3 >/dev/null 2>&1 || need+=(python3)
# The demo scripts wait for `troupe serve` with curl.
command -v curl >/dev/null 2>&1 || need+=(curl)
# (`-tags openblas` builds of generation/builtin also need libopenblas-dev;
# the default build does not, so it is not installed here.)
if ((${#need[@]})); then
  echo "deps: installing ${need[*]} with apt-get" >&2
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
fi
go mod download
