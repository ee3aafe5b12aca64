//! A host's variables as the play of a playbook sees them, each with where it came from.
//!
//! Owns: stacking the layers Ansible gives a play, lowest precedence first: the defaults of
//! the roles the playbook uses (`repo::roles`), the inventory's layers (`[g:vars]`,
//! `group_vars/`, the host line, `host_vars/`, in `repo::inventory`'s order), then the roles'
//! `vars/`; naming for every variable the layer and `file:line:col` that won and the ones it
//! beat; rendering the Jinja of the winners against that same stack.
//! Must not: run Ansible, or decrypt anything (a `!vault` value stays masked and is not
//! rendered). Runbook `defaults:` are not a play's: they belong to `plan` (`runbook::plan`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::inventory::Inventory;
use super::resolve::{Resolved, Resolver};
use super::roles::{self, PlayRoles, RoleError};
use super::vars::{Origin, Var, VarMap};

#[derive(Debug, thiserror::Error)]
pub enum ProvenanceError {
    #[error("no host `{host}` in {}", inventory.display())]
    NoHost { host: String, inventory: PathBuf },
    #[error(transparent)]
    Roles(#[from] RoleError),
    #[error("{0}")]
    PlayFiles(String),
}

/// One variable as the play sees it.
#[derive(Debug, Clone)]
pub struct PlayVar {
    /// The winning definition: raw value (Jinja not rendered), where, whether secret.
    pub var: Var,
    /// The layer it won in: `role defaults (app)`, `group_vars/web`, `[web:vars]`,
    /// `host line of w1`, `host_vars/w1`, `role vars (app)`.
    pub layer: String,
    /// Definitions it overrode, lowest first (layer, where).
    pub overrides: Vec<(String, Origin)>,
    /// The value rendered against the play's variables; `None` for a secret.
    pub resolved: Option<Resolved>,
}

/// The variables of one host in one play.
#[derive(Debug, Clone)]
pub struct PlayView {
    pub host: String,
    /// The roles the playbook uses, in the order Ansible applies them.
    pub roles: Vec<String>,
    /// Roles named by a template: their defaults and vars cannot be known before the run.
    pub unknown_roles: Vec<String>,
    pub vars: BTreeMap<String, PlayVar>,
    /// The vars files the play would load that are vaulted, not read (the inventory's, then
    /// the playbook's own): their variables are not in `vars`.
    pub vaulted: Vec<PathBuf>,
}

/// `host`'s variables in the play of `playbooks` (paths relative to `ansible_dir`, where
/// `ansible.cfg` and `roles/` are looked up as `ansible-playbook` run there would).
pub fn play_view(
    inv: &Inventory,
    ansible_dir: &Path,
    playbooks: &[String],
    host: &str,
    resolver: &Resolver,
) -> Result<PlayView, ProvenanceError> {
    let roles = roles::play_roles(ansible_dir, playbooks)?;
    let play = match &roles.play_dir {
        Some(dir) => inv
            .play_files(dir)
            .map_err(|e| ProvenanceError::PlayFiles(e.to_string()))?,
        None => None,
    };
    view_with_roles(inv, &roles, play.as_ref(), host, resolver)
}

/// As [`play_view`], with the roles already read (`Repo::play_roles` caches them).
pub fn view_with_roles(
    inv: &Inventory,
    roles: &PlayRoles,
    play: Option<&super::inventory::PlayFiles>,
    host: &str,
    resolver: &Resolver,
) -> Result<PlayView, ProvenanceError> {
    let no_host = || ProvenanceError::NoHost {
        host: host.to_string(),
        inventory: inv.path().to_path_buf(),
    };
    let inventory_layers = inv.host_var_layers_in(host, play).ok_or_else(no_host)?;
    let mut layers: Vec<(String, &VarMap)> = Vec::new();
    // Role defaults and vars are each one merged map; the layer name says which role's
    // file a value came from.
    let role_of = |origin: &Origin| {
        roles
            .roles
            .iter()
            .rev()
            .find(|(_, dir)| origin.file.starts_with(dir))
            .map_or_else(|| "?".to_string(), |(name, _)| name.clone())
    };
    layers.push(("role defaults".into(), &roles.defaults));
    layers.extend(inventory_layers);
    layers.push(("role vars".into(), &roles.vars));

    let mut vars: BTreeMap<String, PlayVar> = BTreeMap::new();
    for (label, layer) in layers {
        for (name, var) in layer {
            let label = match label.as_str() {
                "role defaults" | "role vars" => format!("{label} ({})", role_of(&var.origin)),
                _ => label.clone(),
            };
            let fresh = PlayVar {
                var: var.clone(),
                layer: label,
                overrides: Vec::new(),
                resolved: None,
            };
            match vars.get_mut(name) {
                Some(prev) => {
                    let mut beaten = std::mem::replace(prev, fresh);
                    beaten
                        .overrides
                        .push((beaten.layer.clone(), beaten.var.origin.clone()));
                    prev.overrides = beaten.overrides;
                }
                None => {
                    vars.insert(name.clone(), fresh);
                }
            }
        }
    }

    let raw: BTreeMap<String, serde_json::Value> = vars
        .iter()
        .map(|(k, v)| (k.clone(), v.var.value.clone()))
        .collect();
    let ctx = super::host_context(inv, host);
    let mut rendered = resolver.resolve_all(&ctx, &raw);
    for (name, v) in vars.iter_mut() {
        if !v.var.secret {
            v.resolved = rendered.remove(name);
        }
    }
    Ok(PlayView {
        host: host.to_string(),
        roles: roles.roles.iter().map(|(n, _)| n.clone()).collect(),
        unknown_roles: roles.unknown.clone(),
        vars,
        vaulted: inv
            .vaulted_files()
            .iter()
            .chain(play.map(|p| p.vaulted.as_slice()).unwrap_or_default())
            .cloned()
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }

    #[test]
    fn layers_precedence_provenance_and_rendering() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path();
        write(
            root,
            "inventory/hosts.ini",
            "[web]\nw1 line_var=1 knob=from_line\n[web:vars]\nini_group=g\n",
        );
        write(
            root,
            "inventory/group_vars/web.yml",
            "knob: from_gv\nforced: from_gv\n",
        );
        write(
            root,
            "roles/base/defaults/main.yml",
            "base_only: b\nknob: from_base\n",
        );
        write(
            root,
            "roles/app/meta/main.yml",
            "dependencies:\n  - role: base\n",
        );
        write(
            root,
            "roles/app/defaults/main.yml",
            "knob: from_app_defaults\nmsg: \"{{ knob }}-{{ base_only }}\"\n",
        );
        write(root, "roles/app/vars/main.yml", "forced: from_role_vars\n");
        write(
            root,
            "site.yml",
            "- hosts: web\n  gather_facts: false\n  roles:\n    - app\n",
        );
        let inv = Inventory::load(&root.join("inventory/hosts.ini")).expect("inv");
        let view =
            play_view(&inv, root, &["site.yml".into()], "w1", &Resolver::new()).expect("view");
        assert_eq!(view.roles, ["base", "app"]);
        let v = |k: &str| &view.vars[k];
        // The host line beats group_vars, which beats role defaults.
        assert_eq!(v("knob").var.value, json!("from_line"));
        assert_eq!(v("knob").layer, "host line of w1");
        assert_eq!(
            v("knob")
                .overrides
                .iter()
                .map(|(l, _)| l.as_str())
                .collect::<Vec<_>>(),
            ["role defaults (app)", "group_vars/web"]
        );
        // Role vars beat the inventory.
        assert_eq!(v("forced").var.value, json!("from_role_vars"));
        assert_eq!(v("forced").layer, "role vars (app)");
        assert!(v("forced")
            .var
            .origin
            .to_string()
            .ends_with("roles/app/vars/main.yml:1:1"));
        assert_eq!(v("base_only").layer, "role defaults (base)");
        assert_eq!(v("ini_group").layer, "[web:vars]");
        assert_eq!(v("ini_group").var.origin.line, 4);
        // Rendered against the whole stack.
        assert_eq!(
            v("msg").resolved.as_ref().and_then(Resolved::value),
            Some(&json!("from_line-b"))
        );
        assert!(matches!(
            play_view(&inv, root, &["site.yml".into()], "nope", &Resolver::new()),
            Err(ProvenanceError::NoHost { .. })
        ));
    }
}
