//! What stops a run before its first step, found before it starts: only what ansible-playbook
//! itself would stop on.
//!
//! Owns: the blockers of a runbook's playbooks on the hosts it plans for: a playbook that
//! does not exist, a role ansible-playbook will not find (the playbook's FILE:LINE), a
//! whole-file vault it loads for those hosts that no configured password opens, and a
//! device placeholder (`/dev/BLOCKED-…`, [`DEVICE_PLACEHOLDER_PREFIX`]) those
//! hosts hold for a variable the playbooks (or their roles) use when run without `--tags`.
//! Each says what to do. Also [`vault_locked`], the vault part alone, which `check` reports
//! per environment.
//! Must not: run anything, show or return a decrypted value (repo::vault tries the
//! passwords), or call something a blocker on a guess: a vault that only a password script
//! (not run here) or a prompt might open, a collection role and a tagged run are not
//! judged. A vault identity list's files are tried like the password file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The value a device variable holds until the operator names the real disk (the seed
/// writes `/dev/BLOCKED-…`): a play that uses it would format a device that is not there.
pub const DEVICE_PLACEHOLDER_PREFIX: &str = "/dev/BLOCKED-";
use crate::repo::roles::RoleError;
use crate::repo::vault::{self, Opens};
use crate::repo::Repo;
use crate::runbook::plan::{Blocker, PlaybookUse};

/// Blocker kinds, as `[kind]` in messages and `kind` in JSON.
pub mod kinds {
    pub const MISSING_PLAYBOOK: &str = "missing-playbook";
    pub const ROLE_NOT_FOUND: &str = "role-not-found";
    pub const PLAYBOOK_UNREADABLE: &str = "playbook-unreadable";
    pub const VAULT_LOCKED: &str = "vault-locked";
    pub const DEVICE_PLACEHOLDER: &str = "device-placeholder";
}

/// Files of a role directory read for variable uses, at most.
const MAX_ROLE_FILES: usize = 2_000;

/// The blockers of `uses` (playbooks relative to the Ansible directory) on `hosts`.
pub fn for_plan(repo: &Repo, uses: &[PlaybookUse], hosts: &[String]) -> Vec<Blocker> {
    let rel = |p: &Path| repo.rel(p);
    let mut out = Vec::new();
    // The files each untagged playbook reads (itself, what it imports, its roles' files).
    let mut untagged_files: Vec<PathBuf> = Vec::new();
    let mut book_dirs: BTreeSet<PathBuf> = BTreeSet::new();
    for u in uses {
        let path = repo.ansible_dir.join(&u.playbook);
        if !path.is_file() {
            out.push(Blocker {
                kind: kinds::MISSING_PLAYBOOK.into(),
                at: rel(&path),
                message: format!(
                    "the playbook `{}` does not exist (ansible-playbook runs in {}): it stops with \"the playbook: {} could not be found\"",
                    u.playbook,
                    match rel(&repo.ansible_dir) {
                        d if d.is_empty() => "the repo's top directory".to_string(),
                        d => d,
                    },
                    u.playbook
                ),
                fix: "restore the playbook in the infra repo, or correct `playbook:` in the runbook"
                    .into(),
            });
            continue;
        }
        if let Some(d) = path.parent() {
            book_dirs.insert(d.to_path_buf());
        }
        match repo.play_roles(std::slice::from_ref(&u.playbook)) {
            Ok(roles) => {
                if !u.tagged {
                    untagged_files.extend(roles.books.iter().cloned());
                    for (_, dir) in &roles.roles {
                        untagged_files.extend(files_under(dir));
                    }
                }
            }
            Err(RoleError::NotFound {
                path,
                line,
                col,
                role,
                looked,
                cfg,
            }) => out.push(Blocker {
                kind: kinds::ROLE_NOT_FOUND.into(),
                at: format!("{}:{line}:{col}", rel(&path)),
                message: format!(
                    "the role `{role}` is not where ansible-playbook looks ({looked}): it stops with \"the role '{role}' was not found\""
                ),
                fix: format!(
                    "move the role into one of those directories, or add its parent directory to `roles_path` in {}",
                    rel(Path::new(&cfg))
                ),
            }),
            Err(e) => out.push(Blocker {
                kind: kinds::PLAYBOOK_UNREADABLE.into(),
                at: rel(&path),
                message: format!("ansible-playbook cannot load it: {e}"),
                fix: "correct the file named".into(),
            }),
        }
    }
    out.extend(vault_locked_in(repo, hosts, &book_dirs));
    out.extend(placeholders(repo, hosts, &untagged_files));
    out.dedup();
    out
}

/// The whole-file vaults ansible-playbook loads for `hosts` (their groups' and their own
/// group_vars/host_vars beside the inventory) that no configured password opens.
pub fn vault_locked(repo: &Repo, hosts: &[String]) -> Vec<Blocker> {
    vault_locked_in(repo, hosts, &BTreeSet::new())
}

fn vault_locked_in(repo: &Repo, hosts: &[String], book_dirs: &BTreeSet<PathBuf>) -> Vec<Blocker> {
    let rel = |p: &Path| repo.rel(p);
    // A configured password file that is not there stops ansible-playbook before its first
    // play, whether anything is vaulted or not (ansible-core 2.19: "[ERROR]: The vault
    // password file ... was not found"; tests/public_repos.rs runs it).
    if let Some((file, source)) = vault::password_file_source(&repo.ansible_dir) {
        if std::fs::symlink_metadata(&file).is_err() {
            let (at, named) = match source {
                Some((cfg, line)) => (
                    format!("{}:{line}", rel(&cfg)),
                    format!("`vault_password_file` of {}", rel(&cfg)),
                ),
                None => (rel(&file), "ANSIBLE_VAULT_PASSWORD_FILE".to_string()),
            };
            return vec![Blocker {
                kind: kinds::VAULT_LOCKED.into(),
                at,
                message: format!(
                    "the vault password file {} ({named}) is not there: ansible-playbook stops before any play with \"The vault password file ... was not found\", whether anything is vaulted or not",
                    rel(&file)
                ),
                fix: format!(
                    "create {} as the repo's README says (the vault's password, one line), or remove {named}",
                    rel(&file)
                ),
            }];
        }
    }
    let mut dirs: Vec<PathBuf> = repo
        .inventory_path
        .parent()
        .map(Path::to_path_buf)
        .into_iter()
        .collect();
    dirs.extend(book_dirs.iter().cloned());
    let mut groups: BTreeSet<String> = BTreeSet::new();
    for h in hosts {
        groups.extend(repo.inventory.groups_of(h));
    }
    let host_set: BTreeSet<String> = hosts.iter().cloned().collect();
    let mut files: BTreeSet<PathBuf> = BTreeSet::new();
    for d in &dirs {
        for (sub, names) in [("group_vars", &groups), ("host_vars", &host_set)] {
            for name in names {
                let base = d.join(sub).join(name);
                files.extend(files_under(&base));
                for ext in ["", ".yml", ".yaml", ".json"] {
                    let f = d.join(sub).join(format!("{name}{ext}"));
                    if f.is_file() {
                        files.insert(f);
                    }
                }
            }
        }
    }
    let sources = vault::password_sources(&repo.ansible_dir);
    // The sources as the operator reads them: paths relative to the repo.
    let named = sources
        .iter()
        .map(|s| match &s.kind {
            vault::SourceKind::File(p) => rel(p),
            vault::SourceKind::Prompt => s.what.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ");
    let mut out = Vec::new();
    for f in files {
        let Ok(text) = crate::repo::read::read_to_string(&f) else {
            continue;
        };
        if !text.starts_with("$ANSIBLE_VAULT") {
            continue;
        }
        let (message, fix) = match vault::opens_by(&text, &sources) {
            Opens::Yes | Opens::Undecided(_) => continue,
            Opens::NoPassword => (
                "vaulted, and no vault password is configured: ansible-playbook stops with \"Attempting to decrypt but no vault secrets found\"".to_string(),
                format!(
                    "name the password file in `vault_password_file` of {} (or ANSIBLE_VAULT_PASSWORD_FILE), or its vault ids in `vault_identity_list`",
                    rel(&repo.ansible_dir.join("ansible.cfg"))
                ),
            ),
            Opens::Unreadable(why) => (
                format!("vaulted, and the configured vault password file cannot be read ({why}): ansible-playbook cannot decrypt it"),
                "create the password file, or correct `vault_password_file` in ansible.cfg".to_string(),
            ),
            Opens::Fails(e) => (
                format!(
                    "vaulted, and the configured vault password ({named}) does not open it: {e}; ansible-playbook stops with \"Decryption failed\"",
                ),
                "point `vault_password_file` at the password it was encrypted with, or re-key it (ansible-vault rekey)".to_string(),
            ),
        };
        out.push(Blocker {
            kind: kinds::VAULT_LOCKED.into(),
            at: rel(&f),
            message,
            fix,
        });
    }
    out
}

/// Device placeholders of `hosts` for variables `files` use.
fn placeholders(repo: &Repo, hosts: &[String], files: &[PathBuf]) -> Vec<Blocker> {
    let rel = |p: &Path| repo.rel(p);
    if files.is_empty() {
        return Vec::new();
    }
    let texts: Vec<(PathBuf, String)> = files
        .iter()
        .filter_map(|f| Some((f.clone(), crate::repo::read::read_to_string(f).ok()?)))
        .collect();
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for h in hosts {
        let Some(vars) = repo.inventory.host_vars(h) else {
            continue;
        };
        for (name, var) in vars {
            let Some(value) = var.value.as_str() else {
                continue;
            };
            if var.secret || !value.starts_with(DEVICE_PLACEHOLDER_PREFIX) {
                continue;
            }
            let at = format!("{}:{}", rel(&var.origin.file), var.origin.line);
            if !seen.insert((name.clone(), at.clone())) {
                continue;
            }
            let Some(used) = texts
                .iter()
                .find_map(|(f, t)| word_line(t, name).map(|line| format!("{}:{line}", rel(f))))
            else {
                continue;
            };
            out.push(Blocker {
                kind: kinds::DEVICE_PLACEHOLDER.into(),
                at,
                message: format!(
                    "`{name}` is the placeholder `{value}` (for {h}) and {used} uses it: the play stops where it is templated"
                ),
                fix: format!(
                    "decide the device and set `{name}` to it, or run only tags that do not template it"
                ),
            });
        }
    }
    out
}

/// The 1-based line where `word` first occurs as a whole identifier.
fn word_line(text: &str, word: &str) -> Option<usize> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.lines()
        .position(|line| {
            line.match_indices(word).any(|(i, _)| {
                let before = line[..i].chars().next_back();
                let after = line[i + word.len()..].chars().next();
                !before.is_some_and(ident) && !after.is_some_and(ident)
            })
        })
        .map(|i| i + 1)
}

/// Regular files under `dir` (not following symbolic links), sorted, bounded.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    crate::repo::read::files_under(dir, MAX_ROLE_FILES, &|_, _| true)
}
