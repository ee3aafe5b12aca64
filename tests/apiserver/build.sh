#!/usr/bin/env bash
# Builds the real etcd and kube-apiserver the kube tests run (crates/hk-sim/tests/support/apiserver.rs),
# and kubectl from the same k8s.io/kubernetes module and version (the simulation's kubectl
# tests drive it), from the pinned Go module next to this script (go.mod/go.sum,
# committed), into
#   ${HK_APISERVER_BIN_DIR:-<repo>/target/apiserver-bin}/{etcd,kube-apiserver,kubectl}
# Skips the build when all three exist and are newer than go.mod, go.sum and this
# script (it holds the link flags). go.sum is committed: -mod=readonly, never rewritten.
# Needs Go >= the go.mod's `go` line (https://go.dev/dl). A cold build (empty module and
# build caches) downloads the modules and compiles for minutes (11 min measured on 2 cores).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin="${HK_APISERVER_BIN_DIR:-$repo/target/apiserver-bin}"

if ! command -v go >/dev/null 2>&1; then
  echo "go not found: install Go (https://go.dev/dl) to build kube-apiserver and etcd for the kube tests" >&2
  exit 2
fi

# Up to date: both present and newer than the module files and this script.
fresh() {
  local b f
  for b in etcd kube-apiserver kubectl; do
    [ -x "$bin/$b" ] || return 1
    for f in go.mod go.sum build.sh; do
      [ "$bin/$b" -nt "$here/$f" ] || return 1
    done
  done
}

cd "$here"
if fresh; then
  echo "apiserver binaries up to date in $bin"
else
  start=$(date +%s)
  mkdir -p "$bin"
  # The version kube-apiserver reports (and derives its feature-gate defaults from) is
  # stamped at link time, as Kubernetes' own build does; without it the binary calls
  # itself v0.0.0-master.
  kver="$(go list -mod=readonly -m -f '{{.Version}}' k8s.io/kubernetes)"
  kminor="$(echo "$kver" | cut -d. -f2)"
  kmajor="$(echo "$kver" | cut -d. -f1 | tr -d v)"
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$kver -X $pkg.gitMajor=$kmajor -X $pkg.gitMinor=$kminor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo "building etcd, kube-apiserver and kubectl $kver into $bin (cold: several minutes)"
  tmp="$(mktemp -d "$bin/.build.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  # One invocation: all three link from one package graph. etcd's main package is
  # go.etcd.io/etcd/server/v3, so Go names that binary `server`.
  go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$tmp/" \
    go.etcd.io/etcd/server/v3 k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl
  mv -f "$tmp/server" "$bin/etcd"
  mv -f "$tmp/kube-apiserver" "$bin/kube-apiserver"
  mv -f "$tmp/kubectl" "$bin/kubectl"
  echo "built in $(( $(date +%s) - start ))s"
fi

"$bin/etcd" --version | sed -n 1p
"$bin/kube-apiserver" --version
"$bin/kubectl" version --client
