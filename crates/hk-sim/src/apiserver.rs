//! `demo --apiserver DIR`: a REAL kube-apiserver per environment, over that environment's
//! own real etcd cluster (one member per server, named after it, on its address), on
//! loopback, in place of the built-in API server; the simulated controllers then write
//! through a kube client ([`super::kube::api::KubeApi`]) so every kubectl and k9s view is
//! the real server's, and quorum is etcd's own: a server that goes down takes its member
//! with it ([`EtcdMembers::stop`], [`EtcdMembers::start`]).
//!
//! Owns: checking DIR (both binaries there and executable), the throwaway PKI (rcgen: a
//! CA, a serving certificate for 127.0.0.1 and every VIP, a service-account key), the
//! static tokens (an admin in system:masters, a read-only user), starting each
//! environment's etcd members ([`EtcdCluster`]: again on new ports when one was taken) and
//! each kube-apiserver under a watchdog, stopping and starting a member on the demo's word, waiting for them to serve, installing the CRDs the
//! built-in server serves (HelmRelease, Kustomization: generated from
//! [`super::kube::resources::crds`]) and the read-only user's RBAC, and the kubeconfigs.
//! Must not: listen anywhere but loopback, leave a process behind (see the watchdog), or
//! stand in for anything the real server does (it only starts it).
//!
//! Shared with the kube tests' harness (crates/hk-sim/tests/support/apiserver.rs), so both start the
//! servers one way: the PKI ([`make_pki`]), the static tokens ([`write_token_file`]), the
//! etcd and kube-apiserver command lines ([`etcd_args`], [`ApiServerFlags`]), starting
//! etcd until it serves ([`start_etcd`]), the readiness wait ([`wait_ready`]), the
//! kubeconfigs ([`kubeconfig`], [`client_of`]) and the cleanup ([`Watched`]).
//!
//! Processes: each binary runs under a `sh` watchdog whose stdin is a pipe from this
//! process. When the pipe closes (the [`RealCluster`] dropped, or hk-console gone in any
//! way, SIGKILL included) the watchdog SIGKILLs its binary, waits for it and removes its
//! directory. So no etcd or kube-apiserver outlives the demo. A member's watchdog has a
//! directory of its run only (its data outlives a stop, for the next start); the whole
//! directory is a keeper's, a `sleep` under a watchdog of its own, stopped last.

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use rcgen::KeyPair;
use serde_json::{json, Value};

/// The two binaries DIR must hold.
pub const ETCD: &str = "etcd";
pub const KUBE_APISERVER: &str = "kube-apiserver";
/// The read-only user's name and the ClusterRole it is bound to.
pub const READONLY_USER: &str = "hk-console-readonly";
const ADMIN_USER: &str = "hk-console-admin";
/// What the kube tests' build makes (tests/apiserver/build.sh), for the hint.
pub const BUILD_HINT: &str = "build them with `bash tests/apiserver/build.sh` (needs Go), which puts etcd, kube-apiserver and kubectl in target/apiserver-bin";

/// How long a kube-apiserver may take to serve (cold page cache, two shared cores).
const READY_TIMEOUT: Duration = Duration::from_secs(180);
const ETCD_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum ApiServerError {
    #[error("demo --apiserver {dir}: not a directory; it must hold `etcd` and `kube-apiserver` ({BUILD_HINT})")]
    NoDir { dir: PathBuf },
    #[error("demo --apiserver: {path} is missing; the directory must hold `etcd` and `kube-apiserver` ({BUILD_HINT})")]
    MissingBinary { path: PathBuf },
    #[error("demo --apiserver: {path} is not an executable file")]
    NotExecutable { path: PathBuf },
    #[error(
        "demo --apiserver: {0} is not a loopback address; the simulation never listens elsewhere"
    )]
    NotLoopback(IpAddr),
    #[error("demo --apiserver: cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("demo --apiserver: throwaway certificates: {0}")]
    Pki(String),
    #[error("demo --apiserver: cannot start {program}: {why}")]
    Spawn { program: PathBuf, why: String },
    #[error("demo --apiserver: etcd did not serve on {url}: {why}\n--- the last lines of its log ---\n{tail}")]
    EtcdDown {
        url: String,
        why: String,
        tail: String,
    },
    #[error("demo --apiserver: kube-apiserver for `{env}` on https://{addr} did not become ready: {why}\n--- the last lines of its log ---\n{tail}")]
    NotReady {
        env: String,
        addr: SocketAddr,
        why: String,
        tail: String,
    },
    #[error("demo --apiserver: `{env}`: {what}: {why}")]
    Setup {
        env: String,
        what: String,
        why: String,
    },
}

/// DIR's etcd and kube-apiserver, checked: both exist and are executable.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub etcd: PathBuf,
    pub kube_apiserver: PathBuf,
}

impl Binaries {
    pub fn find(dir: &Path) -> Result<Binaries, ApiServerError> {
        if !dir.is_dir() {
            return Err(ApiServerError::NoDir {
                dir: dir.to_path_buf(),
            });
        }
        let one = |name: &str| {
            let path = dir.join(name);
            let meta = std::fs::metadata(&path)
                .map_err(|_| ApiServerError::MissingBinary { path: path.clone() })?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
                    return Err(ApiServerError::NotExecutable { path });
                }
            }
            #[cfg(not(unix))]
            let _ = meta;
            Ok(path)
        };
        Ok(Binaries {
            etcd: one(ETCD)?,
            kube_apiserver: one(KUBE_APISERVER)?,
        })
    }
}

/// `sh -c WATCHDOG sh DIR LOG PROGRAM ARGS...`: runs the program in the background with its
/// output in LOG, prints its pid, then waits for end of input on stdin. At EOF (our end
/// closed: dropped, or this process gone however it went) it SIGKILLs the program, reaps
/// it and removes DIR (again, a few times, while something still writes into it: the
/// watchdogs of one demo all stop at once). Terminal signals are ignored so a Ctrl-C cannot
/// take the watchdog away before its program.
const WATCHDOG: &str = r#"dir=$1; log=$2; shift 2
trap '' INT HUP QUIT TERM
"$@" </dev/null >>"$log" 2>&1 &
child=$!
echo "$child"
cat >/dev/null
kill -KILL "$child" 2>/dev/null
wait "$child" 2>/dev/null
for try in 1 2 3 4 5; do
  rm -rf "$dir" 2>/dev/null
  [ -e "$dir" ] || break
  sleep 1
done
"#;

/// A program under its watchdog. Dropping it kills the program and removes its directory,
/// and waits until both are done.
pub struct Watched {
    pid: u32,
    stdin: Option<ChildStdin>,
    sh: Child,
}

impl Watched {
    /// Start `program ARGS` under its watchdog, its output appended to `log`; `dir` is
    /// removed once it is dead.
    pub fn spawn(
        dir: &Path,
        log: &Path,
        program: &Path,
        args: &[String],
    ) -> Result<Watched, ApiServerError> {
        let spawn_err = |why: String| ApiServerError::Spawn {
            program: program.to_path_buf(),
            why,
        };
        let mut sh = Command::new("/bin/sh")
            .arg("-c")
            .arg(WATCHDOG)
            .arg("hk-console-watchdog")
            .arg(dir)
            .arg(log)
            .arg(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| spawn_err(format!("/bin/sh for its watchdog: {e}")))?;
        let stdin = sh.stdin.take();
        let mut line = String::new();
        let read = sh
            .stdout
            .take()
            .map(|out| BufReader::new(out).read_line(&mut line));
        match (read, line.trim().parse::<u32>()) {
            (Some(Ok(_)), Ok(pid)) => Ok(Watched { pid, stdin, sh }),
            _ => {
                drop(stdin);
                let _ = sh.wait();
                Err(spawn_err(format!(
                    "its watchdog printed {line:?}, not a process id"
                )))
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn alive(&self) -> bool {
        alive(self.pid)
    }

    /// Tell the watchdog to stop its program now, without waiting (dropping it waits): so
    /// many can be stopped at once.
    pub fn release(&mut self) {
        drop(self.stdin.take());
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.sh.wait();
    }
}

/// True while `pid` runs (exists and is not a zombie).
pub fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, r)| r.split_whitespace().next());
    !matches!(state, None | Some("Z") | Some("X"))
}

/// The last `n` lines of a log file, for failure messages.
pub fn log_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn write(path: &Path, text: &str) -> Result<(), ApiServerError> {
    let err = |source| ApiServerError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).map_err(err)?;
    }
    std::fs::write(path, text).map_err(err)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
    }
    Ok(())
}

/// `bytes` random bytes in hex: tokens, markers.
pub fn random_hex(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    rand::fill(&mut b[..]);
    data_encoding::HEXLOWER.encode(&b)
}

/// A port free on `ip` now, outside the kernel's ephemeral range: a released ephemeral port
/// can become the source port of one of the many connections kube-apiserver opens to etcd
/// while it starts, and the bind then fails.
pub fn free_port(ip: IpAddr) -> Option<u16> {
    let range =
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let mut it = range.split_whitespace().map(|x| x.parse::<u32>().ok());
    let (lo, hi) = match (it.next().flatten(), it.next().flatten()) {
        (Some(lo), Some(hi)) => (lo, hi),
        _ => (32768, 60999),
    };
    let (from, to) = if lo >= 12000 {
        (10000, lo)
    } else {
        (hi + 1, 65536)
    };
    if to <= from + 100 {
        return None;
    }
    for _ in 0..200 {
        let mut b = [0u8; 4];
        rand::fill(&mut b);
        let port = u16::try_from(from + u32::from_le_bytes(b) % (to - from)).ok()?;
        if std::net::TcpListener::bind((ip, port)).is_ok() {
            return Some(port);
        }
    }
    None
}

/// The throwaway PKI's files (PEM) and the CA's text.
#[derive(Debug, Clone)]
pub struct Pki {
    pub ca_pem: String,
    pub ca: PathBuf,
    /// The serving certificate, its CA appended.
    pub cert: PathBuf,
    pub key: PathBuf,
    pub sa_key: PathBuf,
    pub sa_pub: PathBuf,
}

/// A CA, a serving certificate for localhost, 127.0.0.1 and `ips`, and the service-account
/// signing key, written under `dir`.
pub fn make_pki(dir: &Path, ips: &[IpAddr]) -> Result<Pki, ApiServerError> {
    let mut addrs = vec![IpAddr::V4(Ipv4Addr::LOCALHOST)];
    addrs.extend_from_slice(ips);
    let super::kube::tls::Minted { ca, cert, key } = super::kube::tls::mint(
        "hk-console demo kube-apiserver CA",
        vec!["localhost".to_string()],
        &addrs,
    )
    .map_err(|e| ApiServerError::Pki(e.to_string()))?;
    let sa = KeyPair::generate()
        .map_err(|e| ApiServerError::Pki(format!("service-account key: {e}")))?;
    let out = Pki {
        ca_pem: ca.pem(),
        ca: dir.join("ca.crt"),
        cert: dir.join("serving.crt"),
        key: dir.join("serving.key"),
        sa_key: dir.join("sa.key"),
        sa_pub: dir.join("sa.pub"),
    };
    write(&out.ca, &out.ca_pem)?;
    write(&out.cert, &format!("{}{}", cert.pem(), out.ca_pem))?;
    write(&out.key, &key.serialize_pem())?;
    write(&out.sa_key, &sa.serialize_pem())?;
    write(&out.sa_pub, &sa.public_key_pem())?;
    Ok(out)
}

/// One line of kube-apiserver's `--token-auth-file`.
#[derive(Debug, Clone, Copy)]
pub struct StaticToken<'a> {
    pub token: &'a str,
    pub user: &'a str,
    pub uid: &'a str,
    pub groups: &'a [&'a str],
}

/// The static token file (CSV: token, user, uid, "group,group"), private to this user.
pub fn write_token_file(path: &Path, tokens: &[StaticToken<'_>]) -> Result<(), ApiServerError> {
    let mut text = String::new();
    for t in tokens {
        text.push_str(&format!("{},{},{}", t.token, t.user, t.uid));
        if !t.groups.is_empty() {
            text.push_str(&format!(",\"{}\"", t.groups.join(",")));
        }
        text.push('\n');
    }
    write(path, &text)
}

/// A single-member etcd on 127.0.0.1 named `name`, its data in `data_dir`.
pub fn etcd_args(name: &str, data_dir: &Path, client: u16, peer: u16) -> Vec<String> {
    vec![
        format!("--name={name}"),
        format!("--data-dir={}", data_dir.display()),
        format!("--listen-client-urls=http://127.0.0.1:{client}"),
        format!("--advertise-client-urls=http://127.0.0.1:{client}"),
        format!("--listen-peer-urls=http://127.0.0.1:{peer}"),
        format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer}"),
        format!("--initial-cluster={name}=http://127.0.0.1:{peer}"),
        // A throwaway store on a shared disk: durability buys nothing here.
        "--unsafe-no-fsync=true".into(),
        "--log-level=warn".into(),
    ]
}

/// One kube-apiserver's command line: loopback only, TLS from [`Pki`], static tokens,
/// RBAC, service-account tokens, its own etcd prefix; `extra` flags last.
#[derive(Debug, Clone)]
pub struct ApiServerFlags<'a> {
    pub etcd_url: &'a str,
    /// Servers that share an etcd never see each other's objects.
    pub etcd_prefix: &'a str,
    pub bind: IpAddr,
    pub port: u16,
    /// Where kube-apiserver keeps what it generates for itself.
    pub cert_dir: &'a Path,
    pub pki: &'a Pki,
    pub token_file: &'a Path,
    pub extra: Vec<String>,
}

impl ApiServerFlags<'_> {
    pub fn args(&self) -> Vec<String> {
        let p = |p: &Path| p.display().to_string();
        let mut args: Vec<String> = vec![
            format!("--etcd-servers={}", self.etcd_url),
            format!("--etcd-prefix={}", self.etcd_prefix),
            format!("--bind-address={}", self.bind),
            format!("--advertise-address={}", self.bind),
            format!("--secure-port={}", self.port),
            format!("--cert-dir={}", p(self.cert_dir)),
            format!("--tls-cert-file={}", p(&self.pki.cert)),
            format!("--tls-private-key-file={}", p(&self.pki.key)),
            format!("--token-auth-file={}", p(self.token_file)),
            "--anonymous-auth=false".into(),
            "--authorization-mode=RBAC".into(),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            format!("--service-account-key-file={}", p(&self.pki.sa_pub)),
            format!("--service-account-signing-key-file={}", p(&self.pki.sa_key)),
            // k3s's service range: the `kubernetes` Service is 10.43.0.1 there too.
            "--service-cluster-ip-range=10.43.0.0/16".into(),
            // No controller-manager makes the ServiceAccounts that plugin requires.
            "--disable-admission-plugins=ServiceAccount".into(),
            "--profiling=false".into(),
        ];
        args.extend(self.extra.iter().cloned());
        args
    }
}

/// A running etcd under its watchdog.
pub struct Etcd {
    pub url: String,
    pub port: u16,
    pub proc: Watched,
}

/// Start etcd (`bin`, named `name`) with its data and log in `dir`, and wait until it
/// serves, at most `timeout`. `prepare` writes what else belongs in `dir` (the PKI, the
/// tokens) before each try: etcd's watchdog removes `dir` when it dies, so a retry (a port
/// taken between choosing and binding it) starts from nothing.
pub async fn start_etcd<T>(
    bin: &Path,
    dir: &Path,
    name: &str,
    timeout: Duration,
    mut prepare: impl FnMut(&Path) -> Result<T, ApiServerError>,
) -> Result<(Etcd, T), ApiServerError> {
    let t0 = Instant::now();
    let log = dir.join("etcd.log");
    let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let mut why = String::from("no free port on 127.0.0.1");
    let mut last_tail = String::new();
    for _ in 0..3 {
        let (Some(client), Some(peer)) = (free_port(lo), free_port(lo)) else {
            break;
        };
        std::fs::create_dir_all(dir).map_err(|source| ApiServerError::Write {
            path: dir.to_path_buf(),
            source,
        })?;
        let prepared = prepare(dir)?;
        let args = etcd_args(name, &dir.join("etcd-data"), client, peer);
        let proc = Watched::spawn(dir, &log, bin, &args)?;
        let url = format!("http://127.0.0.1:{client}");
        loop {
            if etcd_healthy(client).await {
                let etcd = Etcd {
                    url,
                    port: client,
                    proc,
                };
                return Ok((etcd, prepared));
            }
            if !proc.alive() {
                why = format!("etcd (pid {}) exited", proc.pid);
                break;
            }
            if t0.elapsed() > timeout {
                return Err(ApiServerError::EtcdDown {
                    url,
                    why: format!(
                        "not healthy after {}",
                        hk_engine::time::span(timeout, hk_engine::time::Style::Words)
                    ),
                    tail: log_tail(&log, 20),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        last_tail = log_tail(&log, 20);
        drop(proc);
        if !last_tail.contains("address already in use") {
            break;
        }
    }
    Err(ApiServerError::EtcdDown {
        url: "127.0.0.1".into(),
        why,
        tail: last_tail,
    })
}

/// One member of an environment's etcd, as the demo asks for it: named after its server,
/// listening on that server's own (loopback) address when a port is free there.
#[derive(Debug, Clone)]
pub struct MemberSpec {
    pub name: String,
    pub ip: IpAddr,
}

/// One member of a real etcd cluster: its command line is fixed at the start, so the member
/// can be stopped and started again on its data (a server going down and coming back).
struct Member {
    name: String,
    ip: IpAddr,
    client: u16,
    peer: u16,
    /// Its directory: `data/`, `etcd.log`, and one directory per run for its watchdog.
    dir: PathBuf,
    args: Vec<String>,
    /// The running process; `None` while stopped.
    run: Option<Watched>,
    runs: usize,
}

impl Member {
    fn client_url(&self) -> String {
        format!("http://{}", SocketAddr::new(self.ip, self.client))
    }

    fn peer_url(&self) -> String {
        format!("http://{}", SocketAddr::new(self.ip, self.peer))
    }

    fn log(&self) -> PathBuf {
        self.dir.join("etcd.log")
    }

    /// Start the member's process (its watchdog's directory is this run's own, so stopping
    /// it leaves the data for the next run).
    fn spawn(&mut self, bin: &Path) -> Result<(), ApiServerError> {
        self.runs += 1;
        let run_dir = self.dir.join(format!("run-{}", self.runs));
        std::fs::create_dir_all(&run_dir).map_err(|source| ApiServerError::Write {
            path: run_dir.clone(),
            source,
        })?;
        self.run = Some(Watched::spawn(&run_dir, &self.log(), bin, &self.args)?);
        Ok(())
    }
}

/// Where the members listen: each on its server's address, on ports free there now; on
/// 127.0.0.1 when its address has none. No two members get the same address and port.
///
/// Never etcd's own 2379/2380, though they would read as k3s's: every demo puts its
/// servers on the same addresses, so a port a stopped member left would be the next demo's
/// first choice, and this demo's kube-apiserver would then reach that demo's etcd. A
/// random port is taken again by chance only.
fn place_members(specs: &[MemberSpec]) -> Option<Vec<(IpAddr, u16, u16)>> {
    let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let mut taken: Vec<(IpAddr, u16)> = Vec::new();
    let mut out = Vec::new();
    for s in specs {
        let placed = pick_ports(s.ip, &taken)
            .map(|(c, p)| (s.ip, c, p))
            .or_else(|| pick_ports(lo, &taken).map(|(c, p)| (lo, c, p)))?;
        taken.push((placed.0, placed.1));
        taken.push((placed.0, placed.2));
        out.push(placed);
    }
    Some(out)
}

/// A client and a peer port free on `ip` now and not in `taken`.
fn pick_ports(ip: IpAddr, taken: &[(IpAddr, u16)]) -> Option<(u16, u16)> {
    let one = |not: u16| {
        (0..20)
            .filter_map(|_| free_port(ip))
            .find(|port| *port != not && !taken.contains(&(ip, *port)))
    };
    let c = one(0)?;
    Some((c, one(c)?))
}

/// A real etcd cluster, one member per server of an environment, each under its own
/// watchdog. Members are stopped (killed) and started again by name.
pub struct EtcdCluster {
    env: String,
    bin: PathBuf,
    members: Vec<Member>,
    /// Stopped for good (the demo's end): no member starts again.
    shut: bool,
}

impl EtcdCluster {
    /// Start `specs`' members, their data and logs under `dir`, on ports free now; no wait
    /// ([`EtcdCluster::wait_healthy`] does).
    pub fn spawn(
        bin: &Path,
        dir: &Path,
        env: &str,
        specs: &[MemberSpec],
    ) -> Result<EtcdCluster, ApiServerError> {
        let setup = |why: &str| ApiServerError::Setup {
            env: env.to_string(),
            what: "its etcd".into(),
            why: why.into(),
        };
        if specs.is_empty() {
            return Err(setup("the environment has no server to run a member on"));
        }
        if let Some(s) = specs.iter().find(|s| !s.ip.is_loopback()) {
            return Err(ApiServerError::NotLoopback(s.ip));
        }
        let places = place_members(specs).ok_or_else(|| {
            setup("no free ports for its members, on their servers' addresses or 127.0.0.1")
        })?;
        let initial: Vec<String> = specs
            .iter()
            .zip(&places)
            .map(|(s, (ip, _, peer))| format!("{}=http://{}", s.name, SocketAddr::new(*ip, *peer)))
            .collect();
        let mut cluster = EtcdCluster {
            env: env.to_string(),
            bin: bin.to_path_buf(),
            members: Vec::new(),
            shut: false,
        };
        for (s, (ip, client, peer)) in specs.iter().zip(places) {
            let mdir = dir.join(&s.name);
            std::fs::create_dir_all(&mdir).map_err(|source| ApiServerError::Write {
                path: mdir.clone(),
                source,
            })?;
            let mut m = Member {
                name: s.name.clone(),
                ip,
                client,
                peer,
                args: Vec::new(),
                dir: mdir,
                run: None,
                runs: 0,
            };
            m.args = vec![
                format!("--name={}", m.name),
                format!("--data-dir={}", m.dir.join("data").display()),
                format!("--listen-client-urls={}", m.client_url()),
                format!("--advertise-client-urls={}", m.client_url()),
                format!("--listen-peer-urls={}", m.peer_url()),
                format!("--initial-advertise-peer-urls={}", m.peer_url()),
                format!("--initial-cluster={}", initial.join(",")),
                "--initial-cluster-state=new".into(),
                format!("--initial-cluster-token=hk-console-demo-{env}"),
                // A throwaway store on a shared disk: durability buys nothing here.
                "--unsafe-no-fsync=true".into(),
                "--log-level=warn".into(),
            ];
            cluster.members.push(m);
        }
        for m in &mut cluster.members {
            m.spawn(bin)?;
        }
        Ok(cluster)
    }

    /// What waiting for its health needs, copied out (it is shared behind a lock).
    fn watch(&self) -> HealthWatch {
        HealthWatch {
            env: self.env.clone(),
            members: self
                .members
                .iter()
                .map(|m| {
                    (
                        m.name.clone(),
                        SocketAddr::new(m.ip, m.client),
                        m.run.as_ref().map(Watched::pid),
                        m.log(),
                    )
                })
                .collect(),
        }
    }

    /// The members' client URLs, in the servers' order.
    pub fn urls(&self) -> Vec<String> {
        self.members.iter().map(Member::client_url).collect()
    }

    fn member(&mut self, name: &str) -> Option<&mut Member> {
        self.members.iter_mut().find(|m| m.name == name)
    }
}

/// One etcd cluster's members as its start is waited on: (name, client address, pid,
/// log).
struct HealthWatch {
    env: String,
    members: Vec<(String, SocketAddr, Option<u32>, PathBuf)>,
}

impl HealthWatch {
    /// Wait until every member is healthy (a leader elected, a quorum read served), until
    /// `timeout` after `t0`. Err names why, with every member's log tail (a port taken
    /// before etcd bound it says `address already in use` there: see [`port_taken`]).
    async fn wait(&self, t0: Instant, timeout: Duration) -> Result<(), ApiServerError> {
        let why = loop {
            let mut healthy = 0;
            for (_, addr, _, _) in &self.members {
                if etcd_healthy_at(*addr).await {
                    healthy += 1;
                }
            }
            if healthy == self.members.len() {
                tracing::info!(
                    "demo --apiserver: {}'s etcd ({} members) serves after {:?}",
                    self.env,
                    self.members.len(),
                    t0.elapsed()
                );
                return Ok(());
            }
            if let Some((name, ..)) = self
                .members
                .iter()
                .find(|(_, _, pid, _)| !pid.is_some_and(alive))
            {
                break format!("member {name} exited");
            }
            if t0.elapsed() > timeout {
                break format!(
                    "not healthy after {}",
                    hk_engine::time::span(timeout, hk_engine::time::Style::Words)
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        Err(ApiServerError::EtcdDown {
            url: self
                .members
                .iter()
                .map(|(_, a, _, _)| format!("http://{a}"))
                .collect::<Vec<_>>()
                .join(","),
            why,
            tail: self
                .members
                .iter()
                .map(|(name, _, _, log)| format!("[{name}]\n{}", log_tail(log, 20)))
                .collect::<Vec<_>>()
                .join("\n"),
        })
    }
}

/// Whether `e` says a port was taken by another process between choosing and binding it
/// (then the servers are started again on new ports).
pub fn port_taken(e: &ApiServerError) -> bool {
    match e {
        ApiServerError::EtcdDown { tail, .. } => tail.contains("address already in use"),
        _ => false,
    }
}

impl EtcdCluster {
    /// Every member told to stop at once, then each waited for; none starts again.
    fn shut(&mut self) {
        self.shut = true;
        for m in &mut self.members {
            if let Some(r) = m.run.as_mut() {
                r.release();
            }
        }
        for m in &mut self.members {
            drop(m.run.take());
        }
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        self.shut();
    }
}

/// What [`EtcdMembers::stop`] and [`EtcdMembers::start`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberChange {
    Stopped,
    Started,
    /// It already was so; nothing changed.
    Already,
}

/// An environment's real etcd members, shared: the demo's faults stop a server's member
/// and start it again. Cheap to clone.
#[derive(Clone)]
pub struct EtcdMembers {
    inner: Arc<Mutex<EtcdCluster>>,
}

impl std::fmt::Debug for EtcdMembers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = self.lock();
        f.debug_struct("EtcdMembers")
            .field("env", &c.env)
            .field("urls", &c.urls())
            .finish()
    }
}

impl EtcdMembers {
    pub fn new(cluster: EtcdCluster) -> EtcdMembers {
        EtcdMembers {
            inner: Arc::new(Mutex::new(cluster)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, EtcdCluster> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The members' names (their servers'), in order.
    pub fn names(&self) -> Vec<String> {
        self.lock().members.iter().map(|m| m.name.clone()).collect()
    }

    /// Every member's client URL (what kube-apiserver's --etcd-servers lists).
    pub fn urls(&self) -> Vec<String> {
        self.lock().urls()
    }

    /// The client URL of the member named `name`.
    pub fn client_url(&self, name: &str) -> Option<String> {
        self.lock().member(name).map(|m| m.client_url())
    }

    /// The pid of member `name` while it runs.
    pub fn pid(&self, name: &str) -> Option<u32> {
        self.lock()
            .member(name)
            .and_then(|m| m.run.as_ref().filter(|r| r.alive()).map(Watched::pid))
    }

    /// Every running member's pid.
    pub fn pids(&self) -> Vec<u32> {
        self.lock()
            .members
            .iter()
            .filter_map(|m| m.run.as_ref().map(Watched::pid))
            .collect()
    }

    /// Stop member `name` (SIGKILL, as a server losing power: its peers and clients see
    /// their connections close). Its data stays for [`EtcdMembers::start`].
    pub fn stop(&self, name: &str) -> Result<MemberChange, String> {
        let mut c = self.lock();
        let env = c.env.clone();
        let m = c
            .member(name)
            .ok_or_else(|| format!("{env}'s etcd has no member {name}"))?;
        match m.run.take() {
            Some(run) => {
                drop(run);
                tracing::info!("demo --apiserver: {env}'s etcd member {name} stopped");
                Ok(MemberChange::Stopped)
            }
            None => Ok(MemberChange::Already),
        }
    }

    /// Start member `name` again on its data (it rejoins its cluster). Running already (and
    /// alive): nothing changes.
    pub fn start(&self, name: &str) -> Result<MemberChange, String> {
        let mut c = self.lock();
        let (env, bin) = (c.env.clone(), c.bin.clone());
        if c.shut {
            return Err(format!("{env}'s etcd has been stopped with the demo"));
        }
        let m = c
            .member(name)
            .ok_or_else(|| format!("{env}'s etcd has no member {name}"))?;
        if m.run.as_ref().is_some_and(Watched::alive) {
            return Ok(MemberChange::Already);
        }
        drop(m.run.take());
        m.spawn(&bin).map_err(|e| e.to_string())?;
        tracing::info!("demo --apiserver: {env}'s etcd member {name} started again");
        Ok(MemberChange::Started)
    }

    /// Stop every member for good (the demo's end), all at once: no start after this.
    fn shut(&self) {
        self.lock().shut();
    }
}

/// Poll until the kube-apiserver `pid` serves `client` ([`ready`]): Err naming why when
/// it exits or `timeout` passes.
pub async fn wait_ready(client: &kube::Client, pid: u32, timeout: Duration) -> Result<(), String> {
    let t0 = Instant::now();
    loop {
        let why = match ready(client).await {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        if !alive(pid) {
            return Err(format!("kube-apiserver (pid {pid}) exited ({why})"));
        }
        if t0.elapsed() > timeout {
            return Err(format!(
                "not ready after {}: {why}",
                hk_engine::time::span(timeout, hk_engine::time::Style::Words)
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One environment's real kube-apiserver.
pub struct RealApiServer {
    pub env: String,
    pub addr: SocketAddr,
    /// How long it took from its start to serving (the CRDs and RBAC in place).
    pub startup: Duration,
    admin_kubeconfig: String,
    readonly_kubeconfig: String,
    client: kube::Client,
    /// The apiserver's own log (for failure messages), gone with its directory.
    pub log: PathBuf,
    proc: Watched,
}

impl std::fmt::Debug for RealApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealApiServer")
            .field("env", &self.env)
            .field("addr", &self.addr)
            .field("pid", &self.proc.pid)
            .finish_non_exhaustive()
    }
}

impl RealApiServer {
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The kube-apiserver's pid.
    pub fn pid(&self) -> u32 {
        self.proc.pid
    }

    /// A client as the admin (group system:masters).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    pub fn kubeconfig_yaml(&self) -> &str {
        &self.admin_kubeconfig
    }

    /// The read-only user's kubeconfig: RBAC lets it get, list and watch everything.
    pub fn readonly_kubeconfig_yaml(&self) -> &str {
        &self.readonly_kubeconfig
    }

    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), ApiServerError> {
        write(path, &self.admin_kubeconfig)
    }

    pub fn write_readonly_kubeconfig(&self, path: &Path) -> Result<(), ApiServerError> {
        write(path, &self.readonly_kubeconfig)
    }
}

/// The demo's real etcd clusters: one per environment, one member per server of it, for
/// that environment's kube-apiserver ([`RealCluster::start_apiserver`]). Dropping it stops
/// them all (and removes their files).
pub struct RealCluster {
    bins: Binaries,
    dir: PathBuf,
    pki: Pki,
    token_file: PathBuf,
    admin_token: String,
    readonly_token: String,
    /// Environment -> its etcd members.
    etcds: std::collections::BTreeMap<String, EtcdMembers>,
    /// Holds the whole directory: its watchdog removes it (PKI, tokens, the members' data)
    /// once this is dropped or hk-console is gone. Stopped last.
    keeper: Option<Watched>,
    /// When [`RealCluster::spawn`] began.
    started: Instant,
    /// How long the etcds took to serve (set by the demo from [`RealCluster::wait_etcds`]).
    pub etcd_startup: Duration,
}

impl std::fmt::Debug for RealCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealCluster")
            .field("etcds", &self.etcds)
            .finish_non_exhaustive()
    }
}

/// `GET /health` over plain HTTP/1.0: etcd answers `{"health":"true",...}` when it serves.
pub async fn etcd_healthy(port: u16) -> bool {
    etcd_healthy_at(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)).await
}

/// [`etcd_healthy`] for a member on `addr`.
pub async fn etcd_healthy_at(addr: SocketAddr) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let look = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
        s.write_all(format!("GET /health HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await
            .ok()?;
        let mut body = String::new();
        s.read_to_string(&mut body).await.ok()?;
        Some(body.contains("\"health\":\"true\""))
    };
    tokio::time::timeout(Duration::from_secs(2), look)
        .await
        .ok()
        .flatten()
        .unwrap_or(false)
}

/// A kubeconfig with one cluster and one context named `name`, one user (a bearer token).
pub fn kubeconfig(name: &str, url: &str, ca_pem: &str, user: &str, token: &str) -> String {
    let ca = data_encoding::BASE64.encode(ca_pem.as_bytes());
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\nusers:\n- name: {user}\n  user:\n    token: {token}\ncontexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {user}\ncurrent-context: {name}\npreferences: {{}}\n"
    )
}

/// A kube client for a kubeconfig's text, with its current context.
pub async fn client_of(yaml: &str) -> Result<kube::Client, String> {
    let kc = kube::config::Kubeconfig::from_yaml(yaml).map_err(|e| e.to_string())?;
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .map_err(|e| e.to_string())?;
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

/// `/readyz` says ok and the namespaces the simulation writes into exist.
pub async fn ready(client: &kube::Client) -> Result<(), String> {
    let req = kube::core::Request::new("")
        .get("readyz", &kube::api::GetParams::default())
        .map_err(|e| e.to_string())?;
    let text = tokio::time::timeout(Duration::from_secs(5), client.request_text(req))
        .await
        .map_err(|_| "/readyz did not answer within 5 s".to_string())?
        .map_err(|e| format!("/readyz: {e}"))?;
    if text.trim() != "ok" {
        return Err(format!("/readyz said {:?}", text.trim()));
    }
    let ns: Api<Namespace> = Api::all(client.clone());
    for name in ["default", "kube-system", "kube-node-lease"] {
        match ns.get_opt(name).await {
            Ok(Some(_)) => {}
            Ok(None) => return Err(format!("namespace {name} not made yet")),
            Err(e) => return Err(format!("get namespace {name}: {e}")),
        }
    }
    Ok(())
}

impl RealCluster {
    /// Check `bin_dir`, make the PKI and tokens under `dir` (a directory of its own,
    /// removed when this is dropped) for API servers on `ips`, and start one etcd cluster
    /// per environment of `etcds` (environment, its servers' members), without waiting for
    /// them: [`RealCluster::wait_etcds`] does, while the API servers start.
    pub fn spawn(
        bin_dir: &Path,
        dir: &Path,
        ips: &[IpAddr],
        etcds: &[(String, Vec<MemberSpec>)],
    ) -> Result<RealCluster, ApiServerError> {
        let bins = Binaries::find(bin_dir)?;
        if let Some(ip) = ips
            .iter()
            .chain(etcds.iter().flat_map(|(_, m)| m.iter().map(|m| &m.ip)))
            .find(|ip| !ip.is_loopback())
        {
            return Err(ApiServerError::NotLoopback(*ip));
        }
        std::fs::create_dir_all(dir).map_err(|source| ApiServerError::Write {
            path: dir.to_path_buf(),
            source,
        })?;
        // First, so that whatever follows is removed with the directory even when
        // hk-console is SIGKILLed half way.
        let keeper = Watched::spawn(
            dir,
            &dir.join("keeper.log"),
            Path::new("/bin/sh"),
            &["-c".into(), "exec sleep 2147483647".into()],
        )?;
        let pki = make_pki(dir, ips)?;
        let (admin_token, readonly_token) = (random_hex(24), random_hex(24));
        let token_file = dir.join("tokens.csv");
        write_token_file(
            &token_file,
            &[
                StaticToken {
                    token: &admin_token,
                    user: ADMIN_USER,
                    uid: ADMIN_USER,
                    groups: &["system:masters"],
                },
                StaticToken {
                    token: &readonly_token,
                    user: READONLY_USER,
                    uid: READONLY_USER,
                    groups: &[],
                },
            ],
        )?;
        let mut cluster = RealCluster {
            bins,
            dir: dir.to_path_buf(),
            pki,
            token_file,
            admin_token,
            readonly_token,
            etcds: std::collections::BTreeMap::new(),
            keeper: Some(keeper),
            started: Instant::now(),
            etcd_startup: Duration::ZERO,
        };
        for (env, members) in etcds {
            let c = EtcdCluster::spawn(
                &cluster.bins.etcd,
                &dir.join(format!("etcd-{env}")),
                env,
                members,
            )?;
            cluster.etcds.insert(env.clone(), EtcdMembers::new(c));
        }
        Ok(cluster)
    }

    /// Wait until every environment's etcd serves (every member healthy), all at once, at
    /// most a minute from [`RealCluster::spawn`]: how long that took.
    pub async fn wait_etcds(&self) -> Result<Duration, ApiServerError> {
        let clusters: Vec<Arc<Mutex<EtcdCluster>>> =
            self.etcds.values().map(|e| e.inner.clone()).collect();
        let waits = clusters.iter().map(|c| async move {
            // The members' places never change while it starts: look at a copy of them.
            let watch = c.lock().unwrap_or_else(PoisonError::into_inner).watch();
            watch.wait(self.started, ETCD_TIMEOUT).await
        });
        for r in futures::future::join_all(waits).await {
            r?;
        }
        let took = self.started.elapsed();
        tracing::info!(
            "demo --apiserver: {} etcd cluster(s) serve after {took:?}",
            self.etcds.len()
        );
        Ok(took)
    }

    /// `env`'s etcd members.
    pub fn etcd(&self, env: &str) -> Option<&EtcdMembers> {
        self.etcds.get(env)
    }

    /// Every running etcd member's pid, of every environment.
    pub fn etcd_pids(&self) -> Vec<u32> {
        self.etcds.values().flat_map(EtcdMembers::pids).collect()
    }

    /// Start `env`'s kube-apiserver on `bind` (a loopback address; port 0 = a free one),
    /// wait until it serves, and install the CRDs and the read-only user's RBAC.
    pub async fn start_apiserver(
        &self,
        env: &str,
        bind: SocketAddr,
    ) -> Result<RealApiServer, ApiServerError> {
        let t0 = Instant::now();
        if !bind.ip().is_loopback() {
            return Err(ApiServerError::NotLoopback(bind.ip()));
        }
        let setup = |what: &str, why: String| ApiServerError::Setup {
            env: env.to_string(),
            what: what.to_string(),
            why,
        };
        let etcd_urls = self
            .etcds
            .get(env)
            .ok_or_else(|| setup("its etcd", "no etcd cluster was started for it".into()))?
            .urls()
            .join(",");
        let mut last = None;
        for _ in 0..3 {
            let port = match bind.port() {
                0 => free_port(bind.ip())
                    .ok_or_else(|| setup("a port", format!("no free port on {}", bind.ip())))?,
                p => p,
            };
            let addr = SocketAddr::new(bind.ip(), port);
            let dir = self.dir.join(format!("apiserver-{env}"));
            std::fs::create_dir_all(&dir).map_err(|source| ApiServerError::Write {
                path: dir.clone(),
                source,
            })?;
            let log = dir.join("kube-apiserver.log");
            let args = ApiServerFlags {
                etcd_url: &etcd_urls,
                // The environment's own etcd; k3s's prefix.
                etcd_prefix: "/registry",
                bind: bind.ip(),
                port,
                cert_dir: &dir.join("certs"),
                pki: &self.pki,
                token_file: &self.token_file,
                extra: Vec::new(),
            }
            .args();
            let proc = Watched::spawn(&dir, &log, &self.bins.kube_apiserver, &args)?;
            let url = format!("https://{addr}");
            let admin = kubeconfig(
                &format!("hk-sim-{env}"),
                &url,
                &self.pki.ca_pem,
                &format!("hk-sim-{env}"),
                &self.admin_token,
            );
            let readonly = kubeconfig(
                &format!("hk-sim-{env}-readonly"),
                &url,
                &self.pki.ca_pem,
                &format!("hk-sim-{env}-readonly"),
                &self.readonly_token,
            );
            let client = client_of(&admin)
                .await
                .map_err(|e| setup("a client for it", e))?;
            let left = READY_TIMEOUT.saturating_sub(t0.elapsed());
            let waited = wait_ready(&client, proc.pid, left).await;
            match waited {
                Ok(()) => {
                    install_crds(&client)
                        .await
                        .map_err(|e| setup("installing the Flux CRDs", e))?;
                    readonly_rbac(&client)
                        .await
                        .map_err(|e| setup("the read-only user's RBAC", e))?;
                    tracing::info!(
                        "demo --apiserver: {env}'s kube-apiserver serves on {url} after {:?}",
                        t0.elapsed()
                    );
                    return Ok(RealApiServer {
                        env: env.to_string(),
                        addr,
                        startup: t0.elapsed(),
                        admin_kubeconfig: admin,
                        readonly_kubeconfig: readonly,
                        client,
                        log,
                        proc,
                    });
                }
                Err(why) => {
                    let text = log_tail(&log, 40);
                    let taken = bind.port() == 0
                        && text.contains(&format!("{port}: bind: address already in use"));
                    let err = ApiServerError::NotReady {
                        env: env.to_string(),
                        addr,
                        why,
                        tail: text,
                    };
                    drop(proc);
                    if !taken {
                        return Err(err);
                    }
                    last = Some(err);
                }
            }
        }
        Err(last.unwrap_or_else(|| setup("starting", "no attempt was made".into())))
    }
}

/// The CRDs the built-in server serves (HelmRelease, Kustomization), installed for real,
/// and waited for until Established.
async fn install_crds(client: &kube::Client) -> Result<(), String> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    for mut crd in super::kube::resources::crds("") {
        if let Value::Object(m) = &mut crd {
            m.remove("status");
        }
        let name = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let typed: CustomResourceDefinition =
            serde_json::from_value(crd).map_err(|e| format!("{name}: {e}"))?;
        match api.create(&PostParams::default(), &typed).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(format!("create {name}: {e}")),
        }
        names.push(name);
    }
    wait_established(client, &names, Duration::from_secs(60)).await?;
    // Discovery of the new group takes a moment more; the controllers' first write must
    // not race it.
    let t0 = Instant::now();
    loop {
        let found = kube::discovery::Discovery::new(client.clone())
            .filter(&["helm.toolkit.fluxcd.io", "kustomize.toolkit.fluxcd.io"])
            .run()
            .await
            .map(|d| d.groups().count() == 2)
            .unwrap_or(false);
        if found {
            return Ok(());
        }
        if t0.elapsed() > Duration::from_secs(60) {
            return Err("the Flux groups are not in discovery after 60 s".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Wait until every CRD of `names` is Established (its API is served), at most `timeout`.
pub async fn wait_established(
    client: &kube::Client,
    names: &[String],
    timeout: Duration,
) -> Result<(), String> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let t0 = Instant::now();
    for name in names {
        loop {
            let crd = api
                .get(name)
                .await
                .map_err(|e| format!("get {name}: {e}"))?;
            let established = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            if t0.elapsed() > timeout {
                return Err(format!(
                    "CRD {name} not Established after {}",
                    hk_engine::time::span(timeout, hk_engine::time::Style::Words)
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}

/// The read-only user may get, list and watch everything, nothing else (as the built-in
/// server's read-only user).
async fn readonly_rbac(client: &kube::Client) -> Result<(), String> {
    let role: ClusterRole = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": READONLY_USER},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]},
            {"nonResourceURLs": ["*"], "verbs": ["get"]}],
    }))
    .map_err(|e| e.to_string())?;
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": READONLY_USER},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
            "name": READONLY_USER},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
            "name": READONLY_USER}],
    }))
    .map_err(|e| e.to_string())?;
    for r in [
        Api::<ClusterRole>::all(client.clone())
            .create(&PostParams::default(), &role)
            .await
            .map(|_| ()),
        Api::<ClusterRoleBinding>::all(client.clone())
            .create(&PostParams::default(), &binding)
            .await
            .map(|_| ()),
    ] {
        match r {
            Ok(()) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

impl Drop for RealCluster {
    fn drop(&mut self) {
        // Every member told at once, each waited for; then the keeper, whose watchdog
        // removes the whole directory; this makes sure.
        for e in self.etcds.values() {
            e.shut();
        }
        self.etcds.clear();
        drop(self.keeper.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A port free on every one of `ips` now (outside the ephemeral range, see [`free_port`]).
pub fn common_free_port(ips: &[IpAddr]) -> Option<u16> {
    let first = ips.first()?;
    for _ in 0..50 {
        let port = free_port(*first)?;
        if ips
            .iter()
            .all(|ip| std::net::TcpListener::bind((*ip, port)).is_ok())
        {
            return Some(port);
        }
    }
    None
}

/// How one plain-HTTP call to a real etcd member failed, in the words curl would use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpFail {
    /// Nothing listens there (the member is stopped).
    Refused,
    /// No (whole) answer within the time given.
    TimedOut,
    /// Anything else on the way: the reason.
    Other(String),
}

/// `METHOD url` with `body` (JSON) over plain HTTP/1.0 to a loopback member, blocking, at
/// most `timeout` in all: the answer's status and body. For a member's gateway and metrics
/// (`http://IP:PORT/PATH`, what [`EtcdMembers::client_url`] gives).
pub fn http_call(
    url: &str,
    method: &str,
    body: Option<&str>,
    timeout: Duration,
) -> Result<(u16, String), HttpFail> {
    use std::io::{Read, Write};
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| HttpFail::Other(format!("{url}: not an http:// URL")))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let addr: SocketAddr = authority
        .parse()
        .map_err(|_| HttpFail::Other(format!("{url}: not IP:PORT")))?;
    if !addr.ip().is_loopback() {
        return Err(HttpFail::Other(format!("{url}: not a loopback address")));
    }
    let deadline = Instant::now() + timeout;
    let left = || {
        deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1))
    };
    let io = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => HttpFail::TimedOut,
        std::io::ErrorKind::ConnectionRefused => HttpFail::Refused,
        _ => HttpFail::Other(e.to_string()),
    };
    let mut s = std::net::TcpStream::connect_timeout(&addr, left()).map_err(io)?;
    s.set_write_timeout(Some(left())).map_err(io)?;
    let body = body.unwrap_or("");
    let req = format!(
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).map_err(io)?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        s.set_read_timeout(Some(left())).map_err(io)?;
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io(e)),
        }
        if Instant::now() >= deadline {
            return Err(HttpFail::TimedOut);
        }
    }
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| HttpFail::Other(format!("{url}: an answer without headers")))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or_else(|| HttpFail::Other(format!("{url}: no status in {:?}", head.lines().next())))?;
    Ok((status, body.to_string()))
}

impl EtcdMembers {
    /// etcd's gateway `path` with `body`, asked of the first member that answers: its
    /// answer's body. Blocking, at most `timeout` a member.
    pub fn call(&self, path: &str, body: &str, timeout: Duration) -> Result<String, String> {
        let urls: Vec<String> = {
            let c = self.lock();
            c.members
                .iter()
                .filter(|m| m.run.as_ref().is_some_and(Watched::alive))
                .map(Member::client_url)
                .collect()
        };
        let mut why = String::from("no member runs");
        for url in urls {
            match http_call(&format!("{url}{path}"), "POST", Some(body), timeout) {
                Ok((200, answer)) => return Ok(answer),
                Ok((code, answer)) => why = format!("{url}{path}: {code} {}", answer.trim()),
                // No answer in time: the next member (same cluster) would be no quicker.
                Err(HttpFail::TimedOut) => {
                    return Err(format!("{url}{path}: no answer within {timeout:?}"))
                }
                Err(e) => why = format!("{url}{path}: {e:?}"),
            }
        }
        Err(why)
    }

    /// Add an unstarted learner at `peer` (a join that stopped half way), through etcd's
    /// own API: its id (decimal, as etcd writes it), or `None` when one is there already.
    pub fn add_learner(&self, peer: &str) -> Result<Option<String>, String> {
        if self.learner(peer)?.is_some() {
            return Ok(None);
        }
        let said = self.call(
            "/v3/cluster/member/add",
            &serde_json::json!({"peerURLs": [peer], "isLearner": true}).to_string(),
            Duration::from_secs(10),
        )?;
        let v: Value = serde_json::from_str(&said).map_err(|e| format!("{e}: {said}"))?;
        v.pointer("/member/ID")
            .and_then(Value::as_str)
            .map(|id| Some(id.to_string()))
            .ok_or_else(|| format!("etcd did not add the learner: {said}"))
    }

    /// Remove the learner at `peer` through etcd's own API: its id, or `None` when there
    /// is none.
    pub fn remove_learner(&self, peer: &str) -> Result<Option<String>, String> {
        let Some(id) = self.learner(peer)? else {
            return Ok(None);
        };
        let said = self.call(
            "/v3/cluster/member/remove",
            &serde_json::json!({"ID": id}).to_string(),
            Duration::from_secs(10),
        )?;
        if !said.contains("header") {
            return Err(format!("etcd did not remove the learner: {said}"));
        }
        Ok(Some(id))
    }

    /// The id of the member whose peer URL is `peer`, as etcd lists it.
    fn learner(&self, peer: &str) -> Result<Option<String>, String> {
        let said = self.call("/v3/cluster/member/list", "{}", Duration::from_secs(10))?;
        let v: Value = serde_json::from_str(&said).map_err(|e| format!("{e}: {said}"))?;
        Ok(v["members"].as_array().and_then(|ms| {
            ms.iter()
                .find(|m| {
                    m["peerURLs"]
                        .as_array()
                        .is_some_and(|p| p.iter().any(|u| u == peer))
                })
                .and_then(|m| m["ID"].as_str().map(str::to_string))
        }))
    }
}
