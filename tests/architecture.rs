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
    // The simulation drives no run: the run driver is the session's (its headless driver
    // included), and the demo's rehearsals are composed in the binary (src/rehearsal.rs).
    ("hk-sim", &["hk-engine", "hk-effects"]),
    (
        "hk-console",
        &["hk-engine", "hk-effects", "hk-session", "hk-ui", "hk-sim"],
    ),
    // What the crates' integration tests share; on the engine only, so an engine test built
    // on it builds no runtime, network or terminal (the closure rules below hold that).
    ("hk-test-support", &["hk-engine"]),
    // Real OpenSSH nodes for the effects' tests and above: on the effects, never the
    // simulation (no library's tests build it).
    (
        "hk-test-nodes",
        &["hk-engine", "hk-effects", "hk-test-support"],
    ),
];

/// Crates only tests build: any crate may take one as a dev-dependency, none as a normal or
/// build one (`cargo build` of a layer never compiles them).
const TEST_ONLY: &[&str] = &["hk-test-support", "hk-test-nodes"];

/// The most integration-test binaries a crate may have: each one is a link of everything
/// it reaches, and a crate's tests are grouped into a few binaries (`autotests = false`).
const MAX_TEST_BINARIES: usize = 8;

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
    /// workspace member name -> its integration-test targets (`kind = ["test"]`)
    tests: BTreeMap<String, Vec<String>>,
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
    let mut tests_by_id = BTreeMap::new();
    for p in v["packages"].as_array().expect("packages") {
        let id = p["id"].as_str().expect("id").to_string();
        let tests: Vec<String> = p["targets"]
            .as_array()
            .expect("targets")
            .iter()
            .filter(|t| {
                t["kind"]
                    .as_array()
                    .is_some_and(|k| k.iter().any(|k| k == "test"))
            })
            .map(|t| t["name"].as_str().expect("target name").to_string())
            .collect();
        tests_by_id.insert(id.clone(), tests);
        names.insert(id.clone(), p["name"].as_str().expect("name").to_string());
        manifests_by_id.insert(
            id,
            PathBuf::from(p["manifest_path"].as_str().expect("manifest_path")),
        );
    }
    let mut members = BTreeMap::new();
    let mut manifests = BTreeMap::new();
    let mut tests = BTreeMap::new();
    for id in v["workspace_members"].as_array().expect("members") {
        let id = id.as_str().expect("id").to_string();
        let name = names[&id].clone();
        manifests.insert(name.clone(), manifests_by_id[&id].clone());
        tests.insert(name.clone(), tests_by_id[&id].clone());
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
        tests,
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

    /// The workspace crates `member` depends on directly, with the kinds of each.
    fn direct_members_kinds(&self, member: &str) -> BTreeMap<String, BTreeSet<String>> {
        let ws: BTreeSet<&String> = self.members.keys().collect();
        self.deps[self.id(member)]
            .iter()
            .map(|(d, kinds)| (self.names[d].clone(), kinds.clone()))
            .filter(|(n, _)| ws.contains(n))
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
        // A test-only crate as a dev-dependency is any layer's (the next test holds that
        // it is never more than that).
        let has: BTreeSet<String> = m
            .direct_members_kinds(krate)
            .into_iter()
            .filter(|(n, kinds)| {
                !(TEST_ONLY.contains(&n.as_str()) && kinds.iter().all(|k| k == "dev"))
            })
            .map(|(n, _)| n)
            .collect();
        let extra: Vec<&String> = has.difference(&allowed).collect();
        assert!(
            extra.is_empty(),
            "{krate} depends on {extra:?}; its layer may use only {allowed:?}"
        );
    }
}

#[test]
fn test_only_crates_are_only_ever_dev_dependencies() {
    let m = metadata();
    let mut found = Vec::new();
    let mut taken = 0;
    for (krate, _) in LAYERS {
        // A test-only crate may build on another (it is only ever in a test's build).
        if TEST_ONLY.contains(krate) {
            continue;
        }
        for (dep, kinds) in m.direct_members_kinds(krate) {
            if !TEST_ONLY.contains(&dep.as_str()) {
                continue;
            }
            taken += 1;
            if kinds.iter().any(|k| k != "dev") {
                found.push(format!("{krate} -> {dep} as {kinds:?}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a test-only crate in a build that is not a test's: {found:?}"
    );
    // The rule looks at something: the crates' tests do take it.
    assert!(taken >= 3, "only {taken} crates take a test-only crate");
}

/// Each crate's integration tests are a few binaries: `autotests = false` and `[[test]]`
/// groups, never one binary per file (each binary is a link of all it reaches).
#[test]
fn no_crate_has_more_than_a_few_test_binaries() {
    let m = metadata();
    let mut over = Vec::new();
    for (krate, tests) in &m.tests {
        if tests.len() > MAX_TEST_BINARIES {
            over.push(format!("{krate}: {} ({})", tests.len(), tests.join(", ")));
        }
    }
    assert!(
        over.is_empty(),
        "more than {MAX_TEST_BINARIES} test binaries: {over:#?}"
    );
    // The reader sees test targets where they are.
    for krate in ["hk-console", "hk-engine", "hk-ui"] {
        assert!(!m.tests[krate].is_empty(), "{krate} has no test binary");
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

/// A source file's text.
fn source(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Calls that do IO or read the clock, as they are spelled in the sources.
const IO_OR_CLOCK: &[&str] = &[
    "std::fs",
    "fs::read",
    "fs::write",
    "File::open",
    "File::create",
    "std::process",
    "Command::new",
    "std::env::var",
    "Instant::now",
    "SystemTime::now",
    "Timestamp::now",
    "time::now(",
    "journal::now(",
    "TcpStream",
    "TcpListener",
    "UdpSocket",
    "std::thread::sleep",
];

/// Every `.rs` file under `dir`, with its text up to its `#[cfg(test)]` module (tests may
/// make files; the code under test may not).
fn sources_without_tests(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&d)
            .unwrap_or_else(|e| panic!("{}: {e}", d.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = source(&p);
                let code = match text.find("#[cfg(test)]") {
                    Some(i) => text[..i].to_string(),
                    None => text,
                };
                out.push((p, code));
            }
        }
    }
    out
}

/// The engine's modules that say they are PURE do no IO and read no clock: the run machine
/// and planner (`runbook/`), every gate's decision (`guard/`), the rules (`checks/`). What
/// they judge is handed in (the repo read by `repo`, files by `gather`, the clock by the
/// caller, the live look by the effects).
#[test]
fn the_engines_pure_modules_do_no_io_and_read_no_clock() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/hk-engine/src");
    let mut found = Vec::new();
    for module in ["runbook", "guard", "checks"] {
        let files = sources_without_tests(&src.join(module));
        assert!(!files.is_empty(), "no sources under {module}/");
        for (path, code) in files {
            for (no, line) in code.lines().enumerate() {
                let line = line.split("//").next().unwrap_or_default();
                for call in IO_OR_CLOCK {
                    if line.contains(call) {
                        found.push(format!("{}:{}: {call}", path.display(), no + 1));
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "IO or a clock in a pure module: {found:#?}"
    );
    // The reader sees them where they are: the journal reads the clock and writes files.
    let journal = source(&src.join("journal.rs"));
    assert!(IO_OR_CLOCK.iter().any(|c| journal.contains(c)));
}

/// No module of the engine starts a process, pure or not: what it needs run (the real
/// kustomize for the Flux check) goes through a trait the effects implement
/// (`repo::flux::BuildRunner`, hk-effects' `exec::kustomize`).
#[test]
fn the_engine_starts_no_process() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/hk-engine/src");
    let mut found = Vec::new();
    for (path, code) in sources_without_tests(&src) {
        for (no, line) in code.lines().enumerate() {
            let line = line.split("//").next().unwrap_or_default();
            for call in ["std::process", "Command::new", "process::Command"] {
                if line.contains(call) {
                    found.push(format!("{}:{}: {call}", path.display(), no + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "a process started in the engine: {found:#?}"
    );
    // The reader sees them where they are: the effects' runner starts one.
    let effects = source(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/hk-effects/src/exec/kustomize.rs"),
    );
    assert!(effects.contains("Command::new"));
}

/// The console's words: its commands and key hints. Keys are configurable and the console
/// draws its own hints; no layer below it may say them.
const CONSOLE_WORDS: &[&str] = &[":env", ":run ", ":fault ", "press ", "Press "];

/// The session, the effects and the engine speak no console words: no `:env`, no "press",
/// no "s starts the run" (a key followed by what it does), in their code outside tests.
#[test]
fn the_layers_below_the_console_speak_no_console_words() {
    let key_hint = regex::Regex::new(
        r#"\b[a-zA-Z] (starts|aborts|opens|retries|skips|marks|cancels|quits|takes)\b"#,
    )
    .expect("regex");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    let mut found = Vec::new();
    for krate in ["hk-session", "hk-effects", "hk-engine"] {
        for (path, code) in sources_without_tests(&root.join(krate).join("src")) {
            for (no, line) in code.lines().enumerate() {
                let t = line.trim_start();
                if t.starts_with("//") {
                    continue;
                }
                // Only what the code says: string literals.
                for lit in line.split('"').skip(1).step_by(2) {
                    let hit = CONSOLE_WORDS
                        .iter()
                        .find(|w| lit.contains(*w))
                        .map(|w| w.to_string())
                        .or_else(|| key_hint.find(lit).map(|m| m.as_str().to_string()));
                    if let Some(w) = hit {
                        found.push(format!("{}:{}: {w:?} in {lit:?}", path.display(), no + 1));
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "console words below the console: {found:#?}"
    );
    // The reader finds them where they belong: the console's own run view.
    let ui = source(&root.join("hk-ui/src/app/run.rs"));
    assert!(ui
        .split('"')
        .skip(1)
        .step_by(2)
        .any(|l| key_hint.is_match(l)));
}

/// No import circles between a crate's modules (top-level modules, and one level below), read
/// from the sources' `crate::` and `super::` paths (test modules aside). The simulation's six
/// circles were cut by the direction data flows (issue 27); the console's last one (its
/// panes held state types the app kept, and drew from the app) by moving those types into
/// `state` and lending each pane a small view (issue 35). None is allowed.
#[test]
fn no_import_circles_inside_a_crate() {
    let m = metadata();
    let mut found = Vec::new();
    for (name, manifest) in &m.manifests {
        let src = manifest.parent().expect("crate dir").join("src");
        for depth in [1, 2] {
            for circle in circles::in_crate(&src, depth) {
                found.push(format!("{name}: {}", circle.join(" <-> ")));
            }
        }
    }
    assert!(found.is_empty(), "import circles: {found:#?}");
}

/// The circle reader sees circles (the test above would pass on a reader that sees none): a
/// small crate whose `a` and `b` import each other (`crate::` one way, `super::` back), and
/// whose `c::x` and `c::y` do so one level below.
#[test]
fn the_circle_reader_finds_a_circle() {
    let dir = tempfile::tempdir().expect("tmp");
    let src = dir.path();
    let write = |rel: &str, text: &str| {
        let p = src.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    };
    write("lib.rs", "pub mod a;\npub mod b;\npub mod c;\npub mod d;\n");
    write("a.rs", "use crate::b::B;\npub struct A;\n");
    write("b.rs", "pub struct B(super::a::A);\n");
    write("c/mod.rs", "pub mod x;\npub mod y;\n");
    write("c/x.rs", "use super::y::Y;\npub struct X;\n");
    write("c/y.rs", "pub struct Y(crate::c::x::X);\n");
    // One way only: no circle.
    write("d.rs", "use crate::a::A;\n");
    assert_eq!(
        circles::in_crate(src, 1),
        vec![vec!["a".to_string(), "b".into()]]
    );
    assert_eq!(
        circles::in_crate(src, 2),
        vec![
            vec!["a".to_string(), "b".into()],
            vec!["c::x".to_string(), "c::y".into()]
        ]
    );
}

/// The module graph of one crate's sources, and its strongly connected parts.
mod circles {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};

    fn files(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }

    /// `src/a/b.rs` and `src/a/b/mod.rs` -> `[a, b]`; `src/lib.rs` -> `[]`.
    fn module_of(src: &Path, file: &Path) -> Vec<String> {
        let rel = file
            .strip_prefix(src)
            .expect("under src")
            .with_extension("");
        let mut parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if matches!(
            parts.last().map(String::as_str),
            Some("mod" | "lib" | "main")
        ) {
            parts.pop();
        }
        parts
    }

    /// Every circle among the crate's modules cut at `depth` path segments, each sorted.
    pub fn in_crate(src: &Path, depth: usize) -> Vec<Vec<String>> {
        let mut all = Vec::new();
        files(src, &mut all);
        let modules: Vec<(PathBuf, Vec<String>)> =
            all.iter().map(|f| (f.clone(), module_of(src, f))).collect();
        let names: BTreeSet<Vec<String>> = modules.iter().map(|(_, m)| m.clone()).collect();
        let is_module = |p: &[String]| names.iter().any(|n| n.starts_with(p));
        let path = regex::Regex::new(r"\b((?:super::)+|crate::)((?:[a-z_0-9]+::)*[a-z_0-9]+)")
            .expect("regex");
        let mut graph: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
        for (file, module) in &modules {
            if module.is_empty() {
                continue;
            }
            let key: Vec<String> = module.iter().take(depth).cloned().collect();
            let text = std::fs::read_to_string(file).expect("source");
            let text = match text.find("#[cfg(test)]\nmod tests") {
                Some(i) => &text[..i],
                None => &text[..],
            };
            for line in text.lines() {
                let code = line.split("//").next().unwrap_or("");
                for c in path.captures_iter(code) {
                    let ups = c[1].matches("super::").count();
                    let base: Vec<String> = if ups == 0 {
                        Vec::new()
                    } else {
                        module[..module.len().saturating_sub(ups)].to_vec()
                    };
                    let mut target = base;
                    target.extend(c[2].split("::").map(str::to_string));
                    let target: Vec<String> = target.into_iter().take(depth).collect();
                    if target == key || key.starts_with(&target) || !is_module(&target) {
                        continue;
                    }
                    graph.entry(key.clone()).or_default().insert(target);
                }
            }
        }
        strongly_connected(&graph)
            .into_iter()
            .filter(|c| c.len() > 1)
            .map(|c| {
                let mut v: Vec<String> = c.iter().map(|m| m.join("::")).collect();
                v.sort();
                v
            })
            .collect()
    }

    /// Tarjan's algorithm, iterative over an explicit stack of (node, next edge).
    fn strongly_connected(
        g: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
    ) -> Vec<Vec<Vec<String>>> {
        let nodes: BTreeSet<&Vec<String>> =
            g.keys().chain(g.values().flat_map(|s| s.iter())).collect();
        let mut index: BTreeMap<&Vec<String>, usize> = BTreeMap::new();
        let mut low: BTreeMap<&Vec<String>, usize> = BTreeMap::new();
        let mut on: BTreeSet<&Vec<String>> = BTreeSet::new();
        let mut stack: Vec<&Vec<String>> = Vec::new();
        let mut out = Vec::new();
        let mut next = 0;
        let empty = BTreeSet::new();
        for &root in &nodes {
            if index.contains_key(root) {
                continue;
            }
            let mut work: Vec<(&Vec<String>, usize)> = vec![(root, 0)];
            while let Some((v, i)) = work.pop() {
                if i == 0 {
                    index.insert(v, next);
                    low.insert(v, next);
                    next += 1;
                    stack.push(v);
                    on.insert(v);
                }
                let edges: Vec<&Vec<String>> = g.get(v).unwrap_or(&empty).iter().collect();
                if let Some(&w) = edges.get(i) {
                    work.push((v, i + 1));
                    if !index.contains_key(w) {
                        work.push((w, 0));
                    } else if on.contains(w) {
                        let lw = index[w].min(low[v]);
                        low.insert(v, lw);
                    }
                    continue;
                }
                // v is done: pass its low up to its parent, pop its component.
                if let Some(&(parent, _)) = work.last() {
                    let lp = low[parent].min(low[v]);
                    low.insert(parent, lp);
                }
                if low[v] == index[v] {
                    let mut comp = Vec::new();
                    while let Some(w) = stack.pop() {
                        on.remove(w);
                        comp.push(w.clone());
                        if w == v {
                            break;
                        }
                    }
                    out.push(comp);
                }
            }
        }
        out
    }
}
