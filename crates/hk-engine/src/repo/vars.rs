//! Variables with provenance, and Ansible's vars files.
//!
//! Owns: the [`Var`]/[`VarMap`] types every module uses for inventory variables (a raw value,
//! Jinja NOT rendered, plus the file:line:col of the winning definition), finding vars files
//! the way Ansible's `host_group_vars` plugin does (`group_vars/<name>` as a file with no
//! extension, `.yml`, `.yaml` or `.json`, or as a directory read recursively), loading one
//! such file (JSON first, then YAML 1.1, as Ansible's loader does), and the top-level
//! "replace" merge Ansible applies between precedence levels.
//!
//! Must not: decrypt anything. A file that starts with `$ANSIBLE_VAULT` is reported as
//! [`Loaded::Vaulted`] and its content is never parsed or shown; an inline `!vault` value
//! becomes a secret [`Var`].

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::yaml::{self, Node, Value};

/// Where a variable was defined: file and 1-based line and column.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Origin {
    pub file: VarFile,
    pub line: usize,
    pub col: usize,
}

/// The path of the file a variable was defined in, shared by every variable of that file
/// (a 2,000-host INI file's variables hold one path, not one copy each). Reads as a
/// [`Path`]; prints and serializes as one.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VarFile(Arc<Path>);

impl Deref for VarFile {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for VarFile {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl From<PathBuf> for VarFile {
    fn from(path: PathBuf) -> VarFile {
        VarFile(Arc::from(path))
    }
}

impl<T: ?Sized + AsRef<Path>> From<&T> for VarFile {
    fn from(path: &T) -> VarFile {
        VarFile(Arc::from(path.as_ref()))
    }
}

impl fmt::Debug for VarFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl serde::Serialize for VarFile {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file.display(), self.line, self.col)
    }
}

/// One variable: its raw value (Jinja not rendered), where it won, whether it is secret.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Var {
    pub value: serde_json::Value,
    pub origin: Origin,
    /// A `!vault` value (or a structure holding one): never shown, never rendered.
    pub secret: bool,
}

/// Variables by name. Sorted by name so output is stable.
pub type VarMap = BTreeMap<String, Var>;

/// What loading one vars file gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Loaded {
    /// A mapping of variables (possibly empty: an empty file counts as no variables).
    Vars(VarMap),
    /// The whole file is ansible-vault encrypted: not read, its variable names are unknown.
    Vaulted,
}

#[derive(Debug, thiserror::Error)]
pub enum VarsError {
    #[error("{}: cannot read: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}:{col}: invalid YAML: {message}", path.display())]
    Yaml {
        path: PathBuf,
        line: usize,
        col: usize,
        message: String,
    },
    /// Not a regular file, or over the size cap (see `repo::read`).
    #[error(transparent)]
    Refused(super::read::ReadError),
    #[error("{}:{line}:{col}: expected a mapping of variable names to values, found {found}", path.display())]
    NotAMapping {
        path: PathBuf,
        line: usize,
        col: usize,
        found: &'static str,
    },
}

/// How a vaulted vars file is reported wherever files are listed.
pub const VAULTED_NOT_READ: &str = "vaulted, not read";

/// The extensions Ansible accepts for vars files (`YAML_FILENAME_EXTENSIONS`), after "none".
const VARS_EXTENSIONS: [&str; 3] = [".yml", ".yaml", ".json"];

/// Ansible's `DataLoader.find_vars_files(dir, name)`: the FIRST of `dir/name`, `name.yml`,
/// `name.yaml`, `name.json` that exists wins (so a `name/` directory hides a `name.yml`
/// beside it); a directory contributes all its vars files recursively, sorted by name.
pub fn find_vars_files(dir: &Path, name: &str) -> Vec<PathBuf> {
    let base = dir.join(name);
    let candidates = std::iter::once(base.clone()).chain(VARS_EXTENSIONS.iter().map(|ext| {
        let mut s = base.clone().into_os_string();
        s.push(ext);
        PathBuf::from(s)
    }));
    for candidate in candidates {
        if candidate.is_dir() {
            let mut found = Vec::new();
            dir_vars_files(&candidate, &mut found);
            return found;
        }
        if candidate.exists() {
            return vec![candidate];
        }
    }
    Vec::new()
}

/// Ansible's `_get_dir_vars_files`: entries sorted by name; hidden (`.x`) and backup (`x~`)
/// entries skipped; a subdirectory is descended only when its name has no extension; a file
/// counts when it has no extension or one of the vars extensions.
fn dir_vars_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    // Python sorts str by code point; Rust's String order is byte order of UTF-8, the same.
    names.sort();
    for name in names {
        if name.starts_with('.') || name.ends_with('~') {
            continue;
        }
        let ext = python_splitext_ext(&name);
        let full = dir.join(&name);
        if full.is_dir() {
            if ext.is_empty() {
                dir_vars_files(&full, found);
            }
        } else if ext.is_empty() || VARS_EXTENSIONS.contains(&ext) {
            // Not only regular files: Ansible would read a FIFO or device here too (and
            // hang); the bounded reader refuses it by type, naming it, instead of skipping.
            found.push(full);
        }
    }
}

/// `os.path.splitext(name)[1]` for a bare file name: leading dots do not start an extension.
fn python_splitext_ext(name: &str) -> &str {
    let stem_start = name.len() - name.trim_start_matches('.').len();
    match name[stem_start..].rfind('.') {
        Some(i) => &name[stem_start + i..],
        None => "",
    }
}

/// Whether a text is an ansible-vault encrypted file (Ansible checks the raw header).
pub fn is_vaulted_text(text: &str) -> bool {
    text.starts_with("$ANSIBLE_VAULT")
}

/// Load one vars file.
pub fn load_vars_file(path: &Path) -> Result<Loaded, VarsError> {
    use super::read::{read_text, ReadError};
    let text = read_text(path).map_err(|e| match e {
        ReadError::Io { path, source } => VarsError::Io { path, source },
        other => VarsError::Refused(other),
    })?;
    parse_vars_text(&text, path)
}

/// Parse the text of a vars file named `path` (used for positions and messages only).
pub fn parse_vars_text(text: &str, path: &Path) -> Result<Loaded, VarsError> {
    if is_vaulted_text(text) {
        return Ok(Loaded::Vaulted);
    }
    // Ansible's loader tries JSON first and YAML only when that fails; the two type some
    // scalars differently (`1e3` is a float in JSON, a string in YAML 1.1).
    let json: Option<serde_json::Value> = serde_json::from_str(text).ok();
    let doc = match yaml::parse_one(text) {
        Ok(doc) => Some(doc),
        Err(e) if json.is_none() => {
            return Err(VarsError::Yaml {
                path: path.to_path_buf(),
                line: e.mark.line,
                col: e.mark.col,
                message: e.message,
            })
        }
        Err(_) => None,
    };
    // One path for all the file's variables.
    let file = VarFile::from(path);
    let origin = |line: usize, col: usize| Origin {
        file: file.clone(),
        line,
        col,
    };
    if let Some(json) = json {
        let obj = match json {
            serde_json::Value::Object(obj) => obj,
            serde_json::Value::Null => return Ok(Loaded::Vars(VarMap::new())),
            other => {
                return Err(VarsError::NotAMapping {
                    path: path.to_path_buf(),
                    line: 1,
                    col: 1,
                    found: json_kind(&other),
                })
            }
        };
        // Where each key is written, looked up once (not a scan per key).
        let marks: std::collections::HashMap<String, yaml::Mark> = doc
            .as_ref()
            .and_then(Node::as_map)
            .map(|entries| {
                entries
                    .iter()
                    .filter_map(|(k, _)| Some((k.as_key()?, k.mark)))
                    .collect()
            })
            .unwrap_or_default();
        let mut vars = VarMap::new();
        for (k, v) in obj {
            let mark = marks
                .get(&k)
                .copied()
                .unwrap_or(yaml::Mark { line: 1, col: 1 });
            vars.insert(
                k,
                Var {
                    value: v,
                    origin: origin(mark.line, mark.col),
                    secret: false,
                },
            );
        }
        return Ok(Loaded::Vars(vars));
    }
    let Some(doc) = doc else {
        return Ok(Loaded::Vars(VarMap::new()));
    };
    match &doc.value {
        Value::Null => Ok(Loaded::Vars(VarMap::new())),
        Value::Map(entries) => {
            let mut vars = VarMap::new();
            for (k, v) in entries {
                let name = k.as_key().unwrap_or_else(|| k.to_json().to_string());
                vars.insert(
                    name,
                    Var {
                        value: v.to_json(),
                        origin: origin(k.mark.line, k.mark.col),
                        secret: v.contains_vaulted(),
                    },
                );
            }
            Ok(Loaded::Vars(vars))
        }
        other => Err(VarsError::NotAMapping {
            path: path.to_path_buf(),
            line: doc.mark.line,
            col: doc.mark.col,
            found: yaml_kind(other),
        }),
    }
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "a mapping",
    }
}

fn yaml_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Int(_) | Value::Float(_) => "a number",
        Value::Str(_) => "a string",
        Value::Vaulted => "a vaulted value",
        Value::Seq(_) => "a list",
        Value::Map(_) => "a mapping",
    }
}

/// Ansible's default `hash_behaviour = replace` between precedence levels: a key from
/// `higher` replaces the whole value from `into` (dictionaries are not merged).
pub fn combine(into: &mut VarMap, higher: &VarMap) {
    for (k, v) in higher {
        into.insert(k.clone(), v.clone());
    }
}

/// The value as `ansible-inventory --list` prints it: a secret value shows the shape Ansible
/// prints for `!vault` (`{"__ansible_vault": ...}`) with our placeholder instead of the
/// ciphertext, so nothing encrypted or decrypted is ever echoed.
pub fn listing_value(var: &Var) -> serde_json::Value {
    if var.secret {
        mask_vaulted(&var.value)
    } else {
        var.value.clone()
    }
}

fn mask_vaulted(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        J::String(s) if s == yaml::VAULTED_PLACEHOLDER => {
            serde_json::json!({ "__ansible_vault": yaml::VAULTED_PLACEHOLDER })
        }
        J::Array(items) => J::Array(items.iter().map(mask_vaulted).collect()),
        J::Object(map) => J::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), mask_vaulted(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Turn a node into a var (used by callers that build vars from YAML they already parsed).
pub fn var_from_node(node: &Node, key_mark: yaml::Mark, file: &Path) -> Var {
    Var {
        value: node.to_json(),
        origin: Origin {
            file: file.into(),
            line: key_mark.line,
            col: key_mark.col,
        },
        secret: node.contains_vaulted(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars(text: &str) -> VarMap {
        match parse_vars_text(text, Path::new("gv/all.yml")).expect("parse") {
            Loaded::Vars(v) => v,
            Loaded::Vaulted => panic!("not vaulted"),
        }
    }

    #[test]
    fn yaml_vars_keep_positions_and_yaml11_typing() {
        let v = vars("# c\nport: 6443\nflag: yes\nmode: 0755\nname: \"x y\"\n");
        assert_eq!(v["port"].value, json!(6443));
        assert_eq!(v["flag"].value, json!(true));
        assert_eq!(v["mode"].value, json!(493));
        assert_eq!(v["name"].value, json!("x y"));
        assert_eq!(v["flag"].origin.to_string(), "gv/all.yml:3:1");
    }

    /// The variables of one file share its path, and it reads, prints and serializes as
    /// the path it was made from.
    #[test]
    fn origins_share_the_file_path() {
        let v = vars("a: 1\nb: 2\n");
        assert!(Arc::ptr_eq(&v["a"].origin.file.0, &v["b"].origin.file.0));
        let file = &v["a"].origin.file;
        assert_eq!(&**file, Path::new("gv/all.yml"));
        assert_eq!(
            format!("{file:?}"),
            format!("{:?}", Path::new("gv/all.yml"))
        );
        assert_eq!(
            serde_json::to_value(&v["b"].origin).expect("json"),
            json!({"file": "gv/all.yml", "line": 2, "col": 1})
        );
    }

    #[test]
    fn json_is_tried_first() {
        let v = vars("{\"a\": 1e3, \"b\": \"yes\"}");
        assert_eq!(v["a"].value, json!(1000.0));
        assert_eq!(v["b"].value, json!("yes"));
        // The same scalar in YAML 1.1 is a string.
        assert_eq!(vars("a: 1e3\n")["a"].value, json!("1e3"));
    }

    #[test]
    fn empty_and_null_files_have_no_vars() {
        assert!(vars("").is_empty());
        assert!(vars("---\n# only a comment\n").is_empty());
    }

    #[test]
    fn vaulted_file_is_not_read() {
        let got =
            parse_vars_text("$ANSIBLE_VAULT;1.1;AES256\n3132\n", Path::new("v.yml")).expect("ok");
        assert_eq!(got, Loaded::Vaulted);
    }

    #[test]
    fn inline_vault_is_secret_and_masked_in_listing() {
        let v = vars("pw: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  3132\nplain: 1\n");
        assert!(v["pw"].secret);
        assert!(!v["plain"].secret);
        assert_eq!(
            listing_value(&v["pw"]),
            json!({"__ansible_vault": "<vaulted>"})
        );
    }

    #[test]
    fn errors_name_file_line_col() {
        let err = parse_vars_text("a: [1, 2\nb: 3\n", Path::new("gv/x.yml")).expect_err("bad yaml");
        let msg = err.to_string();
        assert!(msg.starts_with("gv/x.yml:"), "{msg}");
        assert!(msg.contains("invalid YAML"), "{msg}");
        let err = parse_vars_text("- a\n- b\n", Path::new("gv/l.yml")).expect_err("a list");
        assert_eq!(
            err.to_string(),
            "gv/l.yml:1:1: expected a mapping of variable names to values, found a list"
        );
    }

    #[test]
    fn splitext_like_python() {
        assert_eq!(python_splitext_ext("a.yml"), ".yml");
        assert_eq!(python_splitext_ext("vars"), "");
        assert_eq!(python_splitext_ext("x.d"), ".d");
        assert_eq!(python_splitext_ext("a.b.json"), ".json");
    }

    #[test]
    fn find_vars_files_dir_hides_file_and_recurses_sorted() {
        let tmp = tempfile::tempdir().expect("tmp");
        let gv = tmp.path();
        std::fs::create_dir_all(gv.join("g/sub")).expect("mk");
        std::fs::create_dir_all(gv.join("g/skip.d")).expect("mk");
        for f in [
            "g/b.yml",
            "g/a.json",
            "g/sub/z",
            "g/.hidden.yml",
            "g/t.txt",
            "g/c.yml~",
            "g/skip.d/x.yml",
            "g.yml",
        ] {
            std::fs::write(gv.join(f), "x: 1\n").expect("write");
        }
        let got: Vec<String> = find_vars_files(gv, "g")
            .iter()
            .map(|p| p.strip_prefix(gv).expect("under").display().to_string())
            .collect();
        assert_eq!(got, vec!["g/a.json", "g/b.yml", "g/sub/z"]);
        std::fs::write(gv.join("h.yaml"), "x: 1\n").expect("write");
        assert_eq!(find_vars_files(gv, "h"), vec![gv.join("h.yaml")]);
        assert!(find_vars_files(gv, "nope").is_empty());
    }
}
