//! A simulated node's real userland (issue 37): the machine's own `/bin/sh`, coreutils,
//! `python3`, `scp` and `sftp-server`, run for the node inside a bubblewrap sandbox, so the
//! real Ansible modules a playbook sends (gather_facts, command, copy, template, lineinfile,
//! stat, file, wait_for, assert, systemd, ...) run on the node instead of against an
//! emulated shell.
//!
//! Each node gets its own root over the host's read-only system: `/usr` (and the `/bin`,
//! `/lib`, ... links or directories beside it) bound read-only from the host; its own
//! writable `/etc` (a copy of the host's, secrets left out, with its own hostname and
//! hosts), `/var`, `/root`, `/home`, `/tmp`, `/run` and `/usr/local`, kept in the node's
//! directory across commands; its own hostname (UTS namespace), PID namespace, `/proc`
//! and `/dev`; the host's network (the node's loopback address, the VIP, the simulated
//! endpoints). Every command runs in a user namespace as its root: nothing it does can
//! touch the operator's files outside the node's directory.
//!
//! What a homelab owns stays the simulation's, behind the node's real interfaces: the
//! node's `systemctl` and `journalctl` (in its `/usr/local/sbin`) are small clients of a
//! Unix socket the simulation serves ([`login::unit_tool`]), so a playbook's `systemctl
//! restart k3s` restarts the simulated server the console watches. `sudo` (in its
//! `/usr/local/bin`) runs the command as is: the sandbox's only user is root, and a setuid
//! program cannot work in a user namespace.
//!
//! Where no sandbox can be made ([`find_sandbox`]: no `bwrap`, or no user namespaces), the
//! caller gets [`Unavailable`] with the reason and the fix; a command is never run on the
//! host outside a sandbox, and never emulated in its place.
//!
//! Owns: [`Sandbox`], [`Userland`] (the node's root, its unit socket, the sandboxed
//! command), [`bridge`] (one SSH channel <-> one sandboxed process, streamed).
//! Must not: run anything outside the sandbox; bind any host path writable.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use russh::server;
use russh::ChannelId;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::process::Command;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use super::login;
use super::node::NodeState;
use super::shell::Ending;

/// The PATH a node's commands get (Debian's root PATH: the node's own shims first).
pub const NODE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// Where OpenSSH's sftp server is on Debian and Ubuntu (what the `sftp` subsystem runs).
pub const SFTP_SERVER: &str = "/usr/lib/openssh/sftp-server";
/// The node's unit socket, as the node sees it.
const UNIT_SOCKET: &str = "/run/hk-sim/units.sock";
/// How long the sandbox trial may take before it counts as refused.
const TRIAL_DEADLINE: Duration = Duration::from_secs(10);
/// How long output still drains after the process ended.
const DRAIN: Duration = Duration::from_secs(5);
/// The most a unit request may carry.
const UNIT_REQUEST_MAX: u64 = 1 << 20;
/// The top-level names that hold the host's system (bound read-only, or links as on the host).
const SYSTEM_DIRS: [&str; 7] = ["usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"];
/// The node's own writable directories, kept in its directory.
const NODE_DIRS: [&str; 7] = ["etc", "var", "root", "home", "tmp", "run", "usr/local"];

/// Why a node cannot have a real userland here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    #[error("the simulated nodes' real userland needs bubblewrap (`bwrap`), and none is on PATH ({path}): install it (Debian and Ubuntu: `apt-get install bubblewrap`; Fedora: `dnf install bubblewrap`)")]
    NoBwrap { path: String },
    #[error("the simulated nodes' real userland needs a user namespace, and bubblewrap could not make one: {why} (a container without user namespaces, or `kernel.unprivileged_userns_clone=0` / `user.max_user_namespaces=0`; run the demo where they are allowed)")]
    NoNamespaces { why: String },
}

/// What can go wrong making a node's userland.
#[derive(Debug, thiserror::Error)]
pub enum UserlandError {
    #[error("{0}")]
    Unavailable(#[from] Unavailable),
    #[error("node {node}: {what} {path}: {source}")]
    Io {
        node: String,
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// A working bubblewrap, tried once.
#[derive(Debug, Clone)]
pub struct Sandbox {
    bwrap: PathBuf,
}

/// Finds `bwrap` on PATH and tries one sandboxed `true` with a user namespace.
pub async fn find_sandbox() -> Result<Sandbox, Unavailable> {
    find_sandbox_in(&std::env::var("PATH").unwrap_or_default()).await
}

/// [`find_sandbox`] with `path` as the PATH searched.
pub async fn find_sandbox_in(path: &str) -> Result<Sandbox, Unavailable> {
    let path = path.to_string();
    let bwrap = std::env::split_paths(&path)
        .map(|d| d.join("bwrap"))
        .find(|p| is_executable(p))
        .ok_or_else(|| Unavailable::NoBwrap { path: path.clone() })?;
    let sandbox = Sandbox { bwrap };
    let mut trial = sandbox.base_command("trial");
    trial
        .arg("--")
        .arg("/bin/true")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let out = tokio::time::timeout(TRIAL_DEADLINE, trial.output()).await;
    match out {
        Ok(Ok(o)) if o.status.success() => Ok(sandbox),
        Ok(Ok(o)) => Err(Unavailable::NoNamespaces {
            why: format!(
                "`bwrap --unshare-user ... /bin/true` exited {}: {}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            ),
        }),
        Ok(Err(e)) => Err(Unavailable::NoNamespaces {
            why: format!("starting {}: {e}", sandbox.bwrap.display()),
        }),
        Err(_) => Err(Unavailable::NoNamespaces {
            why: format!("`bwrap` did not finish within {TRIAL_DEADLINE:?}"),
        }),
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

impl Sandbox {
    /// bwrap with the namespaces and the host's read-only system, no node directories yet.
    fn base_command(&self, hostname: &str) -> Command {
        let mut c = Command::new(&self.bwrap);
        c.env_clear()
            .env("PATH", NODE_PATH)
            .env("HOME", "/root")
            .env("USER", "root")
            .env("LOGNAME", "root")
            .env("LANG", "C.UTF-8");
        c.args(["--unshare-user", "--uid", "0", "--gid", "0"])
            .args(["--unshare-pid", "--unshare-ipc", "--unshare-uts"])
            .args(["--unshare-cgroup-try", "--die-with-parent", "--new-session"])
            .args(["--hostname", hostname]);
        for name in SYSTEM_DIRS {
            let host = Path::new("/").join(name);
            match std::fs::symlink_metadata(&host) {
                Ok(m) if m.file_type().is_symlink() => {
                    if let Ok(target) = std::fs::read_link(&host) {
                        c.arg("--symlink").arg(target).arg(&host);
                    }
                }
                Ok(m) if m.is_dir() => {
                    c.arg("--ro-bind").arg(&host).arg(&host);
                }
                _ => {}
            }
        }
        c.args(["--proc", "/proc", "--dev", "/dev"]);
        c
    }
}

/// A request to the node's unit manager, from its `systemctl`/`journalctl` shim.
#[derive(Debug, Deserialize)]
struct UnitRequest {
    argv: Vec<String>,
}

/// The unit manager's answer, written back to the shim.
#[derive(Debug, Serialize)]
struct UnitReply {
    stdout: String,
    stderr: String,
    status: i32,
}

/// One node's real userland: its root directory, its unit socket, its sandboxed commands.
pub struct Userland {
    sandbox: Sandbox,
    hostname: String,
    root: PathBuf,
    /// Where the unit socket lives on the host (a short path: a Unix socket's is limited).
    socket_dir: PathBuf,
    /// The login shell of the node's root (from its /etc/passwd).
    shell: String,
    /// The node's state: its boot id and IO pressure are read at each command's start.
    state: Arc<Mutex<NodeState>>,
    /// The host's own unit and power programs, each covered by the node's shim.
    covered: Vec<(PathBuf, PathBuf)>,
    /// Host programs the node has too (read-only, in its /usr/local/bin): `kubectl` on a
    /// server, as k3s puts one there.
    programs: Mutex<Vec<(PathBuf, PathBuf)>>,
    /// Commands started in this userland.
    commands: AtomicU32,
    /// Files written into the kernel view, for their temporary names.
    kernel_writes: AtomicU32,
    stop: CancellationToken,
}

static SOCKET_DIRS: AtomicU32 = AtomicU32::new(0);

impl Userland {
    /// Makes (or reopens) the node's root under `root` and starts serving its unit socket
    /// over `state`. `address` is the node's own address (its /etc/hosts line).
    pub async fn create(
        sandbox: Sandbox,
        root: &Path,
        hostname: &str,
        address: std::net::IpAddr,
        state: Arc<Mutex<NodeState>>,
    ) -> Result<Arc<Userland>, UserlandError> {
        let io = |what: &'static str, path: &Path| {
            let node = hostname.to_string();
            let path = path.to_path_buf();
            move |source| UserlandError::Io {
                node,
                what,
                path,
                source,
            }
        };
        // Reopened, the root holds what the node's own commands left: nothing is made,
        // written or chmod-ed through a link they planted.
        for d in NODE_DIRS {
            let p = inside(root, d).map_err(io("checking", root))?;
            std::fs::create_dir_all(&p).map_err(io("creating", &p))?;
        }
        for d in [
            "usr/local/bin",
            "usr/local/sbin",
            "var/tmp",
            "var/log",
            "run/systemd/system",
        ] {
            let p = inside(root, d).map_err(io("checking", root))?;
            std::fs::create_dir_all(&p).map_err(io("creating", &p))?;
        }
        for d in ["tmp", "var/tmp"] {
            let p = inside(root, d).map_err(io("checking", root))?;
            set_mode(&p, 0o1777).map_err(io("setting the mode of", &p))?;
        }
        let etc = root.join("etc");
        if !etc.join("passwd").exists() {
            copy_etc(Path::new("/etc"), &etc).map_err(io("copying the host's /etc into", &etc))?;
        }
        write(root, "etc/hostname", &format!("{hostname}\n")).map_err(io("writing", &etc))?;
        write(
            root,
            "etc/hosts",
            &format!("127.0.0.1\tlocalhost\n{address}\t{hostname}\n::1\tlocalhost ip6-localhost\n"),
        )
        .map_err(io("writing", &etc))?;
        let local = root.join("usr/local");
        let mut covered = Vec::new();
        for (name, text) in SHIMS {
            let dir = if name == "sudo" { "bin" } else { "sbin" };
            let p = local.join(dir).join(name);
            write(root, &format!("usr/local/{dir}/{name}"), text).map_err(io("writing", &p))?;
            set_mode(&p, 0o755).map_err(io("setting the mode of", &p))?;
            // The host's own program of that name (what a module that searches /sbin and
            // /usr/bin first would find) is covered by the shim inside the sandbox.
            for host_dir in ["/usr/bin", "/usr/sbin", "/bin", "/sbin"] {
                let host = Path::new(host_dir).join(name);
                let real_dir = std::fs::symlink_metadata(host_dir).is_ok_and(|m| m.is_dir());
                let file = std::fs::symlink_metadata(&host).is_ok_and(|m| m.is_file());
                if real_dir && file {
                    covered.push((p.clone(), host));
                }
            }
        }
        let shell = login_shell(&etc.join("passwd"));
        let seq = SOCKET_DIRS.fetch_add(1, Ordering::SeqCst);
        // A fresh name made here (create_dir fails on anything already there, a link
        // another user planted in the shared temp dir included).
        let socket_dir = std::env::temp_dir().join(format!(
            "hk-units-{}-{seq}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir(&socket_dir).map_err(io("creating", &socket_dir))?;
        set_mode(&socket_dir, 0o700).map_err(io("setting the mode of", &socket_dir))?;
        let socket = socket_dir.join("units.sock");
        let listener = UnixListener::bind(&socket).map_err(io("listening on", &socket))?;
        let stop = CancellationToken::new();
        tokio::spawn(serve_units(listener, state.clone(), stop.clone()));
        Ok(Arc::new(Userland {
            sandbox,
            hostname: hostname.to_string(),
            root: root.to_path_buf(),
            socket_dir,
            shell,
            state,
            covered,
            programs: Mutex::new(Vec::new()),
            commands: AtomicU32::new(0),
            kernel_writes: AtomicU32::new(0),
            stop,
        }))
    }

    /// The node's root directory on the host.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The host's program `host` in the node's /usr/local/bin under its own name,
    /// read-only (the same binary, not a copy).
    pub fn add_program(&self, host: &Path) -> io::Result<()> {
        let name = host
            .file_name()
            .ok_or_else(|| io::Error::other(format!("{} names no file", host.display())))?;
        let at = Path::new("/usr/local/bin").join(name);
        // The mount point, in the node's own /usr/local.
        std::fs::write(self.root.join("usr/local/bin").join(name), b"")?;
        if let Ok(mut p) = self.programs.lock() {
            p.push((host.to_path_buf(), at));
        }
        Ok(())
    }

    /// Seeds the node's root with the files the simulation gave the node (its k3s data
    /// dir, its configuration), where the root has none yet; `/proc`, `/sys` and `/dev`
    /// stay the kernel's.
    pub fn seed_from(&self, state: &NodeState) -> io::Result<()> {
        for (path, mode, data) in state.fs.regular_files() {
            let rel = path.trim_start_matches('/');
            let owned = NODE_DIRS
                .iter()
                .any(|d| rel == *d || rel.starts_with(&format!("{d}/")));
            if !owned {
                continue;
            }
            let to = self.root.join(rel);
            no_links_below(&self.root, rel)?;
            if std::fs::symlink_metadata(&to).is_ok() {
                continue;
            }
            // Its directories as the simulation has them (k3s's data dir is 0700).
            let mut at = String::new();
            for part in rel
                .split('/')
                .collect::<Vec<_>>()
                .split_last()
                .map_or(&[][..], |x| x.1)
            {
                at.push('/');
                at.push_str(part);
                let dir = self.root.join(at.trim_start_matches('/'));
                if !dir.exists() {
                    std::fs::create_dir(&dir)?;
                    let mode = state.fs.stat(&at).map_or(0o755, |st| st.mode & 0o7777);
                    set_mode(&dir, mode)?;
                }
            }
            std::fs::write(&to, data)?;
            set_mode(&to, mode & 0o7777)?;
        }
        Ok(())
    }

    /// Writes `data` at `path` in the node's root (mode `mode`, parents 0700 as k3s makes
    /// its data dir).
    pub fn write_file(&self, path: &str, data: &[u8], mode: u32) -> io::Result<()> {
        let rel = path.trim_start_matches('/');
        no_links_below(&self.root, rel)?;
        let to = self.root.join(rel);
        if let Some(dir) = to.parent() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        let _ = std::fs::remove_file(&to);
        {
            use std::io::Write;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&to)?
                .write_all(data)?;
        }
        set_mode(&to, mode)
    }

    /// How many commands (exec channels, shells, sftp servers) this userland started.
    pub fn commands(&self) -> u32 {
        self.commands.load(Ordering::SeqCst)
    }

    /// `argv` inside the node's sandbox, in /root, with the node's environment.
    pub fn command(&self, argv: &[String]) -> Command {
        let mut c = self.sandbox.base_command(&self.hostname);
        for d in NODE_DIRS {
            c.arg("--bind")
                .arg(self.root.join(d))
                .arg(Path::new("/").join(d));
        }
        // Read-only: the node connects to its unit socket (a socket needs no write access to
        // its mount), and cannot plant a link where the simulation writes its kernel files.
        c.arg("--ro-bind").arg(&self.socket_dir).arg("/run/hk-sim");
        for (shim, host) in &self.covered {
            c.arg("--ro-bind").arg(shim).arg(host);
        }
        if let Ok(programs) = self.programs.lock() {
            for (host, at) in programs.iter() {
                c.arg("--ro-bind").arg(host).arg(at);
            }
        }
        // What the kernel would say of this node: its boot id and its IO pressure.
        let (boot_id, psi) = {
            let s = self
                .state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            (format!("{}\n", s.boot_id()), s.io_pressure.render())
        };
        for (name, text, at) in [
            ("boot_id", boot_id, "/proc/sys/kernel/random/boot_id"),
            ("pressure-io", psi, "/proc/pressure/io"),
        ] {
            if Path::new(at).exists() {
                if let Some(file) = self.kernel_file(name, &text) {
                    c.arg("--ro-bind").arg(file).arg(at);
                }
            }
        }
        c.args(["--chdir", "/root", "--"]).args(argv);
        c.kill_on_drop(true);
        self.commands.fetch_add(1, Ordering::SeqCst);
        c
    }

    /// `text` in a file of the node's kernel view, named by its content and never replaced:
    /// a command binds the file its text names. It was one file renamed over at each
    /// command's start, and a command starting beside another (the etcd probe's reads run
    /// together) had the file it was binding replaced mid-setup: bwrap failed with "Unable
    /// to find /newroot/proc/pressure/io (deleted) in mount table" (CI, 2026-12-07). Files of
    /// another content are removed once a minute old: a command binds its file within
    /// milliseconds, and keeps it bound once started.
    fn kernel_file(&self, name: &str, text: &str) -> Option<PathBuf> {
        use std::hash::{Hash, Hasher};
        let dir = self.socket_dir.join("kernel");
        std::fs::create_dir_all(&dir).ok()?;
        let mut h = std::collections::hash_map::DefaultHasher::new();
        text.hash(&mut h);
        let file = dir.join(format!("{name}.{:016x}.{}", h.finish(), text.len()));
        if !file.exists() {
            let seq = self.kernel_writes.fetch_add(1, Ordering::SeqCst);
            let tmp = dir.join(format!(".{name}.{seq}"));
            std::fs::write(&tmp, text).ok()?;
            // A link, not a rename: it never replaces a file of the same name that another
            // command wrote meanwhile (and may be binding).
            let _ = std::fs::hard_link(&tmp, &file);
            let _ = std::fs::remove_file(&tmp);
        }
        let prefix = format!("{name}.");
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.flatten() {
                let p = e.path();
                let ours = e.file_name().to_string_lossy().starts_with(&prefix);
                let old = e
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > Duration::from_secs(60));
                if ours && old && p != file {
                    let _ = std::fs::remove_file(&p);
                }
            }
        }
        file.exists().then_some(file)
    }

    /// What sshd runs for an exec request: the user's login shell with `-c`.
    pub fn shell_command(&self, command: &str) -> Vec<String> {
        vec![self.shell.clone(), "-c".into(), command.into()]
    }

    /// What sshd runs for a shell request: the login shell, interactive.
    pub fn login_shell(&self) -> Vec<String> {
        vec![self.shell.clone(), "-i".into()]
    }
}

impl Drop for Userland {
    fn drop(&mut self) {
        self.stop.cancel();
        let _ = std::fs::remove_dir_all(&self.socket_dir);
    }
}

/// `root/rel`, refused when any part of `rel` (the last one too) is a symbolic link.
fn inside(root: &Path, rel: &str) -> io::Result<PathBuf> {
    no_links_below(root, &format!("{rel}/-"))?;
    Ok(root.join(rel))
}

/// Refuses `rel` under `root` when one of its directories is a symbolic link: a node's
/// root is written by its own commands, and the simulation writes nothing through a link
/// one of them made (it could point anywhere the operator can write).
fn no_links_below(root: &Path, rel: &str) -> io::Result<()> {
    let mut at = root.to_path_buf();
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    for part in parts.iter().take(parts.len().saturating_sub(1)) {
        at.push(part);
        if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(io::Error::other(format!(
                "{} is a symbolic link in the node's root: the simulation writes nothing \
                 through it",
                at.display()
            )));
        }
    }
    Ok(())
}

fn set_mode(p: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
}

/// `text` as the new file `root/rel`: whatever was there goes first (a file copied
/// read-only from the host's /etc must still be replaceable; a link is removed, never
/// followed), and the file is made new.
fn write(root: &Path, rel: &str, text: &str) -> io::Result<()> {
    let p = inside(root, rel.rsplit_once('/').map_or("", |x| x.0))?
        .join(rel.rsplit_once('/').map_or(rel, |x| x.1));
    let _ = std::fs::remove_file(&p);
    use std::io::Write;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&p)?
        .write_all(text.as_bytes())
}

/// Root's login shell in a passwd file, else `/bin/sh`.
fn login_shell(passwd: &Path) -> String {
    std::fs::read_to_string(passwd)
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("root:"))
                .and_then(|l| l.rsplit(':').next())
                .filter(|s| s.starts_with('/') && Path::new(s).exists())
                .map(str::to_string)
        })
        .unwrap_or_else(|| "/bin/sh".into())
}

/// True for the host's secrets, which a node's /etc does not get.
fn secret(rel: &Path) -> bool {
    let name = rel.file_name().and_then(|n| n.to_str()).unwrap_or("");
    matches!(name, "shadow" | "gshadow" | "shadow-" | "gshadow-")
        || (rel.starts_with("ssh") && name.starts_with("ssh_host_") && name.ends_with("_key"))
}

/// Copies the host's /etc (links as links; what the user cannot read, and the secrets,
/// left out).
fn copy_etc(from: &Path, to: &Path) -> io::Result<()> {
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let src = from.join(&rel);
        let dst = to.join(&rel);
        let Ok(entries) = std::fs::read_dir(&src) else {
            continue;
        };
        if std::fs::symlink_metadata(&dst).is_ok_and(|m| m.file_type().is_symlink()) {
            continue;
        }
        std::fs::create_dir_all(&dst)?;
        for entry in entries.flatten() {
            let rel = rel.join(entry.file_name());
            if secret(&rel) {
                continue;
            }
            let Ok(ft) = entry.file_type() else { continue };
            let (s, d) = (from.join(&rel), to.join(&rel));
            // What the node already has stays (and is never written through).
            if std::fs::symlink_metadata(&d).is_ok() {
                continue;
            }
            if ft.is_symlink() {
                if let Ok(target) = std::fs::read_link(&s) {
                    let _ = std::os::unix::fs::symlink(target, &d);
                }
            } else if ft.is_dir() {
                stack.push(rel);
            } else if ft.is_file() && std::fs::copy(&s, &d).is_ok() {
                // Writable by the node's root (the user who made it).
                if let Ok(m) = std::fs::metadata(&d) {
                    use std::os::unix::fs::PermissionsExt;
                    let _ = set_mode(&d, m.permissions().mode() | 0o200);
                }
            }
        }
    }
    Ok(())
}

/// The node's own programs for what the simulation owns, by name.
const SHIMS: [(&str, &str); 7] = [
    ("systemctl", UNIT_SHIM),
    ("journalctl", UNIT_SHIM),
    ("shutdown", UNIT_SHIM),
    ("reboot", UNIT_SHIM),
    ("poweroff", UNIT_SHIM),
    ("halt", UNIT_SHIM),
    ("sudo", SUDO_SHIM),
];

/// The node's `systemctl`, `journalctl` and power programs: they ask the simulation, which
/// owns the units and the node's boots.
const UNIT_SHIM: &str = r#"#!/usr/bin/python3
# hk-sim: this node's units (k3s, kube-vip, the VPN tunnel) and its reboots are the
# simulation's; this client asks it through the node's unit socket, as systemctl asks
# systemd over D-Bus.
import json, os, socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("/run/hk-sim/units.sock")
except OSError as e:
    sys.stderr.write("%s: the simulation's unit manager is not answering: %s\n" % (os.path.basename(sys.argv[0]), e))
    sys.exit(1)
s.sendall(json.dumps({"argv": [os.path.basename(sys.argv[0])] + sys.argv[1:]}).encode() + b"\n")
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
r = json.loads(data)
sys.stdout.write(r["stdout"])
sys.stderr.write(r["stderr"])
sys.exit(r["status"])
"#;

/// The node's `sudo`: the sandbox's only user is root already.
const SUDO_SHIM: &str = r#"#!/bin/sh
# hk-sim: a simulated node's sandbox has one user, root (a user namespace: no setuid), so
# sudo reads its options and runs the command as it is. Another target user is refused.
while [ $# -gt 0 ]; do
  case "$1" in
    -u) case "$2" in root|0|'#0') shift 2 ;; *) echo "sudo: a simulated node has only root; cannot run as '$2'" >&2; exit 1 ;; esac ;;
    -p|-g|-C|-D|-r|-t|-T) shift 2 ;;
    --) shift; break ;;
    -*) case "$1" in *[!-HSnEkiAbsl]*) echo "sudo: option $1 is not known on a simulated node" >&2; exit 1 ;; esac; shift ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: sudo COMMAND" >&2; exit 1; }
exec "$@"
"#;

/// The node's unit socket: one request per connection, answered from the node's state.
async fn serve_units(
    listener: UnixListener,
    state: Arc<Mutex<NodeState>>,
    stop: CancellationToken,
) {
    loop {
        let conn = tokio::select! {
            c = listener.accept() => c,
            () = stop.cancelled() => return,
        };
        let Ok((stream, _)) = conn else { continue };
        let state = state.clone();
        tokio::spawn(async move {
            let _ = answer_unit(stream, state).await;
        });
    }
}

async fn answer_unit(stream: UnixStream, state: Arc<Mutex<NodeState>>) -> io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut line = Vec::new();
    let mut reader = BufReader::new(read).take(UNIT_REQUEST_MAX);
    tokio::io::AsyncBufReadExt::read_until(&mut reader, b'\n', &mut line).await?;
    let reply = match serde_json::from_slice::<UnitRequest>(&line) {
        Ok(req) => unit_reply(&state, &req.argv),
        Err(e) => UnitReply {
            stdout: String::new(),
            stderr: format!("hk-sim: a unit request that is not JSON ({e})\n"),
            status: 1,
        },
    };
    let text = serde_json::to_vec(&reply).map_err(io::Error::other)?;
    write.write_all(&text).await?;
    write.shutdown().await
}

/// How long a rebooting node stays down (simulated time; at least [`REBOOT_DOWN_MIN`]): a
/// server's reboot, long enough that its kubelet's silence (this, then k3s's start) passes
/// the node-monitor grace period, so the cluster marks it NotReady as a real one does.
const REBOOT_DOWN_MS: u64 = 45_000;
/// The least real time a node stays down, so a client sees it gone even on a stopped clock.
const REBOOT_DOWN_MIN: Duration = Duration::from_secs(1);

/// Carries out the reboot the node asked for: down at its time, every running unit stopped
/// (SSH refuses meanwhile), up again with a new boot id and those units started.
async fn reboot(state: Arc<Mutex<NodeState>>) {
    let lock = |s: &Arc<Mutex<NodeState>>| {
        s.lock()
            .map_err(|_| ())
            .map(|g| (g.reboot_at_ms, g.clock, g.now_ms()))
    };
    let Ok((Some(at), clock, now)) = lock(&state) else {
        return;
    };
    tokio::time::sleep(clock.real_duration(at.saturating_sub(now))).await;
    let units = match state.lock() {
        Ok(mut s) if s.reboot_at_ms.is_some() => {
            let now = s.now_ms();
            s.shut_down(now)
        }
        _ => return,
    };
    tokio::time::sleep(clock.real_duration(REBOOT_DOWN_MS).max(REBOOT_DOWN_MIN)).await;
    if let Ok(mut s) = state.lock() {
        let now = s.now_ms();
        s.boot(now, &units);
    }
}

fn unit_reply(state: &Arc<Mutex<NodeState>>, argv: &[String]) -> UnitReply {
    let Some((name, args)) = argv.split_first() else {
        return UnitReply {
            stdout: String::new(),
            stderr: "hk-sim: an empty unit request\n".into(),
            status: 1,
        };
    };
    let mut s = state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if s.commands.len() >= 1000 {
        s.commands.remove(0);
    }
    s.commands.push(argv.join(" "));
    let pending = s.reboot_at_ms.is_some();
    let out = login::unit_tool(&mut s, name, args);
    if !pending && s.reboot_at_ms.is_some() {
        tokio::spawn(reboot(state.clone()));
    }
    match out {
        Some(out) => UnitReply {
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            status: out.status,
        },
        None => UnitReply {
            stdout: String::new(),
            stderr: format!("hk-sim: `{name}` is not one of the node's unit tools\n"),
            status: 1,
        },
    }
}

/// One SSH channel bridged to one process in the node's sandbox: the client's data is its
/// stdin (closed at the client's EOF), its stdout and stderr go back as they come (one
/// stream with `\r\n` on a pty), then its exit status, EOF and close. `cancel` (the client
/// signalled or closed the channel) kills it.
pub(crate) async fn bridge(
    userland: Arc<Userland>,
    argv: Vec<String>,
    pty: bool,
    mut input: UnboundedReceiver<Vec<u8>>,
    cancel: Arc<AtomicBool>,
    handle: server::Handle,
    channel: ChannelId,
) {
    let mut cmd = userland.command(&argv);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let msg = format!(
                "sim: node {}: could not start its sandbox: {e}\n",
                userland.hostname
            );
            super::channel::finish(
                handle,
                channel,
                Vec::new(),
                msg.into_bytes(),
                Ending::Exit(255),
            )
            .await;
            return;
        }
    };
    let mut stdin = child.stdin.take();
    let feed = tokio::spawn(async move {
        while let Some(d) = input.recv().await {
            let Some(w) = stdin.as_mut() else { break };
            if w.write_all(&d).await.is_err() {
                break;
            }
        }
        drop(stdin);
        // Keep draining so the connection's sender never blocks on a dead process.
        while input.recv().await.is_some() {}
    });
    let pump = |r: Option<Box<dyn tokio::io::AsyncRead + Send + Unpin>>, ext: bool| {
        let handle = handle.clone();
        tokio::spawn(async move {
            let Some(mut r) = r else { return };
            let mut buf = vec![0u8; 32 * 1024];
            loop {
                match r.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        let data = buf[..n].to_vec();
                        let sent = if pty {
                            handle.data(channel, super::channel::pty_text(&data)).await
                        } else if ext {
                            handle.extended_data(channel, 1, data).await
                        } else {
                            handle.data(channel, data).await
                        };
                        if sent.is_err() {
                            return;
                        }
                    }
                }
            }
        })
    };
    let out = pump(
        child
            .stdout
            .take()
            .map(|r| Box::new(r) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
        false,
    );
    let err = pump(
        child
            .stderr
            .take()
            .map(|r| Box::new(r) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
        true,
    );
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    let mut killed = false;
    let status = loop {
        tokio::select! {
            s = child.wait() => break s,
            _ = tick.tick() => {
                if !killed && cancel.load(Ordering::SeqCst) {
                    killed = true;
                    let _ = child.start_kill();
                }
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN, async {
        let _ = out.await;
        let _ = err.await;
    })
    .await;
    feed.abort();
    let ending = match status {
        _ if killed => Ending::Killed,
        Ok(s) => Ending::Exit(s.code().unwrap_or(255)),
        Err(_) => Ending::Exit(255),
    };
    super::channel::finish(handle, channel, Vec::new(), Vec::new(), ending).await;
}

/// Where a node's sandboxed unit socket is, as the node sees it (for messages and tests).
pub fn unit_socket() -> &'static str {
    UNIT_SOCKET
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_stay_on_the_host() {
        assert!(secret(Path::new("shadow")));
        assert!(secret(Path::new("ssh/ssh_host_ed25519_key")));
        assert!(!secret(Path::new("ssh/ssh_host_ed25519_key.pub")));
        assert!(!secret(Path::new("passwd")));
    }

    #[test]
    fn root_login_shell_from_passwd() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("passwd");
        std::fs::write(
            &p,
            "root:x:0:0:root:/root:/bin/sh\nbin:x:1:1::/bin:/usr/sbin/nologin\n",
        )
        .expect("write");
        assert_eq!(login_shell(&p), "/bin/sh");
        std::fs::write(&p, "root:x:0:0:root:/root:/no/such/shell\n").expect("write");
        assert_eq!(login_shell(&p), "/bin/sh");
    }
}
