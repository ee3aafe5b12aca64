#!/usr/bin/env bash
# Builds the real k9s the simulation's k9s test drives (tests/sim_k9s.rs), from its own Go
# module at the version pinned below, into
#   ${HK_K9S_BIN_DIR:-<repo>/target/k9s-bin}/k9s
# Skips the build when the binary exists and is newer than this script (which holds the
# version and the link flags). `go install MODULE@VERSION` builds with k9s' own go.mod and
# checks every module against the Go checksum database, so the pin is this one line.
# Needs Go >= k9s' go.mod `go` line (1.24.4; https://go.dev/dl). A cold build (empty build
# cache, modules already downloaded) took 554 s of CPU: 29 min wall on a 2-core machine
# loaded by other builds (on two free cores that CPU time is about 5 min; not measured).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin="${HK_K9S_BIN_DIR:-$repo/target/k9s-bin}"
K9S_VERSION=v0.50.16

if ! command -v go >/dev/null 2>&1; then
  echo "go not found: install Go (https://go.dev/dl) to build k9s for the simulation's k9s test" >&2
  exit 2
fi

if [ -x "$bin/k9s" ] && [ "$bin/k9s" -nt "$here/build.sh" ]; then
  echo "k9s up to date in $bin"
else
  start=$(date +%s)
  mkdir -p "$bin"
  echo "building k9s $K9S_VERSION into $bin (cold: minutes)"
  tmp="$(mktemp -d "$bin/.build.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  # The version k9s prints is stamped at link time, as its own Makefile does.
  GOBIN="$tmp" go install -trimpath \
    -ldflags "-s -w -X github.com/derailed/k9s/cmd.version=$K9S_VERSION" \
    "github.com/derailed/k9s@$K9S_VERSION"
  mv -f "$tmp/k9s" "$bin/k9s"
  echo "built in $(( $(date +%s) - start ))s"
fi

"$bin/k9s" version -s
