//! The build script the crates that embed files share: writes `$OUT_DIR/embedded.rs` with
//! `(file name, include_str!(...))` tables of what that crate embeds, from the workspace
//! root:
//! - hk-engine: every `runbooks/*.yaml` (the shipped runbooks);
//! - hk-ui: every `themes/*.yaml`;
//! - hk-sim: every `assets/scenarios/*.yaml`, and the whole bundled sample repo under
//!   `inventory/` (the demo writes it out and points the simulation at it).
//!
//! It also sets `HK_SOURCE_ROOT` (the workspace root) for `env!`: where the bundled sample
//! repo lies in the source tree.
use std::{
    env, fs,
    path::{Path, PathBuf},
};

fn table(dir: &str, name: &str) -> String {
    // Read at run time: `env!` would freeze the path the build script was compiled in.
    let root = source_root().join(dir);
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files: Vec<_> = fs::read_dir(&root)
        .map(|rd| rd.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"));
    files.sort();
    let mut out = format!("pub static {name}: &[(&str, &str)] = &[\n");
    for p in files {
        println!("cargo:rerun-if-changed={}", p.display());
        let file = p
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or_default()
            .to_string();
        out.push_str(&format!(
            "    ({file:?}, include_str!({:?})),\n",
            p.display().to_string()
        ));
    }
    out.push_str("];\n");
    out
}

/// Every file under `dir`, recursively, as `(path relative to dir, contents)`.
fn tree(dir: &str, name: &str) -> String {
    let root = source_root().join(dir);
    let mut files = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        println!("cargo:rerun-if-changed={}", d.display());
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.filter_map(Result::ok) {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut out = format!("pub static {name}: &[(&str, &str)] = &[\n");
    for p in files {
        println!("cargo:rerun-if-changed={}", p.display());
        let rel = p
            .strip_prefix(&root)
            .expect("under root")
            .to_string_lossy()
            .to_string();
        out.push_str(&format!(
            "    ({rel:?}, include_str!({:?})),\n",
            p.display().to_string()
        ));
    }
    out.push_str("];\n");
    out
}

/// The workspace root: two levels above a member crate's manifest (`crates/NAME`).
fn source_root() -> PathBuf {
    let manifest = env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR");
    let manifest = PathBuf::from(manifest);
    manifest
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or(manifest)
}

fn main() {
    let out = Path::new(&env::var("OUT_DIR").expect("OUT_DIR")).join("embedded.rs");
    let package = env::var("CARGO_PKG_NAME").expect("CARGO_PKG_NAME");
    let text = match package.as_str() {
        "hk-engine" => table("runbooks", "RUNBOOKS"),
        "hk-ui" => table("themes", "THEMES"),
        "hk-sim" => table("assets/scenarios", "SCENARIOS") + &tree("inventory", "SAMPLE_REPO"),
        other => panic!("build/embed.rs: nothing to embed for {other}"),
    };
    fs::write(out, text).expect("write embedded.rs");
    println!("cargo:rustc-env=HK_SOURCE_ROOT={}", source_root().display());
}
