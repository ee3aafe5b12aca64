//! Embeds every `runbooks/*.yaml` and `themes/*.yaml` into the binary: writes
//! `$OUT_DIR/embedded.rs` with `(file name, include_str!(...))` tables.
use std::{env, fs, path::Path};

fn table(dir: &str, name: &str) -> String {
    // Read at run time: `env!` would freeze the path the build script was compiled in.
    let manifest = env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest).join(dir);
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

fn main() {
    let out = Path::new(&env::var("OUT_DIR").expect("OUT_DIR")).join("embedded.rs");
    let text = table("runbooks", "RUNBOOKS") + &table("themes", "THEMES");
    fs::write(out, text).expect("write embedded.rs");
}
