//! The etcd pane, looked at over SSH: every k3s server of the chosen environments (the
//! members of its embedded etcd), one read-only look each, judged by `checks::live::etcd`.
//!
//! Owns: which hosts are members (the environment's `servers` group from hk-console.yaml),
//! what to read on each (the member's metrics URL, hostvar `etcd_metrics_url`, default
//! k3s's own `http://127.0.0.1:2381/metrics`; and `/proc/pressure/io`), the two read-only
//! commands sent (see [`Commands`], every word shell-quoted), their output turned into an
//! [`EtcdMemberObs`], the one-shot [`EtcdProbe::look`] and the poller [`spawn_etcd_poll`];
//! and, for an environment whose cluster is reachable ([`EtcdProbe::with_api`]), quorum's
//! live source: `GET /readyz/etcd` and one LIST of the nodes through its API endpoint.
//!
//! Why SSH: the API server does not say which member leads, nor how long each member's WAL
//! fsyncs take; k3s serves etcd's metrics on each server's loopback only, and IO pressure
//! is a kernel file. Both are read-only reads.
//!
//! Must not: judge (the rules are `checks::live::etcd`, the parsers `parse_etcd_metrics` /
//! `parse_psi`), run anything but its two read-only commands (only an `Executor<ReadOnly>`
//! is held) and the two API reads (GET and LIST only), or panic on a host that cannot be reached (a [`Look::CouldNotLook`] naming it).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::ssh_look::failed;
use crate::exec::settings::{SshConfig, SshDefaults};
use crate::exec::{CommandOutput, Executor, ReadOnly, SshOptions};
use crate::hostvar::{http_url, string_var, HostVarError};
use hk_engine::checks::live::{self, EtcdMemberObs, EtcdPane, EtcdPolicy, Look, Timestamp};
use hk_engine::repo::Repo;

/// The hostvar naming a server's etcd metrics URL.
pub const VAR_METRICS_URL: &str = "etcd_metrics_url";
/// k3s's default: etcd's metrics listener on the server's loopback.
pub const DEFAULT_METRICS_URL: &str = "http://127.0.0.1:2381/metrics";
/// The kernel's IO pressure file.
pub const PSI_FILE: &str = "/proc/pressure/io";
/// The hostvar naming a server's etcd client URL (its own member's).
pub const VAR_CLIENT_URL: &str = "etcd_client_url";
/// k3s's default: etcd's client listener on the server's loopback.
pub const DEFAULT_CLIENT_URL: &str = "https://127.0.0.1:2379";
/// The hostvar naming the directory of the server's etcd client certificates.
pub const VAR_TLS_DIR: &str = "etcd_tls_dir";
/// k3s's default (`--data-dir` /var/lib/rancher/k3s): the CA etcd serves with and the
/// client certificate k3s itself uses against etcd.
pub const DEFAULT_TLS_DIR: &str = "/var/lib/rancher/k3s/server/tls/etcd";
/// The hostvar saying whether the reads go through `sudo -n` (k3s keeps the client key
/// readable by root only); default true.
pub const VAR_CLIENT_BECOME: &str = "etcd_client_become";
/// The key the quorum read asks for (it need not exist: etcd answers a linearizable read
/// only through a leader with a quorum).
pub const QUORUM_READ_KEY: &str = "hk-console/quorum-read";
/// How long the quorum read may take (Talos's: a member failing a quorum read within 15 s
/// refuses an upgrade).
pub const QUORUM_READ_DEADLINE: Duration = Duration::from_secs(15);

/// Where one server's member is asked, and with which certificates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSpec {
    pub url: String,
    pub cacert: String,
    pub cert: String,
    pub key: String,
    /// Run `curl` under `sudo -n` (never prompting: a password it would need is a named
    /// could-not-look).
    pub become_root: bool,
}

/// The member's client-API reads, as argv: `curl` with the server's etcd client
/// certificates, POSTing etcd's gateway (every one a read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCommands {
    pub members: Vec<String>,
    pub status: Vec<String>,
    pub alarms: Vec<String>,
    pub quorum_read: Vec<String>,
}

impl ClientSpec {
    /// `curl ... -X POST -d BODY URL/PATH` against this member's gateway with its client
    /// certificates (under `sudo -n` where `become_root`), given `max` to answer (at least
    /// 1 s). The reads below and the leader move (`crate::etcd_leader`) are all this one.
    pub fn post(&self, max: Duration, body: &str, path: &str) -> Vec<String> {
        let sudo: &[&str] = if self.become_root {
            &["sudo", "-n"]
        } else {
            &[]
        };
        let mut argv: Vec<String> = sudo.iter().map(|s| s.to_string()).collect();
        argv.extend(
            [
                "curl",
                "-sS",
                "--max-time",
                &max.as_secs().max(1).to_string(),
                "--cacert",
                &self.cacert,
                "--cert",
                &self.cert,
                "--key",
                &self.key,
                "-X",
                "POST",
                "-d",
                body,
                &format!("{}{path}", self.url.trim_end_matches('/')),
            ]
            .map(str::to_string),
        );
        argv
    }
}

impl ClientCommands {
    pub fn new(spec: &ClientSpec, max_time: Duration) -> Self {
        let curl = |max: Duration, body: &str, path: &str| spec.post(max, body, path);
        let key = data_encoding::BASE64.encode(QUORUM_READ_KEY.as_bytes());
        ClientCommands {
            members: curl(max_time, "{}", "/v3/cluster/member/list"),
            status: curl(max_time, "{}", "/v3/maintenance/status"),
            // An empty request is action GET (0): the alarms raised.
            alarms: curl(max_time, "{}", "/v3/maintenance/alarm"),
            quorum_read: curl(
                QUORUM_READ_DEADLINE,
                &format!("{{\"key\":\"{key}\"}}"),
                "/v3/kv/range",
            ),
        }
    }
}

/// How `host`'s member is asked: `etcd_client_url` (an https URL; k3s's etcd takes only
/// TLS clients) and the certificates in `etcd_tls_dir`, k3s's defaults where the repo
/// names neither. A value that cannot be rendered or is no URL is an error naming the host
/// and the variable.
pub fn client_spec(repo: &Repo, host: &str) -> Result<ClientSpec, HostVarError> {
    let url = string_var(repo, host, VAR_CLIENT_URL, DEFAULT_CLIENT_URL)?;
    crate::hostvar::check_word(host, VAR_CLIENT_URL, &url)?;
    let url = http_url(host, VAR_CLIENT_URL, url)?;
    let dir = string_var(repo, host, VAR_TLS_DIR, DEFAULT_TLS_DIR)?;
    crate::hostvar::check_word(host, VAR_TLS_DIR, &dir)?;
    let dir = dir.trim_end_matches('/');
    Ok(ClientSpec {
        url,
        cacert: format!("{dir}/server-ca.crt"),
        cert: format!("{dir}/client.crt"),
        key: format!("{dir}/client.key"),
        become_root: crate::hostvar::bool_var(repo, host, VAR_CLIENT_BECOME, true)?,
    })
}

/// The two read-only commands of one member's look, as argv.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commands {
    /// `curl -sS --max-time N URL`
    pub metrics: Vec<String>,
    /// `cat /proc/pressure/io`
    pub psi: Vec<String>,
}

impl Commands {
    pub fn new(metrics_url: &str, max_time: Duration) -> Self {
        let max_time = max_time.as_secs().max(1).to_string();
        Commands {
            metrics: ["curl", "-sS", "--max-time", &max_time, metrics_url]
                .map(str::to_string)
                .to_vec(),
            psi: vec!["cat".to_string(), PSI_FILE.to_string()],
        }
    }
}

/// One member to look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSpec {
    pub env: String,
    pub host: String,
    pub address: String,
    /// The metrics URL, or why it cannot be worked out (a could-not-look for the metrics).
    pub metrics_url: Result<String, HostVarError>,
    /// Where its member's client API is asked, or why that cannot be worked out.
    pub client: Result<ClientSpec, HostVarError>,
}

/// The metrics URL of `host`: its rendered `etcd_metrics_url`, the k3s default where the
/// repo defines none. A value that cannot be rendered, is no string or no http(s) URL is an
/// error naming the host and the variable, never the default in disguise.
pub fn metrics_url(repo: &Repo, host: &str) -> Result<String, HostVarError> {
    let url = string_var(repo, host, VAR_METRICS_URL, DEFAULT_METRICS_URL)?;
    if url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        // A URL is one word of the curl command line.
        return Err(HostVarError::NotHttpUrl {
            host: host.to_string(),
            var: VAR_METRICS_URL.to_string(),
            value: url,
        });
    }
    http_url(host, VAR_METRICS_URL, url)
}

/// Why an environment has no etcd members to look at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MembersError {
    #[error("no environment `{env}` in hk-console.yaml (known: {known})")]
    UnknownEnv { env: String, known: String },
    #[error("{env} has no servers (group `{group}` is empty): no etcd member to look at")]
    NoServers { env: String, group: String },
}

/// The members of `env`: its servers, in inventory order.
pub fn members(repo: &Repo, env: &str) -> Result<Vec<MemberSpec>, MembersError> {
    let e = repo
        .environment(env)
        .ok_or_else(|| MembersError::UnknownEnv {
            env: env.to_string(),
            known: repo.environment_names().join(", "),
        })?;
    if e.servers.is_empty() {
        return Err(MembersError::NoServers {
            env: env.to_string(),
            group: e.servers_group.clone(),
        });
    }
    Ok(e.servers
        .iter()
        .map(|s| MemberSpec {
            env: env.to_string(),
            host: s.name.clone(),
            address: s.address.clone(),
            metrics_url: metrics_url(repo, &s.name),
            client: client_spec(repo, &s.name),
        })
        .collect())
}

/// The servers' SSH side: a read-only executor (one connection per host, reused across
/// looks) and the hosts whose connection settings could not be worked out.
/// One member's WAL fsync histograms as scraped, oldest first: (when, (bound µs,
/// cumulative count)).
type FsyncScrapes = Vec<(Timestamp, Vec<(u64, u64)>)>;

pub struct EtcdProbe {
    exec: Arc<Executor<ReadOnly>>,
    unreachable: BTreeMap<String, String>,
    pub policy: EtcdPolicy,
    /// `curl --max-time`.
    pub curl_max_time: Duration,
    /// How long one command may take before it is stopped.
    pub command_timeout: Duration,
    /// Per environment, its cluster's client and settings: quorum is read through it.
    api: BTreeMap<String, (kube::Client, crate::cluster::WatchSettings)>,
    /// Per host, since when its member has not answered (its first failed look after the
    /// last one that answered): what "not answering since" says.
    silent_since: std::sync::Mutex<BTreeMap<String, Timestamp>>,
    /// The pre-flight's thresholds.
    pub preflight: live::PreflightPolicy,
    /// Per host, its member's leader-change counter as seen over the pre-flight's window.
    leader_changes: std::sync::Mutex<BTreeMap<String, Vec<(Timestamp, u64)>>>,
    /// Per host, its member's WAL fsync histogram as scraped over the last
    /// `FSYNC_WINDOW_MS` (and the last scrape before it): the p99 the pane shows is over
    /// that window, the disk now, not since the member started.
    fsync_seen: std::sync::Mutex<BTreeMap<String, FsyncScrapes>>,
}

impl std::fmt::Debug for EtcdProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdProbe")
            .field("unreachable", &self.unreachable)
            .field("policy", &self.policy)
            .finish()
    }
}

impl EtcdProbe {
    /// A pool for every server of the repo, connecting as the console does (the same
    /// settings path as the VPN look: hostvars, then `~/.ssh/config`).
    pub fn for_repo(repo: &Repo, ssh: SshOptions) -> Self {
        super::ssh_look::with_ssh_config(
            || all_servers(repo),
            |config, defaults| Self::for_repo_with(repo, ssh, config, defaults),
            |p| &mut p.unreachable,
        )
    }

    /// [`EtcdProbe::for_repo`] with `~/.ssh/config` and the user/home defaults given.
    pub fn for_repo_with(
        repo: &Repo,
        ssh: SshOptions,
        ssh_config: &SshConfig,
        defaults: &SshDefaults,
    ) -> Self {
        let (exec, unreachable) =
            super::ssh_look::read_only_ssh(repo, ssh, all_servers(repo), ssh_config, defaults);
        EtcdProbe {
            exec: Arc::new(exec),
            unreachable,
            policy: EtcdPolicy::default(),
            curl_max_time: Duration::from_secs(5),
            command_timeout: Duration::from_secs(10),
            api: BTreeMap::new(),
            silent_since: std::sync::Mutex::new(BTreeMap::new()),
            preflight: live::PreflightPolicy::default(),
            leader_changes: std::sync::Mutex::new(BTreeMap::new()),
            fsync_seen: std::sync::Mutex::new(BTreeMap::new()),
        }
    }

    /// Read `env`'s quorum through `client` (its API endpoint) on every look.
    pub fn with_api(
        mut self,
        env: &str,
        client: kube::Client,
        settings: crate::cluster::WatchSettings,
    ) -> Self {
        self.api.insert(env.to_string(), (client, settings));
        self
    }

    /// `/readyz/etcd` and the servers' Ready conditions through the API endpoint, both
    /// bounded by the settings' request timeout (a frozen server is a could-not-look).
    async fn api_look(
        client: &kube::Client,
        settings: &crate::cluster::WatchSettings,
        servers: &[String],
    ) -> live::EtcdApiObs {
        let nodes = async {
            let api: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
            let lp = kube::api::ListParams::default();
            match tokio::time::timeout(settings.request_timeout, api.list(&lp)).await {
                Ok(Ok(l)) => Look::seen(
                    l.items
                        .iter()
                        .map(crate::cluster::convert::node)
                        .filter(|n| servers.contains(&n.name))
                        .map(|n| (n.name, n.ready))
                        .collect(),
                ),
                Ok(Err(e)) => {
                    Look::could_not(format!("list nodes: {}", crate::cluster::explain(&e)))
                }
                Err(_) => Look::could_not(format!(
                    "list nodes: no answer within {} s",
                    settings.request_timeout.as_secs()
                )),
            }
        };
        let (readyz, servers_ready) = tokio::join!(
            crate::cluster::health_probe::readyz_etcd(client, settings),
            nodes
        );
        live::EtcdApiObs {
            readyz,
            servers_ready,
        }
    }

    /// How many times a connection to `host` was opened (1 = reused ever since).
    pub fn connects(&self, host: &str) -> usize {
        self.exec.ssh().connects(host)
    }

    /// One read-only command on `host`, the path a runbook `ssh` step with `mutates: false`
    /// takes (classified, then `Executor::run`).
    async fn run(
        &self,
        host: &str,
        argv: &[String],
        cancel: &CancellationToken,
    ) -> Result<CommandOutput, String> {
        let look = super::ssh_look::ReadOnlyLook {
            id: "etcd-look",
            title: "etcd",
            timeout: self.command_timeout,
        };
        look.run(&self.exec, host, argv, cancel).await
    }

    /// One read-only command on `host` whose stdout is handed to `stdout` raw as it
    /// arrives (not collected, not capped): etcd's snapshot stream.
    async fn stream(
        &self,
        host: &str,
        argv: &[String],
        timeout: Duration,
        cancel: &CancellationToken,
        stdout: &mut crate::exec::ssh::RawSink<'_>,
    ) -> Result<CommandOutput, String> {
        if let Some(why) = self.unreachable.get(host) {
            return Err(why.clone());
        }
        let opts = crate::exec::ssh::ExecOptions {
            timeout: Some(timeout),
            cancel: cancel.clone(),
            redactor: self.exec.redactor().clone(),
            ..crate::exec::ssh::ExecOptions::default()
        };
        self.exec
            .ssh()
            .exec_to(host, &super::ssh_look::remote_command(argv), &opts, stdout)
            .await
            .map_err(|e| e.to_string())
    }

    /// Everything seen on one member: its metrics and IO pressure, and what it answers on
    /// etcd's client API. Never fails: what could not be seen is a could-not-look naming
    /// the host.
    pub async fn observe(
        &self,
        spec: &MemberSpec,
        cancel: &CancellationToken,
    ) -> (EtcdMemberObs, live::EtcdClientObs) {
        let host = spec.host.as_str();
        let unseen = |why: String| {
            (
                EtcdMemberObs {
                    host: spec.host.clone(),
                    address: spec.address.clone(),
                    metrics: Look::could_not(why.clone()),
                    io_pressure: Look::could_not(why.clone()),
                },
                client_unseen(host, &why),
            )
        };
        let connected = match self.unreachable.get(host) {
            Some(why) => Err(why.clone()),
            None => tokio::select! {
                r = self.exec.ssh().connect(host) => r.map_err(|e| e.to_string()),
                _ = cancel.cancelled() => Err(format!("{host}: look cancelled")),
            },
        };
        if let Err(why) = connected {
            return unseen(why);
        }
        let psi_cmd = Commands::new(DEFAULT_METRICS_URL, self.curl_max_time).psi;
        let metrics = async {
            match &spec.metrics_url {
                Err(why) => Look::could_not(why.to_string()),
                Ok(url) => {
                    let argv = Commands::new(url, self.curl_max_time).metrics;
                    metrics_look(host, &argv, self.run(host, &argv, cancel).await)
                }
            }
        };
        let psi = async { psi_look(host, &psi_cmd, self.run(host, &psi_cmd, cancel).await) };
        let client = async {
            match &spec.client {
                Err(why) => client_unseen(host, &why.to_string()),
                Ok(c) => self.client_look(host, c, cancel).await,
            }
        };
        let (metrics, io_pressure, client) = tokio::join!(metrics, psi, client);
        (
            EtcdMemberObs {
                host: spec.host.clone(),
                address: spec.address.clone(),
                metrics,
                io_pressure,
            },
            client,
        )
    }

    /// The member's four client-API reads, concurrently over the one connection.
    async fn client_look(
        &self,
        host: &str,
        spec: &ClientSpec,
        cancel: &CancellationToken,
    ) -> live::EtcdClientObs {
        let c = ClientCommands::new(spec, self.curl_max_time);
        let quorum_look = super::ssh_look::ReadOnlyLook {
            id: "etcd-quorum-read",
            title: "etcd quorum read",
            timeout: QUORUM_READ_DEADLINE + Duration::from_secs(5),
        };
        let (members, status, alarms, quorum_read) = tokio::join!(
            async {
                client_answer(host, &c.members, self.run(host, &c.members, cancel).await).and_then(
                    |t| {
                        live::parse_member_list(&t).map_err(|e| format!("{host}: member list: {e}"))
                    },
                )
            },
            async {
                client_answer(host, &c.status, self.run(host, &c.status, cancel).await).and_then(
                    |t| live::parse_status(&t).map_err(|e| format!("{host}: status: {e}")),
                )
            },
            async {
                client_answer(host, &c.alarms, self.run(host, &c.alarms, cancel).await).and_then(
                    |t| live::parse_alarms(&t).map_err(|e| format!("{host}: alarms: {e}")),
                )
            },
            async {
                let r = quorum_look
                    .run(&self.exec, host, &c.quorum_read, cancel)
                    .await;
                client_answer(host, &c.quorum_read, r).and_then(|t| {
                    live::parse_range(&t).map_err(|e| format!("{host}: quorum read: {e}"))
                })
            },
        );
        live::EtcdClientObs {
            host: host.to_string(),
            members: look(members),
            status: look(status),
            alarms: look(alarms),
            quorum_read: look(quorum_read),
            leader_changes: None,
        }
    }

    /// One look at every member of `env`, concurrently, judged. Returns the pane and the
    /// clock time it was judged at.
    pub async fn look(
        &self,
        repo: &Repo,
        env: &str,
        cancel: &CancellationToken,
    ) -> (EtcdPane, Timestamp) {
        self.look_via(repo, env, self.api.get(env), cancel).await
    }

    /// [`EtcdProbe::look`] with quorum read through `api` (a client the caller built for
    /// `env`, as `observe --once` does), or not at all (`None`).
    pub async fn look_via(
        &self,
        repo: &Repo,
        env: &str,
        api: Option<&(kube::Client, crate::cluster::WatchSettings)>,
        cancel: &CancellationToken,
    ) -> (EtcdPane, Timestamp) {
        self.look_members(env, members(repo, env), api, cancel)
            .await
    }

    /// [`EtcdProbe::look_via`] on members worked out before (`members(repo, env)`).
    pub async fn look_members(
        &self,
        env: &str,
        specs: Result<Vec<MemberSpec>, MembersError>,
        api: Option<&(kube::Client, crate::cluster::WatchSettings)>,
        cancel: &CancellationToken,
    ) -> (EtcdPane, Timestamp) {
        let specs = match specs {
            Ok(s) => s,
            Err(why) => {
                let mut pane = live::etcd(env, &[], &self.policy);
                pane.verdicts.push(live::Verdict {
                    pane: live::Pane::Etcd,
                    rule: live::Rule::CouldNotLook,
                    severity: live::Severity::Unknown,
                    env: env.to_string(),
                    subject: env.to_string(),
                    message: format!("could not look: {why}"),
                });
                return (pane, hk_engine::journal::now());
            }
        };
        let looks = specs.iter().map(|s| self.observe(s, cancel));
        let servers: Vec<String> = specs.iter().map(|s| s.host.clone()).collect();
        let api = async {
            match api {
                Some((client, settings)) => tokio::select! {
                    a = Self::api_look(client, settings, &servers) => Some(a),
                    _ = cancel.cancelled() => None,
                },
                None => None,
            }
        };
        let (both, api) = tokio::join!(futures::future::join_all(looks), api);
        let (mut observed, mut client): (Vec<EtcdMemberObs>, Vec<live::EtcdClientObs>) =
            both.into_iter().unzip();
        let now = hk_engine::journal::now();
        {
            // The disk now: WAL fsync p99 over the fsyncs since a scrape at least a window
            // old where one is kept (and enough fsyncs came), else the whole histogram.
            let mut history = self
                .fsync_seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for m in observed.iter_mut() {
                let Look::Seen { value } = &mut m.metrics else {
                    continue;
                };
                if value.wal_fsync_buckets.is_empty() {
                    continue;
                }
                let samples = history.entry(m.host.clone()).or_default();
                samples.push((now, value.wal_fsync_buckets.clone()));
                let start = now.0.saturating_sub(live::FSYNC_WINDOW_MS);
                let keep_from = samples.iter().rposition(|(t, _)| t.0 <= start).unwrap_or(0);
                samples.drain(..keep_from);
                let (first_at, first) = &samples[0];
                if samples.len() < 2 || first_at.0 >= now.0 {
                    continue;
                }
                if let Some(p99) = live::fsync_p99_between(first, &value.wal_fsync_buckets) {
                    value.wal_fsync_p99_ms = Some(p99);
                    value.wal_fsync_window_s = Some((now.0 - first_at.0).div_ceil(1000));
                }
            }
        }
        {
            let mut history = self
                .leader_changes
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let window = self.preflight.leader_changes_window_ms;
            for (m, c) in observed.iter().zip(client.iter_mut()) {
                let Some(n) = m.metrics.as_seen().and_then(|x| x.leader_changes) else {
                    continue;
                };
                let samples = history.entry(m.host.clone()).or_default();
                samples.push((now, n));
                // Keep the window and the last sample before it.
                let start = now.0.saturating_sub(window);
                let keep_from = samples.iter().rposition(|(t, _)| t.0 <= start).unwrap_or(0);
                samples.drain(..keep_from);
                c.leader_changes = live::leader_changes(samples, window);
            }
        }
        let since = {
            let mut silent = self
                .silent_since
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for m in &observed {
                match m.metrics {
                    Look::Seen { .. } => {
                        silent.remove(&m.host);
                    }
                    Look::CouldNotLook { .. } => {
                        silent.entry(m.host.clone()).or_insert(now);
                    }
                }
            }
            silent.clone()
        };
        let mut pane = live::etcd_since(env, &observed, &self.policy, &since);
        live::judge_members(&mut pane, &client, &self.preflight, &since);
        if let Some(api) = api {
            live::judge_quorum(&mut pane, &api);
        }
        (pane, now)
    }
}

/// What a health gate reads etcd's members with (issue 39): the probe, and each
/// environment's members as the repo names them when the source was made.
#[derive(Clone)]
pub struct EtcdSource {
    pub probe: Arc<EtcdProbe>,
    members: BTreeMap<String, Result<Vec<MemberSpec>, MembersError>>,
    /// Per (environment, server): its member's WAL fsync p99 (µs) as the last look before
    /// a change of that server saw it (the leader look and move note it), for the health
    /// gate after the change to judge its disk against.
    before_change: Arc<std::sync::Mutex<BTreeMap<(String, String), u64>>>,
}

impl std::fmt::Debug for EtcdSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdSource")
            .field("envs", &self.members.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl EtcdSource {
    pub fn new(repo: &Repo, probe: Arc<EtcdProbe>) -> Self {
        EtcdSource {
            probe,
            members: repo
                .environments
                .iter()
                .map(|e| (e.name.clone(), members(repo, &e.name)))
                .collect(),
            before_change: Arc::default(),
        }
    }

    /// `host`'s WAL fsync p99 (ms, as the looks give it) seen right before a step changes
    /// it: the health gate after the change wants its disk back at or under it.
    pub fn note_before_change(&self, env: &str, host: &str, p99_ms: f64) {
        let us = if p99_ms.is_finite() {
            (p99_ms * 1000.0).round() as u64
        } else {
            u64::MAX
        };
        if let Ok(mut m) = self.before_change.lock() {
            m.insert((env.to_string(), host.to_string()), us);
        }
    }

    /// `env`'s members as the repo named them when the source was made.
    pub fn specs(&self, env: &str) -> Result<Vec<MemberSpec>, MembersError> {
        self.members.get(env).cloned().unwrap_or_else(|| {
            Err(MembersError::UnknownEnv {
                env: env.to_string(),
                known: self.members.keys().cloned().collect::<Vec<_>>().join(", "),
            })
        })
    }

    /// One look at `env`'s members: their metrics and their client API (the etcd pane's).
    pub async fn pane(&self, env: &str, cancel: &CancellationToken) -> EtcdPane {
        self.probe
            .look_members(env, self.specs(env), None, cancel)
            .await
            .0
    }

    /// One read on `host` whose stdout goes to `stdout` as it arrives (etcd's snapshot
    /// stream), over the looks' own connection, bounded by `timeout`.
    pub async fn stream(
        &self,
        host: &str,
        argv: &[String],
        timeout: Duration,
        cancel: &CancellationToken,
        stdout: &mut crate::exec::ssh::RawSink<'_>,
    ) -> Result<CommandOutput, String> {
        self.probe.stream(host, argv, timeout, cancel, stdout).await
    }

    /// `env`'s members read as etcd: the client view, or why it could not be had.
    pub async fn read(&self, env: &str, cancel: &CancellationToken) -> Look<live::EtcdClientView> {
        let pane = self.pane(env, cancel).await;
        match pane.client {
            Some(mut view) => {
                // The disks as this look scraped them, and as they were before a change.
                view.wal_fsync = pane
                    .members
                    .iter()
                    .filter_map(|m| {
                        let b = &m.metrics.as_ref()?.wal_fsync_buckets;
                        (!b.is_empty()).then(|| (m.host.clone(), b.clone()))
                    })
                    .collect();
                if let Ok(m) = self.before_change.lock() {
                    view.fsync_before_change_us = m
                        .iter()
                        .filter(|((e, _), _)| e == env)
                        .map(|((_, h), us)| (h.clone(), *us))
                        .collect();
                }
                Look::seen(view)
            }
            None => Look::could_not(
                pane.verdicts
                    .iter()
                    .find(|v| v.rule == live::Rule::CouldNotLook)
                    .map(|v| v.message.clone())
                    .unwrap_or_else(|| format!("{env}: etcd's members were not read")),
            ),
        }
    }
}

impl crate::cluster::health_probe::EtcdMembers for EtcdSource {
    fn read<'a>(
        &'a self,
        env: &'a str,
        cancel: &'a CancellationToken,
    ) -> futures::future::BoxFuture<'a, Look<live::EtcdClientView>> {
        Box::pin(EtcdSource::read(self, env, cancel))
    }
}

/// Every server of every environment of the repo (each once).
fn all_servers(repo: &Repo) -> Vec<String> {
    let mut hosts: Vec<String> = repo
        .environments
        .iter()
        .flat_map(|e| e.servers.iter().map(|h| h.name.clone()))
        .collect();
    hosts.sort();
    hosts.dedup();
    hosts
}

/// `curl URL` for the member's metrics: exit 0 with etcd's metrics = seen; anything else
/// (curl's error, a body that is no etcd metrics, output cut at the cap) = could not look,
/// naming the host and the command.
pub fn metrics_look(
    host: &str,
    argv: &[String],
    result: Result<CommandOutput, String>,
) -> Look<live::EtcdMetrics> {
    let out = match result {
        Ok(out) => out,
        Err(why) => return Look::could_not(why),
    };
    if out.exit_status != Some(0) || out.exit_signal.is_some() {
        return Look::could_not(failed(host, argv, &out));
    }
    if out.stdout_truncated {
        return Look::could_not(format!(
            "{host}: `{}` printed more than the SSH output cap",
            argv.join(" ")
        ));
    }
    match live::parse_etcd_metrics(&out.stdout) {
        Ok(m) => Look::seen(m),
        Err(e) => Look::could_not(format!("{host}: `{}`: {e}", argv.join(" "))),
    }
}

fn look<T>(r: Result<T, String>) -> Look<T> {
    match r {
        Ok(v) => Look::seen(v),
        Err(why) => Look::could_not(why),
    }
}

/// Every client-API read of `host` failed for one reason (no connection, no URL).
fn client_unseen(host: &str, why: &str) -> live::EtcdClientObs {
    live::EtcdClientObs {
        host: host.to_string(),
        members: Look::could_not(why),
        status: Look::could_not(why),
        alarms: Look::could_not(why),
        quorum_read: Look::could_not(why),
        leader_changes: None,
    }
}

/// A client-API `curl`'s answer: its output when it exited 0 (etcd's own errors come back
/// as a JSON body, which the parsers name), else why not, naming the host and the command.
pub fn client_answer(
    host: &str,
    argv: &[String],
    result: Result<CommandOutput, String>,
) -> Result<String, String> {
    let out = result?;
    if out.exit_status != Some(0) || out.exit_signal.is_some() {
        return Err(failed(host, argv, &out));
    }
    if out.stdout_truncated {
        return Err(format!(
            "{host}: `{}` printed more than the SSH output cap",
            argv.join(" ")
        ));
    }
    Ok(out.stdout)
}

/// `cat /proc/pressure/io`: exit 0 with PSI text = seen; a kernel without PSI (no such
/// file) or any other failure = could not look, naming the host.
pub fn psi_look(
    host: &str,
    argv: &[String],
    result: Result<CommandOutput, String>,
) -> Look<live::IoPressure> {
    let out = match result {
        Ok(out) => out,
        Err(why) => return Look::could_not(why),
    };
    if out.exit_status != Some(0) || out.exit_signal.is_some() {
        return Look::could_not(failed(host, argv, &out));
    }
    match live::parse_psi(&out.stdout) {
        Ok(p) => Look::seen(p),
        Err(e) => Look::could_not(format!("{host}: {PSI_FILE}: {e}")),
    }
}

/// Looks at every environment of `envs` every `period` (start to start) and sends each
/// pane through `wrap` on `tx`. Stops when `cancel` trips or the receiver is gone.
pub fn spawn_etcd_poll<T, F>(
    repo: Arc<Repo>,
    envs: Vec<String>,
    probe: Arc<EtcdProbe>,
    period: Duration,
    tx: mpsc::Sender<T>,
    wrap: F,
    cancel: CancellationToken,
) -> JoinHandle<()>
where
    T: Send + 'static,
    F: Fn(EtcdPane, Timestamp) -> T + Send + 'static,
{
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period.max(Duration::from_millis(100)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = cancel.cancelled() => return,
            }
            let looks = envs.iter().map(|e| probe.look(&repo, e, &cancel));
            let panes = futures::future::join_all(looks).await;
            if cancel.is_cancelled() {
                return;
            }
            for (pane, at) in panes {
                tokio::select! {
                    r = tx.send(wrap(pane, at)) => if r.is_err() { return },
                    _ = cancel.cancelled() => return,
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::ssh_look::remote_command;

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
    fn the_two_commands_are_exactly_these() {
        let c = Commands::new(DEFAULT_METRICS_URL, Duration::from_secs(5));
        assert_eq!(
            remote_command(&c.metrics),
            "'curl' '-sS' '--max-time' '5' 'http://127.0.0.1:2381/metrics'"
        );
        assert_eq!(remote_command(&c.psi), "'cat' '/proc/pressure/io'");
    }

    #[test]
    fn failures_are_could_not_look_naming_the_host() {
        let a = vec!["curl".to_string()];
        let Look::CouldNotLook { reason } = metrics_look(
            "k3s-prod-1",
            &a,
            Ok(out(
                Some(7),
                "",
                "curl: (7) Failed to connect to 127.0.0.1 port 2381\n",
            )),
        ) else {
            panic!("a refused connection is no metrics");
        };
        assert!(
            reason.starts_with("k3s-prod-1: `curl` exited 7"),
            "{reason}"
        );
        let Look::CouldNotLook { reason } =
            metrics_look("k3s-prod-1", &a, Ok(out(Some(0), "<html>", "")))
        else {
            panic!("a page that is not etcd's is no metrics");
        };
        assert!(reason.contains("not an etcd member"), "{reason}");
        assert!(matches!(
            metrics_look("h", &a, Ok(out(Some(0), "etcd_server_is_leader 0\n", ""))),
            Look::Seen { .. }
        ));
        let c = vec!["cat".to_string()];
        let Look::CouldNotLook { reason } = psi_look(
            "k3s-dev-1",
            &c,
            Ok(out(
                Some(1),
                "",
                "cat: /proc/pressure/io: No such file or directory\n",
            )),
        ) else {
            panic!("no PSI file");
        };
        assert!(reason.contains("k3s-dev-1"), "{reason}");
        assert!(matches!(
            psi_look(
                "h",
                &c,
                Ok(out(
                    Some(0),
                    "some avg10=0.10 avg60=0.10 avg300=0.10 total=1\n",
                    ""
                ))
            ),
            Look::Seen { .. }
        ));
    }
}
