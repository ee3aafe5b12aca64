#!/usr/bin/env bash
# Every test hk-console has, on a fresh machine: installs what the tests need first.
#   - ansible-core (pinned, from PyPI) into target/hk-venv: the real ansible-inventory and
#     ansible-playbook the parity and executor tests compare against.
#   - openssh-server (apt), for the exec tests' sshd nodes on 127.0.0.11-13.
#   - tmux (apt), for the end-to-end tests that drive the real binary in a terminal.
#   - bubblewrap (apt), the sandbox of the simulated nodes' real userland (tests/sim_userland.rs).
#   - etcd and kube-apiserver built from tests/apiserver/go.mod (needs Go) into
#     target/apiserver-bin, and openssl (apt) for their certificates: the kube tests' real
#     API server (crates/hk-sim/tests/support/apiserver.rs).
#   - kustomize built from tests/kustomize/go.mod (needs Go) into target/kustomize-bin: the
#     real engine the parity check is compared with (tests/check_kustomize_diff.rs).
#   - k9s built by tests/k9s/build.sh (needs Go) into target/k9s-bin: the real k9s the
#     simulation's k9s test drives (tests/sim_k9s.rs).
#   - flux built by tests/flux/build.sh (needs Go) into target/flux-bin: the real Flux CLI
#     the simulation's Flux test drives (crates/hk-sim/tests/sim_flux.rs).
# Then: cargo fmt --check, and every test binary of the workspace (tests/run-tests.py: what
# `cargo test --workspace --all-targets` runs, several at a time), built by clippy -D warnings.
set -euo pipefail
cd "$(dirname "$0")/.."

ANSIBLE_CORE_VERSION="${ANSIBLE_CORE_VERSION:-2.19.14}"
VENV="${HK_VENV:-$PWD/target/hk-venv}"

# Each phase says how long it took (CI's time budget is spent here: docs/perf.md).
T_START=$(date +%s)
T_STEP=$T_START
STEP_NAME=""
step() {
  local now
  now=$(date +%s)
  if [ -n "$STEP_NAME" ]; then
    printf '    [%s: %ds]\n' "$STEP_NAME" $((now - T_STEP))
  fi
  T_STEP=$now
  STEP_NAME="$*"
  printf '\n==> %s\n' "$*"
}

# The Go-built tools (kube-apiserver and etcd, kustomize, k9s, flux) are kept beside the
# user's caches, keyed by everything their build reads (the Go version, the build script, its
# go.mod and go.sum): a clean clone on a machine that built the same inputs before takes them
# from there instead of relinking them (about a minute of CI's budget, docs/perf.md). A new
# input, or a new machine, builds them with the script as before; only a finished build is
# ever kept (the `.built` stamp is written after the script succeeded).
TOOL_CACHE="${HK_TOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hk-console/tools}"
# go_tool NAME VAR SCRIPT_DIR: with VAR set, SCRIPT_DIR/build.sh builds into it as given (the
# script's own up-to-date check); unset, VAR is exported as the cache directory of these
# inputs, built there by the script unless a finished build is there already.
go_tool() {
  local name=$1 var=$2 dir=$3 key cached
  if [ -n "${!var:-}" ]; then
    bash "$dir/build.sh"
    return
  fi
  key=$( { go version; for f in build.sh go.mod go.sum; do [ ! -f "$dir/$f" ] || cat "$dir/$f"; done; } \
    | sha256sum | cut -c1-16)
  cached="$TOOL_CACHE/$name-$key"
  export "$var=$cached"
  if [ -f "$cached/.built" ]; then
    echo "$name: built before from the same inputs, in $cached"
  else
    rm -rf "$cached"
    bash "$dir/build.sh"
    touch "$cached/.built"
  fi
  # Where the tests look when the variable is unset (a plain `cargo test` after this script).
  mkdir -p target
  if [ -L "target/$name-bin" ] || [ ! -e "target/$name-bin" ]; then
    ln -sfn "$cached" "target/$name-bin"
  fi
}

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust (https://rustup.rs) first" >&2
  exit 2
fi

step "ansible-core ${ANSIBLE_CORE_VERSION} in ${VENV}"
# Read the whole output (no grep -q, no head): under pipefail a reader that stops early
# makes Python die of a broken pipe.
if ! "${VENV}/bin/ansible-inventory" --version 2>/dev/null | grep "core ${ANSIBLE_CORE_VERSION}" >/dev/null; then
  python3 -m venv "${VENV}"
  "${VENV}/bin/pip" install --quiet --disable-pip-version-check "ansible-core==${ANSIBLE_CORE_VERSION}"
fi
"${VENV}/bin/ansible-inventory" --version | sed -n 1p
export HK_ANSIBLE_BIN_DIR="${VENV}/bin"

# --- exec tests (tests/exec_*.rs): OpenSSH sshd + client tools, run as three loopback
# "nodes" by tests/support. Installed where we can (root + apt); the tests FAIL with this
# same hint when sshd is missing.
step "OpenSSH server and client for the exec tests"
if [ ! -x /usr/sbin/sshd ] || ! command -v ssh-agent >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    # A fresh machine's package lists may be empty or stale.
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssh-server openssh-client
  else
    echo "OpenSSH server missing: run 'apt-get install -y openssh-server' as root" >&2
  fi
fi
/usr/sbin/sshd -V 2>&1 | sed -n 1p || true
# --- end exec step

step "tmux for the console's end-to-end tests"
if ! command -v tmux >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tmux
  else
    echo "tmux missing: run 'apt-get install -y tmux' as root" >&2
  fi
fi
tmux -V

# --- the simulated nodes' real userland (crates/hk-sim/src/userland.rs): each node's
# commands run the machine's own sh, coreutils and python3 in a bubblewrap sandbox.
step "bubblewrap for the simulated nodes' real userland"
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap
  else
    echo "bubblewrap missing: run 'apt-get install -y bubblewrap' as root" >&2
  fi
fi
bwrap --version

# --- kube tests (tests/kube_*.rs): a real kube-apiserver over a real etcd on 127.0.0.1.
# build.sh skips the build when the binaries are newer than go.mod/go.sum; a cold build
# takes minutes. Without Go the kube tests FAIL with the same hint.
step "openssl for the kube tests' certificates"
if ! command -v openssl >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssl
  else
    echo "openssl missing: run 'apt-get install -y openssl' as root" >&2
  fi
fi
openssl version || true

step "etcd and kube-apiserver for the kube tests"
if command -v go >/dev/null 2>&1; then
  go_tool apiserver HK_APISERVER_BIN_DIR tests/apiserver
else
  echo "go not found: install Go (https://go.dev/dl), then 'bash tests/apiserver/build.sh'" >&2
fi
# --- end kube step

# --- parity tests (tests/check_kustomize_diff.rs): the REAL kustomize, built from
# tests/kustomize/go.mod (needs Go) into target/kustomize-bin; the builtin engine is compared
# with it on every overlay variant. Without Go those tests FAIL with the same hint.
step "kustomize for the parity tests"
if command -v go >/dev/null 2>&1; then
  go_tool kustomize HK_KUSTOMIZE_BIN_DIR tests/kustomize
else
  echo "go not found: install Go (https://go.dev/dl), then 'bash tests/kustomize/build.sh'" >&2
fi
# --- end parity step

# --- k9s test (tests/sim_k9s.rs): the REAL k9s, built by tests/k9s/build.sh from its Go
# module (pinned in the script) into target/k9s-bin; it drives the demo's simulated API
# server in tmux. Cached: rebuilt only when build.sh changes. A cold build measured 29 min
# wall on a loaded 2-core machine (554 s of CPU; module cache warm). Without Go the test
# FAILS with the same hint.
step "k9s for the simulation's k9s test"
if command -v go >/dev/null 2>&1; then
  go_tool k9s HK_K9S_BIN_DIR tests/k9s
else
  echo "go not found: install Go (https://go.dev/dl), then 'bash tests/k9s/build.sh'" >&2
fi
# --- end k9s step

# --- Flux test (crates/hk-sim/tests/sim_flux.rs): the REAL flux CLI, built by tests/flux/build.sh from its
# Go module (pinned in the script) into target/flux-bin; it drives the demo on both API
# servers. Cached: rebuilt only when build.sh changes (with a warm Go build cache: ~5 s).
# Without Go the test FAILS with the same hint.
step "flux for the simulation's Flux test"
if command -v go >/dev/null 2>&1; then
  go_tool flux HK_FLUX_BIN_DIR tests/flux
else
  echo "go not found: install Go (https://go.dev/dl), then 'bash tests/flux/build.sh'" >&2
fi
# --- end flux step

# A target directory without incremental state (a fresh clone: CI) is built from scratch,
# where incremental compilation only adds the bookkeeping of state nobody will reuse; a
# developer's target keeps it (docs/perf.md, "CI's budget").
if [ ! -d target/debug/incremental ] && [ -z "${CARGO_INCREMENTAL:-}" ]; then
  export CARGO_INCREMENTAL=0
  echo "a fresh target directory: CARGO_INCREMENTAL=0 for this build"
fi

step "cargo fmt --check"
cargo fmt --all -- --check

# What `cargo test --workspace --all-targets --no-fail-fast` runs, the test binaries side by
# side (HK_TEST_JOBS at a time, default 3): most of them wait on a simulated clock or a real
# process, and cargo would run them one after another (docs/perf.md, "The test suite").
# Clippy is in the build: the workspace's crates are compiled by clippy-driver with
# -D warnings, every target as `cargo clippy --all-targets` checks them, so a warning fails
# the build and nothing is compiled twice (tests/run-tests.py, build()).
step "cargo test (tests/run-tests.py), built with clippy -D warnings"
rc=0
python3 tests/run-tests.py --clippy "-D warnings" || rc=$?
step "done (exit $rc)"
printf '    [total: %ds]\n' $(( $(date +%s) - T_START ))
exit "$rc"
