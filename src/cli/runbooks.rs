//! `runbooks list` and `runbooks validate`.

use std::path::PathBuf;

use super::{print_json, Cli, CmdResult, Failure, Status};
use crate::context::{read_runbook_dir, NotOffered};
use crate::runbook::embedded::{self, Origin};
use crate::runbook::validate::validate_text;

pub(super) fn list(cli: &Cli, json: bool, all: bool) -> CmdResult {
    let set = super::runbooks_of(cli)?;
    // Where the repo loads, what is not offered on it (context::not_offered: written for
    // none of its environments, or built in with playbooks it lacks), and why.
    let repo = super::repo_root(cli.repo.as_deref())
        .ok()
        .and_then(|root| crate::repo::Repo::load(&root).ok());
    let hidden = |l: &crate::runbook::embedded::Loaded| {
        repo.as_ref()
            .and_then(|r| crate::context::not_offered(r, l))
    };
    if json {
        let rows: Vec<serde_json::Value> = set
            .iter()
            .map(|l| {
                let why = hidden(l);
                serde_json::json!({
                    "id": l.runbook.id,
                    "title": l.runbook.title,
                    "environments": l.runbook.environments,
                    "mutates": l.runbook.mutates(),
                    "source": l.runbook.source,
                    "overrides_shipped": l.overrides_shipped().is_some(),
                    // Which layer won (built-in < the repo's runbooks/ < --runbooks),
                    // and what it replaced.
                    "origin": l.origin.describe(),
                    "replaced": l.replaced.as_ref().map(|o| o.describe()),
                    // False: not offered on this repo; `not_offered` says why.
                    "applies": why.is_none(),
                    "not_offered": why.map(|w| w.to_string()),
                })
            })
            .collect();
        print_json(&rows)?;
        return Ok(Status::Clean);
    }
    let mut elsewhere: Vec<String> = Vec::new();
    let mut lacking: Vec<String> = Vec::new();
    for l in set.iter() {
        let rb = &l.runbook;
        let why = hidden(l);
        if let (Some(why), false) = (&why, all) {
            match why {
                NotOffered::Lacks(_) => lacking.push(format!("{} ({why})", rb.id)),
                NotOffered::OtherEnvironments(_) => {
                    elsewhere.push(format!("{} ({})", rb.id, rb.environments.join(",")))
                }
            }
            continue;
        }
        // A replaced shipped id must not look like the shipped runbook.
        // Which layer won, and what it replaced: built-in < the repo's runbooks/ <
        // --runbooks.
        let overrides = match (&l.origin, l.overrides_shipped(), &l.replaced) {
            (_, Some(file), Some(Origin::Embedded) | None) => {
                format!("  (overrides the shipped runbook: {file})")
            }
            (_, Some(file), Some(below)) => format!(
                "  (overrides the shipped runbook: {file}; replaces {})",
                below.describe()
            ),
            (Origin::Embedded, _, _) => String::new(),
            (origin, None, Some(below)) => {
                format!("  ({}; replaces {})", origin.describe(), below.describe())
            }
            (origin, None, None) => format!("  ({})", origin.describe()),
        };
        let not_here = why
            .map(|w| format!("  [not offered here: {w}]"))
            .unwrap_or_default();
        outln!(
            "{:<26} {:<9} {:<10} {}{overrides}{not_here}",
            rb.id,
            if rb.mutates() {
                "mutating"
            } else {
                "read-only"
            },
            rb.environments.join(","),
            rb.title
        );
    }
    if !elsewhere.is_empty() {
        outln!(
            "not for this repo (its environments: {}): {}",
            repo.as_ref()
                .map(|r| r.environment_names().join(", "))
                .unwrap_or_default(),
            elsewhere.join(", ")
        );
    }
    if !lacking.is_empty() {
        outln!("not offered here: {}", lacking.join("; "));
    }
    if !elsewhere.is_empty() || !lacking.is_empty() {
        outln!("(`hk-console runbooks list --all` lists them with the others)");
    }
    Ok(Status::Clean)
}

pub(super) fn validate(cli: &Cli, paths: &[PathBuf]) -> CmdResult {
    let mut files: Vec<(String, String)> = Vec::new();
    if paths.is_empty() {
        files.extend(
            embedded::embedded()
                .iter()
                .map(|(name, text)| (format!("runbooks/{name}"), text.to_string())),
        );
        // The repo's own runbooks/ and --runbooks, as every command loads them.
        if let Some(dir) = super::repo_root(cli.repo.as_deref())
            .ok()
            .and_then(|r| crate::context::repo_runbooks_dir(&r))
        {
            files.extend(read_runbook_dir(&dir)?);
        }
        if let Some(dir) = &cli.runbooks {
            files.extend(read_runbook_dir(dir)?);
        }
    }
    for p in paths {
        if p.is_dir() {
            files.extend(read_runbook_dir(p)?);
        } else {
            let text = crate::repo::read::read_to_string(p)
                .map_err(|e| Failure::msg(format!("{}: cannot read: {e}", p.display())))?;
            files.push((p.display().to_string(), text));
        }
    }
    let mut errors = 0;
    for (name, text) in &files {
        for w in crate::runbook::validate::raw_shell_splices(name, text) {
            errln!("warning: {w}");
        }
        if let Err(diags) = validate_text(name, text) {
            errors += diags.len();
            for d in diags {
                errln!("{d}");
            }
        }
    }
    if errors > 0 {
        errln!("{errors} error(s) in {} file(s) checked", files.len());
        return Ok(Status::CouldNotRun);
    }
    outln!("ok: {} runbook file(s) valid", files.len());
    Ok(Status::Clean)
}

/// `runbooks new --playbook P [--id ID] [--out FILE]` (logic: repo::scaffold).
pub(super) fn new(
    cli: &Cli,
    playbook: &str,
    id: Option<&str>,
    out: Option<&std::path::Path>,
) -> CmdResult {
    let repo = super::load_repo(cli)?;
    let text = crate::repo::scaffold::scaffold(&repo, playbook, id)
        .map_err(|e| Failure::msg(e.to_string()))?;
    match out {
        None => outln!("{}", text.trim_end()),
        Some(path) => {
            use std::io::Write as _;
            // Relative to the repo, like --playbook is to its Ansible directory: the runbook
            // belongs to the repo whatever directory the command was typed in.
            let path = &repo.root.join(path);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| {
                    Failure::msg(format!("{}: cannot create the folder: {e}", dir.display()))
                })?;
            }
            // create_new: an existing file (the operator's edited runbook) is never replaced.
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
                .map_err(|e| {
                    Failure::msg(if e.kind() == std::io::ErrorKind::AlreadyExists {
                        format!(
                            "{}: already exists; not overwritten (choose another --out, or remove it)",
                            path.display()
                        )
                    } else {
                        format!("{}: cannot create: {e}", path.display())
                    })
                })?;
            f.write_all(text.as_bytes())
                .map_err(|e| Failure::msg(format!("{}: cannot write: {e}", path.display())))?;
            errln!(
                "wrote {}: review its `# QUESTION:` lines, then `hk-console runbooks validate {}`",
                path.display(),
                path.display()
            );
        }
    }
    Ok(Status::Clean)
}
