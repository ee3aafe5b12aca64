#!/usr/bin/env bash
# Builds the real kustomize the parity tests compare hk-console's builtin engine with
# (tests/check_kustomize_diff.rs), from the pinned Go module next to this script
# (go.mod/go.sum, committed), into
#   ${HK_KUSTOMIZE_BIN_DIR:-<repo>/target/kustomize-bin}/kustomize
# Skips the build when the binary exists and is newer than go.mod, go.sum and this script.
# go.sum is committed: -mod=readonly, never rewritten. Needs Go >= the go.mod's `go` line
# (https://go.dev/dl). A cold build downloads the modules and compiles for about a minute.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin="${HK_KUSTOMIZE_BIN_DIR:-$repo/target/kustomize-bin}"

if ! command -v go >/dev/null 2>&1; then
  echo "go not found: install Go (https://go.dev/dl) to build kustomize for the parity tests" >&2
  exit 2
fi

fresh() {
  local f
  [ -x "$bin/kustomize" ] || return 1
  for f in go.mod go.sum build.sh; do
    [ "$bin/kustomize" -nt "$here/$f" ] || return 1
  done
}

cd "$here"
if fresh; then
  echo "kustomize up to date in $bin"
else
  start=$(date +%s)
  mkdir -p "$bin"
  kver="$(go list -mod=readonly -m -f '{{.Version}}' sigs.k8s.io/kustomize/kustomize/v5)"
  echo "building kustomize $kver into $bin"
  tmp="$(mktemp -d "$bin/.build.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  # kustomize reports the version stamped here (its own release build does the same).
  go build -mod=readonly -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/kustomize/api/provenance.version=$kver" \
    -o "$tmp/kustomize" sigs.k8s.io/kustomize/kustomize/v5
  mv -f "$tmp/kustomize" "$bin/kustomize"
  echo "built in $(( $(date +%s) - start ))s"
fi

"$bin/kustomize" version
