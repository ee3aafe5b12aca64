//! SSH over russh: one connection per host, reused for every probe and step (a channel
//! per command), strict host key checking, agent-then-key-file auth, keepalives, reconnect
//! with backoff, per-command timeout, capped output, cancellation.
//!
//! Owns: [`SshPool`], [`SshOptions`], [`SshError`], [`scan_host_key`] (for the explicit
//! `ssh trust` flow). Must not: decide whether a command may run (the capability types in
//! [`super`] do), prompt for anything, or keep a passphrase or password.
//!
//! Why one file over 800 lines: the code is about 840 lines around one `SshPool` (connect,
//! auth, host keys, reconnect, run) whose parts share its private connection state.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use russh::client::{self, Handle};
use russh::keys::agent::client::AgentClient;
use russh::keys::agent::AgentIdentity;
use russh::keys::{PrivateKeyWithHashAlg, PublicKey, PublicKeyOrCertificate};
use russh::{ChannelMsg, Disconnect, Sig};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::known_hosts::{self, HostKeyVerdict, KnownHosts};
use super::process::{OutputLine, Stream};
use super::redact::Redactor;
use super::settings::ConnectSettings;

/// How hard to try reconnecting after a drop.
#[derive(Debug, Clone)]
pub struct Backoff {
    pub attempts: u32,
    pub initial: Duration,
    pub max: Duration,
}

/// Client-wide SSH settings.
#[derive(Debug, Clone)]
pub struct SshOptions {
    /// Consulted in order: `~/.ssh/known_hosts`, then the one named in hk-console.yaml.
    pub known_hosts: Vec<PathBuf>,
    /// The ssh-agent socket (`SSH_AUTH_SOCK`), tried before key files.
    pub agent_socket: Option<PathBuf>,
    pub connect_timeout: Duration,
    pub keepalive_interval: Duration,
    /// Unanswered keepalives before the connection counts as dropped.
    pub keepalive_max: usize,
    pub reconnect: Backoff,
    /// Bytes kept per stream per command; the rest is dropped and flagged.
    pub max_output: usize,
    /// Channels (commands) one connection serves before the next command opens a fresh
    /// one. A console probes the same hosts every few seconds for hours; a server that
    /// keeps a little state per channel it closed itself (russh 0.65's server does: the
    /// client's answering CLOSE is ignored, its channel entry stays) would grow for as
    /// long as the connection lives. A handshake every few hundred commands costs little.
    pub channels_per_connection: usize,
}

impl SshOptions {
    /// `~/.ssh/known_hosts` (+ `extra_known_hosts`), `$SSH_AUTH_SOCK`, and defaults.
    pub fn from_env(extra_known_hosts: Option<PathBuf>) -> Self {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/"));
        let mut known = vec![home.join(".ssh").join("known_hosts")];
        known.extend(extra_known_hosts);
        SshOptions {
            known_hosts: known,
            agent_socket: std::env::var_os("SSH_AUTH_SOCK")
                .filter(|s| !s.is_empty())
                .map(PathBuf::from),
            ..SshOptions::with_known_hosts(Vec::new())
        }
    }

    /// Defaults with exactly these known_hosts files and no agent.
    pub fn with_known_hosts(known_hosts: Vec<PathBuf>) -> Self {
        SshOptions {
            known_hosts,
            agent_socket: None,
            connect_timeout: Duration::from_secs(10),
            keepalive_interval: Duration::from_secs(15),
            keepalive_max: 3,
            reconnect: Backoff {
                attempts: 5,
                initial: Duration::from_millis(200),
                max: Duration::from_secs(5),
            },
            max_output: 1 << 20,
            channels_per_connection: 128,
        }
    }
}

/// What can go wrong talking to a host. Messages are for the operator.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SshError {
    #[error("{host}: no connection settings for this host")]
    NoSettings { host: String },
    #[error(
        "{host} ({endpoint}): UNKNOWN host key {fingerprint}; expected an entry for {lookup} in {files}. \
         Refusing to connect; check the fingerprint out of band, then `hk-console ssh trust {host}`"
    )]
    UnknownHostKey {
        host: String,
        endpoint: String,
        lookup: String,
        fingerprint: String,
        files: String,
    },
    #[error(
        "{host} ({endpoint}): host key CHANGED: presented {fingerprint}, but expected {expected}. \
         Refusing to connect (possible man-in-the-middle, or the host was reinstalled)"
    )]
    ChangedHostKey {
        host: String,
        endpoint: String,
        fingerprint: String,
        expected: String,
    },
    #[error("{host} ({endpoint}): host key {fingerprint} is marked @revoked at {at}")]
    RevokedHostKey {
        host: String,
        endpoint: String,
        fingerprint: String,
        at: String,
    },
    #[error("{host}: cannot read known_hosts: {msg}")]
    KnownHosts { host: String, msg: String },
    #[error("{host} ({endpoint}): authentication as {user} failed; tried: {tried}{hint}")]
    AuthFailed {
        host: String,
        endpoint: String,
        user: String,
        tried: String,
        hint: String,
    },
    #[error("{host} ({endpoint}): cannot connect: {msg}")]
    Connect {
        host: String,
        endpoint: String,
        msg: String,
    },
    #[error("{host}: command timed out after {}: {command}", hk_engine::time::span(*after, hk_engine::time::Style::Words))]
    Timeout {
        host: String,
        command: String,
        after: Duration,
    },
    #[error("{host}: command cancelled: {command}")]
    Cancelled { host: String, command: String },
    #[error("{host}: channel failed: {msg}")]
    Channel { host: String, msg: String },
    #[error("{host}: stopped `{command}`: {why}")]
    Local {
        host: String,
        command: String,
        why: String,
    },
}

impl SshError {
    /// Errors that retrying cannot fix: a refused host key or failed auth.
    fn is_permanent(&self) -> bool {
        !matches!(self, SshError::Connect { .. })
    }
}

/// What one remote command did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutput {
    /// The remote exit status; None if it died by a signal or none was reported.
    pub exit_status: Option<u32>,
    pub exit_signal: Option<String>,
    /// Redacted, lossy UTF-8.
    pub stdout: String,
    pub stderr: String,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub elapsed: Duration,
}

/// Where [`SshPool::exec_to`] hands a command's stdout, raw, as it arrives.
pub type RawSink<'a> = dyn FnMut(&[u8]) -> Result<(), String> + Send + 'a;

/// Per-command options.
#[derive(Debug, Clone, Default)]
pub struct ExecOptions {
    pub timeout: Option<Duration>,
    pub cancel: CancellationToken,
    pub redactor: Redactor,
    /// Receives each complete redacted line as it arrives.
    pub sink: Option<mpsc::UnboundedSender<OutputLine>>,
}

/// Wraps a command for `become`: `sudo -n`, never a password prompt. A step that would need
/// a password fails, and [`needs_sudo_password`] recognises that failure.
pub fn become_command(command: &str) -> String {
    format!("sudo -n -- sh -c {}", shell_quote(command))
}

/// Whether stderr says `sudo -n` wanted a password.
pub fn needs_sudo_password(stderr: &str) -> bool {
    stderr.contains("a password is required") || stderr.contains("a terminal is required")
}

/// POSIX single-quoting.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Checks the server's key against known_hosts and records what it saw; accepts only a
/// trusted key (or, when scanning, accepts nothing).
struct Verifier {
    known: KnownHosts,
    names: Vec<String>,
    port: u16,
    seen: Arc<Mutex<Option<(HostKeyVerdict, PublicKey)>>>,
    scan_only: bool,
}

impl client::Handler for Verifier {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        server_public_key: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let key = match server_public_key {
            PublicKeyOrCertificate::PublicKey { key, .. } => key.clone(),
            // Host certificates would need @cert-authority support: refused, not guessed.
            PublicKeyOrCertificate::Certificate(c) => c.public_key().clone().into(),
        };
        let names: Vec<&str> = self.names.iter().map(String::as_str).collect();
        let verdict = self.known.check(&names, self.port, &key);
        let ok = !self.scan_only && matches!(verdict, HostKeyVerdict::Trusted { .. });
        if let Ok(mut s) = self.seen.lock() {
            *s = Some((verdict, key));
        }
        Ok(ok)
    }
}

type Conn = Arc<Handle<Verifier>>;

struct HostSlot {
    settings: ConnectSettings,
    conn: tokio::sync::Mutex<Option<Conn>>,
    connects: AtomicUsize,
    /// Channels asked of the current connection (see `SshOptions::channels_per_connection`).
    uses: AtomicUsize,
}

/// One SSH connection per host, opened on first use and reused; re-opened after a drop.
pub struct SshPool {
    options: Arc<SshOptions>,
    hosts: Mutex<HashMap<String, Arc<HostSlot>>>,
}

impl SshPool {
    pub fn new(options: SshOptions) -> Self {
        SshPool {
            options: Arc::new(options),
            hosts: Mutex::new(HashMap::new()),
        }
    }

    /// Registers (or replaces) how to reach a host; an open connection to it is kept only
    /// if the settings did not change.
    pub fn add_host(&self, settings: ConnectSettings) {
        if let Ok(mut h) = self.hosts.lock() {
            let keep = h
                .get(&settings.host_alias)
                .is_some_and(|s| s.settings == settings);
            if !keep {
                h.insert(
                    settings.host_alias.clone(),
                    Arc::new(HostSlot {
                        settings,
                        conn: tokio::sync::Mutex::new(None),
                        connects: AtomicUsize::new(0),
                        uses: AtomicUsize::new(0),
                    }),
                );
            }
        }
    }

    /// How many times a connection to `host` was established (1 = never reconnected).
    pub fn connects(&self, host: &str) -> usize {
        self.slot(host)
            .map(|s| s.connects.load(Ordering::SeqCst))
            .unwrap_or(0)
    }

    fn slot(&self, host: &str) -> Option<Arc<HostSlot>> {
        self.hosts.lock().ok().and_then(|h| h.get(host).cloned())
    }

    /// Opens the connection to `host` now (otherwise the first command does).
    pub async fn connect(&self, host: &str) -> Result<(), SshError> {
        let slot = self.slot(host).ok_or_else(|| SshError::NoSettings {
            host: host.to_string(),
        })?;
        self.handle(&slot, false).await.map(|_| ())
    }

    async fn handle(&self, slot: &HostSlot, force_new: bool) -> Result<Conn, SshError> {
        let mut guard = slot.conn.lock().await;
        if let Some(h) = guard.as_ref() {
            let worn =
                slot.uses.load(Ordering::SeqCst) >= self.options.channels_per_connection.max(1);
            if !force_new && !h.is_closed() && !worn {
                return Ok(h.clone());
            }
        }
        // Commands still running on the old connection keep it (their clone of the handle)
        // until they end; the connection closes when the last one lets go of it.
        *guard = None;
        let mut delay = self.options.reconnect.initial;
        let attempts = self.options.reconnect.attempts.max(1);
        let mut last = None;
        for attempt in 0..attempts {
            if attempt > 0 {
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(self.options.reconnect.max);
            }
            match open(&slot.settings, &self.options).await {
                Ok(h) => {
                    let h = Arc::new(h);
                    slot.connects.fetch_add(1, Ordering::SeqCst);
                    slot.uses.store(0, Ordering::SeqCst);
                    *guard = Some(h.clone());
                    return Ok(h);
                }
                Err(e) if e.is_permanent() => return Err(e),
                Err(e) => {
                    tracing::debug!(host = %slot.settings.host_alias, attempt, error = %e, "ssh connect failed");
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| SshError::Connect {
            host: slot.settings.host_alias.clone(),
            endpoint: slot.settings.endpoint(),
            msg: "no attempt made".into(),
        }))
    }

    /// Runs `command` on `host` over the host's connection (a new channel per command).
    /// A dropped connection is re-opened (with backoff) before the command is sent; once
    /// sent, a command is never re-sent.
    pub async fn exec(
        &self,
        host: &str,
        command: &str,
        opts: &ExecOptions,
    ) -> Result<CommandOutput, SshError> {
        self.exec_inner(host, command, opts, None).await
    }

    /// [`SshPool::exec`] with the command's stdout handed to `stdout` as it arrives, raw
    /// (not collected, not capped, not masked: bytes the caller writes somewhere, e.g. a
    /// snapshot); stderr is collected as `exec` collects it. An error from `stdout` stops
    /// the command and is returned as [`SshError::Local`].
    pub async fn exec_to(
        &self,
        host: &str,
        command: &str,
        opts: &ExecOptions,
        stdout: &mut RawSink<'_>,
    ) -> Result<CommandOutput, SshError> {
        self.exec_inner(host, command, opts, Some(stdout)).await
    }

    async fn exec_inner(
        &self,
        host: &str,
        command: &str,
        opts: &ExecOptions,
        mut raw_stdout: Option<&mut RawSink<'_>>,
    ) -> Result<CommandOutput, SshError> {
        let slot = self.slot(host).ok_or_else(|| SshError::NoSettings {
            host: host.to_string(),
        })?;
        let shown = opts.redactor.redact(command);
        let chan_err = |e: russh::Error| SshError::Channel {
            host: host.to_string(),
            msg: e.to_string(),
        };
        let started = Instant::now();
        let conn = tokio::select! {
            c = self.handle(&slot, false) => c?,
            _ = opts.cancel.cancelled() => return Err(SshError::Cancelled { host: host.to_string(), command: shown }),
        };
        slot.uses.fetch_add(1, Ordering::SeqCst);
        let mut channel = match conn.channel_open_session().await {
            Ok(c) => c,
            // The connection died between uses (the drop not noticed yet): the command was
            // not sent, so a fresh connection is safe.
            Err(_) => {
                let conn = self.handle(&slot, true).await?;
                conn.channel_open_session().await.map_err(chan_err)?
            }
        };
        channel.exec(true, command).await.map_err(chan_err)?;
        // No input for the command (as `ssh -n`): its stdin closes at once, so a command
        // that reads it ends instead of waiting, and the far side need not wait for data.
        channel.eof().await.map_err(chan_err)?;

        let cap = self.options.max_output;
        let mut out = Collector::new(cap, &opts.redactor, opts.sink.as_ref());
        let mut exit_status = None;
        let mut exit_signal = None;
        let deadline = opts.timeout.map(|t| tokio::time::Instant::now() + t);
        loop {
            tokio::select! {
                msg = channel.wait() => match msg {
                    None => break,
                    Some(ChannelMsg::Data { data }) => match raw_stdout.as_mut() {
                        None => out.push(Stream::Stdout, &data),
                        Some(sink) => if let Err(why) = sink(&data) {
                            stop_remote(&channel).await;
                            return Err(SshError::Local { host: host.to_string(), command: shown, why });
                        },
                    },
                    Some(ChannelMsg::ExtendedData { data, ext: 1 }) => out.push(Stream::Stderr, &data),
                    Some(ChannelMsg::ExitStatus { exit_status: s }) => exit_status = Some(s),
                    Some(ChannelMsg::ExitSignal { signal_name, .. }) => exit_signal = Some(signal_words(&signal_name)),
                    Some(ChannelMsg::Close) => break,
                    Some(_) => {}
                },
                _ = sleep_until_opt(deadline) => {
                    stop_remote(&channel).await;
                    // The timeout as it was set (`40s`), not the instant the timer fired (`40.003s`).
                    return Err(SshError::Timeout { host: host.to_string(), command: shown, after: opts.timeout.unwrap_or_else(|| started.elapsed()) });
                }
                _ = opts.cancel.cancelled() => {
                    stop_remote(&channel).await;
                    return Err(SshError::Cancelled { host: host.to_string(), command: shown });
                }
            }
        }
        if exit_status.is_none() && exit_signal.is_none() && conn.is_closed() {
            return Err(SshError::Channel {
                host: host.to_string(),
                msg: "connection dropped while the command ran (it may or may not have completed)"
                    .into(),
            });
        }
        let (stdout, stdout_truncated, stderr, stderr_truncated) = out.finish();
        Ok(CommandOutput {
            exit_status,
            exit_signal,
            stdout,
            stderr,
            stdout_truncated,
            stderr_truncated,
            elapsed: started.elapsed(),
        })
    }

    /// Closes every connection politely.
    pub async fn close_all(&self) {
        let slots: Vec<Arc<HostSlot>> = self
            .hosts
            .lock()
            .map(|h| h.values().cloned().collect())
            .unwrap_or_default();
        for s in slots {
            if let Some(h) = s.conn.lock().await.take() {
                let _ = h.disconnect(Disconnect::ByApplication, "", "en").await;
            }
        }
    }
}

async fn stop_remote(channel: &russh::Channel<client::Msg>) {
    // OpenSSH honours the signal request; closing the channel also closes the process's
    // pipes, which ends most commands that are still writing.
    let _ = channel.signal(Sig::KILL).await;
    let _ = channel.close().await;
}

async fn sleep_until_opt(t: Option<tokio::time::Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

struct Collector<'a> {
    cap: usize,
    redactor: &'a Redactor,
    sink: Option<&'a mpsc::UnboundedSender<OutputLine>>,
    bufs: [Vec<u8>; 2],
    truncated: [bool; 2],
    partial: [Vec<u8>; 2],
}

impl<'a> Collector<'a> {
    fn new(
        cap: usize,
        redactor: &'a Redactor,
        sink: Option<&'a mpsc::UnboundedSender<OutputLine>>,
    ) -> Self {
        Collector {
            cap,
            redactor,
            sink,
            bufs: [Vec::new(), Vec::new()],
            truncated: [false, false],
            partial: [Vec::new(), Vec::new()],
        }
    }

    fn push(&mut self, stream: Stream, data: &[u8]) {
        let i = usize::from(stream == Stream::Stderr);
        let room = self.cap.saturating_sub(self.bufs[i].len());
        if data.len() > room {
            self.truncated[i] = true;
        }
        self.bufs[i].extend_from_slice(&data[..data.len().min(room)]);
        if let Some(sink) = self.sink {
            self.partial[i].extend_from_slice(data);
            // A "line" without a newline cannot grow without bound: past 64 KiB it is
            // passed on as it is.
            while let Some(pos) = self.partial[i]
                .iter()
                .position(|b| *b == b'\n')
                .or_else(|| (self.partial[i].len() > 64 * 1024).then_some(64 * 1024 - 1))
            {
                let line: Vec<u8> = self.partial[i].drain(..=pos).collect();
                let text = String::from_utf8_lossy(&line);
                let _ = sink.send(OutputLine {
                    stream,
                    text: self.redactor.redact(text.trim_end_matches(['\n', '\r'])),
                });
            }
        }
    }

    fn finish(self) -> (String, bool, String, bool) {
        if let Some(sink) = self.sink {
            for (i, stream) in [Stream::Stdout, Stream::Stderr].into_iter().enumerate() {
                if !self.partial[i].is_empty() {
                    let _ = sink.send(OutputLine {
                        stream,
                        text: self
                            .redactor
                            .redact(&String::from_utf8_lossy(&self.partial[i])),
                    });
                }
            }
        }
        let [o, e] = self.bufs;
        let [to, te] = self.truncated;
        let redact = |b: &[u8], truncated: bool| {
            let text = String::from_utf8_lossy(b);
            if truncated {
                self.redactor.redact_truncated(&text)
            } else {
                self.redactor.redact(&text)
            }
        };
        (redact(&o, to), to, redact(&e, te), te)
    }
}

/// Opens and authenticates one connection.
async fn open(s: &ConnectSettings, o: &SshOptions) -> Result<Handle<Verifier>, SshError> {
    let host = s.host_alias.clone();
    let endpoint = s.endpoint();
    let connect_err = |msg: String| SshError::Connect {
        host: host.clone(),
        endpoint: endpoint.clone(),
        msg,
    };
    let known = KnownHosts::load(&o.known_hosts).map_err(|e| SshError::KnownHosts {
        host: host.clone(),
        msg: e.to_string(),
    })?;
    let seen = Arc::new(Mutex::new(None));
    let handler = Verifier {
        known,
        names: dialled_names(s),
        port: s.port,
        seen: seen.clone(),
        scan_only: false,
    };
    let config = Arc::new(client::Config {
        keepalive_interval: Some(o.keepalive_interval),
        keepalive_max: o.keepalive_max,
        inactivity_timeout: None,
        nodelay: true,
        ..client::Config::default()
    });
    let tcp = tokio::time::timeout(
        o.connect_timeout,
        tokio::net::TcpStream::connect((s.address.as_str(), s.port)),
    )
    .await
    .map_err(|_| {
        connect_err(format!(
            "no answer within {}",
            hk_engine::time::span(o.connect_timeout, hk_engine::time::Style::Words)
        ))
    })?
    .map_err(|e| connect_err(e.to_string()))?;
    let _ = tcp.set_nodelay(true);
    let res = tokio::time::timeout(
        o.connect_timeout,
        client::connect_stream(config, tcp, handler),
    )
    .await
    .map_err(|_| {
        connect_err(format!(
            "no SSH handshake within {}",
            hk_engine::time::span(o.connect_timeout, hk_engine::time::Style::Words)
        ))
    })?;
    let mut handle = match res {
        Ok(h) => h,
        Err(e) => {
            let seen = seen.lock().ok().and_then(|mut g| g.take());
            return Err(match seen {
                Some((verdict, key)) => host_key_error(s, &o.known_hosts, verdict, &key)
                    .unwrap_or_else(|| connect_err(e.to_string())),
                None => connect_err(e.to_string()),
            });
        }
    };
    authenticate(&mut handle, s, o).await?;
    Ok(handle)
}

/// The names a host's key is looked up under: what is dialled (as OpenSSH does), then the
/// inventory alias (an operator may have recorded it so).
fn dialled_names(s: &ConnectSettings) -> Vec<String> {
    let mut v = vec![s.address.clone()];
    if s.host_alias != s.address {
        v.push(s.host_alias.clone());
    }
    v
}

fn host_key_error(
    s: &ConnectSettings,
    files: &[PathBuf],
    verdict: HostKeyVerdict,
    key: &PublicKey,
) -> Option<SshError> {
    let fingerprint = format!("{} {}", key.algorithm(), known_hosts::fingerprint(key));
    match verdict {
        HostKeyVerdict::Trusted { .. } => None,
        HostKeyVerdict::Unknown => Some(SshError::UnknownHostKey {
            host: s.host_alias.clone(),
            endpoint: s.endpoint(),
            lookup: known_hosts::lookup_name(&s.address, s.port),
            fingerprint,
            files: files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        }),
        HostKeyVerdict::Changed { expected } => Some(SshError::ChangedHostKey {
            host: s.host_alias.clone(),
            endpoint: s.endpoint(),
            fingerprint,
            expected: recorded_keys(&expected),
        }),
        HostKeyVerdict::Revoked { file, line } => Some(revoked(s, fingerprint, &file, line)),
    }
}

async fn authenticate(
    handle: &mut Handle<Verifier>,
    s: &ConnectSettings,
    o: &SshOptions,
) -> Result<(), SshError> {
    let mut tried: Vec<String> = Vec::new();
    let mut encrypted: Vec<String> = Vec::new();
    let chan_err = |e: russh::Error| SshError::Connect {
        host: s.host_alias.clone(),
        endpoint: s.endpoint(),
        msg: e.to_string(),
    };
    if let Some(sock) = &o.agent_socket {
        match AgentClient::connect_uds(sock).await {
            Ok(mut agent) => match agent.request_identities().await {
                Ok(ids) => {
                    for id in ids {
                        let AgentIdentity::PublicKey { key, comment } = id else {
                            continue;
                        };
                        let hash = if key.algorithm().is_rsa() {
                            handle
                                .best_supported_rsa_hash()
                                .await
                                .map_err(chan_err)?
                                .flatten()
                        } else {
                            None
                        };
                        let label =
                            format!("agent key {} {comment}", known_hosts::fingerprint(&key));
                        match handle
                            .authenticate_publickey_with(&s.user, key, hash, &mut agent)
                            .await
                        {
                            Ok(r) if r.success() => return Ok(()),
                            Ok(_) => tried.push(label),
                            Err(e) => tried.push(format!("{label} ({e})")),
                        }
                    }
                    if tried.is_empty() {
                        tried.push(format!("agent at {} (holds no keys)", sock.display()));
                    }
                }
                Err(e) => tried.push(format!("agent at {} ({e})", sock.display())),
            },
            Err(e) => tried.push(format!("agent at {} ({e})", sock.display())),
        }
    }
    for path in &s.identity_files {
        match russh::keys::load_secret_key(path, None) {
            Ok(key) => {
                let hash = if key.algorithm().is_rsa() {
                    handle
                        .best_supported_rsa_hash()
                        .await
                        .map_err(chan_err)?
                        .flatten()
                } else {
                    None
                };
                let r = handle
                    .authenticate_publickey(
                        &s.user,
                        PrivateKeyWithHashAlg::new(Arc::new(key), hash),
                    )
                    .await
                    .map_err(chan_err)?;
                if r.success() {
                    return Ok(());
                }
                tried.push(format!("key file {} (refused)", path.display()));
            }
            Err(russh::keys::Error::KeyIsEncrypted) => {
                tried.push(format!(
                    "key file {} (passphrase-protected)",
                    path.display()
                ));
                encrypted.push(path.display().to_string());
            }
            Err(e) => tried.push(format!("key file {} (unreadable: {e})", path.display())),
        }
    }
    if tried.is_empty() {
        tried.push("nothing (no agent, no key files)".into());
    }
    let hint = if encrypted.is_empty() {
        String::new()
    } else {
        format!(
            ". {} is protected by a passphrase, which hk-console never asks for: load it into \
             your ssh-agent first (`ssh-add {}`)",
            encrypted.join(", "),
            encrypted.join(" ")
        )
    };
    Err(SshError::AuthFailed {
        host: s.host_alias.clone(),
        endpoint: s.endpoint(),
        user: s.user.clone(),
        tried: tried.join(", "),
        hint,
    })
}

/// A host key as the host presented it, for the explicit trust flow.
#[derive(Debug, Clone)]
pub struct ScannedHostKey {
    /// `ssh-ed25519 SHA256:...`
    pub fingerprint: String,
    /// The verdict against the current known_hosts files.
    pub verdict: HostKeyVerdict,
    /// The line `hk-console ssh trust` appends after the operator types yes.
    pub trust_line: String,
}

/// Connects only far enough to see the host's key; trusts nothing and authenticates nothing.
pub async fn scan_host_key(
    s: &ConnectSettings,
    o: &SshOptions,
) -> Result<ScannedHostKey, SshError> {
    let connect_err = |msg: String| SshError::Connect {
        host: s.host_alias.clone(),
        endpoint: s.endpoint(),
        msg,
    };
    let known = KnownHosts::load(&o.known_hosts).map_err(|e| SshError::KnownHosts {
        host: s.host_alias.clone(),
        msg: e.to_string(),
    })?;
    let seen = Arc::new(Mutex::new(None));
    let handler = Verifier {
        known,
        names: dialled_names(s),
        port: s.port,
        seen: seen.clone(),
        scan_only: true,
    };
    let config = Arc::new(client::Config::default());
    let fut = client::connect(config, (s.address.as_str(), s.port), handler);
    // The handshake fails by design once the key is seen.
    let _ = tokio::time::timeout(o.connect_timeout, fut).await;
    let (verdict, key) = seen
        .lock()
        .ok()
        .and_then(|mut g| g.take())
        .ok_or_else(|| connect_err("no host key received".into()))?;
    Ok(ScannedHostKey {
        fingerprint: format!("{} {}", key.algorithm(), known_hosts::fingerprint(&key)),
        verdict,
        trust_line: known_hosts::trust_line(&s.address, s.port, &key)
            .map_err(|e| connect_err(e.to_string()))?,
    })
}

/// What the explicit trust flow did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustOutcome {
    /// The key was already recorded; nothing written.
    AlreadyTrusted { fingerprint: String },
    /// The operator confirmed; this line was appended.
    Appended { fingerprint: String, line: String },
    /// The operator did not confirm; nothing written.
    Declined { fingerprint: String },
    /// A different key is recorded for the host: trusting would hide a changed key, so the
    /// old entry must be removed by hand first (as OpenSSH asks).
    Changed {
        fingerprint: String,
        expected: String,
    },
}

/// Every key recorded for a host, as `file:line: type fingerprint`, for a changed-key message.
fn recorded_keys(expected: &[crate::exec::known_hosts::RecordedKey]) -> String {
    expected
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

fn revoked(
    s: &ConnectSettings,
    fingerprint: String,
    file: &std::path::Path,
    line: usize,
) -> SshError {
    SshError::RevokedHostKey {
        host: s.host_alias.clone(),
        endpoint: s.endpoint(),
        fingerprint,
        at: format!("{}:{line}", file.display()),
    }
}

/// `hk-console ssh trust HOST`: shows the presented key to `confirm` (which asks the
/// operator to type yes) and appends it to `target` only on a yes. Never replaces a
/// recorded key.
pub async fn trust_host<F>(
    s: &ConnectSettings,
    o: &SshOptions,
    target: &std::path::Path,
    confirm: F,
) -> Result<TrustOutcome, SshError>
where
    F: FnOnce(&ScannedHostKey) -> bool,
{
    let scanned = scan_host_key(s, o).await?;
    let fingerprint = scanned.fingerprint.clone();
    match &scanned.verdict {
        HostKeyVerdict::Trusted { .. } => Ok(TrustOutcome::AlreadyTrusted { fingerprint }),
        HostKeyVerdict::Changed { expected } => Ok(TrustOutcome::Changed {
            fingerprint,
            expected: recorded_keys(expected),
        }),
        HostKeyVerdict::Revoked { file, line } => Err(revoked(s, fingerprint, file, *line)),
        HostKeyVerdict::Unknown => {
            if !confirm(&scanned) {
                return Ok(TrustOutcome::Declined { fingerprint });
            }
            known_hosts::append_line(target, &scanned.trust_line).map_err(|e| {
                SshError::KnownHosts {
                    host: s.host_alias.clone(),
                    msg: e.to_string(),
                }
            })?;
            Ok(TrustOutcome::Appended {
                fingerprint,
                line: scanned.trust_line,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn become_is_sudo_n_and_quoted() {
        assert_eq!(
            become_command("echo 'hi' && id"),
            r"sudo -n -- sh -c 'echo '\''hi'\'' && id'"
        );
        assert!(needs_sudo_password("sudo: a password is required\n"));
        assert!(!needs_sudo_password("permission denied"));
    }

    #[test]
    fn collector_caps_output_and_splits_lines_for_the_sink() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let r = Redactor::new(["pw123"]);
        let mut c = Collector::new(15, &r, Some(&tx));
        c.push(Stream::Stdout, b"a pw123\nb");
        c.push(Stream::Stdout, b"c\nd pw1");
        c.push(Stream::Stdout, b"23\n");
        c.push(Stream::Stderr, &vec![b'x'; 70 * 1024]);
        let (out, out_trunc, err, err_trunc) = c.finish();
        // Capped at 15 bytes, "d pw123" cut after "pw": the cut secret is masked too.
        assert_eq!(out, "a ********\nbc\nd ********");
        assert!(out_trunc && err_trunc);
        assert_eq!(err, "x".repeat(15));
        let mut lines = Vec::new();
        while let Ok(l) = rx.try_recv() {
            lines.push((l.stream, l.text.len(), l.text));
        }
        assert_eq!(lines[0].2, "a ********");
        assert_eq!(lines[1].2, "bc");
        assert_eq!(lines[2].2, "d ********");
        // 70 KiB without a newline: one 64 KiB piece, then the rest at the end.
        assert_eq!((lines[3].0, lines[3].1), (Stream::Stderr, 64 * 1024));
        assert_eq!(lines[4].1, 6 * 1024);
    }
}

/// A signal the remote end reported, as the operator knows it (`SIGTERM`), not as Rust
/// prints the enum (`TERM`, `Custom("XCPU")`).
fn signal_words(sig: &Sig) -> String {
    match sig {
        Sig::Custom(name) => format!("SIG{name}"),
        known => format!("SIG{known:?}"),
    }
}

#[cfg(test)]
mod words_tests {
    use super::*;

    #[test]
    fn signals_and_timeouts_read_as_words() {
        assert_eq!(signal_words(&Sig::TERM), "SIGTERM");
        assert_eq!(signal_words(&Sig::Custom("XCPU".into())), "SIGXCPU");
        let e = SshError::Timeout {
            host: "n1".into(),
            command: "sleep 60".into(),
            after: Duration::from_secs(40),
        };
        assert_eq!(e.to_string(), "n1: command timed out after 40s: sleep 60");
    }
}
