//! Test harness shared by tests/exec_*.rs and the exec benchmark: real OpenSSH `sshd`
//! processes as three "nodes" on 127.0.0.11-13, each with its own throwaway host key and
//! one authorized test key, every file under a temp dir, all killed on drop. Also a real
//! `ssh-agent`, and an Ansible inventory/environment pointing at the nodes.
//!
//! Needs `/usr/sbin/sshd` (Debian: `apt-get install -y openssh-server`) and `ssh-keygen`,
//! `ssh-agent`, `ssh-add` (openssh-client). Missing tools FAIL the test with that hint.
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hk_effects::exec::settings::{ConnectSettings, SshConfig, SshDefaults};
use hk_effects::exec::{SshOptions, SshPool};

pub mod gateway;

pub const SSHD: &str = "/usr/sbin/sshd";
pub const INSTALL_SSHD: &str =
    "OpenSSH server missing: install it with `apt-get install -y openssh-server` (Debian/Ubuntu)";
pub const ADDRS: [&str; 3] = ["127.0.0.11", "127.0.0.12", "127.0.0.13"];

fn tool(name: &str) -> PathBuf {
    for d in ["/usr/bin", "/usr/sbin", "/bin", "/usr/local/bin"] {
        let p = Path::new(d).join(name);
        if p.exists() {
            return p;
        }
    }
    panic!("{name} not found: {INSTALL_SSHD} (and openssh-client)");
}

/// `ssh-keygen -t ed25519` into `path` with this passphrase ("" for none).
pub fn keygen(path: &Path, passphrase: &str) {
    let st = Command::new(tool("ssh-keygen"))
        .args([
            "-q", "-t", "ed25519", "-N", passphrase, "-C", "hk-test", "-f",
        ])
        .arg(path)
        .stdin(Stdio::null())
        .status()
        .expect("run ssh-keygen");
    assert!(st.success(), "ssh-keygen failed for {}", path.display());
}

/// `SHA256:...` of a public key file, as ssh-keygen prints it.
pub fn keygen_fingerprint(pub_path: &Path) -> String {
    let out = Command::new(tool("ssh-keygen"))
        .arg("-lf")
        .arg(pub_path)
        .output()
        .expect("ssh-keygen -lf");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.split_whitespace()
        .nth(1)
        .expect("fingerprint field")
        .to_string()
}

fn free_port(addr: &str) -> u16 {
    let l = TcpListener::bind((addr, 0)).expect("bind a free port on the node address");
    l.local_addr().expect("addr").port()
}

pub struct Node {
    pub name: String,
    pub addr: String,
    pub port: u16,
    pub dir: PathBuf,
    pub host_key_pub: PathBuf,
    pub log: PathBuf,
    config: PathBuf,
    child: Option<Child>,
}

impl Node {
    fn start(&mut self) {
        if let Err(e) = self.try_start() {
            panic!("{e}");
        }
    }

    /// The login's home as the test node gives it (`SetEnv HOME`): a directory of the node's
    /// own, so a login does not run the machine user's shell start-up. Root's `~/.bashrc`
    /// here runs `pyenv init` and so `pyenv rehash`, whose lock, left behind by a login
    /// killed mid-way, made every later login wait 60 s (the suite went red on it once).
    fn home(&self) -> PathBuf {
        self.dir.join("home")
    }

    fn write_config(&self, authorized: &Path) {
        let _ = std::fs::create_dir_all(self.home());
        std::fs::write(
            &self.config,
            format!(
                "Port {port}\nListenAddress {addr}\nHostKey {hk}\nPidFile {pid}\n\
                 AuthorizedKeysFile {auth}\nStrictModes no\nPubkeyAuthentication yes\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
                 PermitRootLogin prohibit-password\nLogLevel DEBUG1\nMaxSessions 100\n\
                 MaxStartups 100:30:200\nSubsystem sftp internal-sftp\n\
                 SetEnv HOME={home}\n",
                home = self.home().display(),
                port = self.port,
                addr = self.addr,
                hk = self.dir.join("ssh_host_ed25519_key").display(),
                pid = self.dir.join("sshd.pid").display(),
                auth = authorized.display(),
            ),
        )
        .expect("sshd_config");
    }

    /// Starts sshd and waits for its banner; Err if it exits first (e.g. the port was taken
    /// between choosing it and binding it).
    fn try_start(&mut self) -> Result<(), String> {
        assert!(Path::new(SSHD).exists(), "{INSTALL_SSHD}");
        // sshd's privilege separation needs this directory (absent in containers).
        let _ = std::fs::create_dir_all("/run/sshd");
        let child = Command::new(SSHD)
            .arg("-D")
            .arg("-f")
            .arg(&self.config)
            .arg("-E")
            .arg(&self.log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(INSTALL_SSHD);
        self.child = Some(child);
        // Ready when it answers with its banner.
        let t0 = Instant::now();
        loop {
            if let Ok(mut s) = TcpStream::connect((self.addr.as_str(), self.port)) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let mut buf = [0u8; 4];
                if s.read_exact(&mut buf).is_ok() && &buf == b"SSH-" {
                    return Ok(());
                }
            }
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(st)) = c.try_wait() {
                    self.child = None;
                    let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                    return Err(format!("sshd for {} exited with {st}: {log}", self.name));
                }
            }
            if t0.elapsed() > Duration::from_secs(10) {
                return Err(format!(
                    "sshd for {} did not answer on {}:{}",
                    self.name, self.addr, self.port
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the listener and every per-connection sshd it forked: a crash, not a shutdown.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            kill_tree(c.id());
            let _ = c.wait();
        }
    }

    /// Starts sshd again on the same port with the same host key.
    pub fn restart(&mut self) {
        self.kill();
        self.start();
    }

    /// How many connections sshd authenticated (`Accepted publickey` lines in its log).
    pub fn accepted(&self) -> usize {
        self.log_text().matches("Accepted publickey").count()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn host_key_fingerprint(&self) -> String {
        keygen_fingerprint(&self.host_key_pub)
    }

    /// The known_hosts line for this node, `[addr]:port type key`.
    pub fn known_hosts_line(&self) -> String {
        let pubkey = std::fs::read_to_string(&self.host_key_pub).expect("host key");
        let mut f = pubkey.split_whitespace();
        let (t, k) = (f.next().expect("type"), f.next().expect("key"));
        format!("[{}]:{} {t} {k}", self.addr, self.port)
    }
}

fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // The comm field may contain spaces: ppid is the 2nd field after the last ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let ppid = rest
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.push(p);
        }
    }
    out
}

pub fn kill_tree(pid: u32) {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    // Stop the parent first so it forks nothing new, then the descendants.
    let _ = kill(Pid::from_raw(pid as i32), Signal::SIGSTOP);
    for c in children_of(pid) {
        kill_tree(c);
    }
    let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
}

/// Three sshd nodes and a client key.
pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub nodes: Vec<Node>,
    pub client_key: PathBuf,
    pub known_hosts: PathBuf,
}

impl Cluster {
    pub fn start() -> Self {
        Self::start_n(3)
    }

    pub fn start_n(n: usize) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("hk-sshd-")
            .tempdir()
            .expect("tempdir");
        let client_key = dir.path().join("id_ed25519");
        keygen(&client_key, "");
        let authorized = dir.path().join("authorized_keys");
        std::fs::copy(client_key.with_extension("pub"), &authorized).expect("authorized_keys");
        let mut nodes = Vec::new();
        for (i, addr) in ADDRS.iter().take(n).enumerate() {
            let name = format!("node{}", i + 1);
            let ndir = dir.path().join(&name);
            std::fs::create_dir_all(&ndir).expect("node dir");
            let host_key = ndir.join("ssh_host_ed25519_key");
            keygen(&host_key, "");
            let config = ndir.join("sshd_config");
            let mut node = Node {
                name,
                addr: addr.to_string(),
                port: 0,
                host_key_pub: host_key.with_extension("pub"),
                log: ndir.join("sshd.log"),
                dir: ndir,
                config,
                child: None,
            };
            // A port chosen free can be taken before sshd binds it (tests run in
            // parallel): choose again.
            let mut last = String::new();
            for _ in 0..5 {
                node.port = free_port(addr);
                node.write_config(&authorized);
                match node.try_start() {
                    Ok(()) => break,
                    Err(e) => last = e,
                }
            }
            assert!(node.child.is_some(), "{last}");
            nodes.push(node);
        }
        let known_hosts = dir.path().join("known_hosts");
        let lines: Vec<String> = nodes.iter().map(Node::known_hosts_line).collect();
        std::fs::write(&known_hosts, lines.join("\n") + "\n").expect("known_hosts");
        Cluster {
            dir,
            nodes,
            client_key,
            known_hosts,
        }
    }

    pub fn user() -> String {
        std::env::var("USER").unwrap_or_else(|_| "root".into())
    }

    /// Inventory-style hostvars for node `i`.
    pub fn hostvars(&self, i: usize) -> BTreeMap<String, serde_json::Value> {
        let n = &self.nodes[i];
        let mut m = BTreeMap::new();
        m.insert("ansible_host".into(), n.addr.clone().into());
        m.insert("ansible_port".into(), n.port.into());
        m.insert("ansible_user".into(), Self::user().into());
        m.insert(
            "ansible_ssh_private_key_file".into(),
            self.client_key.display().to_string().into(),
        );
        m
    }

    /// Settings for node `i` resolved the way the app does it, from hostvars.
    pub fn settings(&self, i: usize) -> ConnectSettings {
        ConnectSettings::resolve(
            &self.nodes[i].name,
            &self.hostvars(i),
            &SshConfig::empty(),
            &SshDefaults::from_env(),
        )
        .expect("settings")
    }

    /// OpenSSH's own `ssh` to node `i` as a script would run it: no config file, no
    /// agent, no connection sharing, this cluster's host keys only. The remote command is
    /// the caller's to add.
    pub fn openssh(&self, i: usize) -> std::process::Command {
        let n = &self.nodes[i];
        let mut c = std::process::Command::new("ssh");
        c.args([
            "-F",
            "/dev/null",
            "-o",
            "BatchMode=yes",
            "-o",
            "IdentitiesOnly=yes",
        ])
        .args(["-o", "ControlMaster=no", "-o", "ControlPath=none"])
        .args(["-o", "StrictHostKeyChecking=yes"])
        .arg("-o")
        .arg(format!("UserKnownHostsFile={}", self.known_hosts.display()))
        .arg("-i")
        .arg(&self.client_key)
        .arg("-p")
        .arg(n.port.to_string())
        .arg(format!("{}@{}", Self::user(), n.addr));
        c
    }

    /// Options trusting exactly this cluster's host keys, no agent, quick reconnects.
    pub fn options(&self) -> SshOptions {
        let mut o = SshOptions::with_known_hosts(vec![self.known_hosts.clone()]);
        o.reconnect.initial = Duration::from_millis(100);
        o.connect_timeout = Duration::from_secs(10);
        o
    }

    pub fn pool_with(&self, o: SshOptions) -> SshPool {
        let pool = SshPool::new(o);
        for i in 0..self.nodes.len() {
            pool.add_host(self.settings(i));
        }
        pool
    }

    pub fn pool(&self) -> SshPool {
        self.pool_with(self.options())
    }

    /// An INI inventory for the nodes, as Ansible reads it.
    pub fn write_inventory(&self) -> PathBuf {
        let mut s = String::from("[nodes]\n");
        for n in &self.nodes {
            s.push_str(&format!(
                "{} ansible_host={} ansible_port={}\n",
                n.name, n.addr, n.port
            ));
        }
        s.push_str(&format!(
            "\n[nodes:vars]\nansible_user={user}\nansible_ssh_private_key_file={key}\n\
             ansible_python_interpreter=/usr/bin/python3\nansible_remote_tmp={tmp}/remote-tmp\n\
             ansible_ssh_common_args='-o UserKnownHostsFile={kh} -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes'\n",
            user = Self::user(),
            key = self.client_key.display(),
            tmp = self.dir.path().display(),
            kh = self.known_hosts.display(),
        ));
        let p = self.dir.path().join("hosts.ini");
        std::fs::write(&p, s).expect("inventory");
        p
    }

    /// Environment that keeps Ansible's files inside the temp dir.
    pub fn ansible_env(&self) -> Vec<(String, String)> {
        let d = self.dir.path();
        let cp = d.join("cp");
        let _ = std::fs::create_dir_all(&cp);
        vec![
            (
                "ANSIBLE_HOME".into(),
                d.join("ansible-home").display().to_string(),
            ),
            (
                "ANSIBLE_LOCAL_TEMP".into(),
                d.join("local-tmp").display().to_string(),
            ),
            (
                "ANSIBLE_SSH_CONTROL_PATH_DIR".into(),
                cp.display().to_string(),
            ),
            ("ANSIBLE_HOST_KEY_CHECKING".into(), "True".into()),
            ("ANSIBLE_RETRY_FILES_ENABLED".into(), "False".into()),
            ("ANSIBLE_DEPRECATION_WARNINGS".into(), "False".into()),
        ]
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            n.kill();
        }
    }
}

/// A real ssh-agent on a socket in `dir`, killed on drop.
pub struct Agent {
    pub socket: PathBuf,
    child: Child,
}

impl Agent {
    pub fn start(dir: &Path) -> Self {
        let socket = dir.join("agent.sock");
        let child = Command::new(tool("ssh-agent"))
            .arg("-D")
            .arg("-a")
            .arg(&socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start ssh-agent");
        let t0 = Instant::now();
        while !socket.exists() {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "ssh-agent did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Agent { socket, child }
    }

    pub fn add(&self, key: &Path) {
        let st = Command::new(tool("ssh-add"))
            .arg(key)
            .env("SSH_AUTH_SOCK", &self.socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("ssh-add");
        assert!(st.success(), "ssh-add {} failed", key.display());
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The directory holding ansible-playbook (hk-test-support's one lookup for the tests).
pub fn ansible_bin_dir() -> PathBuf {
    hk_test_support::ansible::dir_of("ansible-playbook")
}

/// Lines of a file, for marker assertions.
pub fn read_lines(p: &Path) -> Vec<String> {
    let f = std::fs::File::open(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    BufReader::new(f)
        .lines()
        .map(|l| l.expect("line"))
        .collect()
}

pub fn fixtures() -> PathBuf {
    hk_test_support::root().join("tests/fixtures/exec")
}

/// The real Flux CLI that tests/flux/build.sh built (`$HK_FLUX_BIN_DIR`, else
/// target/flux-bin). Missing = FAIL with the build hint, never a skip.
pub fn flux_bin() -> PathBuf {
    let dir = std::env::var_os("HK_FLUX_BIN_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| hk_test_support::root().join("target/flux-bin"));
    let bin = dir.join("flux");
    assert!(
        bin.is_file(),
        "{} not found: run `bash tests/flux/build.sh` (tests/run-all.sh does, and exports HK_FLUX_BIN_DIR)",
        bin.display()
    );
    bin
}

/// A step's start, recorded the only way there is: a journal in its own temporary
/// directory records `step`'s `step-started` (a one-step plan of it, no gate), and hands
/// back the proof an executor needs to start the step. Keep the value alive while the step
/// runs (it holds the directory).
pub struct RecordedStart {
    _dir: tempfile::TempDir,
    pub start: hk_engine::journal::StartRecorded,
}

pub fn recorded_start(step: &hk_engine::runbook::plan::PlannedStep) -> RecordedStart {
    use hk_engine::journal::{Header, Journal};
    use hk_engine::runbook::machine::{Effect, Event, Input, Mode, Run, Timestamp};
    use hk_engine::runbook::plan::Plan;
    let dir = tempfile::tempdir().expect("temp dir");
    let mut one = step.clone();
    one.gate = None;
    let plan = Plan {
        runbook: "recorded-start".into(),
        env: "test".into(),
        mutates: one.mutates,
        steps: vec![one],
    };
    let mut j = Journal::create(
        dir.path(),
        &Header::new(plan.clone(), Mode::Operate, "test", Timestamp(1)),
    )
    .expect("journal");
    let mut run = Run::new(plan).expect("a valid one-step plan");
    let fx = j
        .record(&mut run, Event::new(Timestamp(2), Input::Start))
        .expect("start journaled");
    let Some(Effect::Execute(x)) = fx.into_iter().find(|e| matches!(e, Effect::Execute(_))) else {
        panic!("the one step's work goes out at the start");
    };
    let (_, start) = j
        .record_start(&mut run, Timestamp(3), x.n(), x.attempt())
        .expect("start recorded");
    RecordedStart { _dir: dir, start }
}
