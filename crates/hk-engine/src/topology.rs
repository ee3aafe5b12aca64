//! The planner's [`Topology`] over a loaded repo: groups and membership from the inventory,
//! host and play variables as Ansible resolves them, where a variable was searched, and
//! what would stop the run before step 1 (`repo::blockers` reads the files for that), and
//! what a playbook runs for real under `--check` (`repo::check_mode` reads the playbooks).
//! The planner in `runbook::plan` stays pure: it asks, this answers.

use crate::repo::Repo;
use crate::runbook::plan::Topology;

impl Topology for Repo {
    fn hosts_in(&self, group: &str) -> Option<Vec<String>> {
        self.inventory.pattern_hosts(group)
    }

    fn is_member(&self, host: &str, group: &str) -> bool {
        self.inventory.is_member(host, group)
    }

    fn host_var(&self, host: &str, var: &str) -> Option<serde_json::Value> {
        self.resolve_var(host, var)?.value().cloned()
    }

    fn play_var(
        &self,
        host: &str,
        var: &str,
        playbooks: &[String],
    ) -> Result<Option<serde_json::Value>, String> {
        let roles = self.play_roles(playbooks).map_err(|e| e.to_string())?;
        match self.var_in_play(host, var, &roles) {
            None => Ok(None),
            Some(crate::repo::resolve::Resolved::Value(v)) => Ok(Some(v)),
            Some(crate::repo::resolve::Resolved::Unrenderable { reason }) => {
                Err(format!("`{var}` of {host} cannot be rendered: {reason}"))
            }
        }
    }

    fn blockers(
        &self,
        uses: &[crate::runbook::plan::PlaybookUse],
        hosts: &[String],
    ) -> Vec<crate::runbook::plan::Blocker> {
        crate::repo::blockers::for_plan(self, uses, hosts)
    }

    fn check_runs(&self, playbook: &str) -> crate::runbook::plan::CheckRuns {
        use crate::repo::roles::{AnsibleEnv, RoleSearch};
        use crate::runbook::plan::{CheckRuns, RealTask};
        let search = RoleSearch::new(&self.ansible_dir, &AnsibleEnv::from_process());
        let d = crate::repo::check_mode::derive(
            &self.root,
            &self.ansible_dir,
            playbook,
            &search,
            &self.config.reviewed_read_only,
        );
        CheckRuns {
            real: d
                .real
                .into_iter()
                .map(|r| RealTask {
                    at: format!("{}:{}", r.file, r.line),
                    module: r.module,
                    why: r.why,
                })
                .collect(),
            reviewed: d
                .reviewed
                .into_iter()
                .map(|r| {
                    format!(
                        "{}:{} ({}) reviewed read-only by {} at {}",
                        r.file, r.line, r.module, r.by, r.at
                    )
                })
                .collect(),
        }
    }

    fn searched(&self, _host: &str, playbooks: &[String]) -> Vec<String> {
        let rel = |p: &std::path::Path| {
            p.strip_prefix(&self.root)
                .unwrap_or(p)
                .display()
                .to_string()
        };
        let mut out = vec![format!(
            "the inventory's group_vars and host_vars ({})",
            rel(&self.inventory_path)
        )];
        match self.play_roles(playbooks) {
            Ok(roles) if roles.roles.is_empty() => out.push(format!(
                "role defaults: none ({} use no role)",
                if playbooks.is_empty() {
                    "the runbook runs no playbook, so it".to_string()
                } else {
                    playbooks.join(", ")
                }
            )),
            Ok(roles) => {
                let names: Vec<String> = roles
                    .roles
                    .iter()
                    .map(|(n, d)| format!("{n} ({})", rel(d)))
                    .collect();
                out.push(format!("role defaults and vars of {}", names.join(", ")));
                if !roles.unknown.is_empty() {
                    out.push(format!(
                        "NOT searched: roles named by a template ({}), unknown before the play runs",
                        roles.unknown.join(", ")
                    ));
                }
            }
            Err(e) => out.push(format!("roles: could not be read: {e}")),
        }
        out
    }
}
