//! The VPN egress pane, looked at over SSH: every gateway host of the chosen environments,
//! one read-only look each, judged by `checks::live`.
//!
//! Owns: which hosts are gateways (the `vpn_gateways` group hk-console.yaml names per
//! environment), what to look at on each (hk-console.yaml `names.vpn_unit` /
//! `vpn_interface` / `vpn_exit_ip_url`, else the host's RENDERED hostvars
//! `vpn_egress_gateway_service` / `_interface` / `_exit_ip_url`, else the seed repo's
//! names), the four commands sent
//! (see [`Commands`]: `systemctl is-active`, `curl` through the tunnel interface and
//! without it, `journalctl -u` over the window, every word shell-quoted), turning their
//! output into a [`GatewayObs`], the one-shot [`look`] over all gateways at once, and the
//! poller [`spawn_vpn_poll`] that sends [`Update`]s to the UI reusing one SSH connection
//! per host.
//!
//! Must not: judge (the rules are `checks::live::vpn_gateway` / `vpn_across`, the journal
//! parser is `checks::live::parse_journal`), run anything but the four read-only commands
//! (only an `Executor<ReadOnly>` is held), panic on a host that cannot be reached (that is
//! a [`Look::CouldNotLook`] naming the host), or know any particular homelab.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::ssh_look::{failed, stderr_line};
use crate::exec::settings::{SshConfig, SshDefaults};

use crate::exec::{CommandOutput, Executor, ReadOnly, SshOptions};
use hk_engine::checks::live::{
    self, GatewayObs, GatewayPane, Look, Pane, Rule, Severity, Timestamp, Verdict, VpnPolicy,
};
use hk_engine::repo::env::EnvProblem;
use hk_engine::repo::Repo;

use super::feed::{Feed, Update, VpnLook, ALL_ENVS};
use super::ssh_look::{read_only_ssh, with_ssh_config, ReadOnlyLook};
pub use crate::hostvar::HostVarError;

pub use crate::gateway::{
    gateway_spec, GatewaySpec, DEFAULT_EXIT_IP_URL, DEFAULT_INTERFACE, DEFAULT_SERVICE,
    VAR_EXIT_IP_URL, VAR_INTERFACE, VAR_SERVICE,
};

/// How a look is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LookOptions {
    /// The rules' thresholds; `policy.window_ms` is also the journal's `--since`.
    pub policy: VpnPolicy,
    /// `curl --max-time` (whole seconds, at least 1).
    pub curl_max_time: Duration,
    /// How long any one command may take over SSH before it is stopped (keep it above
    /// `curl_max_time`, or a slow exit probe reads as could-not-look instead of curl's error).
    pub command_timeout: Duration,
}

impl Default for LookOptions {
    /// The default policy, curl 10 s, 15 s per command.
    fn default() -> Self {
        LookOptions {
            policy: VpnPolicy::default(),
            curl_max_time: Duration::from_secs(10),
            command_timeout: Duration::from_secs(15),
        }
    }
}

/// The four read-only commands of one look, as argv. [`remote_command`] quotes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commands {
    /// `systemctl is-active SERVICE`
    pub is_active: Vec<String>,
    /// `curl -sS --max-time N --interface IFACE URL`
    pub tunnel_exit: Vec<String>,
    /// `curl -sS --max-time N URL`
    pub direct_exit: Vec<String>,
    /// `journalctl -u SERVICE --since -Ns -o short-iso --no-pager`
    pub journal: Vec<String>,
}

impl Commands {
    pub fn for_gateway(spec: &GatewaySpec, opts: &LookOptions) -> Self {
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let max_time = opts.curl_max_time.as_secs().max(1).to_string();
        // Relative to the gateway's own clock (systemd.time: "-1800s" = 30 min ago), so a
        // skewed clock on either side does not empty the window.
        let since = format!("-{}s", (opts.policy.window_ms / 1000).max(1));
        Commands {
            is_active: words(&["systemctl", "is-active", &spec.service]),
            tunnel_exit: words(&[
                "curl",
                "-sS",
                "--max-time",
                &max_time,
                "--interface",
                &spec.interface,
                &spec.exit_ip_url,
            ]),
            direct_exit: words(&["curl", "-sS", "--max-time", &max_time, &spec.exit_ip_url]),
            journal: words(&[
                "journalctl",
                "-u",
                &spec.service,
                "--since",
                &since,
                "-o",
                "short-iso",
                "--no-pager",
            ]),
        }
    }
}

/// The gateways' SSH side: a read-only executor (one connection per host, reused across
/// looks) and the hosts whose connection settings could not be worked out.
pub struct Gateways {
    exec: Arc<Executor<ReadOnly>>,
    /// Host -> why it has no connection settings (shown as its could-not-look reason).
    unreachable: BTreeMap<String, String>,
    pub options: LookOptions,
}

impl std::fmt::Debug for Gateways {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateways")
            .field("unreachable", &self.unreachable)
            .field("options", &self.options)
            .finish()
    }
}

/// Every gateway host of every environment of the repo (each once).
fn all_gateway_hosts(repo: &Repo) -> Vec<String> {
    let mut hosts: Vec<String> = repo
        .environments
        .iter()
        .flat_map(|e| e.vpn_gateways.iter().map(|h| h.name.clone()))
        .collect();
    hosts.sort();
    hosts.dedup();
    hosts
}

impl Gateways {
    /// A pool for the repo's gateway hosts, connecting as the console does: `ssh` from
    /// `context::ssh_options(repo)` (the known_hosts files trusted), settings from each
    /// host's hostvars then `~/.ssh/config` (`context::connect_settings_with`).
    pub fn for_repo(repo: &Repo, ssh: SshOptions) -> Self {
        with_ssh_config(
            || all_gateway_hosts(repo),
            |config, defaults| Self::for_repo_with(repo, ssh, config, defaults),
            |g| &mut g.unreachable,
        )
    }

    /// [`Gateways::for_repo`] with `~/.ssh/config` and the user/home defaults given.
    pub fn for_repo_with(
        repo: &Repo,
        ssh: SshOptions,
        ssh_config: &SshConfig,
        defaults: &SshDefaults,
    ) -> Self {
        // The gateways' output (journal lines, curl) may quote a vaulted value (the VPN
        // credentials live in the vault): masked, as in every executor's.
        let (exec, unreachable) =
            read_only_ssh(repo, ssh, all_gateway_hosts(repo), ssh_config, defaults);
        Gateways {
            exec: Arc::new(exec),
            unreachable,
            options: LookOptions::default(),
        }
    }

    /// Share an observe-mode executor the console already has (its pool must know the
    /// gateway hosts; one it does not know is a could-not-look naming the host).
    pub fn with_executor(exec: Arc<Executor<ReadOnly>>) -> Self {
        Gateways {
            exec,
            unreachable: BTreeMap::new(),
            options: LookOptions::default(),
        }
    }

    /// Other thresholds or timeouts than [`LookOptions::default`].
    pub fn with_options(mut self, options: LookOptions) -> Self {
        self.options = options;
        self
    }

    /// How many times a connection to `host` was opened (1 = reused ever since).
    pub fn connects(&self, host: &str) -> usize {
        self.exec.ssh().connects(host)
    }

    /// Close every connection (a later look opens them again).
    pub async fn close(&self) {
        self.exec.ssh().close_all().await;
    }

    /// Runs one read-only command on `host` through the read-only executor, the path a
    /// runbook `ssh` step with `mutates: false` takes (classified, then `Executor::run`).
    async fn run(
        &self,
        host: &str,
        argv: &[String],
        cancel: &CancellationToken,
    ) -> Result<CommandOutput, String> {
        let look = ReadOnlyLook {
            id: "vpn-egress-look",
            title: "VPN egress",
            timeout: self.options.command_timeout,
        };
        look.run(&self.exec, host, argv, cancel).await
    }

    /// Everything seen on one gateway. Never fails: what could not be seen is a
    /// could-not-look naming the host.
    pub async fn observe(&self, spec: &GatewaySpec, cancel: &CancellationToken) -> GatewayObs {
        let host = spec.host.as_str();
        let connected = match self.unreachable.get(host) {
            Some(why) => Err(why.clone()),
            // Connect once before the four commands: an unreachable host is tried (with the
            // pool's backoff) once, not once per command.
            None => tokio::select! {
                r = self.exec.ssh().connect(host) => r.map_err(|e| e.to_string()),
                _ = cancel.cancelled() => Err(format!("{host}: look cancelled")),
            },
        };
        if let Err(why) = connected {
            return unseen(&spec.env, host, &spec.service, &spec.interface, &why);
        }
        let c = Commands::for_gateway(spec, &self.options);
        let (active, tunnel, direct, journal) = tokio::join!(
            self.run(host, &c.is_active, cancel),
            self.run(host, &c.tunnel_exit, cancel),
            self.run(host, &c.direct_exit, cancel),
            self.run(host, &c.journal, cancel),
        );
        GatewayObs {
            env: spec.env.clone(),
            host: spec.host.clone(),
            service: spec.service.clone(),
            interface: spec.interface.clone(),
            active_state: active_state(host, &c.is_active, active),
            tunnel_exit: exit_ip(host, &c.tunnel_exit, tunnel),
            direct_exit: exit_ip(host, &c.direct_exit, direct),
            journal: journal_lines(host, &c.journal, journal),
        }
    }
}

/// A gateway where nothing could be seen, for one reason.
fn unseen(env: &str, host: &str, service: &str, interface: &str, why: &str) -> GatewayObs {
    GatewayObs {
        env: env.to_string(),
        host: host.to_string(),
        service: service.to_string(),
        interface: interface.to_string(),
        active_state: Look::could_not(why),
        tunnel_exit: Look::could_not(why),
        direct_exit: Look::could_not(why),
        journal: Look::could_not(why),
    }
}

/// `systemctl is-active` prints the ActiveState and exits non-zero unless it is `active`:
/// a printed state is an answer whatever the exit status; no state is a failed command.
pub fn active_state(
    host: &str,
    argv: &[String],
    result: Result<CommandOutput, String>,
) -> Look<String> {
    let out = match result {
        Ok(out) => out,
        Err(why) => return Look::could_not(why),
    };
    let state = out.stdout.trim();
    let is_state = !state.is_empty() && state.chars().all(|c| c.is_ascii_lowercase() || c == '-');
    if is_state && out.exit_signal.is_none() {
        Look::seen(state.to_string())
    } else {
        Look::could_not(failed(host, argv, &out))
    }
}

/// `curl URL`: exit 0 = the body (an IP or not: the probe's answer); curl's own error
/// (could not connect, timed out, no such interface...) = the probe's error; curl that
/// could not run at all (126/127, a signal, no status) = could not look.
pub fn exit_ip(
    host: &str,
    argv: &[String],
    result: Result<CommandOutput, String>,
) -> Look<Result<IpAddr, String>> {
    let out = match result {
        Ok(out) => out,
        Err(why) => return Look::could_not(why),
    };
    match (out.exit_status, &out.exit_signal) {
        // The observation keeps the probe's answer as text (it is serialised with the look).
        (Some(0), None) => Look::seen(live::parse_exit_ip(&out.stdout).map_err(|e| e.to_string())),
        (Some(126 | 127), _) | (None, _) | (_, Some(_)) => {
            Look::could_not(failed(host, argv, &out))
        }
        (Some(code), None) => Look::seen(Err(format!("curl exited {code}: {}", stderr_line(&out)))),
    }
}

/// `journalctl`: exit 0 = its lines. A failed command, or output cut at the pool's cap
/// (the newest lines, the ones that say which server, would be the ones missing), is a
/// could-not-look.
pub fn journal_lines(
    host: &str,
    argv: &[String],
    result: Result<CommandOutput, String>,
) -> Look<Vec<String>> {
    let out = match result {
        Ok(out) => out,
        Err(why) => return Look::could_not(why),
    };
    if out.exit_status != Some(0) || out.exit_signal.is_some() {
        return Look::could_not(failed(host, argv, &out));
    }
    if out.stdout_truncated {
        return Look::could_not(format!(
            "{host}: `{}` printed more than the SSH output cap; its newest lines were not read",
            argv.join(" ")
        ));
    }
    Look::seen(out.stdout.lines().map(str::to_string).collect())
}

/// A verdict about an environment as a whole (no gateway to hang it on).
fn env_could_not(env: &str, why: String) -> Verdict {
    Verdict {
        pane: Pane::VpnEgress,
        rule: Rule::CouldNotLook,
        severity: Severity::Unknown,
        env: env.to_string(),
        subject: env.to_string(),
        message: format!("could not look: {why}"),
    }
}

/// One gateway to look at: what to look at there, or why that cannot be worked out.
struct Target {
    env: String,
    host: String,
    spec: Result<GatewaySpec, HostVarError>,
}

/// The gateways to look at (per gateway host of each environment) and environment-level
/// problems. An empty `envs` means every environment of the repo.
fn targets(repo: &Repo, envs: &[String]) -> (Vec<Target>, Vec<Verdict>) {
    let names: Vec<String> = if envs.is_empty() {
        repo.environment_names()
            .into_iter()
            .map(str::to_string)
            .collect()
    } else {
        envs.to_vec()
    };
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for name in names {
        let Some(env) = repo.environment(&name) else {
            problems.push(env_could_not(
                &name,
                format!(
                    "no environment `{name}` in hk-console.yaml (known: {})",
                    repo.environment_names().join(", ")
                ),
            ));
            continue;
        };
        // The environment's own finding (derived once, in `repo::env`), not re-derived here.
        for p in &env.problems {
            if matches!(p, EnvProblem::NoGatewayGroup { .. }) {
                problems.push(env_could_not(
                    &name,
                    format!("{p} ({})", repo.inventory_path.display()),
                ));
            }
        }
        for h in &env.vpn_gateways {
            out.push(Target {
                env: name.clone(),
                host: h.name.clone(),
                spec: gateway_spec(repo, &name, &h.name),
            });
        }
    }
    (out, problems)
}

/// Judge one gateway; identical verdicts (four could-not-looks for one unreachable host)
/// are shown once.
fn judge(obs: &GatewayObs, now: Timestamp, policy: &VpnPolicy) -> GatewayPane {
    let mut pane = live::vpn_gateway(obs, now, policy);
    let mut seen = Vec::with_capacity(pane.verdicts.len());
    pane.verdicts.retain(|v| {
        if seen.contains(v) {
            false
        } else {
            seen.push(v.clone());
            true
        }
    });
    pane
}

/// One look at every gateway of `envs` (empty = every environment), all at once, judged
/// at the clock time the last answer came in, then across environments. Returns the look
/// and that time. `cancel` stops the commands in flight (they then read as could-not-look).
pub async fn look_with(
    repo: &Repo,
    envs: &[String],
    gateways: &Gateways,
    cancel: &CancellationToken,
) -> (VpnLook, Timestamp) {
    let (targets, problems) = targets(repo, envs);
    let looks = targets.iter().map(|t| async move {
        match &t.spec {
            Ok(spec) => gateways.observe(spec, cancel).await,
            Err(why) => unseen(
                &t.env,
                &t.host,
                DEFAULT_SERVICE,
                DEFAULT_INTERFACE,
                &why.to_string(),
            ),
        }
    });
    let observed = futures::future::join_all(looks).await;
    let now = hk_engine::journal::now();
    let policy = gateways.options.policy;
    let panes: Vec<GatewayPane> = observed.iter().map(|o| judge(o, now, &policy)).collect();
    let mut across = problems;
    across.extend(live::vpn_across(&panes));
    (
        VpnLook {
            gateways: panes,
            across,
        },
        now,
    )
}

/// One look at every gateway of `envs` (empty = every environment of the repo),
/// concurrently, then `vpn_across` over all of them.
pub async fn look(repo: &Repo, envs: &[String], gateways: &Gateways) -> VpnLook {
    look_with(repo, envs, gateways, &CancellationToken::new())
        .await
        .0
}

/// Looks every `period` (start to start; a slow look delays the next rather than piling
/// up) and sends each as `Update { env: ALL_ENVS, feed: Feed::Vpn(..) }`. The first look
/// starts at once. Stops when `cancel` trips (a look in flight is abandoned, its commands
/// stopped) or the receiver is gone. Connections stay open between looks (one per host).
pub fn spawn_vpn_poll(
    repo: Arc<Repo>,
    envs: Vec<String>,
    gateways: Arc<Gateways>,
    period: Duration,
    tx: mpsc::Sender<Update>,
    cancel: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period.max(Duration::from_millis(100)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = cancel.cancelled() => return,
            }
            // Not raced against `cancel`: the commands see it and stop their remote side
            // (dropping them mid-flight would leave that to the channel's close).
            let (vpn, at) = look_with(&repo, &envs, &gateways, &cancel).await;
            if cancel.is_cancelled() {
                return;
            }
            let update = Update {
                env: ALL_ENVS.to_string(),
                at,
                feed: Feed::Vpn(vpn),
            };
            tokio::select! {
                r = tx.send(update) => if r.is_err() { return },
                _ = cancel.cancelled() => return,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::ssh_look::remote_command;

    fn spec() -> GatewaySpec {
        GatewaySpec {
            env: "dev".into(),
            host: "gw".into(),
            service: DEFAULT_SERVICE.into(),
            interface: DEFAULT_INTERFACE.into(),
            exit_ip_url: DEFAULT_EXIT_IP_URL.into(),
        }
    }

    fn out(code: Option<u32>, stdout: &str, stderr: &str) -> CommandOutput {
        CommandOutput {
            exit_status: code,
            exit_signal: None,
            stdout: stdout.into(),
            stderr: stderr.into(),
            stdout_truncated: false,
            stderr_truncated: false,
            elapsed: Duration::ZERO,
        }
    }

    #[test]
    fn the_four_commands_are_exactly_these() {
        let c = Commands::for_gateway(&spec(), &LookOptions::default());
        assert_eq!(
            remote_command(&c.is_active),
            "'systemctl' 'is-active' 'vpn-egress-tunnel.service'"
        );
        assert_eq!(
            remote_command(&c.tunnel_exit),
            "'curl' '-sS' '--max-time' '10' '--interface' 'tun0' 'https://ipinfo.io/ip'"
        );
        assert_eq!(
            remote_command(&c.direct_exit),
            "'curl' '-sS' '--max-time' '10' 'https://ipinfo.io/ip'"
        );
        assert_eq!(
            remote_command(&c.journal),
            "'journalctl' '-u' 'vpn-egress-tunnel.service' '--since' '-1800s' '-o' 'short-iso' '--no-pager'"
        );
    }

    /// hk-console.yaml `names:` over the gateway's hostvars, the environment's over the top
    /// level's, the hostvar over the seed's name.
    #[test]
    fn the_gateway_spec_takes_hk_console_yaml_names_first() {
        let dir = tempfile::tempdir().expect("temp dir");
        let inv = dir.path().join("infra/ansible/inventory");
        std::fs::create_dir_all(inv.join("host_vars")).expect("mkdir");
        std::fs::write(
            inv.join("hosts.ini"),
            "[lab]\ns1 ansible_host=127.0.10.1\n[gw]\ng1 ansible_host=127.0.10.9\n",
        )
        .expect("hosts");
        std::fs::write(
            inv.join("host_vars/g1.yml"),
            "vpn_egress_gateway_service: from-hostvar.service\nvpn_egress_gateway_interface: wg-host\n",
        )
        .expect("g1");
        let load = |config: &str| {
            std::fs::write(dir.path().join("hk-console.yaml"), config).expect("config");
            Repo::load(dir.path()).expect("load repo")
        };
        let envs = "environments:\n  lab:\n    servers: lab\n    vpn_gateways: gw\n";
        let r = load(envs);
        let s = gateway_spec(&r, "lab", "g1").expect("spec");
        assert_eq!(
            (
                s.service.as_str(),
                s.interface.as_str(),
                s.exit_ip_url.as_str()
            ),
            ("from-hostvar.service", "wg-host", DEFAULT_EXIT_IP_URL)
        );
        let r = load(&format!(
            "names:\n  vpn_unit: my-tunnel.service\n  vpn_exit_ip_url: http://10.0.0.1/ip\n{envs}    names: {{vpn_interface: wg9}}\n"
        ));
        let s = gateway_spec(&r, "lab", "g1").expect("spec");
        assert_eq!(
            (
                s.service.as_str(),
                s.interface.as_str(),
                s.exit_ip_url.as_str()
            ),
            ("my-tunnel.service", "wg9", "http://10.0.0.1/ip")
        );
    }

    #[test]
    fn quoting_keeps_a_hostile_value_one_word() {
        let w = vec!["curl".to_string(), "https://x/ip?a=1&b='$(id)'".to_string()];
        assert_eq!(
            remote_command(&w),
            r#"'curl' 'https://x/ip?a=1&b='\''$(id)'\'''"#
        );
    }

    #[test]
    fn is_active_answers_with_a_state_whatever_the_exit() {
        let a = vec!["systemctl".to_string()];
        assert_eq!(
            active_state("gw", &a, Ok(out(Some(0), "active\n", ""))),
            Look::seen("active".to_string())
        );
        assert_eq!(
            active_state("gw", &a, Ok(out(Some(3), "failed\n", ""))),
            Look::seen("failed".to_string())
        );
        let Look::CouldNotLook { reason } = active_state(
            "gw",
            &a,
            Ok(out(Some(127), "", "sh: 1: systemctl: not found\n")),
        ) else {
            panic!("no state printed must be could-not-look");
        };
        assert!(
            reason.contains("gw: `systemctl` exited 127: sh: 1: systemctl: not found"),
            "{reason}"
        );
    }

    #[test]
    fn curl_errors_are_the_probes_answer_but_a_missing_curl_is_not() {
        let a = vec!["curl".to_string()];
        assert_eq!(
            exit_ip("gw", &a, Ok(out(Some(0), "158.173.241.20\n", ""))),
            Look::seen(Ok("158.173.241.20".parse().expect("ip")))
        );
        match exit_ip(
            "gw",
            &a,
            Ok(out(Some(28), "", "curl: (28) Connection timed out\n")),
        ) {
            Look::Seen { value: Err(e) } => assert!(e.contains("curl exited 28"), "{e}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            exit_ip("gw", &a, Ok(out(Some(127), "", "not found"))),
            Look::CouldNotLook { .. }
        ));
        assert!(matches!(
            exit_ip("gw", &a, Err("gw (127.0.0.1:1): cannot connect".into())),
            Look::CouldNotLook { .. }
        ));
    }

    #[test]
    fn a_cut_or_failed_journal_is_not_read() {
        let a = vec!["journalctl".to_string()];
        let mut o = out(Some(0), "a\nb\n", "");
        assert_eq!(
            journal_lines("gw", &a, Ok(o.clone())),
            Look::seen(vec!["a".to_string(), "b".to_string()])
        );
        o.stdout_truncated = true;
        assert!(matches!(
            journal_lines("gw", &a, Ok(o)),
            Look::CouldNotLook { .. }
        ));
        assert!(matches!(
            journal_lines(
                "gw",
                &a,
                Ok(out(Some(1), "", "Failed to get journal access"))
            ),
            Look::CouldNotLook { .. }
        ));
    }
}
