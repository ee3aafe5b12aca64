//! Where the tests find the real Ansible (ansible-core): `$HK_ANSIBLE_BIN_DIR` (set by
//! tests/run-all.sh to the venv it installs), else `PATH`, else /opt/hk-venv/bin. A missing
//! tool FAILS the test that needs it, with how to install it: a parity test that skipped
//! would say nothing.

use std::path::{Path, PathBuf};

pub const INSTALL_HINT: &str = "run `bash tests/run-all.sh`, which installs ansible-core into \
target/hk-venv, or install ansible-core 2.19 (python3 -m venv /opt/hk-venv && \
/opt/hk-venv/bin/pip install 'ansible-core>=2.19,<2.20') and point HK_ANSIBLE_BIN_DIR at its bin/";

/// The directory that holds `name` (`ansible-playbook`, `ansible-inventory`, ...).
pub fn dir_of(name: &str) -> PathBuf {
    if let Some(dir) = std::env::var_os("HK_ANSIBLE_BIN_DIR").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        assert!(
            dir.join(name).is_file(),
            "{} not found in HK_ANSIBLE_BIN_DIR: {INSTALL_HINT}",
            dir.join(name).display()
        );
        return dir;
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if dir.join(name).is_file() {
                return dir;
            }
        }
    }
    let venv = Path::new("/opt/hk-venv/bin");
    assert!(
        venv.join(name).is_file(),
        "`{name}` is not installed (HK_ANSIBLE_BIN_DIR, PATH, /opt/hk-venv/bin): {INSTALL_HINT}"
    );
    venv.to_path_buf()
}

/// The program `name` itself.
pub fn bin(name: &str) -> PathBuf {
    dir_of(name).join(name)
}
