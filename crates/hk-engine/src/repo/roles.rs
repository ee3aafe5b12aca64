//! The roles a playbook uses, and their defaults and vars: what a runbook's templates see
//! besides the inventory, as Ansible gives it to the play.
//!
//! Owns: reading a playbook (following `import_playbook`), finding the roles it names
//! (`roles:`, `import_role` / `include_role` with a literal name, in tasks, pre_tasks,
//! post_tasks, handlers and blocks), their `dependencies` (meta/main.yml), locating each
//! role directory as Ansible does (`roles_path` of the ansible.cfg, the playbook's own
//! `roles/`, the Ansible directory's `roles/`), and loading `defaults/main.yml` and
//! `vars/main.yml` with positions.
//! Must not: render anything or decide precedence against the inventory (`Repo` does:
//! role defaults lowest, then the inventory, then role vars).
//!
//! A role named by a template (`include_role: name: "{{ x }}"`) cannot be known before the
//! play runs: it is listed in [`PlayRoles::unknown`] so a lookup that fails can say so,
//! never skipped silently.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::vars::{self, Loaded, VarMap};

/// How deep `import_playbook` and role `dependencies` are followed.
const MAX_DEPTH: usize = 32;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RoleError {
    #[error("{path}: cannot read: {message}")]
    Read { path: PathBuf, message: String },
    #[error("{path}: not YAML: {message}")]
    Yaml { path: PathBuf, message: String },
    #[error("{path}: role `{role}` not found (looked in {looked})")]
    NotFound {
        path: PathBuf,
        role: String,
        looked: String,
    },
    #[error("{path}: imports nest deeper than {MAX_DEPTH} (a cycle?)")]
    TooDeep { path: PathBuf },
    #[error("{0}")]
    Vars(String),
}

/// The roles of a set of playbooks, in the order Ansible applies them, with their
/// variables.
#[derive(Debug, Clone, Default)]
pub struct PlayRoles {
    /// Role name -> its directory, in first-use order (dependencies before dependents).
    pub roles: Vec<(String, PathBuf)>,
    /// Every role's defaults merged (a later role's value wins, as Ansible merges them
    /// into one play's variables).
    pub defaults: VarMap,
    /// Every role's vars merged likewise.
    pub vars: VarMap,
    /// The defaults files and vars files read, for messages ("searched ...").
    pub files: Vec<PathBuf>,
    /// Roles named by a template, which cannot be known before the play runs.
    pub unknown: Vec<String>,
}

/// The roles of `playbooks` (paths relative to `ansible_dir`).
pub fn play_roles(ansible_dir: &Path, playbooks: &[String]) -> Result<PlayRoles, RoleError> {
    let roles_path = roles_path(ansible_dir);
    let mut out = PlayRoles::default();
    let mut seen_books = BTreeSet::new();
    for pb in playbooks {
        collect_playbook(
            ansible_dir,
            &ansible_dir.join(pb),
            &roles_path,
            &mut out,
            &mut seen_books,
            0,
        )?;
    }
    for (_, dir) in out.roles.clone() {
        for (sub, into) in [("defaults", true), ("vars", false)] {
            let Some(file) = ["main.yml", "main.yaml"]
                .iter()
                .map(|f| dir.join(sub).join(f))
                .find(|p| p.is_file())
            else {
                continue;
            };
            let loaded = vars::load_vars_file(&file).map_err(|e| RoleError::Vars(e.to_string()))?;
            out.files.push(file.clone());
            if let Loaded::Vars(map) = loaded {
                let target = if into {
                    &mut out.defaults
                } else {
                    &mut out.vars
                };
                vars::combine(target, &map);
            }
        }
    }
    Ok(out)
}

/// `roles_path` from `ansible_dir/ansible.cfg` (`[defaults]`, colon-separated, relative
/// to the file's directory), then `ansible_dir/roles`.
fn roles_path(ansible_dir: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Ok(text) = std::fs::read_to_string(ansible_dir.join("ansible.cfg")) {
        let mut in_defaults = false;
        for line in text.lines() {
            let t = line.trim();
            if t.starts_with('[') {
                in_defaults = t == "[defaults]";
                continue;
            }
            if !in_defaults || t.starts_with('#') || t.starts_with(';') {
                continue;
            }
            if let Some((k, v)) = t.split_once('=') {
                if k.trim() == "roles_path" {
                    for p in v.trim().split(':').filter(|p| !p.is_empty()) {
                        let p = expand_home(p);
                        dirs.push(if p.is_absolute() {
                            p
                        } else {
                            ansible_dir.join(p)
                        });
                    }
                }
            }
        }
    }
    dirs.push(ansible_dir.join("roles"));
    dirs
}

fn expand_home(p: &str) -> PathBuf {
    match (p.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(p),
    }
}

fn read_yaml(path: &Path) -> Result<serde_yaml::Value, RoleError> {
    let text = super::read::read_text(path).map_err(|e| RoleError::Read {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    // The bounded loader first (aliases, depth, size), as for every repo file.
    if let Err(e) = crate::yaml::parse_documents(&text) {
        return Err(RoleError::Yaml {
            path: path.to_path_buf(),
            message: format!("{}:{}: {}", e.mark.line, e.mark.col, e.message),
        });
    }
    serde_yaml::from_str(&text).map_err(|e| RoleError::Yaml {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

fn collect_playbook(
    ansible_dir: &Path,
    path: &Path,
    roles_path: &[PathBuf],
    out: &mut PlayRoles,
    seen: &mut BTreeSet<PathBuf>,
    depth: usize,
) -> Result<(), RoleError> {
    if depth > MAX_DEPTH {
        return Err(RoleError::TooDeep {
            path: path.to_path_buf(),
        });
    }
    if !seen.insert(path.to_path_buf()) {
        return Ok(());
    }
    let doc = read_yaml(path)?;
    let book_dir = path.parent().unwrap_or(ansible_dir).to_path_buf();
    // The playbook's own roles/ comes first, as Ansible searches it first.
    let mut search = vec![book_dir.join("roles")];
    search.extend(roles_path.iter().cloned());
    for play in doc.as_sequence().into_iter().flatten() {
        if let Some(imported) = play
            .get("import_playbook")
            .or_else(|| play.get("ansible.builtin.import_playbook"))
            .and_then(serde_yaml::Value::as_str)
        {
            if !imported.contains("{{") {
                collect_playbook(
                    ansible_dir,
                    &book_dir.join(imported),
                    roles_path,
                    out,
                    seen,
                    depth + 1,
                )?;
            }
            continue;
        }
        for r in play
            .get("roles")
            .and_then(serde_yaml::Value::as_sequence)
            .into_iter()
            .flatten()
        {
            let name = role_name(path, "roles", r)?;
            add_role(path, &name, &search, out, depth)?;
        }
        for section in ["pre_tasks", "tasks", "post_tasks", "handlers"] {
            if let Some(tasks) = play.get(section) {
                collect_tasks(path, tasks, &search, out, depth)?;
            }
        }
    }
    Ok(())
}

/// `import_role` / `include_role` in a task list, blocks included.
fn collect_tasks(
    path: &Path,
    tasks: &serde_yaml::Value,
    search: &[PathBuf],
    out: &mut PlayRoles,
    depth: usize,
) -> Result<(), RoleError> {
    for task in tasks.as_sequence().into_iter().flatten() {
        for key in ["block", "rescue", "always"] {
            if let Some(inner) = task.get(key) {
                collect_tasks(path, inner, search, out, depth)?;
            }
        }
        for key in [
            "import_role",
            "include_role",
            "ansible.builtin.import_role",
            "ansible.builtin.include_role",
        ] {
            let Some(args) = task.get(key) else { continue };
            let Some(name) = args.get("name").and_then(serde_yaml::Value::as_str) else {
                continue;
            };
            if name.contains("{{") {
                out.unknown.push(name.to_string());
            } else {
                add_role(path, name, search, out, depth)?;
            }
        }
    }
    Ok(())
}

/// The role an entry of `roles:` or `dependencies:` names: a string, or a mapping with
/// `role:` (or `name:`). Anything else is an error naming the file, never skipped.
fn role_name(path: &Path, list: &str, entry: &serde_yaml::Value) -> Result<String, RoleError> {
    let name = match entry {
        serde_yaml::Value::String(s) => Some(s.clone()),
        m => m
            .get("role")
            .or_else(|| m.get("name"))
            .and_then(serde_yaml::Value::as_str)
            .map(str::to_string),
    };
    name.ok_or_else(|| RoleError::Yaml {
        path: path.to_path_buf(),
        message: format!(
            "an entry of `{list}:` names no role (expected a name, or a mapping with `role:`)"
        ),
    })
}

fn add_role(
    path: &Path,
    name: &str,
    search: &[PathBuf],
    out: &mut PlayRoles,
    depth: usize,
) -> Result<(), RoleError> {
    if depth > MAX_DEPTH {
        return Err(RoleError::TooDeep {
            path: path.to_path_buf(),
        });
    }
    if name.contains("{{") {
        out.unknown.push(name.to_string());
        return Ok(());
    }
    if out.roles.iter().any(|(n, _)| n == name) {
        return Ok(());
    }
    // A role may be named by a path; otherwise its name is looked up in each directory.
    let direct = PathBuf::from(name);
    let dir = if direct.is_absolute() && direct.is_dir() {
        Some(direct)
    } else {
        search.iter().map(|d| d.join(name)).find(|d| d.is_dir())
    };
    let Some(dir) = dir else {
        return Err(RoleError::NotFound {
            path: path.to_path_buf(),
            role: name.to_string(),
            looked: search
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    // Dependencies first: Ansible runs (and merges) them before the role itself.
    let meta = ["main.yml", "main.yaml"]
        .iter()
        .map(|f| dir.join("meta").join(f))
        .find(|p| p.is_file());
    if let Some(meta) = meta {
        let doc = read_yaml(&meta)?;
        for dep in doc
            .get("dependencies")
            .and_then(serde_yaml::Value::as_sequence)
            .into_iter()
            .flatten()
        {
            let d = role_name(&meta, "dependencies", dep)?;
            add_role(&meta, &d, search, out, depth + 1)?;
        }
    }
    out.roles.push((name.to_string(), dir));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }

    #[test]
    fn roles_dependencies_and_defaults_in_ansible_order() {
        let d = tempfile::tempdir().expect("tempdir");
        let a = d.path();
        write(a, "ansible.cfg", "[defaults]\nroles_path = extra\n");
        write(a, "playbooks/site.yml", "- import_playbook: one.yml\n");
        write(
            a,
            "playbooks/one.yml",
            "- hosts: all\n  roles:\n    - { role: app }\n  tasks:\n    - import_role: { name: tool }\n    - include_role: { name: \"{{ pick }}\" }\n",
        );
        write(a, "extra/app/meta/main.yml", "dependencies:\n  - base\n");
        write(a, "extra/app/defaults/main.yml", "knob: app\nonly_app: 1\n");
        write(
            a,
            "roles/base/defaults/main.yml",
            "knob: base\nonly_base: 2\n",
        );
        write(a, "roles/tool/vars/main.yml", "tool_var: 3\n");
        let r = play_roles(a, &["playbooks/site.yml".into()]).expect("roles");
        let names: Vec<&str> = r.roles.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["base", "app", "tool"]);
        // A later role's default wins, as Ansible merges them into the play.
        assert_eq!(r.defaults["knob"].value, serde_json::json!("app"));
        assert_eq!(r.defaults["only_base"].value, serde_json::json!(2));
        assert_eq!(r.vars["tool_var"].value, serde_json::json!(3));
        assert_eq!(r.unknown, ["{{ pick }}"]);
    }

    #[test]
    fn an_entry_naming_no_role_and_a_missing_role_are_errors() {
        let d = tempfile::tempdir().expect("tempdir");
        let a = d.path();
        write(a, "p.yml", "- hosts: all\n  roles:\n    - { when: x }\n");
        let e = play_roles(a, &["p.yml".into()]).expect_err("no role named");
        assert!(e.to_string().contains("names no role"), "{e}");
        write(a, "q.yml", "- hosts: all\n  roles: [ghost]\n");
        let e = play_roles(a, &["q.yml".into()]).expect_err("missing role");
        assert!(e.to_string().contains("role `ghost` not found"), "{e}");
    }
}
