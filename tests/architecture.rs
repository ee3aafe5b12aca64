//! The layers' rules, held over `cargo metadata` (docs/ARCHITECTURE.md opens with the map
//! these tests keep true). A crate that gains a dependency its layer must not have fails
//! here, naming the crate, the dependency and the path that brought it in.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The workspace's crates, bottom layer first, each with the workspace crates it may
/// depend on (normal, build or dev).
const LAYERS: &[(&str, &[&str])] = &[
    ("hk-engine", &[]),
    ("hk-effects", &["hk-engine"]),
    ("hk-session", &["hk-engine", "hk-effects"]),
    ("hk-ui", &["hk-engine", "hk-effects", "hk-session"]),
    ("hk-sim", &["hk-engine", "hk-effects", "hk-session"]),
    (
        "hk-console",
        &["hk-engine", "hk-effects", "hk-session", "hk-ui", "hk-sim"],
    ),
];

/// What the engine's build (its tests included) must not compile: no runtime, no network
/// client or server, no terminal.
const NOT_IN_ENGINE: &[&str] = &[
    "tokio",
    "russh",
    "kube",
    "kube-client",
    "hyper",
    "rustls",
    "ratatui",
    "crossterm",
    "tui-textarea",
];

/// The terminal libraries: only the UI crate (and the binary, through it) builds them.
const TERMINAL: &[&str] = &["ratatui", "crossterm", "tui-textarea"];

struct Metadata {
    /// package id -> name
    names: BTreeMap<String, String>,
    /// package id -> (dependency id, kinds: "normal" | "dev" | "build")
    deps: BTreeMap<String, Vec<(String, BTreeSet<String>)>>,
    /// workspace member name -> id
    members: BTreeMap<String, String>,
    /// workspace member name -> manifest path
    manifests: BTreeMap<String, PathBuf>,
}

fn metadata() -> Metadata {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = Command::new(&cargo)
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap_or_else(|e| panic!("{cargo} metadata: {e}"));
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    let mut names = BTreeMap::new();
    let mut manifests_by_id = BTreeMap::new();
    for p in v["packages"].as_array().expect("packages") {
        let id = p["id"].as_str().expect("id").to_string();
        names.insert(id.clone(), p["name"].as_str().expect("name").to_string());
        manifests_by_id.insert(
            id,
            PathBuf::from(p["manifest_path"].as_str().expect("manifest_path")),
        );
    }
    let mut members = BTreeMap::new();
    let mut manifests = BTreeMap::new();
    for id in v["workspace_members"].as_array().expect("members") {
        let id = id.as_str().expect("id").to_string();
        let name = names[&id].clone();
        manifests.insert(name.clone(), manifests_by_id[&id].clone());
        members.insert(name, id);
    }
    let mut deps = BTreeMap::new();
    for n in v["resolve"]["nodes"].as_array().expect("resolve") {
        let id = n["id"].as_str().expect("id").to_string();
        let list = n["deps"]
            .as_array()
            .expect("deps")
            .iter()
            .map(|d| {
                let kinds = d["dep_kinds"]
                    .as_array()
                    .expect("dep_kinds")
                    .iter()
                    .map(|k| k["kind"].as_str().unwrap_or("normal").to_string())
                    .collect();
                (d["pkg"].as_str().expect("pkg").to_string(), kinds)
            })
            .collect();
        deps.insert(id, list);
    }
    Metadata {
        names,
        deps,
        members,
        manifests,
    }
}

impl Metadata {
    fn id(&self, member: &str) -> &str {
        self.members
            .get(member)
            .unwrap_or_else(|| panic!("{member} is not a workspace member: {:?}", self.members))
    }

    /// Every package `member`'s build compiles, with the path that brought each in:
    /// its own normal, build and (with `dev`) dev dependencies, then their normal and build
    /// dependencies (a dependency's dev-dependencies are never built).
    fn closure(&self, member: &str, dev: bool) -> BTreeMap<String, Vec<String>> {
        let root = self.id(member).to_string();
        let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut queue = VecDeque::from([(root.clone(), vec![member.to_string()])]);
        while let Some((id, path)) = queue.pop_front() {
            for (dep, kinds) in self.deps.get(&id).into_iter().flatten() {
                let wanted = kinds.contains("normal")
                    || kinds.contains("build")
                    || (dev && id == root && kinds.contains("dev"));
                if !wanted || seen.contains_key(dep) {
                    continue;
                }
                let mut p = path.clone();
                p.push(self.names[dep].clone());
                seen.insert(dep.clone(), p.clone());
                queue.push_back((dep.clone(), p));
            }
        }
        seen.into_iter()
            .map(|(id, p)| (self.names[&id].clone(), p))
            .collect()
    }

    /// The workspace crates `member` depends on directly, of any kind.
    fn direct_members(&self, member: &str) -> BTreeSet<String> {
        let ws: BTreeSet<&String> = self.members.keys().collect();
        self.deps[self.id(member)]
            .iter()
            .map(|(d, _)| self.names[d].clone())
            .filter(|n| ws.contains(n))
            .collect()
    }
}

#[test]
fn the_workspace_is_the_layers_and_nothing_else() {
    let m = metadata();
    let listed: BTreeSet<String> = LAYERS.iter().map(|(n, _)| n.to_string()).collect();
    let members: BTreeSet<String> = m.members.keys().cloned().collect();
    assert_eq!(
        members, listed,
        "a crate was added or removed: give it its layer in LAYERS and docs/ARCHITECTURE.md"
    );
}

#[test]
fn each_crate_depends_only_on_the_layers_below_it() {
    let m = metadata();
    for (krate, allowed) in LAYERS {
        let allowed: BTreeSet<String> = allowed.iter().map(|s| s.to_string()).collect();
        let has = m.direct_members(krate);
        let extra: Vec<&String> = has.difference(&allowed).collect();
        assert!(
            extra.is_empty(),
            "{krate} depends on {extra:?}; its layer may use only {allowed:?}"
        );
    }
}

#[test]
fn the_engine_builds_no_runtime_network_or_terminal_even_for_its_tests() {
    let m = metadata();
    let built = m.closure("hk-engine", true);
    let found: Vec<String> = NOT_IN_ENGINE
        .iter()
        .filter_map(|n| {
            built
                .get(*n)
                .map(|p| format!("{n} (via {})", p.join(" -> ")))
        })
        .collect();
    assert!(
        found.is_empty(),
        "`cargo test -p hk-engine` would compile: {found:?}"
    );
    // The check can fail: the binary's build does hold them.
    let all = m.closure("hk-console", false);
    for n in ["tokio", "russh", "kube", "ratatui"] {
        assert!(all.contains_key(n), "the binary builds {n}");
    }
}

#[test]
fn only_the_ui_crate_builds_the_terminal_libraries() {
    let m = metadata();
    for (krate, _) in LAYERS {
        let built = m.closure(krate, true);
        let terminal: Vec<String> = TERMINAL
            .iter()
            .filter_map(|n| built.get(*n).map(|p| p.join(" -> ")))
            .collect();
        match *krate {
            "hk-ui" => assert_eq!(terminal.len(), TERMINAL.len(), "{terminal:?}"),
            // The binary builds them through hk-ui; its integration tests draw with ratatui.
            "hk-console" => {}
            _ => assert!(
                terminal.is_empty(),
                "{krate} builds a terminal library: {terminal:?}"
            ),
        }
    }
}

#[test]
fn no_library_crate_depends_on_the_simulation() {
    let m = metadata();
    for (krate, _) in LAYERS {
        if *krate == "hk-console" || *krate == "hk-sim" {
            continue;
        }
        let built = m.closure(krate, true);
        assert!(
            !built.contains_key("hk-sim"),
            "{krate} builds the simulation: {:?}",
            built["hk-sim"]
        );
    }
}

/// `[lints] workspace = true` in every member, the workspace's lints declared once (unsafe
/// forbidden, unwrap denied), and every dependency taken from `[workspace.dependencies]`.
#[test]
fn every_crate_takes_the_workspace_lints_and_dependencies() {
    let m = metadata();
    let read = |p: &Path| -> toml::Table {
        let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        text.parse()
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    let top = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"));
    let lint = |group: &str, name: &str| {
        top.get("workspace")
            .and_then(|w| w.get("lints"))
            .and_then(|l| l.get(group))
            .and_then(|g| g.get(name))
            .and_then(|v| v.as_str())
            .map(str::to_string)
    };
    assert_eq!(lint("rust", "unsafe_code").as_deref(), Some("forbid"));
    assert_eq!(lint("clippy", "unwrap_used").as_deref(), Some("deny"));
    for (name, manifest) in &m.manifests {
        let doc = read(manifest);
        assert_eq!(
            doc.get("lints")
                .and_then(|l| l.get("workspace"))
                .and_then(|w| w.as_bool()),
            Some(true),
            "{name} ({}) does not take the workspace's lints",
            manifest.display()
        );
        for table in ["dependencies", "dev-dependencies", "build-dependencies"] {
            let Some(deps) = doc.get(table).and_then(|t| t.as_table()) else {
                continue;
            };
            for (dep, value) in deps {
                let from_workspace = value
                    .get("workspace")
                    .and_then(|w| w.as_bool())
                    .unwrap_or(false);
                assert!(
                    from_workspace,
                    "{name}: [{table}] {dep} = {value}: declare it once in [workspace.dependencies] and take it with `workspace = true`"
                );
            }
        }
    }
}
