//! What the workspace's integration tests share, whichever crate they test: each crate's
//! tests live in its own `tests/` (docs/ARCHITECTURE.md, "Tests"), and this is their one
//! common part. A dev-dependency only (tests/architecture.rs holds that no crate's own build
//! links it); it depends on the engine and nothing above it, so an engine test built on it
//! builds no runtime, network or terminal.

pub mod ansible;
pub mod fs;
pub mod kustomize;
pub mod machine;
pub mod runbooks;
pub mod tools;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The workspace's root directory (where the sample `inventory/`, `docs/` and
/// `tests/fixtures/` are), whichever crate's test asks: a test's working directory and its
/// `CARGO_MANIFEST_DIR` are its own crate's.
pub fn root() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let up = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let root = up.canonicalize().unwrap_or(up);
        assert!(
            root.join("Cargo.toml").is_file() && root.join("tests/fixtures").is_dir(),
            "{} is not the workspace's root",
            root.display()
        );
        root
    })
}

/// `tests/fixtures/REL` under the workspace's root.
pub fn fixture(rel: &str) -> PathBuf {
    root().join("tests/fixtures").join(rel)
}
