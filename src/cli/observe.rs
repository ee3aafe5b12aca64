//! `observe --once`: one look at each selected environment's panes, printed.

use super::{kube_overrides, load_repo, print_json, Cli, CmdResult, Failure, Status};

/// `observe --once`: one look at each selected environment's panes, printed. Exit 1 on a
/// critical verdict; 2 when something could not be looked at, or when a kubeconfig reached
/// a cluster that is not its environment's (its verdicts would judge the wrong cluster).
pub(super) fn once(
    cli: &Cli,
    rt: &tokio::runtime::Runtime,
    json: bool,
    env: Option<&str>,
) -> CmdResult {
    let repo = load_repo(cli)?;
    if repo.is_bundled_sample() {
        return Err(Failure::msg(
            "observe --once: the bundled sample repo's addresses are documentation values, not \
             your clusters; point --repo or HK_REPO at your infra repo",
        ));
    }
    if cli.dry_run {
        return Err(Failure::msg(
            "observe --once reads the clusters and probes their VIPs; a dry run cannot look",
        ));
    }
    let names: Vec<String> = match env {
        Some(e) => {
            if repo.environment(e).is_none() {
                return Err(Failure::msg(format!(
                    "no environment `{e}` in hk-console.yaml (known: {})",
                    repo.environment_names().join(", ")
                )));
            }
            vec![e.to_string()]
        }
        None => repo
            .environment_names()
            .into_iter()
            .map(str::to_string)
            .collect(),
    };
    let (overrides, _) = kube_overrides(cli, &repo, env, false)?;
    let gateways =
        crate::observe::vpn::Gateways::for_repo(&repo, crate::context::ssh_options(&repo));
    let etcd = crate::observe::etcd::EtcdProbe::for_repo(&repo, crate::context::ssh_options(&repo));
    let taken = rt.block_on(crate::observe::snapshot::take(
        &repo, &names, &overrides, &gateways, &etcd,
    ));

    if json {
        print_json(&taken.snapshot)?;
    } else {
        outln!(
            "{}",
            render_snapshot(&taken.snapshot, &taken.targets).trim_end()
        );
    }
    for p in taken.problems.iter().chain(&taken.wrong_cluster) {
        errln!("error: {p}");
    }
    Ok(status_of(&taken))
}

/// The exit status of one look: a wrong cluster first (nothing it says is about the
/// environment), then the verdicts, then what could not be looked at.
pub(super) fn status_of(taken: &crate::observe::snapshot::Taken) -> Status {
    if !taken.wrong_cluster.is_empty() {
        return Status::CouldNotRun;
    }
    match (taken.snapshot.exit_code(), taken.problems.is_empty()) {
        (0, true) => Status::Clean,
        (1, _) => Status::Violations,
        _ => Status::CouldNotRun,
    }
}

/// The human form of a snapshot: per environment, each pane's facts and its verdicts with
/// their severity, then a one-line tally.
pub(super) fn render_snapshot(
    s: &crate::checks::live::Snapshot,
    targets: &[(String, String)],
) -> String {
    use crate::checks::live::{Rule, Severity, TcpProbe, Verdict};
    use std::fmt::Write as _;

    fn verdicts(out: &mut String, vs: &[Verdict]) {
        for v in vs {
            let _ = writeln!(
                out,
                "    {:<9}{}: {}",
                v.severity.to_string(),
                v.subject,
                v.message
            );
        }
    }
    /// `  N what` when the pane looked, nothing when it could not.
    fn counted(vs: &[Verdict], n: usize, what: &str) -> String {
        if vs.iter().any(|v| v.rule == Rule::CouldNotLook) {
            String::new()
        } else {
            format!("  {n} {what}")
        }
    }
    let mut out = String::new();
    let mut envs: Vec<&str> = Vec::new();
    for e in s
        .vip_lease
        .iter()
        .map(|p| p.env.as_str())
        .chain(s.agent_env.iter().map(|p| p.env.as_str()))
        .chain(s.nodes.iter().map(|p| p.env.as_str()))
        .chain(s.vpn.iter().map(|p| p.env.as_str()))
        .chain(s.etcd.iter().map(|p| p.env.as_str()))
    {
        if !envs.contains(&e) {
            envs.push(e);
        }
    }
    for env in envs {
        let target = targets
            .iter()
            .find(|(e, _)| e == env)
            .map(|(_, t)| format!("  (kubeconfig {t})"))
            .unwrap_or_default();
        let _ = writeln!(out, "{env}{target}");
        for p in s.vip_lease.iter().filter(|p| p.env == env) {
            let holder = match (&p.holder, &p.holder_node) {
                (Some(h), Some(n)) if h != n => format!("holder {h} (node {n})"),
                (Some(h), _) => format!("holder {h}"),
                (None, _) => "no holder".to_string(),
            };
            let probe = match &p.probe {
                Some(TcpProbe::Connected { latency_ms }) => format!("answers in {latency_ms} ms"),
                Some(TcpProbe::Failed { error }) => format!("does not answer ({error})"),
                None => "not probed".to_string(),
            };
            let _ = writeln!(
                out,
                "  VIP lease  {}:{}  {holder}; VIP {probe}",
                p.vip, p.port
            );
            verdicts(&mut out, &p.verdicts);
        }
        for p in s.agent_env.iter().filter(|p| p.env == env) {
            let _ = writeln!(
                out,
                "  Agent env{}",
                counted(&p.verdicts, p.agents.len(), "cilium-agent pod(s)")
            );
            verdicts(&mut out, &p.verdicts);
        }
        for p in s.rollout.iter().filter(|p| p.env == env) {
            let _ = writeln!(out, "  Rollout");
            verdicts(&mut out, &p.verdicts);
        }
        for p in s.vpn.iter().filter(|p| p.env == env) {
            let _ = writeln!(out, "  VPN egress {}", p.host);
            verdicts(&mut out, &p.verdicts);
        }
        for p in s.nodes.iter().filter(|p| p.env == env) {
            let _ = writeln!(
                out,
                "  Nodes{}",
                counted(&p.verdicts, p.nodes.len(), "node(s)")
            );
            verdicts(&mut out, &p.verdicts);
        }
        for p in s.etcd.iter().filter(|p| p.env == env) {
            let leader = match &p.leader {
                Some(l) => format!("  leader {l}"),
                None => "  no leader seen".to_string(),
            };
            let _ = writeln!(out, "  etcd  {} member(s){leader}", p.members.len());
            verdicts(&mut out, &p.verdicts);
        }
    }
    if !s.vpn_across.is_empty() {
        let _ = writeln!(out, "Across environments");
        verdicts(&mut out, &s.vpn_across);
    }
    let all = s.verdicts();
    let count = |sev: Severity| {
        all.iter()
            .filter(|v| v.severity == sev && v.rule != Rule::CouldNotLook)
            .count()
    };
    let could_not = all.iter().filter(|v| v.rule == Rule::CouldNotLook).count();
    let _ = writeln!(
        out,
        "\n{} critical, {} warn, {} unknown, {} could not look, {} ok",
        count(Severity::Critical),
        count(Severity::Warn),
        count(Severity::Unknown),
        could_not,
        count(Severity::Ok)
    );
    out
}
