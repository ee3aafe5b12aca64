//! The roles a playbook uses, and their defaults and vars: what a runbook's templates see
//! besides the inventory, as Ansible gives it to the play.
//!
//! Owns: reading a playbook (following `import_playbook`), finding the roles it names
//! (`roles:`, `import_role` / `include_role` with a literal name, in tasks, pre_tasks,
//! post_tasks, handlers and blocks), their `dependencies` (meta/main.yml), locating each
//! role directory exactly where ansible-playbook (run in the Ansible directory) looks
//! ([`RoleSearch`]: the playbook's `roles/`, `roles_path` (ansible.cfg or
//! `ANSIBLE_ROLES_PATH`, else Ansible's default under `~/.ansible`), a dependent role's
//! siblings, the playbook's own directory, then the name as a path), and loading
//! `defaults/main.yml` and `vars/main.yml` with positions.
//! Must not: render anything or decide precedence against the inventory (`Repo` does:
//! role defaults lowest, then the inventory, then role vars).
//!
//! A role named by a template (`include_role: name: "{{ x }}"`) cannot be known before the
//! play runs: it is listed in [`PlayRoles::unknown`] so a lookup that fails can say so,
//! never skipped silently. So is a collection role (`ns.collection.role`) found in none of
//! the directories: collections are not read.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::vars::{self, Loaded, VarMap};
use crate::yaml::{self, Node};

/// How deep `import_playbook` and role `dependencies` are followed.
const MAX_DEPTH: usize = 32;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RoleError {
    #[error("{path}: cannot read: {message}")]
    Read { path: PathBuf, message: String },
    #[error("{path}: not YAML: {message}")]
    Yaml { path: PathBuf, message: String },
    #[error("{}:{line}:{col}: role `{role}` not found where ansible-playbook looks ({looked}): ansible-playbook stops with \"the role '{role}' was not found\"\n  fix: move the role into one of those directories, or name its directory in `roles_path` of {cfg}", path.display())]
    NotFound {
        path: PathBuf,
        line: usize,
        col: usize,
        role: String,
        looked: String,
        /// The ansible.cfg that would hold `roles_path`.
        cfg: String,
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
    /// Every playbook file read (the given ones and what they import).
    pub books: Vec<PathBuf>,
    /// The directory of the first playbook given: where ansible-playbook looks for the
    /// play's own `group_vars/` and `host_vars/` (its basedir).
    pub play_dir: Option<PathBuf>,
}

/// Where ansible-playbook, run in the Ansible directory, looks for roles besides the
/// playbook's own directories: the configured `roles_path`, else Ansible's default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleSearch {
    pub roles_path: Vec<PathBuf>,
    /// The ansible.cfg that holds (or would hold) `roles_path`, for the fix in messages.
    pub cfg: PathBuf,
}

use super::ansible_cfg::AnsibleCfg;
pub use super::ansible_cfg::AnsibleEnv;

impl RoleSearch {
    /// As ansible-playbook in `ansible_dir` finds it: `ANSIBLE_ROLES_PATH`, else
    /// `roles_path` in `[defaults]` of the config it reads (`ANSIBLE_CONFIG`, else
    /// `./ansible.cfg`, else `~/.ansible.cfg`, else /etc/ansible/ansible.cfg; relative
    /// paths are relative to that file's directory), else Ansible's default
    /// (`~/.ansible/roles:/usr/share/ansible/roles:/etc/ansible/roles`).
    pub fn new(ansible_dir: &Path, env: &AnsibleEnv) -> RoleSearch {
        let split = |v: &str, base: &Path| -> Vec<PathBuf> {
            v.split(':')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(|p| env.expand(p, base))
                .collect()
        };
        let cfg = AnsibleCfg::load(ansible_dir, env);
        let shown = cfg.shown.clone();
        if let Some(v) = &env.roles_path {
            return RoleSearch {
                roles_path: split(v, ansible_dir),
                cfg: shown,
            };
        }
        if let Some((v, _)) = cfg.get("roles_path") {
            return RoleSearch {
                roles_path: split(v, cfg.base()),
                cfg: shown,
            };
        }
        let ansible_home = env
            .ansible_home
            .clone()
            .or_else(|| env.home.as_ref().map(|h| h.join(".ansible")));
        let mut roles_path: Vec<PathBuf> =
            ansible_home.map(|h| h.join("roles")).into_iter().collect();
        roles_path.push(PathBuf::from("/usr/share/ansible/roles"));
        roles_path.push(PathBuf::from("/etc/ansible/roles"));
        RoleSearch {
            roles_path,
            cfg: shown,
        }
    }
}

impl RoleSearch {
    /// The directory of role `name` named from a playbook in `book_dir` (and, for a
    /// dependency, by a role whose parent directory is `role_basedir`), as ansible-playbook
    /// run in `ansible_dir` finds it; with the directories looked in, for messages.
    /// Ansible's order (RoleDefinition._load_role_path): the playbook's roles/, the
    /// roles_path, a dependent role's directory, the playbook's directory, then the name as
    /// a path from the working directory.
    pub fn find(
        &self,
        ansible_dir: &Path,
        book_dir: &Path,
        role_basedir: Option<&Path>,
        name: &str,
    ) -> (Option<PathBuf>, Vec<PathBuf>) {
        let mut dirs = vec![book_dir.join("roles")];
        dirs.extend(self.roles_path.iter().cloned());
        if let Some(b) = role_basedir {
            dirs.push(b.to_path_buf());
        }
        dirs.push(book_dir.to_path_buf());
        let found = dirs
            .iter()
            .map(|d| d.join(name))
            .chain(std::iter::once(ansible_dir.join(name)))
            .find(|d| d.is_dir());
        (found, dirs)
    }
}

/// The roles of `playbooks` (paths relative to `ansible_dir`), searched for as
/// ansible-playbook run there with this process's environment would.
pub fn play_roles(ansible_dir: &Path, playbooks: &[String]) -> Result<PlayRoles, RoleError> {
    let search = RoleSearch::new(ansible_dir, &AnsibleEnv::from_process());
    play_roles_with(ansible_dir, playbooks, &search)
}

/// [`play_roles`] with the search given.
pub fn play_roles_with(
    ansible_dir: &Path,
    playbooks: &[String],
    search: &RoleSearch,
) -> Result<PlayRoles, RoleError> {
    let mut out = PlayRoles {
        play_dir: playbooks
            .first()
            .and_then(|pb| ansible_dir.join(pb).parent().map(Path::to_path_buf)),
        ..PlayRoles::default()
    };
    let mut seen_books = BTreeSet::new();
    for pb in playbooks {
        let walk = Walk {
            ansible_dir,
            search,
        };
        walk.playbook(&ansible_dir.join(pb), &mut out, &mut seen_books, 0)?;
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

fn read_yaml(path: &Path) -> Result<Node, RoleError> {
    let text = super::read::read_text(path).map_err(|e| RoleError::Read {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    // The bounded loader, as for every repo file; its nodes carry the line and column a
    // role-not-found names.
    yaml::parse_one(&text).map_err(|e| RoleError::Yaml {
        path: path.to_path_buf(),
        message: format!("{}:{}: {}", e.mark.line, e.mark.col, e.message),
    })
}

/// One walk over playbooks and roles.
struct Walk<'a> {
    ansible_dir: &'a Path,
    search: &'a RoleSearch,
}

/// Where a role is named: the file, the node, and the directories of the playbook that
/// names it (directly or through a dependent role).
struct Naming<'a> {
    file: &'a Path,
    book_dir: &'a Path,
    /// A dependent role's parent directory: its siblings are searched too.
    role_basedir: Option<&'a Path>,
}

impl Walk<'_> {
    fn playbook(
        &self,
        path: &Path,
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
        out.books.push(path.to_path_buf());
        let doc = read_yaml(path)?;
        let book_dir = path.parent().unwrap_or(self.ansible_dir).to_path_buf();
        let at = Naming {
            file: path,
            book_dir: &book_dir,
            role_basedir: None,
        };
        for play in doc.as_seq().into_iter().flatten() {
            if let Some(imported) = play
                .get("import_playbook")
                .or_else(|| play.get("ansible.builtin.import_playbook"))
                .and_then(Node::as_str)
            {
                if !imported.contains("{{") {
                    self.playbook(&book_dir.join(imported), out, seen, depth + 1)?;
                }
                continue;
            }
            for r in play
                .get("roles")
                .and_then(Node::as_seq)
                .into_iter()
                .flatten()
            {
                let name = role_name(path, "roles", r)?;
                self.add_role(&at, &name, r, out, depth)?;
            }
            for section in ["pre_tasks", "tasks", "post_tasks", "handlers"] {
                if let Some(tasks) = play.get(section) {
                    self.tasks(&at, tasks, out, depth)?;
                }
            }
        }
        Ok(())
    }

    /// `import_role` / `include_role` in a task list, blocks included.
    fn tasks(
        &self,
        at: &Naming<'_>,
        tasks: &Node,
        out: &mut PlayRoles,
        depth: usize,
    ) -> Result<(), RoleError> {
        for task in tasks.as_seq().into_iter().flatten() {
            for key in ["block", "rescue", "always"] {
                if let Some(inner) = task.get(key) {
                    self.tasks(at, inner, out, depth)?;
                }
            }
            for key in [
                "import_role",
                "include_role",
                "ansible.builtin.import_role",
                "ansible.builtin.include_role",
            ] {
                let Some(args) = task.get(key) else { continue };
                let Some(name_node) = args.get("name") else {
                    continue;
                };
                let Some(name) = name_node.as_str() else {
                    continue;
                };
                self.add_role(at, name, name_node, out, depth)?;
            }
        }
        Ok(())
    }

    fn add_role(
        &self,
        at: &Naming<'_>,
        name: &str,
        node: &Node,
        out: &mut PlayRoles,
        depth: usize,
    ) -> Result<(), RoleError> {
        if depth > MAX_DEPTH {
            return Err(RoleError::TooDeep {
                path: at.file.to_path_buf(),
            });
        }
        if name.contains("{{") {
            out.unknown.push(name.to_string());
            return Ok(());
        }
        if out.roles.iter().any(|(n, _)| n == name) {
            return Ok(());
        }
        let (found, dirs) = self
            .search
            .find(self.ansible_dir, at.book_dir, at.role_basedir, name);
        let Some(dir) = found else {
            // `ns.collection.role`: a collection's, which is not read here.
            if name.split('.').count() >= 3 && !name.contains('/') {
                out.unknown.push(name.to_string());
                return Ok(());
            }
            return Err(RoleError::NotFound {
                path: at.file.to_path_buf(),
                line: node.mark.line,
                col: node.mark.col,
                role: name.to_string(),
                looked: dirs
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(":"),
                cfg: self.search.cfg.display().to_string(),
            });
        };
        // Dependencies first: Ansible runs (and merges) them before the role itself.
        let meta = ["main.yml", "main.yaml"]
            .iter()
            .map(|f| dir.join("meta").join(f))
            .find(|p| p.is_file());
        if let Some(meta) = meta {
            let doc = read_yaml(&meta)?;
            let parent = dir.parent().map(Path::to_path_buf);
            let dep_at = Naming {
                file: &meta,
                book_dir: at.book_dir,
                role_basedir: parent.as_deref(),
            };
            for dep in doc
                .get("dependencies")
                .and_then(Node::as_seq)
                .into_iter()
                .flatten()
            {
                let d = role_name(&meta, "dependencies", dep)?;
                self.add_role(&dep_at, &d, dep, out, depth + 1)?;
            }
        }
        out.roles.push((name.to_string(), dir));
        Ok(())
    }
}

/// The role an entry of `roles:` or `dependencies:` names: a string, or a mapping with
/// `role:` (or `name:`). Anything else is an error naming the file, never skipped.
fn role_name(path: &Path, list: &str, entry: &Node) -> Result<String, RoleError> {
    let name = match entry.as_str() {
        Some(s) => Some(s.to_string()),
        None => entry
            .get("role")
            .or_else(|| entry.get("name"))
            .and_then(Node::as_str)
            .map(str::to_string),
    };
    name.ok_or_else(|| RoleError::Yaml {
        path: path.to_path_buf(),
        message: format!(
            "{}:{}: an entry of `{list}:` names no role (expected a name, or a mapping with `role:`)",
            entry.mark.line, entry.mark.col
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }

    /// The search with HOME in the test's directory, no ANSIBLE_* variables.
    fn pinned(a: &Path) -> RoleSearch {
        RoleSearch::new(
            a,
            &AnsibleEnv {
                home: Some(a.join("home")),
                ..AnsibleEnv::default()
            },
        )
    }

    #[test]
    fn roles_dependencies_and_defaults_in_ansible_order() {
        let d = tempfile::tempdir().expect("tempdir");
        let a = d.path();
        // Both directories named: Ansible looks in neither the Ansible directory's roles/
        // nor beside it unless roles_path says so.
        write(a, "ansible.cfg", "[defaults]\nroles_path = extra:roles\n");
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
        let r = play_roles_with(a, &["playbooks/site.yml".into()], &pinned(a)).expect("roles");
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
        let e = play_roles_with(a, &["p.yml".into()], &pinned(a)).expect_err("no role named");
        assert!(e.to_string().contains("names no role"), "{e}");
        write(a, "q.yml", "- hosts: all\n  roles: [ghost]\n");
        let e = play_roles_with(a, &["q.yml".into()], &pinned(a)).expect_err("missing role");
        assert!(
            e.to_string()
                .contains("role `ghost` not found where ansible-playbook looks"),
            "{e}"
        );
        // Named at the playbook's line and column, as ansible-playbook names it.
        assert!(
            e.to_string()
                .starts_with(&format!("{}:2:11: ", a.join("q.yml").display())),
            "{e}"
        );
    }
}
