//! `runbooks list` and `runbooks validate`.

use std::path::PathBuf;

use super::{print_json, Cli, CmdResult, Failure, Status};
use crate::context::{load_runbooks, read_runbook_dir};
use crate::runbook::embedded;
use crate::runbook::validate::validate_text;

pub(super) fn list(cli: &Cli, json: bool) -> CmdResult {
    let set = load_runbooks(cli.runbooks.as_deref())?;
    if json {
        let rows: Vec<serde_json::Value> = set
            .iter()
            .map(|l| {
                serde_json::json!({
                    "id": l.runbook.id,
                    "title": l.runbook.title,
                    "environments": l.runbook.environments,
                    "mutates": l.runbook.mutates(),
                    "source": l.runbook.source,
                    "overrides_shipped": l.overrides_shipped().is_some(),
                })
            })
            .collect();
        print_json(&rows)?;
        return Ok(Status::Clean);
    }
    for l in set.iter() {
        let rb = &l.runbook;
        // A replaced shipped id must not look like the shipped runbook.
        let overrides = l
            .overrides_shipped()
            .map(|file| format!("  (overrides the shipped runbook: {file})"))
            .unwrap_or_default();
        outln!(
            "{:<26} {:<9} {:<10} {}{overrides}",
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
