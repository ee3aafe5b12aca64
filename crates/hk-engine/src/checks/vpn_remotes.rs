//! The repo conditions a `repo-wait` step waits for (`runbook::schema::REPO_CONDITIONS`):
//! what the infra repo, as loaded, says about the VPN gateways' servers.
//!
//! Owns: [`vpn_remotes_differ`], reading each VPN gateway's `vpn_egress_gateway_pia_remote`
//! (every environment's gateways: the eviction loop crosses environments) and judging
//! whether one gateway's server differs from all the others'; [`evaluate`], a condition's
//! text to its judgement.
//! Must not: read files (the caller loads the repo again for every look), edit the repo, or
//! look at the live gateways (that is `checks::live::vpn`).

use crate::repo::Repo;

/// The variable that pins a gateway's VPN server: `"<host> <port>"`, empty = the `.ovpn`'s
/// own `remote` line.
pub const REMOTE_VAR: &str = "vpn_egress_gateway_pia_remote";

/// Where a repo condition stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepoCheck {
    /// The condition holds.
    Holds,
    /// Not yet: the operator has something to change in the repo.
    Waiting,
    /// It can never hold as asked (an unknown condition, a host that is no gateway): the
    /// step fails at once, saying why.
    Impossible(String),
}

/// A judgement with the lines that show the operator why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoJudgement {
    pub check: RepoCheck,
    pub lines: Vec<String>,
}

/// One gateway's remote as the repo says it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Remote {
    /// Set: its words (`host port`), whitespace normalised.
    Set(String),
    /// Empty or absent: the `.ovpn`'s own `remote`, which the repo does not show.
    OvpnOwn,
    /// The value cannot be rendered or is not text.
    Unreadable(String),
}

fn remote_of(repo: &Repo, host: &str) -> Remote {
    match repo.resolve_var(host, REMOTE_VAR) {
        None => Remote::OvpnOwn,
        Some(r) => match (r.as_text(), r.value()) {
            (Some(t), _) if t.trim().is_empty() => Remote::OvpnOwn,
            (Some(t), _) => Remote::Set(t.split_whitespace().collect::<Vec<_>>().join(" ")),
            (None, Some(serde_json::Value::Null)) => Remote::OvpnOwn,
            (None, Some(v)) => Remote::Unreadable(format!("not text: {v}")),
            (None, None) => Remote::Unreadable(match r {
                crate::repo::resolve::Resolved::Unrenderable { reason } => reason,
                crate::repo::resolve::Resolved::Value(_) => "unreadable".into(),
            }),
        },
    }
}

/// `condition` (a rendered `repo-wait` condition) judged over `repo`.
pub fn evaluate(repo: &Repo, condition: &str) -> RepoJudgement {
    let mut words = condition.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (Some("vpn-remotes-differ"), Some(host), None) => vpn_remotes_differ(repo, host),
        _ => RepoJudgement {
            check: RepoCheck::Impossible(format!(
                "unknown repo-wait condition `{condition}` (known: vpn-remotes-differ HOST)"
            )),
            lines: Vec::new(),
        },
    }
}

/// `vpn-remotes-differ HOST`: HOST is a VPN gateway whose `vpn_egress_gateway_pia_remote`
/// is set, and no other gateway (of any environment) has the same one. A gateway left on
/// its `.ovpn`'s own remote cannot be compared from the repo: it is named as such and does
/// not stop the condition; the live check after the apply (`vpn-wait vpn-loop-gone`) is
/// what proves the two servers differ.
pub fn vpn_remotes_differ(repo: &Repo, host: &str) -> RepoJudgement {
    let mut gateways: Vec<(String, String)> = Vec::new();
    for env in &repo.environments {
        for h in &env.vpn_gateways {
            if !gateways.iter().any(|(_, g)| g == &h.name) {
                gateways.push((env.name.clone(), h.name.clone()));
            }
        }
    }
    if !gateways.iter().any(|(_, g)| g == host) {
        let known: Vec<&str> = gateways.iter().map(|(_, g)| g.as_str()).collect();
        return RepoJudgement {
            check: RepoCheck::Impossible(format!(
                "{host} is no VPN gateway of any environment (the gateways: {})",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            )),
            lines: Vec::new(),
        };
    }
    let remotes: Vec<(String, String, Remote)> = gateways
        .into_iter()
        .map(|(env, g)| {
            let r = remote_of(repo, &g);
            (env, g, r)
        })
        .collect();
    let mut lines = Vec::new();
    for (env, g, r) in &remotes {
        let said = match r {
            Remote::Set(v) => format!("\"{v}\""),
            Remote::OvpnOwn => "empty: the .ovpn's own remote, which the repo does not show".into(),
            Remote::Unreadable(why) => format!("cannot be read: {why}"),
        };
        lines.push(format!("repo: {g} ({env}) {REMOTE_VAR} = {said}"));
    }
    let mine = remotes
        .iter()
        .find(|(_, g, _)| g == host)
        .map(|(_, _, r)| r.clone())
        .unwrap_or(Remote::OvpnOwn);
    let hint = format!(
        "change {host}'s {REMOTE_VAR} in the repo (its host_vars or group_vars) to another \
         server of the pool, save, and this step sees it within seconds; hk-console does not \
         edit the repo"
    );
    let check = match &mine {
        Remote::Unreadable(why) => {
            lines.push(format!(
                "waiting: {host}'s {REMOTE_VAR} cannot be read ({why}): {hint}"
            ));
            RepoCheck::Waiting
        }
        Remote::OvpnOwn => {
            lines.push(format!(
                "waiting: {host}'s {REMOTE_VAR} is empty, so its server is whatever its .ovpn \
                 says: {hint}"
            ));
            RepoCheck::Waiting
        }
        Remote::Set(v) => {
            let same: Vec<String> = remotes
                .iter()
                .filter(|(_, g, r)| g != host && *r == Remote::Set(v.clone()))
                .map(|(env, g, _)| format!("{g} ({env})"))
                .collect();
            if same.is_empty() {
                let unknown: Vec<&str> = remotes
                    .iter()
                    .filter(|(_, g, r)| g != host && !matches!(r, Remote::Set(_)))
                    .map(|(_, g, _)| g.as_str())
                    .collect();
                lines.push(format!(
                    "{host}'s remote \"{v}\" differs from every other gateway's in the repo{}",
                    if unknown.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " ({} not compared: no remote in the repo; the live check after \
                             the apply is the proof)",
                            unknown.join(", ")
                        )
                    }
                ));
                RepoCheck::Holds
            } else {
                lines.push(format!(
                    "waiting: {host} shares \"{v}\" with {}: {hint}",
                    same.join(", ")
                ));
                RepoCheck::Waiting
            }
        }
    };
    RepoJudgement { check, lines }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// The bundled sample's hk-console.yaml and inventory, copied so a test can change it.
    fn sample_copy() -> tempfile::TempDir {
        fn copy(from: &Path, to: &Path) {
            std::fs::create_dir_all(to).expect("mkdir");
            for e in std::fs::read_dir(from).expect("read_dir") {
                let e = e.expect("entry");
                let dst = to.join(e.file_name());
                if e.file_type().expect("type").is_dir() {
                    copy(&e.path(), &dst);
                } else {
                    std::fs::copy(e.path(), dst).expect("copy");
                }
            }
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let src = crate::repo::bundled_sample_dir();
        std::fs::copy(
            src.join("hk-console.yaml"),
            dir.path().join("hk-console.yaml"),
        )
        .expect("config");
        copy(
            &src.join("infra/ansible/inventory"),
            &dir.path().join("infra/ansible/inventory"),
        );
        dir
    }

    fn pin(dir: &Path, host: &str, remote: &str) {
        let hv = dir.join("infra/ansible/inventory/host_vars");
        std::fs::create_dir_all(&hv).expect("host_vars");
        std::fs::write(
            hv.join(format!("{host}.yml")),
            format!("{REMOTE_VAR}: \"{remote}\"\n"),
        )
        .expect("write");
    }

    fn judge(dir: &Path, condition: &str) -> RepoJudgement {
        evaluate(&Repo::load(dir).expect("repo"), condition)
    }

    #[test]
    fn two_gateways_pinned_to_one_server_wait_and_name_each_other() {
        let dir = sample_copy();
        pin(dir.path(), "k3s-dev-3", "198.51.100.30 1198");
        pin(dir.path(), "k3s-prod-3", "198.51.100.30   1198");
        let j = judge(dir.path(), "vpn-remotes-differ k3s-prod-3");
        assert_eq!(j.check, RepoCheck::Waiting, "{:?}", j.lines);
        assert!(j.lines.contains(&format!(
            "repo: k3s-dev-3 (dev) {REMOTE_VAR} = \"198.51.100.30 1198\""
        )));
        let last = j.lines.last().expect("a verdict line");
        assert!(
            last.starts_with(
                "waiting: k3s-prod-3 shares \"198.51.100.30 1198\" with k3s-dev-3 (dev)"
            ) && last.contains("hk-console does not edit the repo"),
            "{last}"
        );
        // The operator's edit, read again: now it holds.
        pin(dir.path(), "k3s-prod-3", "198.51.100.31 1198");
        let j = judge(dir.path(), "vpn-remotes-differ k3s-prod-3");
        assert_eq!(j.check, RepoCheck::Holds, "{:?}", j.lines);
        assert_eq!(
            j.lines.last().map(String::as_str),
            Some("k3s-prod-3's remote \"198.51.100.31 1198\" differs from every other gateway's in the repo")
        );
    }

    #[test]
    fn an_empty_remote_is_waited_on_for_the_target_and_named_for_the_others() {
        let dir = sample_copy();
        // The sample: dev keeps its .ovpn's remote, prod is pinned to .135.
        let j = judge(dir.path(), "vpn-remotes-differ k3s-dev-3");
        assert_eq!(j.check, RepoCheck::Waiting, "{:?}", j.lines);
        assert!(j
            .lines
            .iter()
            .any(|l| l.starts_with("waiting: k3s-dev-3's") && l.contains("is empty")));
        let j = judge(dir.path(), "vpn-remotes-differ k3s-prod-3");
        assert_eq!(j.check, RepoCheck::Holds, "{:?}", j.lines);
        assert!(j
            .lines
            .last()
            .expect("line")
            .contains("k3s-dev-3 not compared"));
    }

    #[test]
    fn a_host_that_is_no_gateway_or_an_unknown_condition_can_never_hold() {
        let dir = sample_copy();
        let j = judge(dir.path(), "vpn-remotes-differ k3s-prod-1");
        assert_eq!(
            j.check,
            RepoCheck::Impossible(
                "k3s-prod-1 is no VPN gateway of any environment (the gateways: k3s-dev-3, k3s-prod-3)"
                    .into()
            )
        );
        assert!(matches!(
            judge(dir.path(), "remotes-differ k3s-prod-3").check,
            RepoCheck::Impossible(m) if m.contains("unknown repo-wait condition")
        ));
    }
}
