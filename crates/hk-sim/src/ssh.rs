//! The simulated nodes' SSH servers: one russh server per node, listening on its own
//! loopback address (127.0.0.0/8 only), with its own generated ed25519 host key, public-key
//! authentication against an authorized key set, and exec channels whose commands run in
//! the node's simulated shell ([`super::node::NodeSession`]) with stdout, stderr and the
//! exit status (or `KILL` when the client signals) sent back as sshd sends them.
//!
//! An exec command gets what the client sends as its stdin (all of it, up to the client's
//! EOF; a client that sends nothing within a moment gets an empty stdin). A remote
//! `scp -t`/`scp -f` (what `scp -O` starts) speaks the SCP protocol ([`super::scp`]); the
//! `sftp` subsystem (what `sftp` and `scp` without `-O` use) is served by [`super::sftp`];
//! a `shell` request gets an interactive session whose lines each run through the same
//! interpreter (a prompt and echo when the client asked for a pty). X11 and agent
//! forwarding and other subsystems are refused.
//!
//! Owns: [`SimNode`] (start, address, host key, known_hosts line, counters, stop),
//! [`SimNodeSpec`], [`parse_authorized_keys`], [`generate_host_key`].
//! A node made with a real userland ([`SimNodeSpec::userland`]) runs every exec, shell and
//! `sftp` channel as a process in its sandbox instead ([`super::userland::bridge`]: the
//! real `sh -c`, `scp -t`, `sftp-server`, streamed both ways).
//!
//! Must not: listen on anything but a loopback address, or run a command on the real host
//! outside a node's sandbox.
//!
//! One file (over 800 lines): the russh handler's channel bookkeeping (exec, shell, subsystems
//! and their close) is one state machine; SCP and SFTP live in their own files.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use russh::keys::{Algorithm, PrivateKey, PublicKey};
use russh::server::{self, Auth, Msg, PublicKeyOffer, Session, VerifiedPublicKey};
use russh::{Channel, ChannelId, Disconnect, MethodKind, MethodSet, Sig};
use tokio::net::TcpListener;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio_util::sync::CancellationToken;

use super::channel::{finish, pty_text};
use super::login::NodeSession;
use super::node::NodeState;
use super::scp::{self, ScpRequest};
use super::sftp::SftpSession;
use super::shell::{incomplete, Ending, Output};
use super::userland::{self, Userland};
use hk_effects::exec::known_hosts;

/// What can go wrong starting a simulated node.
#[derive(Debug, thiserror::Error)]
pub enum SimSshError {
    #[error(
        "sim node {node}: {addr} is not in 127.0.0.0/8; a simulated node only listens on loopback"
    )]
    NotLoopback { node: String, addr: IpAddr },
    #[error("sim node {node}: cannot listen on {addr}:{port}: {source}")]
    Bind {
        node: String,
        addr: IpAddr,
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("sim node {node}: cannot generate a host key: {source}")]
    HostKey {
        node: String,
        #[source]
        source: russh::keys::ssh_key::Error,
    },
    #[error("sim node {node}: {source}")]
    KnownHostsLine {
        node: String,
        #[source]
        source: known_hosts::KnownHostsError,
    },
    #[error("sim node {node}: no authorized keys: nobody could log in")]
    NoAuthorizedKeys { node: String },
    #[error("{file}:{line}: not a public key ({msg})")]
    AuthorizedKeys {
        file: String,
        line: usize,
        msg: String,
    },
}

/// How to start one node.
pub struct SimNodeSpec {
    /// The inventory host name (for messages; the state has its own hostname).
    pub name: String,
    /// Must be in 127.0.0.0/8.
    pub address: IpAddr,
    /// 0 = a free port.
    pub port: u16,
    /// Keys allowed to log in (any user name).
    pub authorized_keys: Vec<PublicKey>,
    pub state: Arc<Mutex<NodeState>>,
    /// None = a fresh ed25519 key.
    pub host_key: Option<PrivateKey>,
    /// Some = the node's commands, shells and sftp run in its real userland (a sandbox of
    /// the machine's own programs, [`super::userland`]); None = the emulated shell.
    pub userland: Option<Arc<Userland>>,
}

/// Counters a test or the demo can read.
#[derive(Debug, Default)]
struct Stats {
    accepted: AtomicUsize,
    rejected: AtomicUsize,
    commands: AtomicUsize,
    /// Channel states ([`ChannelCtl`]) kept by all this node's connections.
    channel_states: AtomicUsize,
    /// Connections whose session (and its handler) is alive.
    sessions: AtomicUsize,
}

struct Shared {
    name: String,
    state: Arc<Mutex<NodeState>>,
    authorized: Vec<PublicKey>,
    stats: Stats,
    /// The next pseudo-terminal number (`tty` on a `ssh -tt` session says /dev/pts/N).
    next_pts: std::sync::atomic::AtomicU32,
    userland: Option<Arc<Userland>>,
}

impl Shared {
    /// A pty's device name, as the kernel hands out /dev/pts numbers.
    fn pts(&self) -> String {
        format!("/dev/pts/{}", self.next_pts.fetch_add(1, Ordering::SeqCst))
    }

    /// Between a reboot's shutdown and its boot.
    fn down(&self) -> bool {
        self.state.lock().is_ok_and(|s| s.down)
    }

    fn authorizes(&self, key: &PublicKey) -> bool {
        self.authorized
            .iter()
            .any(|k| k.key_data() == key.key_data())
    }
}

/// A running simulated node. Dropping it stops the listener and every session.
pub struct SimNode {
    shared: Arc<Shared>,
    addr: SocketAddr,
    host_key: PublicKey,
    stop: CancellationToken,
}

/// A fresh ed25519 host key.
pub fn generate_host_key() -> Result<PrivateKey, russh::keys::ssh_key::Error> {
    PrivateKey::random(&mut rand::rng(), Algorithm::Ed25519)
}

/// The keys of an OpenSSH `authorized_keys` text (options before the key type are skipped;
/// blank lines and `#` comments ignored). `file` names it in errors.
pub fn parse_authorized_keys(text: &str, file: &str) -> Result<Vec<PublicKey>, SimSshError> {
    let mut keys = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // `type base64 [comment]`, possibly after an options field.
        let fields: Vec<&str> = line.split_whitespace().collect();
        let start = fields
            .iter()
            .position(|f| f.starts_with("ssh-") || f.starts_with("ecdsa-") || f.starts_with("sk-"))
            .unwrap_or(0);
        let candidate = fields[start..].join(" ");
        let key = PublicKey::from_openssh(&candidate).map_err(|e| SimSshError::AuthorizedKeys {
            file: file.to_string(),
            line: i + 1,
            msg: e.to_string(),
        })?;
        keys.push(key);
    }
    Ok(keys)
}

impl SimNode {
    /// Binds the node's address and starts serving. Refuses a non-loopback address.
    pub async fn start(spec: SimNodeSpec) -> Result<SimNode, SimSshError> {
        let is_loopback_v4 = matches!(spec.address, IpAddr::V4(a) if a.is_loopback());
        if !is_loopback_v4 {
            return Err(SimSshError::NotLoopback {
                node: spec.name,
                addr: spec.address,
            });
        }
        if spec.authorized_keys.is_empty() {
            return Err(SimSshError::NoAuthorizedKeys { node: spec.name });
        }
        let key = match spec.host_key {
            Some(k) => k,
            None => generate_host_key().map_err(|source| SimSshError::HostKey {
                node: spec.name.clone(),
                source,
            })?,
        };
        let host_key = key.public_key().clone();
        let listener = TcpListener::bind((spec.address, spec.port))
            .await
            .map_err(|source| SimSshError::Bind {
                node: spec.name.clone(),
                addr: spec.address,
                port: spec.port,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| SimSshError::Bind {
            node: spec.name.clone(),
            addr: spec.address,
            port: spec.port,
            source,
        })?;
        let config = Arc::new(server::Config {
            server_id: russh::SshId::Standard("SSH-2.0-hk-console-sim".into()),
            methods: MethodSet::from(&[MethodKind::PublicKey][..]),
            auth_rejection_time: Duration::from_millis(20),
            auth_rejection_time_initial: Some(Duration::ZERO),
            keys: vec![key],
            inactivity_timeout: Some(Duration::from_secs(3600)),
            nodelay: true,
            ..server::Config::default()
        });
        let shared = Arc::new(Shared {
            name: spec.name,
            state: spec.state,
            authorized: spec.authorized_keys,
            stats: Stats::default(),
            next_pts: std::sync::atomic::AtomicU32::new(0),
            userland: spec.userland,
        });
        let stop = CancellationToken::new();
        tokio::spawn(accept_loop(listener, config, shared.clone(), stop.clone()));
        Ok(SimNode {
            shared,
            addr,
            host_key,
            stop,
        })
    }

    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn host_public_key(&self) -> &PublicKey {
        &self.host_key
    }

    /// `SHA256:...` of the host key.
    pub fn host_key_fingerprint(&self) -> String {
        known_hosts::fingerprint(&self.host_key)
    }

    /// The known_hosts line recording this node's key for its address and port.
    pub fn known_hosts_line(&self) -> Result<String, SimSshError> {
        known_hosts::trust_line(
            &self.addr.ip().to_string(),
            self.addr.port(),
            &self.host_key,
        )
        .map_err(|source| SimSshError::KnownHostsLine {
            node: self.shared.name.clone(),
            source,
        })
    }

    /// The node's state (shared with every session).
    pub fn state(&self) -> Arc<Mutex<NodeState>> {
        self.shared.state.clone()
    }

    /// Successful public-key logins so far.
    pub fn accepted(&self) -> usize {
        self.shared.stats.accepted.load(Ordering::SeqCst)
    }

    /// Refused key offers and logins so far.
    pub fn rejected(&self) -> usize {
        self.shared.stats.rejected.load(Ordering::SeqCst)
    }

    /// Exec requests served so far.
    pub fn commands(&self) -> usize {
        self.shared.stats.commands.load(Ordering::SeqCst)
    }

    /// Channel states the node's connections hold now: those of channels still open, plus
    /// those closed since each connection last opened a channel. Stays small however many
    /// commands a long-lived connection has run.
    pub fn channel_states(&self) -> usize {
        self.shared.stats.channel_states.load(Ordering::SeqCst)
    }

    /// Connections alive now (a session's state, russh's included, goes with it).
    pub fn sessions(&self) -> usize {
        self.shared.stats.sessions.load(Ordering::SeqCst)
    }

    /// Stops listening and disconnects every session (as a node going down does).
    pub fn stop(&self) {
        self.stop.cancel();
    }
}

impl Drop for SimNode {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn accept_loop(
    listener: TcpListener,
    config: Arc<server::Config>,
    shared: Arc<Shared>,
    stop: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => return,
            a = listener.accept() => a,
        };
        let (socket, _peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                tracing::debug!(node = %shared.name, error = %e, "sim ssh accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if shared.down() {
            // Rebooting: nothing listens on port 22 until it is up again.
            drop(socket);
            continue;
        }
        let _ = socket.set_nodelay(true);
        shared.stats.sessions.fetch_add(1, Ordering::SeqCst);
        let handler = Conn {
            shared: shared.clone(),
            user: String::new(),
            channels: HashMap::new(),
            opened: HashMap::new(),
        };
        let config = config.clone();
        let stop = stop.clone();
        let node = shared.clone();
        tokio::spawn(async move {
            let Ok(session) = server::run_stream(config, socket, handler).await else {
                return;
            };
            let handle = session.handle();
            let goes_down = async {
                let mut tick = tokio::time::interval(Duration::from_millis(200));
                while !node.down() {
                    tick.tick().await;
                }
            };
            tokio::select! {
                _ = session => {}
                _ = stop.cancelled() => {
                    let _ = handle
                        .disconnect(Disconnect::ByApplication, "simulated node stopped".into(), String::new())
                        .await;
                }
                () = goes_down => {
                    // A reboot ends every session (sshd is stopped with the rest).
                    let _ = handle
                        .disconnect(Disconnect::ByApplication, "the node is rebooting".into(), String::new())
                        .await;
                }
            }
        });
    }
}

/// What the connection keeps per open channel.
struct ChannelCtl {
    /// Set when the client signals the command or closes the channel.
    cancel: Arc<AtomicBool>,
    /// Becomes true when the client sends EOF (or closes).
    eof: tokio::sync::watch::Sender<bool>,
    /// The client's data (stdin) goes here until its EOF (then the sender is dropped).
    input: Option<UnboundedSender<Vec<u8>>>,
    /// The other end, taken by whatever the channel runs.
    output: Option<UnboundedReceiver<Vec<u8>>>,
    /// The client asked for a pty: one output stream, `\r\n` line ends, echo.
    pty: bool,
    /// Runs the sftp server: the client's EOF ends it with exit status 0, as sftp-server
    /// exits when its input closes.
    sftp: bool,
    /// Set once this side has sent the channel's close. russh (0.65) then ignores the
    /// client's answering CLOSE, so `channel_close` never comes for it: the state is
    /// dropped at the connection's next channel open instead.
    closed: Arc<AtomicBool>,
}

/// One client connection.
struct Conn {
    shared: Arc<Shared>,
    user: String,
    channels: HashMap<ChannelId, ChannelCtl>,
    /// Session channels whose request has not come yet (the sftp subsystem takes its own).
    opened: HashMap<ChannelId, Channel<Msg>>,
}

/// How long a command that reads its stdin waits for the client's EOF.
const STDIN_EOF_WAIT: Duration = Duration::from_secs(30);
/// How long an exec waits for the first byte of stdin before running with none (a client
/// whose stdin is a terminal sends neither data nor EOF).
const STDIN_QUIET: Duration = Duration::from_millis(100);

impl Conn {
    fn ctl(&mut self, channel: ChannelId) -> &mut ChannelCtl {
        let stats = &self.shared.stats;
        self.channels.entry(channel).or_insert_with(|| {
            stats.channel_states.fetch_add(1, Ordering::SeqCst);
            let (tx, rx) = unbounded_channel();
            ChannelCtl {
                cancel: Arc::new(AtomicBool::new(false)),
                eof: tokio::sync::watch::channel(false).0,
                input: Some(tx),
                output: Some(rx),
                pty: false,
                sftp: false,
                closed: Arc::new(AtomicBool::new(false)),
            }
        })
    }

    /// Forgets the state of channels this side has closed (see [`ChannelCtl::closed`]).
    fn prune_closed(&mut self) {
        let before = self.channels.len();
        self.channels
            .retain(|_, c| !c.closed.load(Ordering::SeqCst));
        let gone = before - self.channels.len();
        self.shared
            .stats
            .channel_states
            .fetch_sub(gone, Ordering::SeqCst);
    }

    /// Runs `argv` in the node's real userland over this channel ([`userland::bridge`]).
    fn in_userland(
        &mut self,
        userland: Arc<Userland>,
        channel: ChannelId,
        argv: Vec<String>,
        session: &mut Session,
    ) -> Result<(), russh::Error> {
        let ctl = self.ctl(channel);
        let (pty, cancel, closed) = (ctl.pty, ctl.cancel.clone(), ctl.closed.clone());
        let Some(rx) = ctl.output.take() else {
            return session.channel_failure(channel);
        };
        let handle = session.handle();
        tokio::spawn(async move {
            userland::bridge(userland, argv, pty, rx, cancel, handle, channel).await;
            closed.store(true, Ordering::SeqCst);
        });
        Ok(())
    }

    fn forget(&mut self, channel: ChannelId) -> Option<ChannelCtl> {
        let ctl = self.channels.remove(&channel)?;
        self.shared
            .stats
            .channel_states
            .fetch_sub(1, Ordering::SeqCst);
        Some(ctl)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.shared
            .stats
            .channel_states
            .fetch_sub(self.channels.len(), Ordering::SeqCst);
        self.shared.stats.sessions.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Everything the client sends before its EOF, or nothing if it stays quiet at first.
async fn collect_stdin(rx: &mut UnboundedReceiver<Vec<u8>>) -> Vec<u8> {
    let mut stdin = Vec::new();
    loop {
        let wait = if stdin.is_empty() {
            STDIN_QUIET
        } else {
            STDIN_EOF_WAIT
        };
        match tokio::time::timeout(wait, rx.recv()).await {
            Ok(Some(d)) => stdin.extend_from_slice(&d),
            Ok(None) | Err(_) => return stdin,
        }
    }
}

/// The SCP protocol's replies, as channel data.
struct ChannelOut {
    handle: server::Handle,
    channel: ChannelId,
}

impl scp::Sender for ChannelOut {
    async fn send(&mut self, data: Vec<u8>) {
        let _ = self.handle.data(self.channel, data).await;
    }
}

/// An interactive login: each complete line through the node's shell, state kept between
/// lines; a prompt and echo on a pty. Ends at `exit`, EOF or Ctrl-D with `$?` as status.
async fn interactive(
    handle: server::Handle,
    channel: ChannelId,
    mut session: NodeSession,
    mut rx: UnboundedReceiver<Vec<u8>>,
    pty: bool,
) {
    let send = |data: Vec<u8>| {
        let handle = handle.clone();
        async move {
            if !data.is_empty() {
                let _ = handle.data(channel, data).await;
            }
        }
    };
    if pty {
        send(session.prompt().into_bytes()).await;
    }
    let mut line: Vec<u8> = Vec::new();
    let mut script = String::new();
    let mut status = 0;
    let mut last_cr = false;
    'session: while let Some(data) = rx.recv().await {
        for b in data {
            let after_cr = std::mem::replace(&mut last_cr, b == b'\r');
            match b {
                b'\n' if after_cr => {}
                b'\r' | b'\n' => {
                    if pty {
                        send(b"\r\n".to_vec()).await;
                    }
                    script.push_str(&String::from_utf8_lossy(&std::mem::take(&mut line)));
                    if incomplete(&script) {
                        script.push('\n');
                        if pty {
                            send(b"> ".to_vec()).await;
                        }
                        continue;
                    }
                    let text = std::mem::take(&mut script);
                    let ran = tokio::task::spawn_blocking(move || {
                        let r = session.run_line(&text);
                        (session, r)
                    })
                    .await;
                    let Ok((back, (out, ending, exited))) = ran else {
                        status = 255;
                        break 'session;
                    };
                    session = back;
                    if pty {
                        let mut all = out.stdout;
                        all.extend_from_slice(&out.stderr);
                        send(pty_text(&all)).await;
                    } else {
                        send(out.stdout).await;
                        if !out.stderr.is_empty() {
                            let _ = handle.extended_data(channel, 1, out.stderr).await;
                        }
                    }
                    status = out.status;
                    if exited || ending == Ending::Killed {
                        break 'session;
                    }
                    if pty {
                        send(session.prompt().into_bytes()).await;
                    }
                }
                0x7f | 0x08 if pty => {
                    if line.pop().is_some() {
                        send(b"\x08 \x08".to_vec()).await;
                    }
                }
                0x03 if pty => {
                    line.clear();
                    script.clear();
                    send(b"^C\r\n".to_vec()).await;
                    send(session.prompt().into_bytes()).await;
                }
                0x04 if line.is_empty() => break 'session,
                b => {
                    line.push(b);
                    if pty {
                        send(vec![b]).await;
                    }
                }
            }
        }
    }
    if pty {
        send(b"logout\r\n".to_vec()).await;
    }
    finish(
        handle,
        channel,
        Vec::new(),
        Vec::new(),
        Ending::Exit(status),
    )
    .await;
}

impl server::Handler for Conn {
    type Error = russh::Error;

    async fn auth_publickey_offered(
        &mut self,
        _user: &str,
        offer: PublicKeyOffer<'_>,
    ) -> Result<Auth, Self::Error> {
        if self.shared.authorizes(offer.public_key) {
            Ok(Auth::Accept)
        } else {
            self.shared.stats.rejected.fetch_add(1, Ordering::SeqCst);
            Ok(Auth::reject())
        }
    }

    async fn auth_publickey(
        &mut self,
        user: &str,
        key: VerifiedPublicKey<'_>,
    ) -> Result<Auth, Self::Error> {
        if self.shared.authorizes(key.public_key) {
            self.user = user.to_string();
            self.shared.stats.accepted.fetch_add(1, Ordering::SeqCst);
            Ok(Auth::Accept)
        } else {
            self.shared.stats.rejected.fetch_add(1, Ordering::SeqCst);
            Ok(Auth::reject())
        }
    }

    async fn channel_open_session(
        &mut self,
        channel: Channel<Msg>,
        reply: server::ChannelOpenHandle,
        _session: &mut Session,
    ) -> Result<(), Self::Error> {
        self.prune_closed();
        self.ctl(channel.id());
        self.opened.insert(channel.id(), channel);
        reply.accept().await;
        Ok(())
    }

    async fn pty_request(
        &mut self,
        channel: ChannelId,
        _term: &str,
        _col_width: u32,
        _row_height: u32,
        _pix_width: u32,
        _pix_height: u32,
        _modes: &[(russh::Pty, u32)],
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        self.ctl(channel).pty = true;
        session.channel_success(channel)
    }

    async fn env_request(
        &mut self,
        channel: ChannelId,
        _name: &str,
        _value: &str,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_success(channel)
    }

    async fn shell_request(
        &mut self,
        channel: ChannelId,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        self.opened.remove(&channel);
        session.channel_success(channel)?;
        if let Some(u) = self.shared.userland.clone() {
            let argv = u.login_shell();
            return self.in_userland(u, channel, argv, session);
        }
        let ctl = self.ctl(channel);
        let pty = ctl.pty;
        let cancel = ctl.cancel.clone();
        let closed = ctl.closed.clone();
        let Some(rx) = ctl.output.take() else {
            return session.channel_failure(channel);
        };
        let tty = pty.then(|| self.shared.pts());
        let node = NodeSession::new(self.shared.state.clone(), &self.user, cancel).with_tty(tty);
        let handle = session.handle();
        tokio::spawn(async move {
            interactive(handle, channel, node, rx, pty).await;
            closed.store(true, Ordering::SeqCst);
        });
        Ok(())
    }

    async fn subsystem_request(
        &mut self,
        channel: ChannelId,
        name: &str,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        let opened = self.opened.remove(&channel);
        if let (Some(u), "sftp") = (self.shared.userland.clone(), name) {
            // OpenSSH's own sftp server, in the node's sandbox, over the channel's data.
            session.channel_success(channel)?;
            let argv = vec![userland::SFTP_SERVER.to_string()];
            return self.in_userland(u, channel, argv, session);
        }
        match (name, opened) {
            ("sftp", Some(ch)) => {
                // The sftp server reads the channel itself; Handler::data must not queue it.
                if let Some(ctl) = self.channels.get_mut(&channel) {
                    ctl.input = None;
                    ctl.output = None;
                    ctl.sftp = true;
                }
                session.channel_success(channel)?;
                let sftp = SftpSession::new(self.shared.state.clone(), &self.user);
                russh_sftp::server::run(ch.into_stream(), sftp).await;
                Ok(())
            }
            _ => {
                tracing::debug!(node = %self.shared.name, subsystem = name, "sim ssh refused a subsystem");
                session.channel_failure(channel)
            }
        }
    }

    async fn exec_request(
        &mut self,
        channel: ChannelId,
        data: &[u8],
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        self.opened.remove(&channel);
        session.channel_success(channel)?;
        self.shared.stats.commands.fetch_add(1, Ordering::SeqCst);
        let command = String::from_utf8_lossy(data).to_string();
        if let Some(u) = self.shared.userland.clone() {
            if let Ok(mut s) = self.shared.state.lock() {
                if s.commands.len() >= 1000 {
                    s.commands.remove(0);
                }
                s.commands.push(command.clone());
            }
            let argv = u.shell_command(&command);
            return self.in_userland(u, channel, argv, session);
        }
        let ctl = self.ctl(channel);
        let cancel = ctl.cancel.clone();
        let pty = ctl.pty;
        let closed = ctl.closed.clone();
        let mut eof = ctl.eof.subscribe();
        let Some(mut rx) = ctl.output.take() else {
            return session.channel_failure(channel);
        };
        let state = self.shared.state.clone();
        let user = self.user.clone();
        let tty = pty.then(|| self.shared.pts());
        let handle = session.handle();
        if let Some(req) = ScpRequest::parse(&command) {
            if let Ok(mut s) = state.lock() {
                // Capped like every other command record (node.rs).
                if s.commands.len() >= 1000 {
                    s.commands.remove(0);
                }
                s.commands.push(command.clone());
            }
            tokio::spawn(async move {
                let mut out = ChannelOut {
                    handle: handle.clone(),
                    channel,
                };
                let status = scp::serve(req, state, &user, rx, &mut out).await;
                finish(
                    handle,
                    channel,
                    Vec::new(),
                    Vec::new(),
                    Ending::Exit(status),
                )
                .await;
                closed.store(true, Ordering::SeqCst);
            });
            return Ok(());
        }
        tokio::spawn(async move {
            let stdin = collect_stdin(&mut rx).await;
            let ran = tokio::task::spawn_blocking(move || {
                NodeSession::new(state, &user, cancel)
                    .with_tty(tty)
                    .run_with_input(&command, &stdin)
            })
            .await;
            match ran {
                Ok((out, ending)) => {
                    if out.reads_stdin {
                        let _ = tokio::time::timeout(STDIN_EOF_WAIT, eof.wait_for(|e| *e)).await;
                    }
                    let Output { stdout, stderr, .. } = out;
                    if pty {
                        let mut all = stdout;
                        all.extend_from_slice(&stderr);
                        finish(handle, channel, pty_text(&all), Vec::new(), ending).await
                    } else {
                        finish(handle, channel, stdout, stderr, ending).await
                    }
                }
                Err(e) => {
                    let msg = format!("sim: the command failed inside the simulation: {e}\n");
                    finish(
                        handle,
                        channel,
                        Vec::new(),
                        msg.into_bytes(),
                        Ending::Exit(255),
                    )
                    .await;
                }
            }
            closed.store(true, Ordering::SeqCst);
        });
        Ok(())
    }

    async fn data(
        &mut self,
        channel: ChannelId,
        data: &[u8],
        _session: &mut Session,
    ) -> Result<(), Self::Error> {
        if let Some(tx) = self.channels.get(&channel).and_then(|c| c.input.as_ref()) {
            let _ = tx.send(data.to_vec());
        }
        Ok(())
    }

    async fn signal(
        &mut self,
        channel: ChannelId,
        _signal: Sig,
        _session: &mut Session,
    ) -> Result<(), Self::Error> {
        if let Some(ctl) = self.channels.get(&channel) {
            ctl.cancel.store(true, Ordering::SeqCst);
        }
        Ok(())
    }

    async fn channel_eof(
        &mut self,
        channel: ChannelId,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        if let Some(ctl) = self.channels.get_mut(&channel) {
            ctl.eof.send_replace(true);
            ctl.input = None;
            if ctl.sftp {
                // Queued now, before the stream's end can close the channel first.
                session.exit_status_request(channel, 0)?;
                session.eof(channel)?;
                session.close(channel)?;
                ctl.closed.store(true, Ordering::SeqCst);
            }
        }
        Ok(())
    }

    async fn channel_close(
        &mut self,
        channel: ChannelId,
        _session: &mut Session,
    ) -> Result<(), Self::Error> {
        self.opened.remove(&channel);
        if let Some(ctl) = self.forget(channel) {
            ctl.cancel.store(true, Ordering::SeqCst);
            ctl.eof.send_replace(true);
        }
        Ok(())
    }
}
