#!/usr/bin/env bash
# Installs Prometheus and promtool from the distribution's `prometheus` package (Debian/Ubuntu)
# for the dashboard and alert tests, and prints the directory holding both binaries on the last
# line of stdout. Idempotent: with both binaries on PATH (or in RKCM_PROMETHEUS_BIN) it only
# prints the directory. Needs root (or sudo) on a fresh machine, as CI machines are.
set -euo pipefail

log() { printf '[prometheus %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'prometheus.sh: error: %s\n' "$*" >&2; exit 1; }

found() { # the directory holding both binaries, if any
  local dir
  for dir in ${RKCM_PROMETHEUS_BIN:-} /usr/bin /usr/local/bin; do
    if [ -x "$dir/prometheus" ] && [ -x "$dir/promtool" ]; then
      echo "$dir"
      return 0
    fi
  done
  return 1
}

if dir=$(found); then
  echo "$dir"
  exit 0
fi

command -v apt-get >/dev/null || die "no apt-get: install Prometheus (prometheus and promtool) yourself and set RKCM_PROMETHEUS_BIN"
as_root=()
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || die "not root and no sudo: cannot install the prometheus package"
  as_root=(sudo)
fi
log "installing the prometheus package with apt-get"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq >&2
# The tests start their own server; the package's service and the recommended exporters are
# not needed (in containers policy-rc.d keeps the service from starting).
"${as_root[@]}" apt-get install -y -qq --no-install-recommends prometheus >&2
dir=$(found) || die "the prometheus package installed no prometheus/promtool"
log "prometheus: $("$dir/prometheus" --version 2>&1 | head -1)"
echo "$dir"
