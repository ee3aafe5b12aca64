#!/usr/bin/env bash
# Every test hk-console has, on a fresh machine: installs what the tests need first.
#   - ansible-core (pinned, from PyPI) into target/hk-venv: the real ansible-inventory and
#     ansible-playbook the parity and executor tests compare against.
# Then: cargo fmt --check, cargo clippy -D warnings, cargo test (all targets).
set -euo pipefail
cd "$(dirname "$0")/.."

ANSIBLE_CORE_VERSION="${ANSIBLE_CORE_VERSION:-2.19.14}"
VENV="${HK_VENV:-$PWD/target/hk-venv}"

step() { printf '\n==> %s\n' "$*"; }

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust (https://rustup.rs) first" >&2
  exit 2
fi

step "ansible-core ${ANSIBLE_CORE_VERSION} in ${VENV}"
if ! "${VENV}/bin/ansible-inventory" --version 2>/dev/null | grep -q "core ${ANSIBLE_CORE_VERSION}"; then
  python3 -m venv "${VENV}"
  "${VENV}/bin/pip" install --quiet --disable-pip-version-check "ansible-core==${ANSIBLE_CORE_VERSION}"
fi
"${VENV}/bin/ansible-inventory" --version | head -1
export HK_ANSIBLE_BIN_DIR="${VENV}/bin"

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --quiet -- -D warnings

step "cargo test"
cargo test --all-targets --no-fail-fast
