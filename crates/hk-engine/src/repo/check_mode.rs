//! Which tasks of a playbook run for real under `ansible-playbook --check`: derived from the
//! playbook as ansible-playbook resolves it, never taken from a runbook's word.
//!
//! Owns: walking a playbook the way ansible-playbook loads it (plays, `import_playbook`,
//! `import_tasks`/`include_tasks`, blocks with `rescue`/`always`, roles with `tasks_from`,
//! their `dependencies` in meta/main.yml, handlers), the effective `check_mode` of each
//! task (its own, else its block's, role's or play's), whether it runs on the operator's
//! machine (`delegate_to: localhost`, `connection: local`, `local_action`), and sorting
//! each `check_mode: false` task into a probe (its module cannot write, [`WRITES_NOTHING`],
//! or hk-console.yaml `reviewed_read_only:` pins it) or a task that runs for real.
//! Must not: render templates (a templated `check_mode` is undecidable: it counts as
//! `false` and says so), or guess at what it cannot read (a templated include, a missing
//! file or role: the preview counts as running something for real, and says why).
//!
//! Roles are found by [`RoleSearch`], where ansible-playbook looks; files are read through
//! the bounded reader (`repo::read`) and the positioned loader (`yaml`).

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::config::ReviewedReadOnly;
use super::roles::RoleSearch;
use crate::yaml::{self, Node, Value};

/// Modules that cannot change the host they run on (nor the operator's machine), so a
/// `check_mode: false` task using one stays a probe. Each with why it is safe. Short names;
/// the `ansible.builtin.` and `ansible.legacy.` forms are the same modules.
pub const WRITES_NOTHING: &[(&str, &str)] = &[
    ("stat", "reads a path's metadata"),
    ("slurp", "reads a file and returns it base64-encoded"),
    ("find", "lists paths matching patterns"),
    ("getent", "reads a name service database"),
    ("ping", "answers pong; touches nothing"),
    ("setup", "gathers facts"),
    ("gather_facts", "gathers facts"),
    ("package_facts", "reads the package manager's list"),
    ("service_facts", "reads the service manager's list"),
    ("assert", "evaluates expressions on the controller"),
    ("debug", "prints a message on the controller"),
    ("fail", "stops the host with a message"),
    ("set_fact", "sets variables in the play's memory"),
    ("include_vars", "reads variables from a file into memory"),
    (
        "meta",
        "controls the play (flush_handlers runs handlers, which are walked on their own)",
    ),
    (
        "wait_for",
        "waits for a port, a path or a string; it never creates or deletes anything",
    ),
];

/// How deep imports and role dependencies are followed before the walk gives up (a cycle).
const MAX_DEPTH: usize = 32;

/// A task that runs for real under `--check`, or a part of the playbook that could not be
/// read (which may hold one).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RealRun {
    /// The file, relative to the repo root where it is under it.
    pub file: String,
    pub line: usize,
    /// The module (`ansible.builtin.shell`), or what could not be read (`include_tasks`).
    pub module: String,
    /// Why it runs for real: its `check_mode` and where that came from, the operator's
    /// machine, a stale review; or why the part could not be read.
    pub why: String,
}

/// A `check_mode: false` task that stays a probe only because someone reviewed it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ReviewedProbe {
    pub file: String,
    pub line: usize,
    pub module: String,
    pub by: String,
    pub at: String,
}

/// What one playbook does under `--check`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckDerivation {
    /// Tasks that run for real (and parts that could not be read), sorted, once each.
    pub real: Vec<RealRun>,
    /// `check_mode: false` tasks that are probes by a review, sorted, once each.
    pub reviewed: Vec<ReviewedProbe>,
    /// `check_mode: false` tasks that are probes by their module ([`WRITES_NOTHING`]):
    /// `(file, line, module)`, sorted, once each.
    pub probes: Vec<(String, usize, String)>,
}

/// The sha256 (hex) of a task as written: its YAML as canonical JSON (keys sorted), so a
/// change to anything the task says voids a review, and moving it or a comment does not.
pub fn task_sha256(task: &Node) -> String {
    let text = serde_json::to_string(&task.to_json()).unwrap_or_default();
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Derive what `playbook` (relative to `ansible_dir`) runs for real under `--check`.
pub fn derive(
    root: &Path,
    ansible_dir: &Path,
    playbook: &str,
    search: &RoleSearch,
    reviews: &[ReviewedReadOnly],
) -> CheckDerivation {
    let mut w = Walker {
        root,
        ansible_dir,
        search,
        reviews,
        out: CheckDerivation::default(),
    };
    let path = ansible_dir.join(playbook);
    w.playbook(&path, &Inherit::default(), None, 0);
    w.out.real.sort();
    w.out.real.dedup();
    w.out.reviewed.sort();
    w.out.reviewed.dedup();
    w.out.probes.sort();
    w.out.probes.dedup();
    w.out
}

/// A `check_mode` as written.
#[derive(Debug, Clone, PartialEq, Eq)]
enum CheckMode {
    On,
    Off,
    /// A Jinja value: undecidable before the play runs.
    Templated(String),
}

/// The keywords a task inherits from its block, role or play, with where each was set.
#[derive(Debug, Clone, Default)]
struct Inherit {
    check_mode: Option<(CheckMode, String)>,
    /// Runs on the operator's machine: `connection: local`, `delegate_to: localhost` or a
    /// play on `hosts: localhost` (what, and where set).
    local: Option<String>,
}

/// Where a task list lives: its file, the playbook's directory, the role (if any).
#[derive(Clone)]
struct Place<'p> {
    file: &'p Path,
    book_dir: &'p Path,
    role_dir: Option<&'p Path>,
}

struct Walker<'a> {
    root: &'a Path,
    ansible_dir: &'a Path,
    search: &'a RoleSearch,
    reviews: &'a [ReviewedReadOnly],
    out: CheckDerivation,
}

/// Ansible's boolean reading of a keyword's value.
fn check_mode_of(node: &Node) -> CheckMode {
    match &node.value {
        Value::Bool(true) => CheckMode::On,
        Value::Bool(false) | Value::Null => CheckMode::Off,
        Value::Int(i) => {
            if *i == 0 {
                CheckMode::Off
            } else {
                CheckMode::On
            }
        }
        Value::Str(s) if s.contains("{{") || s.contains("{%") => CheckMode::Templated(s.clone()),
        Value::Str(s) => match s.trim().to_ascii_lowercase().as_str() {
            "yes" | "on" | "true" | "1" | "y" | "t" => CheckMode::On,
            // Ansible's boolean(): anything not truthy is false.
            _ => CheckMode::Off,
        },
        _ => CheckMode::Templated(format!("{:?}", node.to_json())),
    }
}

fn is_local_host(s: &str) -> bool {
    matches!(s.trim(), "localhost" | "127.0.0.1" | "::1")
}

/// The short name of a module (`ansible.builtin.stat` -> `stat`).
fn short(module: &str) -> &str {
    module
        .strip_prefix("ansible.builtin.")
        .or_else(|| module.strip_prefix("ansible.legacy."))
        .unwrap_or(module)
}

/// The keywords a task may carry besides its module (Ansible's Task, Block and
/// Conditional/Taggable/Become/... attributes, and the loop forms).
const TASK_KEYWORDS: &[&str] = &[
    "name",
    "when",
    "register",
    "become",
    "become_user",
    "become_method",
    "become_flags",
    "become_exe",
    "check_mode",
    "diff",
    "delegate_to",
    "delegate_facts",
    "connection",
    "run_once",
    "loop",
    "loop_control",
    "tags",
    "vars",
    "environment",
    "notify",
    "changed_when",
    "failed_when",
    "ignore_errors",
    "ignore_unreachable",
    "until",
    "retries",
    "delay",
    "no_log",
    "any_errors_fatal",
    "args",
    "async",
    "poll",
    "listen",
    "module_defaults",
    "collections",
    "throttle",
    "timeout",
    "debugger",
    "port",
    "remote_user",
    "action",
    "local_action",
];

fn is_keyword(key: &str) -> bool {
    TASK_KEYWORDS.contains(&key) || key.starts_with("with_")
}

const TASK_INCLUDES: &[&str] = &[
    "import_tasks",
    "include_tasks",
    "include",
    "ansible.builtin.import_tasks",
    "ansible.builtin.include_tasks",
    "ansible.builtin.include",
];
const ROLE_INCLUDES: &[&str] = &[
    "import_role",
    "include_role",
    "ansible.builtin.import_role",
    "ansible.builtin.include_role",
];

impl Walker<'_> {
    fn shown(&self, path: &Path) -> String {
        path.strip_prefix(self.root)
            .unwrap_or(path)
            .display()
            .to_string()
    }

    /// A part that could not be read: the preview counts as running something for real.
    fn unreadable(&mut self, file: &Path, line: usize, what: &str, why: String) {
        self.out.real.push(RealRun {
            file: self.shown(file),
            line,
            module: what.to_string(),
            why: format!("{why}: cannot tell what it runs, so the preview counts as mutating"),
        });
    }

    fn load(&mut self, path: &Path, from: Option<(&Path, usize, &str)>) -> Option<Node> {
        let (file, line, what) = from.unwrap_or((path, 1, "playbook"));
        let text = match super::read::read_text(path) {
            Ok(t) => t,
            Err(e) => {
                let why = format!("{} cannot be read ({})", self.shown(path), e.reason());
                self.unreadable(file, line, what, why);
                return None;
            }
        };
        match yaml::parse_one(&text) {
            Ok(n) => Some(n),
            Err(e) => {
                let why = format!(
                    "{}:{} is not YAML ({})",
                    self.shown(path),
                    e.mark,
                    e.message
                );
                self.unreadable(file, line, what, why);
                None
            }
        }
    }

    fn merge(&self, inh: &Inherit, node: &Node, file: &Path) -> Inherit {
        let mut out = inh.clone();
        if let Some(v) = node.get("check_mode").filter(|v| !v.is_null()) {
            out.check_mode = Some((
                check_mode_of(v),
                format!("{}:{}", self.shown(file), v.mark.line),
            ));
        }
        let at = |v: &Node| format!("{}:{}", self.shown(file), v.mark.line);
        if let Some(v) = node.get("hosts") {
            if v.as_str().is_some_and(is_local_host) {
                out.local = Some(format!("hosts: localhost, at {}", at(v)));
            }
        }
        if let Some(v) = node.get("connection") {
            out.local =
                (v.as_str() == Some("local")).then(|| format!("connection: local, at {}", at(v)));
        }
        if let Some(v) = node.get("delegate_to") {
            out.local = v
                .as_str()
                .filter(|d| is_local_host(d))
                .map(|d| format!("delegate_to: {d}, at {}", at(v)));
        }
        out
    }

    fn playbook(&mut self, path: &Path, inh: &Inherit, from: Option<(&Path, usize)>, depth: usize) {
        if depth > MAX_DEPTH {
            let (f, l) = from.unwrap_or((path, 1));
            let why = format!("imports nest deeper than {MAX_DEPTH} (a cycle?)");
            self.unreadable(f, l, "import_playbook", why);
            return;
        }
        let Some(doc) = self.load(path, from.map(|(f, l)| (f, l, "import_playbook"))) else {
            return;
        };
        let book_dir = path.parent().unwrap_or(self.ansible_dir).to_path_buf();
        let Some(plays) = doc.as_seq() else {
            if !doc.is_null() {
                let why = format!("{} is not a list of plays", self.shown(path));
                self.unreadable(path, doc.mark.line, "playbook", why);
            }
            return;
        };
        for play in plays {
            if let Some(imported) = play
                .get("import_playbook")
                .or_else(|| play.get("ansible.builtin.import_playbook"))
            {
                match imported.as_str() {
                    Some(name) if !name.contains("{{") => {
                        let next = book_dir.join(name);
                        self.playbook(&next, inh, Some((path, imported.mark.line)), depth + 1)
                    }
                    _ => {
                        let why = format!(
                            "the imported playbook is named by a template or not a name ({:?})",
                            imported.to_json()
                        );
                        self.unreadable(path, imported.mark.line, "import_playbook", why);
                    }
                }
                continue;
            }
            let play_inh = self.merge(inh, play, path);
            let place = Place {
                file: path,
                book_dir: &book_dir,
                role_dir: None,
            };
            for r in play
                .get("roles")
                .and_then(Node::as_seq)
                .into_iter()
                .flatten()
            {
                let name = r.as_str().or_else(|| {
                    r.get("role")
                        .or_else(|| r.get("name"))
                        .and_then(Node::as_str)
                });
                let r_inh = if r.as_map().is_some() {
                    self.merge(&play_inh, r, path)
                } else {
                    play_inh.clone()
                };
                match name {
                    Some(n) => self.role(&place, n, r, None, &r_inh, depth + 1),
                    None => {
                        let why = "an entry of `roles:` names no role".to_string();
                        self.unreadable(path, r.mark.line, "role", why);
                    }
                }
            }
            for section in ["pre_tasks", "tasks", "post_tasks", "handlers"] {
                if let Some(tasks) = play.get(section) {
                    self.tasks(&place, tasks, &play_inh, depth + 1);
                }
            }
        }
    }

    /// A role's dependencies, tasks (`tasks_from`, else main) and handlers.
    fn role(
        &mut self,
        at: &Place<'_>,
        name: &str,
        node: &Node,
        tasks_from: Option<&str>,
        inh: &Inherit,
        depth: usize,
    ) {
        let what = ROLE_INCLUDES
            .iter()
            .find(|k| node.get(k).is_some())
            .copied()
            .unwrap_or("role");
        if name.contains("{{") {
            let why = format!("role `{name}` is named by a template");
            self.unreadable(at.file, node.mark.line, what, why);
            return;
        }
        if depth > MAX_DEPTH {
            let why = format!("roles nest deeper than {MAX_DEPTH} (a cycle?)");
            self.unreadable(at.file, node.mark.line, what, why);
            return;
        }
        let basedir = at.role_dir.and_then(Path::parent);
        let (found, looked) = self
            .search
            .find(self.ansible_dir, at.book_dir, basedir, name);
        let Some(dir) = found else {
            let looked: Vec<String> = looked.iter().map(|d| d.display().to_string()).collect();
            let why = format!("role `{name}` not found (looked in {})", looked.join(":"));
            self.unreadable(at.file, node.mark.line, what, why);
            return;
        };
        let first = |sub: &str, stem: &str| -> Option<PathBuf> {
            let base = dir.join(sub);
            [
                base.join(stem),
                base.join(format!("{stem}.yml")),
                base.join(format!("{stem}.yaml")),
            ]
            .into_iter()
            .find(|p| p.is_file())
        };
        if let Some(meta) = first("meta", "main") {
            if let Some(doc) = self.load(&meta, Some((at.file, node.mark.line, "role"))) {
                let dep_place = Place {
                    file: &meta,
                    book_dir: at.book_dir,
                    role_dir: Some(&dir),
                };
                for dep in doc
                    .get("dependencies")
                    .and_then(Node::as_seq)
                    .into_iter()
                    .flatten()
                {
                    let d_inh = if dep.as_map().is_some() {
                        self.merge(inh, dep, &meta)
                    } else {
                        inh.clone()
                    };
                    let d = dep.as_str().or_else(|| {
                        dep.get("role")
                            .or_else(|| dep.get("name"))
                            .and_then(Node::as_str)
                    });
                    match d {
                        Some(d) => self.role(&dep_place, d, dep, None, &d_inh, depth + 1),
                        None => {
                            let why = "an entry of `dependencies:` names no role".to_string();
                            self.unreadable(&meta, dep.mark.line, "role", why);
                        }
                    }
                }
            }
        }
        let stem = tasks_from.unwrap_or("main");
        let tasks_file = first("tasks", stem);
        match tasks_file {
            Some(f) => {
                if let Some(doc) = self.load(&f, Some((at.file, node.mark.line, "role"))) {
                    let place = Place {
                        file: &f,
                        book_dir: at.book_dir,
                        role_dir: Some(&dir),
                    };
                    self.tasks(&place, &doc, inh, depth + 1);
                }
            }
            None if tasks_from.is_some() => {
                let why = format!("role `{name}` has no tasks file `{stem}`");
                self.unreadable(at.file, node.mark.line, "role", why);
            }
            None => {}
        }
        if tasks_from.is_none() {
            if let Some(f) = first("handlers", "main") {
                if let Some(doc) = self.load(&f, Some((at.file, node.mark.line, "role"))) {
                    let place = Place {
                        file: &f,
                        book_dir: at.book_dir,
                        role_dir: Some(&dir),
                    };
                    self.tasks(&place, &doc, inh, depth + 1);
                }
            }
        }
    }

    fn tasks(&mut self, at: &Place<'_>, tasks: &Node, inh: &Inherit, depth: usize) {
        if depth > MAX_DEPTH {
            let why = format!("includes nest deeper than {MAX_DEPTH} (a cycle?)");
            self.unreadable(at.file, tasks.mark.line, "include_tasks", why);
            return;
        }
        let Some(list) = tasks.as_seq() else {
            if !tasks.is_null() {
                let why = format!("{} holds no list of tasks", self.shown(at.file));
                self.unreadable(at.file, tasks.mark.line, "tasks", why);
            }
            return;
        };
        for task in list {
            let t_inh = self.merge(inh, task, at.file);
            if task.get("block").is_some() {
                for key in ["block", "rescue", "always"] {
                    if let Some(inner) = task.get(key) {
                        self.tasks(at, inner, &t_inh, depth + 1);
                    }
                }
                continue;
            }
            if let Some((key, arg)) = TASK_INCLUDES
                .iter()
                .find_map(|k| task.get(k).map(|v| (*k, v)))
            {
                self.include_tasks(at, task, key, arg, &t_inh, depth);
                continue;
            }
            if let Some((key, arg)) = ROLE_INCLUDES
                .iter()
                .find_map(|k| task.get(k).map(|v| (*k, v)))
            {
                let name = arg.get("name").and_then(Node::as_str);
                let from = arg.get("tasks_from").and_then(Node::as_str);
                match (name, from) {
                    (Some(n), Some(f)) if f.contains("{{") => {
                        let why = format!("`{key}` of `{n}` names its tasks_from by a template");
                        self.unreadable(at.file, task.mark.line, key, why);
                    }
                    (Some(n), f) => self.role(at, n, task, f, &t_inh, depth + 1),
                    (None, _) => {
                        let why = format!("`{key}` names no role");
                        self.unreadable(at.file, task.mark.line, key, why);
                    }
                }
                continue;
            }
            self.task(at, task, &t_inh);
        }
    }

    fn include_tasks(
        &mut self,
        at: &Place<'_>,
        task: &Node,
        key: &str,
        arg: &Node,
        inh: &Inherit,
        depth: usize,
    ) {
        let name = arg
            .as_str()
            .or_else(|| arg.get("file").and_then(Node::as_str));
        let Some(name) = name.filter(|n| !n.contains("{{")) else {
            let why = format!("`{key}` names its file by a template or not at all");
            self.unreadable(at.file, task.mark.line, key, why);
            return;
        };
        // Where ansible-playbook looks: beside the including file, the role's tasks/, the
        // playbook's directory.
        let here = at.file.parent().unwrap_or(at.book_dir);
        let mut dirs = vec![here.to_path_buf()];
        if let Some(r) = at.role_dir {
            dirs.push(r.join("tasks"));
        }
        dirs.push(at.book_dir.to_path_buf());
        let Some(file) = dirs.iter().map(|d| d.join(name)).find(|p| p.is_file()) else {
            let why = format!("`{key}: {name}` names no file");
            self.unreadable(at.file, task.mark.line, key, why);
            return;
        };
        if let Some(doc) = self.load(&file, Some((at.file, task.mark.line, key))) {
            let place = Place {
                file: &file,
                book_dir: at.book_dir,
                role_dir: at.role_dir,
            };
            self.tasks(&place, &doc, inh, depth + 1);
        }
    }

    /// One module task: a probe, a reviewed probe, or a task that runs for real.
    fn task(&mut self, at: &Place<'_>, task: &Node, inh: &Inherit) {
        let Some((mode, set_at)) = &inh.check_mode else {
            return;
        };
        let because = match mode {
            CheckMode::On => return,
            CheckMode::Off => format!("check_mode: false (set at {set_at})"),
            CheckMode::Templated(t) => format!(
                "check_mode `{t}` (set at {set_at}) is a template hk-console cannot decide: treated as false"
            ),
        };
        let local_action = task.get("local_action");
        let module = match local_action.or_else(|| task.get("action")) {
            Some(a) => a
                .as_str()
                .and_then(|s| s.split_whitespace().next())
                .or_else(|| a.get("module").and_then(Node::as_str))
                .unwrap_or("?")
                .to_string(),
            None => task
                .as_map()
                .into_iter()
                .flatten()
                .filter_map(|(k, _)| k.as_key())
                .find(|k| !is_keyword(k))
                .unwrap_or_else(|| "?".into()),
        };
        let file = self.shown(at.file);
        let line = task.mark.line;
        if WRITES_NOTHING.iter().any(|(m, _)| *m == short(&module)) {
            self.out.probes.push((file, line, module));
            return;
        }
        let local = match local_action {
            Some(a) => Some(format!("local_action, at {file}:{}", a.mark.line)),
            None => inh.local.clone(),
        };
        let mut why = because;
        if let Some(l) = local {
            why.push_str(&format!("; on the operator's machine ({l})"));
        }
        let sha = task_sha256(task);
        let pinned: Vec<&ReviewedReadOnly> = self
            .reviews
            .iter()
            .filter(|r| r.file.trim() == file && r.line == line)
            .collect();
        if let Some(r) = pinned.iter().find(|r| r.sha256.eq_ignore_ascii_case(&sha)) {
            self.out.reviewed.push(ReviewedProbe {
                file,
                line,
                module,
                by: r.by.clone(),
                at: r.at.clone(),
            });
            return;
        }
        match pinned.first() {
            Some(r) => why.push_str(&format!(
                "; the review by {} at {} (hk-console.yaml:{}) pinned sha256 {}, the task now hashes {sha}: it changed since, review it again",
                r.by, r.at, r.config_line, r.sha256
            )),
            None => why.push_str(&format!(
                "; not reviewed (a reviewed read-only probe is pinned in hk-console.yaml `reviewed_read_only:` with file: {file}, line: {line}, sha256: {sha})"
            )),
        }
        self.out.real.push(RealRun {
            file,
            line,
            module,
            why,
        });
    }
}
