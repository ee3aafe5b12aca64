//! The IO side of the parity check: a [`crate::checks::parity::RepoView`] over a loaded repo
//! (its files read from disk, its overlays built with the engine hk-console.yaml and PATH
//! give), mapped to facts by the pure `checks::parity::gather_view`.
//!
//! Owns: choosing the engine once per run and reading files for the check.
//! Must not: judge anything (the rules live in `checks::parity`).
//!
//! Why here, beside `checks` and `repo` rather than inside either: it needs both (the repo
//! to read, the check's view to fill), and `checks` already depends on `repo`; inside `repo`
//! it made the two folders import each other.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::checks::parity::{gather_view, ParityInput, RawVar, RepoView};
use crate::repo::flux::{report, BuildRunner, EngineChoice};
use crate::repo::Repo;

/// The engine for `repo`: its `kustomize_bin:`, else kustomize or kubectl on PATH, a binary
/// run by `runner` (the effects' `exec::kustomize`: the engine starts no process).
pub fn engine_for(repo: &Repo, runner: Arc<dyn BuildRunner>) -> EngineChoice {
    EngineChoice::detect(
        &repo.root,
        repo.config.kustomize_bin.as_deref(),
        std::env::var_os("PATH"),
        runner,
    )
}

/// Gather the facts of a loaded repo. Reads, besides what the repo already loaded, the Flux
/// overlays (built by the engine [`engine_for`] picks, a binary run by `runner`), the
/// Cilium values template, `site.yml`, each environment's vault file, and whether the
/// configured vault password opens the vaults its servers load.
pub fn parity_input(repo: &Repo, runner: Arc<dyn BuildRunner>) -> ParityInput {
    parity_input_with(repo, &engine_for(repo, runner))
}

/// [`parity_input`] with the engine given.
pub fn parity_input_with(repo: &Repo, choice: &EngineChoice) -> ParityInput {
    let host_vars = |host: &str| -> Vec<RawVar> {
        repo.inventory
            .host_vars(host)
            .map(|vars| {
                vars.iter()
                    .map(|(name, v)| RawVar {
                        name: name.clone(),
                        value: v.value.clone(),
                        file: v.origin.file.to_path_buf(),
                        line: v.origin.line,
                        secret: v.secret,
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let resolved = |host: &str, var: &str| repo.resolve_var(host, var);
    let render =
        |host: &str, template: &str| crate::repo::env::HostFacts::rendered(repo, host, template);
    let read = |path: &Path| crate::repo::read::read_to_string(path).ok();
    let flux = |overlay: &Path, var: &str| report(&repo.root, overlay, choice, var);
    let rel = |path: &Path| rel_to(&repo.root, path);
    // Repo::ansible_dir is already under the root; the view wants it relative to the root.
    let ansible_dir = repo
        .ansible_dir
        .strip_prefix(&repo.root)
        .unwrap_or(&repo.ansible_dir);
    // The Ansible side, and the manifests beside it (a k3s HelmChart, a Flux HelmRelease)
    // when the Ansible directory is a part of the repo.
    let mut api_uses = ansible_api_uses(&repo.root, &repo.ansible_dir);
    if repo.ansible_dir != repo.root {
        let ansible = repo.ansible_dir.clone();
        api_uses.extend(
            ansible_api_uses(&repo.root, &repo.root)
                .into_iter()
                .filter(|u| !repo.root.join(&u.at.file).starts_with(&ansible)),
        );
    }
    let mut input = gather_view(&RepoView {
        root: &repo.root,
        ansible_dir,
        environments: &repo.environments,
        host_vars: &host_vars,
        resolved: &resolved,
        read: &read,
        flux: &flux,
        engine_line: Some(choice.describe()),
        rel: &rel,
        contract: &repo.config.contract,
        api_uses: &api_uses,
        render: &render,
    });
    // The vaults each environment's servers load, tried with the configured password.
    for facts in &mut input.envs {
        if let Some(env) = repo.environment(&facts.name) {
            let hosts: Vec<String> = env.servers.iter().map(|s| s.name.clone()).collect();
            facts.vault_locked = crate::repo::blockers::vault_locked(repo, &hosts);
        }
    }
    input
}

/// `path` relative to the repo root, for findings; the inventory may report absolute paths
/// while the root was given relative (or the other way round).
fn rel_to(root: &Path, path: &Path) -> PathBuf {
    if let Ok(rel) = path.strip_prefix(root) {
        return rel.to_path_buf();
    }
    if let (Ok(abs_root), Ok(abs_path)) = (root.canonicalize(), path.canonicalize()) {
        if let Ok(rel) = abs_path.strip_prefix(&abs_root) {
            return rel.to_path_buf();
        }
    }
    if let Ok(abs_root) = root.canonicalize() {
        if let Ok(rel) = path.strip_prefix(&abs_root) {
            return rel.to_path_buf();
        }
    }
    path.to_path_buf()
}

/// The API URLs the Ansible directory's files write from a variable (playbooks, roles'
/// tasks and templates): every `.yml`, `.yaml` and `.j2` under it, hidden directories
/// skipped, in path order so the findings come in one order every run. Bounded: at most
/// `MAX_FILES` files of at most `MAX_BYTES` each are read (an Ansible tree is far smaller).
fn ansible_api_uses(root: &Path, ansible_dir: &Path) -> Vec<crate::checks::parity::ApiUse> {
    const MAX_FILES: usize = 20_000;
    const MAX_BYTES: u64 = 1 << 20;
    let files = crate::repo::read::files_under(ansible_dir, MAX_FILES, &|e, is_dir| {
        let path = e.path();
        !e.file_name().to_string_lossy().starts_with('.')
            && (is_dir
                || path
                    .extension()
                    .is_some_and(|x| x == "yml" || x == "yaml" || x == "j2"))
    });
    let mut out = Vec::new();
    for path in files {
        if std::fs::metadata(&path).map_or(true, |m| m.len() > MAX_BYTES) {
            continue;
        }
        let Ok(text) = crate::repo::read::read_to_string(&path) else {
            continue;
        };
        out.extend(crate::checks::parity::api_uses_in(
            &rel_to(root, &path),
            &text,
        ));
    }
    out
}
