#!/usr/bin/env bash
# Installs what `make test` needs beyond Go itself, only when it is missing.
set -euo pipefail
need=()
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
# OpenBLAS headers and library for generation/builtin's optional `-tags openblas` kernels.
{ [ -e /usr/include/cblas.h ] || compgen -G '/usr/include/*/cblas.h' >/dev/null; } || need+=(libopenblas-dev)
if ((${#need[@]})); then
  echo "deps: installing ${need[*]} with apt-get" >&2
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
fi
go mod download
