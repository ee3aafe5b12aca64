//! The simulated SSH nodes (crates/hk-sim/src) driven by real clients: hk-console's own SSH pool
//! (russh client, strict known_hosts), OpenSSH's `ssh`, and `ansible-playbook`. Each node is
//! an in-process russh server on its own 127.0.1.x address with its own host key.
//! Needs `ssh`/`ssh-keygen` (openssh-client) and ansible-core (tests/run-all.sh installs
//! both); the latency comparison also starts the real sshd harness (tests/support).

use crate::support;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hk_console::context::{load_runbooks, plan_runbook};
use hk_console::exec::settings::{ConnectSettings, SshConfig, SshDefaults};
use hk_console::exec::ssh::{CommandOutput, ExecOptions};
use hk_console::exec::{SshError, SshOptions, SshPool};
use hk_console::repo::Repo;
use hk_console::runbook::plan::StepKind;
use hk_console::sim::node::{Clock, NodeState, UnitState, VpnTunnel, VPN_UNIT};
use hk_console::sim::ssh::{SimNode, SimNodeSpec, SimSshError};
use support::keygen;
use support::sim_nodes::{ansible_inventory, SimNodes};

/// 2026-09-12T22:57:05Z.
const T0: u64 = 1_789_253_825_000;
const TUNNEL_EXIT: &str = "203.0.113.50";
const ISP_EXIT: &str = "198.51.100.7";

fn tunnel() -> VpnTunnel {
    VpnTunnel {
        unit: VPN_UNIT.into(),
        interface: "tun0".into(),
        exit_ip: TUNNEL_EXIT.parse().expect("ip"),
        server: "192.0.2.112:1198".parse().expect("addr"),
        tunnel_addr: Ipv4Addr::new(10, 72, 192, 7),
        netmask: Ipv4Addr::new(255, 255, 192, 0),
    }
}

/// Simulated nodes on 127.0.1.11.., a client key they accept, a known_hosts for them.
struct Sim {
    dir: tempfile::TempDir,
    nodes: Vec<SimNode>,
    client_key: PathBuf,
    known_hosts: PathBuf,
}

impl Sim {
    /// `gateways` get the VPN tunnel.
    async fn start(names: &[&str], gateways: &[&str]) -> Sim {
        let s = SimNodes::start(
            "hk-sim-",
            names,
            |i| IpAddr::V4(Ipv4Addr::new(127, 0, 1, 11 + i as u8)),
            |name| {
                let state = NodeState::new(name, Clock::fixed(T0));
                if gateways.contains(&name) {
                    state.with_vpn(tunnel(), T0 - 3_600_000)
                } else {
                    state
                }
            },
        )
        .await;
        Sim {
            dir: s.dir,
            nodes: s.nodes,
            client_key: s.key,
            known_hosts: s.known_hosts,
        }
    }

    fn node(&self, name: &str) -> &SimNode {
        self.nodes
            .iter()
            .find(|n| n.name() == name)
            .unwrap_or_else(|| panic!("no sim node {name}"))
    }

    fn settings_with_key(&self, node: &SimNode, key: &Path) -> ConnectSettings {
        let mut hv = BTreeMap::new();
        hv.insert("ansible_host".into(), node.addr().ip().to_string().into());
        hv.insert("ansible_port".into(), node.addr().port().into());
        hv.insert("ansible_user".into(), "ops".into());
        hv.insert(
            "ansible_ssh_private_key_file".into(),
            key.display().to_string().into(),
        );
        ConnectSettings::resolve(
            node.name(),
            &hv,
            &SshConfig::empty(),
            &SshDefaults::from_env(),
        )
        .expect("settings")
    }

    /// hk-console's pool, trusting exactly these nodes' keys, logging in with `key`.
    fn pool_with_key(&self, key: &Path) -> SshPool {
        let pool = SshPool::new(SshOptions::with_known_hosts(vec![self.known_hosts.clone()]));
        for n in &self.nodes {
            pool.add_host(self.settings_with_key(n, key));
        }
        pool
    }

    fn pool(&self) -> SshPool {
        self.pool_with_key(&self.client_key)
    }

    /// OpenSSH's client against one node: strict host key checking, this key only.
    fn openssh(
        &self,
        node: &SimNode,
        key: &Path,
        known_hosts: &Path,
        remote: &[&str],
    ) -> std::process::Output {
        Command::new("ssh")
            .args([
                "-F",
                "/dev/null",
                "-o",
                "BatchMode=yes",
                "-o",
                "StrictHostKeyChecking=yes",
            ])
            .arg("-o")
            .arg(format!("UserKnownHostsFile={}", known_hosts.display()))
            .args(["-o", "IdentitiesOnly=yes", "-o", "ConnectTimeout=10"])
            .arg("-i")
            .arg(key)
            .arg("-p")
            .arg(node.addr().port().to_string())
            .arg(format!("ops@{}", node.addr().ip()))
            .args(remote)
            .stdin(Stdio::null())
            .output()
            .expect("run ssh (install openssh-client)")
    }
}

fn opts() -> ExecOptions {
    ExecOptions {
        timeout: Some(Duration::from_secs(20)),
        ..ExecOptions::default()
    }
}

async fn run(pool: &SshPool, host: &str, cmd: &str) -> CommandOutput {
    pool.exec(host, cmd, &opts())
        .await
        .unwrap_or_else(|e| panic!("{host}: {cmd}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_supported_command_answers_over_hk_consoles_client() {
    let sim = Sim::start(&["gw-1"], &["gw-1"]).await;
    let pool = sim.pool();
    let ok = |o: &CommandOutput| o.exit_status == Some(0);

    let o = run(
        &pool,
        "gw-1",
        "systemctl is-active vpn-egress-tunnel.service",
    )
    .await;
    assert_eq!((o.stdout.as_str(), o.exit_status), ("active\n", Some(0)));
    let o = run(&pool, "gw-1", "systemctl show -p IOWeight k3s.service").await;
    assert_eq!(o.stdout, "IOWeight=[not set]\n");
    let o = run(
        &pool,
        "gw-1",
        "systemctl show -p IOWeight --value system.slice",
    )
    .await;
    assert_eq!(o.stdout, "[not set]\n");
    let o = run(&pool, "gw-1", "systemctl is-system-running").await;
    assert_eq!(o.stdout, "running\n");
    let o = run(
        &pool,
        "gw-1",
        "journalctl -u vpn-egress-tunnel.service --since -2h -o short-iso --no-pager",
    )
    .await;
    assert!(ok(&o), "{o:?}");
    assert!(
        o.stdout.contains("gw-1 openvpn[")
            && o.stdout
                .contains("Peer Connection Initiated with [AF_INET]192.0.2.112:1198"),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout.contains("ifconfig 10.72.192.7 255.255.192.0"),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout.starts_with(
            "2026-09-12T21:57:05+00:00 gw-1 systemd[1]: Started vpn-egress-tunnel.service"
        ),
        "{}",
        o.stdout
    );
    let o = run(
        &pool,
        "gw-1",
        "curl -fsS --max-time 15 --interface tun0 https://ipinfo.io/ip",
    )
    .await;
    assert_eq!((o.stdout.as_str(), o.exit_status), (TUNNEL_EXIT, Some(0)));
    let o = run(
        &pool,
        "gw-1",
        "curl -fsS --max-time 15 https://ipinfo.io/ip",
    )
    .await;
    assert_eq!(o.stdout, ISP_EXIT);
    let o = run(&pool, "gw-1", "cat /sys/block/sda/queue/scheduler").await;
    assert_eq!(o.stdout, "[mq-deadline] kyber bfq none\n");
    let o = run(&pool, "gw-1", "cat /sys/block/sda/queue/nr_requests").await;
    assert_eq!(o.stdout, "64\n");
    // sysfs is root's (0644): the login user is refused, sudo writes.
    let o = run(&pool, "gw-1", "echo bfq > /sys/block/sda/queue/scheduler").await;
    assert_eq!(o.exit_status, Some(2), "{o:?}");
    assert!(o.stderr.contains("Permission denied"), "{}", o.stderr);
    let o = run(
        &pool,
        "gw-1",
        "sudo sh -c 'echo bfq > /sys/block/sda/queue/scheduler'",
    )
    .await;
    assert!(ok(&o), "{o:?}");
    let o = run(&pool, "gw-1", "cat /sys/block/sda/queue/scheduler").await;
    assert_eq!(o.stdout, "mq-deadline kyber [bfq] none\n");
    let o = run(
        &pool,
        "gw-1",
        "sudo sh -c 'echo nope > /sys/block/sda/queue/scheduler'",
    )
    .await;
    assert_eq!(o.exit_status, Some(1));
    assert!(o.stderr.contains("Invalid argument"), "{}", o.stderr);
    let o = run(&pool, "gw-1", "hostname").await;
    assert_eq!(o.stdout, "gw-1\n");
    let o = run(&pool, "gw-1", "true").await;
    assert!(ok(&o) && o.stdout.is_empty());
    let o = run(&pool, "gw-1", "echo hello 'big world'").await;
    assert_eq!(o.stdout, "hello big world\n");
    let o = run(&pool, "gw-1", "uptime").await;
    assert!(
        o.stdout.contains(" up 1 day,") && o.stdout.contains("load average"),
        "{}",
        o.stdout
    );
    let o = run(&pool, "gw-1", "cat /etc/os-release").await;
    assert!(o.stdout.contains("ID=debian"), "{}", o.stdout);
    let o = run(&pool, "gw-1", "cat /proc/pressure/io").await;
    assert!(o.stdout.starts_with("some avg10="), "{}", o.stdout);
    // The form `become` produces.
    let o = run(
        &pool,
        "gw-1",
        "sudo -n -- sh -c 'systemctl is-active k3s && echo '\\''done'\\'''",
    )
    .await;
    assert_eq!(o.stdout, "active\ndone\n");
    // stderr and the exit status travel separately.
    let o = run(&pool, "gw-1", "echo out; echo err >&2; exit 3").await;
    assert_eq!(
        (o.stdout.as_str(), o.stderr.as_str(), o.exit_status),
        ("out\n", "err\n", Some(3))
    );
    assert_eq!(
        sim.nodes[0].accepted(),
        1,
        "one connection for every command"
    );
}

/// Every `ssh` step of every shipped runbook, planned on the sample repo, runs on the sim
/// node it targets and meets its expectations once the node is in the state the runbook
/// establishes; the etcd read-back fails first, then passes after the change over SSH.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shipped_runbook_ssh_step_runs_on_the_sim_nodes() {
    let repo =
        Repo::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory")).expect("sample");
    let mut hosts: Vec<String> = Vec::new();
    let mut gateways: Vec<String> = Vec::new();
    for env in repo.environment_names() {
        let e = repo.environment(env).expect("env");
        hosts.extend(e.servers.iter().map(|h| h.name.clone()));
        gateways.extend(e.vpn_gateways.iter().map(|h| h.name.clone()));
    }
    let names: Vec<&str> = hosts.iter().map(String::as_str).collect();
    let gws: Vec<&str> = gateways.iter().map(String::as_str).collect();
    assert_eq!(names.len(), 6, "{names:?}");
    let sim = Sim::start(&names, &gws).await;
    let pool = sim.pool();

    let set = load_runbooks(None).expect("runbooks");
    let mut steps = Vec::new();
    for loaded in set.iter() {
        let rb = &loaded.runbook;
        for env in &rb.environments {
            let e = repo.environment(env).expect("env");
            let single = rb.target.as_ref().is_some_and(|t| t.single);
            // Single-host runbooks: plan for a VPN gateway so its gateway-only steps appear.
            let host = single.then(|| e.vpn_gateways.first().unwrap_or(&e.servers[0]).name.clone());
            let plan = plan_runbook(&repo, &set, &rb.id, env, host.as_deref())
                .unwrap_or_else(|e| panic!("{} for {env}: {e}", rb.id));
            for s in plan.steps.into_iter().filter(|s| s.kind == StepKind::Ssh) {
                steps.push((format!("{}/{env}/{}", rb.id, s.id), s));
            }
        }
    }
    let ids: std::collections::BTreeSet<String> = steps.iter().map(|(_, s)| s.id.clone()).collect();
    for want in [
        "read-back",
        "io-pressure",
        "system-state",
        "tunnel-active",
        "exit-ip",
        "vpn-tunnel-active",
        "vpn-exit-ip",
    ] {
        assert!(ids.contains(want), "no {want} step planned: {ids:?}");
    }

    let check = |label: &str,
                 s: &hk_console::runbook::plan::PlannedStep,
                 o: &CommandOutput|
     -> Result<(), String> {
        let e = s.expect.clone().unwrap_or_default();
        let want = e.exit_code.unwrap_or(0);
        if o.exit_status != Some(want as u32) {
            return Err(format!(
                "{label}: exit {:?}, expected {want}: {o:?}",
                o.exit_status
            ));
        }
        let out = o.stdout.trim();
        if let Some(w) = &e.stdout_equals {
            if out != w.trim() {
                return Err(format!("{label}: stdout {out:?} != {w:?}"));
            }
        }
        if let Some(w) = &e.stdout_contains {
            if !out.contains(w.as_str()) {
                return Err(format!("{label}: stdout {out:?} lacks {w:?}"));
            }
        }
        Ok(())
    };
    let command_of = |s: &hk_console::runbook::plan::PlannedStep| -> (String, String) {
        let argv = s.command.clone().expect("ssh argv");
        assert_eq!(argv.len(), 3, "{argv:?}");
        (argv[1].clone(), argv[2].clone())
    };

    // Before the etcd change: every read-back fails, naming the scheduler.
    let mut read_backs = 0;
    for (label, s) in steps.iter().filter(|(_, s)| s.id == "read-back") {
        let (host, cmd) = command_of(s);
        let o = run(&pool, &host, &cmd).await;
        assert_eq!(o.exit_status, Some(1), "{label}: {o:?}");
        assert_eq!(
            o.stdout, "scheduler is not bfq: [mq-deadline] kyber bfq none\n",
            "{label}"
        );
        read_backs += 1;
    }
    assert_eq!(read_backs, 3, "one read-back per prod node");
    // What etcd-io-priority.yml establishes, done over SSH on each prod node.
    for h in ["k3s-prod-1", "k3s-prod-2", "k3s-prod-3"] {
        for cmd in [
            "sudo sh -c 'echo bfq > /sys/block/sda/queue/scheduler'",
            "sudo sh -c 'echo 32 > /sys/block/sda/queue/nr_requests'",
            "systemctl set-property system.slice IOWeight=10000",
            "systemctl set-property k3s.service IOWeight=10000",
        ] {
            let o = run(&pool, h, cmd).await;
            assert_eq!(o.exit_status, Some(0), "{h}: {cmd}: {o:?}");
        }
    }
    for (label, s) in &steps {
        let (host, cmd) = command_of(s);
        let o = run(&pool, &host, &cmd).await;
        if let Err(e) = check(label, s, &o) {
            panic!("{e}");
        }
        if s.id == "read-back" {
            assert_eq!(
                o.stdout, "ok: sda scheduler=bfq nr_requests=32 IOWeight=10000\n",
                "{label}"
            );
        }
        if s.id.ends_with("exit-ip") {
            assert_eq!(
                o.stdout,
                format!("tunnel={TUNNEL_EXIT} isp={ISP_EXIT}\n"),
                "{label}"
            );
        }
    }

    // Faults the steps must catch: a leaking tunnel, a dead tunnel, a failed unit.
    let gw = sim.node("k3s-prod-3");
    let (leak_label, exit_ip) = steps
        .iter()
        .find(|(_, s)| s.id == "exit-ip" && s.host.as_deref() == Some("k3s-prod-3"))
        .expect("prod exit-ip step");
    gw.state()
        .lock()
        .expect("lock")
        .vpn
        .as_mut()
        .expect("vpn")
        .exit_ip = ISP_EXIT.parse().expect("ip");
    let (host, cmd) = command_of(exit_ip);
    let o = run(&pool, &host, &cmd).await;
    assert_eq!(
        o.exit_status,
        Some(1),
        "{leak_label}: a leak must fail: {o:?}"
    );
    assert_eq!(o.stdout, format!("tunnel={ISP_EXIT} isp={ISP_EXIT}\n"));
    gw.state()
        .lock()
        .expect("lock")
        .stop_unit_at(VPN_UNIT, T0)
        .expect("stop");
    let o = run(&pool, &host, &cmd).await;
    assert_eq!(o.exit_status, Some(45), "{o:?}");
    assert!(o.stderr.contains("curl: (45)"), "{}", o.stderr);
    assert!(o.stdout.is_empty(), "the && chain stops at the failed curl");
    let o = run(
        &pool,
        &host,
        "systemctl is-active vpn-egress-tunnel.service",
    )
    .await;
    assert_eq!((o.stdout.as_str(), o.exit_status), ("inactive\n", Some(3)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_changes_are_seen_across_connections_and_by_the_simulation() {
    let sim = Sim::start(&["gw-1"], &["gw-1"]).await;
    let first = sim.pool();
    let o = run(
        &first,
        "gw-1",
        "systemctl restart vpn-egress-tunnel.service",
    )
    .await;
    assert_eq!(o.exit_status, Some(0), "{o:?}");
    first.close_all().await;

    // The simulation reads the state directly.
    let state = sim.nodes[0].state();
    {
        let s = state.lock().expect("lock");
        assert_eq!(s.units[VPN_UNIT].restarts, 1);
        assert_eq!(s.units[VPN_UNIT].state, UnitState::Active);
        assert!(s
            .commands
            .contains(&"systemctl restart vpn-egress-tunnel.service".to_string()));
    }
    // A new connection sees the restart in the journal and in NRestarts.
    let second = sim.pool();
    let o = run(
        &second,
        "gw-1",
        "journalctl -u vpn-egress-tunnel.service -o short-iso --no-pager",
    )
    .await;
    let stopped = o
        .stdout
        .lines()
        .filter(|l| l.contains("systemd[1]: Stopped vpn-egress-tunnel.service"))
        .count();
    let inits = o
        .stdout
        .lines()
        .filter(|l| l.contains("Initialization Sequence Completed"))
        .count();
    assert_eq!((stopped, inits), (1, 2), "{}", o.stdout);
    let o = run(
        &second,
        "gw-1",
        "systemctl show -p NRestarts vpn-egress-tunnel.service",
    )
    .await;
    assert_eq!(o.stdout, "NRestarts=1\n");
    // The simulation changes the state; the next command over SSH sees it.
    state
        .lock()
        .expect("lock")
        .fail_unit_at("k3s", T0)
        .expect("fail");
    let o = run(
        &second,
        "gw-1",
        "systemctl is-active k3s.service; systemctl is-system-running",
    )
    .await;
    assert_eq!(o.stdout, "failed\ndegraded\n");
    assert_eq!(o.exit_status, Some(1));
    assert_eq!(sim.nodes[0].accepted(), 2, "two connections");
}

/// Unmodelled commands fail with exit 2 and the simulation's message (issue 17: never 127
/// that a script may take for "not installed" and route around); the node's own tools work
/// on its simulated files only, never on this host's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsupported_commands_are_exit_2_and_nothing_runs_on_this_host() {
    let sim = Sim::start(&["n1"], &[]).await;
    let pool = sim.pool();
    let marker = sim.dir.path().join("must-not-exist");
    for cmd in [
        format!("rsync /etc/hostname {}", marker.display()),
        format!("sh -c 'rsync /etc/hostname {}'", marker.display()),
        format!("true && rsync /etc/hostname {}", marker.display()),
    ] {
        let o = run(&pool, "n1", &cmd).await;
        assert_eq!(o.exit_status, Some(2), "{cmd}: {o:?}");
        assert_eq!(
            o.stderr, "hk-console simulation: `rsync` is not simulated\n",
            "{cmd}"
        );
    }
    // The simulated file tree has no such directory: the real one is never touched.
    let o = run(&pool, "n1", &format!("echo x > {}", marker.display())).await;
    assert_eq!(o.exit_status, Some(2), "{o:?}");
    assert!(o.stderr.contains("cannot create"), "{}", o.stderr);
    let o = run(&pool, "n1", &format!("touch {}", marker.display())).await;
    assert_eq!(o.exit_status, Some(1), "{o:?}");
    assert!(
        o.stderr.contains("No such file or directory"),
        "{}",
        o.stderr
    );
    // Made in the simulation, it exists there and still not here.
    let dir = sim.dir.path().display().to_string();
    let o = run(
        &pool,
        "n1",
        &format!(
            "sudo mkdir -p {dir} && sudo touch {m} && ls {m}",
            m = marker.display()
        ),
    )
    .await;
    assert_eq!(o.exit_status, Some(0), "{o:?}");
    assert_eq!(o.stdout, format!("{}\n", marker.display()));
    assert!(
        !marker.exists(),
        "a simulated command touched the real file system"
    );
    let o = run(&pool, "n1", "python3 -c 'print(1)'").await;
    assert_eq!(o.exit_status, Some(2));
    assert!(o.stderr.contains("never runs Python"), "{}", o.stderr);
    let o = run(&pool, "n1", "echo $((1+1))").await;
    assert_eq!(o.exit_status, Some(2));
    assert!(o.stderr.contains("is not simulated"), "{}", o.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_key_and_unknown_host_key_are_refused() {
    let sim = Sim::start(&["n1"], &[]).await;
    let other = sim.dir.path().join("other_key");
    keygen(&other, "");
    let pool = sim.pool_with_key(&other);
    let err = pool.exec("n1", "true", &opts()).await.expect_err("refused");
    assert!(matches!(err, SshError::AuthFailed { .. }), "{err}");
    assert!(err.to_string().contains("other_key (refused)"), "{err}");
    assert_eq!(sim.nodes[0].accepted(), 0);
    assert!(sim.nodes[0].rejected() >= 1);
    assert_eq!(sim.nodes[0].commands(), 0);

    // Its host key is its own: an empty known_hosts refuses it with that fingerprint.
    let empty = sim.dir.path().join("empty_known_hosts");
    std::fs::write(&empty, "").expect("write");
    let pool = SshPool::new(SshOptions::with_known_hosts(vec![empty]));
    pool.add_host(sim.settings_with_key(&sim.nodes[0], &sim.client_key));
    let err = pool.exec("n1", "true", &opts()).await.expect_err("refused");
    match &err {
        SshError::UnknownHostKey {
            fingerprint,
            lookup,
            ..
        } => {
            assert_eq!(
                fingerprint,
                &format!("ssh-ed25519 {}", sim.nodes[0].host_key_fingerprint())
            );
            assert_eq!(
                lookup,
                &format!("[127.0.1.11]:{}", sim.nodes[0].addr().port())
            );
        }
        other => panic!("expected UnknownHostKey, got {other}"),
    }
    assert_eq!(sim.nodes[0].accepted(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openssh_client_talks_to_a_sim_node() {
    let sim = Sim::start(&["gw-1", "n2"], &["gw-1"]).await;
    let (n1, key, kh) = (&sim.nodes[0], &sim.client_key, &sim.known_hosts);
    let o = tokio::task::block_in_place(|| {
        sim.openssh(
            n1,
            key,
            kh,
            &["systemctl", "is-active", "vpn-egress-tunnel.service"],
        )
    });
    assert_eq!(String::from_utf8_lossy(&o.stdout), "active\n");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // ssh joins its arguments with spaces; the remote shell parses the result.
    let o = tokio::task::block_in_place(|| {
        sim.openssh(
            n1,
            key,
            kh,
            &["echo out; echo err >&2; cat /sys/block/sda/queue/nr_requests; exit 7"],
        )
    });
    assert_eq!(String::from_utf8_lossy(&o.stdout), "out\n64\n");
    assert!(String::from_utf8_lossy(&o.stderr).contains("err\n"));
    assert_eq!(o.status.code(), Some(7));
    let o = tokio::task::block_in_place(|| {
        sim.openssh(n1, key, kh, &["systemctl restart vpn-egress-tunnel"])
    });
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(n1.state().lock().expect("lock").units[VPN_UNIT].restarts, 1);
    let o = tokio::task::block_in_place(|| sim.openssh(n1, key, kh, &["rsync", "-a", "/", "/x"]));
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "hk-console simulation: `rsync` is not simulated\n"
    );
    // An interpreter reading its program from stdin (Ansible's pipelining) is refused only
    // after the client has sent all of it: writing 2 MiB does not break the pipe.
    let o = tokio::task::block_in_place(|| {
        use std::io::Write;
        let mut child = Command::new("ssh")
            .args([
                "-F",
                "/dev/null",
                "-o",
                "BatchMode=yes",
                "-o",
                "IdentitiesOnly=yes",
            ])
            .arg("-o")
            .arg(format!("UserKnownHostsFile={}", kh.display()))
            .arg("-i")
            .arg(key)
            .arg("-p")
            .arg(n1.addr().port().to_string())
            .arg(format!("ops@{}", n1.addr().ip()))
            .arg("/bin/sh -c '/usr/bin/python3 && sleep 0'")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("ssh");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(&vec![b'#'; 2 << 20])
            .expect("the whole payload is accepted");
        drop(stdin);
        child.wait_with_output().expect("wait")
    });
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("never runs Python"));
    // No command: a shell request, a login session reading its lines from stdin (here
    // none: it ends at EOF with status 0 and says nothing; crates/hk-sim/tests/sim_tools.rs drives one).
    let o = tokio::task::block_in_place(|| sim.openssh(n1, key, kh, &[]));
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.stdout.is_empty(), "{o:?}");
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("hk-console"),
        "{o:?}"
    );
    // A key it does not accept.
    let other = sim.dir.path().join("other_key");
    keygen(&other, "");
    let o = tokio::task::block_in_place(|| sim.openssh(n1, &other, kh, &["true"]));
    assert_eq!(o.status.code(), Some(255));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("Permission denied (publickey)"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // n2's key recorded for n1's address: OpenSSH sees a changed host key and refuses.
    let swapped = sim.dir.path().join("swapped_known_hosts");
    let n2_line = sim.nodes[1].known_hosts_line().expect("line");
    let key_part = n2_line.split_once(' ').expect("line").1;
    std::fs::write(
        &swapped,
        format!("[127.0.1.11]:{} {key_part}\n", n1.addr().port()),
    )
    .expect("write");
    let o = tokio::task::block_in_place(|| sim.openssh(n1, key, &swapped, &["true"]));
    assert_eq!(o.status.code(), Some(255));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("REMOTE HOST IDENTIFICATION HAS CHANGED"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_on_two_addresses_at_once_and_only_loopback() {
    let sim = Sim::start(&["n1", "n2"], &[]).await;
    assert_eq!(sim.nodes[0].addr().ip().to_string(), "127.0.1.11");
    assert_eq!(sim.nodes[1].addr().ip().to_string(), "127.0.1.12");
    assert_ne!(
        sim.nodes[0].host_key_fingerprint(),
        sim.nodes[1].host_key_fingerprint(),
        "each node has its own host key"
    );
    let pool = Arc::new(sim.pool());
    let (p1, p2) = (pool.clone(), pool.clone());
    let a = tokio::spawn(async move { p1.exec("n1", "sleep 0.3; hostname", &opts()).await });
    let b = tokio::spawn(async move { p2.exec("n2", "sleep 0.3; hostname", &opts()).await });
    let t0 = Instant::now();
    let (a, b) = (
        a.await.expect("join").expect("n1"),
        b.await.expect("join").expect("n2"),
    );
    assert_eq!((a.stdout.as_str(), b.stdout.as_str()), ("n1\n", "n2\n"));
    assert!(
        t0.elapsed() < Duration::from_millis(1500),
        "ran concurrently: {:?}",
        t0.elapsed()
    );
    // Writes on one node do not leak into the other.
    run(
        &pool,
        "n1",
        "sudo sh -c 'echo bfq > /sys/block/sda/queue/scheduler'",
    )
    .await;
    let o = run(&pool, "n2", "cat /sys/block/sda/queue/scheduler").await;
    assert_eq!(o.stdout, "[mq-deadline] kyber bfq none\n");

    let key = sim.nodes[0].host_public_key().clone();
    for addr in ["192.0.2.10", "0.0.0.0", "::1"] {
        let err = SimNode::start(SimNodeSpec {
            name: "outside".into(),
            address: addr.parse().expect("addr"),
            port: 0,
            authorized_keys: vec![key.clone()],
            state: Arc::new(Mutex::new(NodeState::new("outside", Clock::fixed(T0)))),
            host_key: None,
            userland: None,
        })
        .await
        .err()
        .expect("refused");
        assert!(matches!(err, SimSshError::NotLoopback { .. }), "{err}");
        assert!(err.to_string().contains("127.0.0.0/8"), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_and_cancel_stop_the_simulated_command_not_the_connection() {
    let sim = Sim::start(&["n1"], &[]).await;
    let pool = sim.pool();
    let t0 = Instant::now();
    let err = pool
        .exec(
            "n1",
            "sleep 5; systemctl stop k3s",
            &ExecOptions {
                timeout: Some(Duration::from_millis(300)),
                ..ExecOptions::default()
            },
        )
        .await
        .expect_err("times out");
    assert!(matches!(err, SshError::Timeout { .. }), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(3));
    // The KILL reached the simulated command: the rest of the line never ran.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let o = run(&pool, "n1", "systemctl is-active k3s").await;
    assert_eq!(o.stdout, "active\n");
    assert_eq!(pool.connects("n1"), 1);
}

/// A console probes the same nodes for hours over one pooled connection. What a long run of
/// commands leaves behind must stay bounded: the node keeps the state of its channels only
/// while they are open (it closes them itself, and russh never reports the client's
/// answering close), and the pool moves to a fresh connection after
/// `channels_per_connection` commands, so whatever a server keeps per connection is let go
/// with the old one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_run_of_commands_keeps_bounded_state_on_the_node_and_the_pool() {
    let sim = Sim::start(&["n1"], &[]).await;
    let node = sim.node("n1");
    // Default rotation (128): one connection; the node holds at most the last channel's
    // state, however many commands ran.
    let pool = sim.pool();
    for i in 0..60 {
        let o = run(&pool, "n1", "true").await;
        assert_eq!(o.exit_status, Some(0), "command {i}");
        assert!(
            node.channel_states() <= 2,
            "after {i}: {}",
            node.channel_states()
        );
    }
    assert_eq!(pool.connects("n1"), 1);
    assert!(node.channel_states() <= 1, "{}", node.channel_states());
    drop(pool);

    // Rotation every 10 commands: 45 commands are 5 connections, and the old ones close.
    let mut o = SshOptions::with_known_hosts(vec![sim.known_hosts.clone()]);
    o.channels_per_connection = 10;
    let pool = SshPool::new(o);
    pool.add_host(sim.settings_with_key(node, &sim.client_key));
    let before = node.accepted();
    for _ in 0..45 {
        assert_eq!(run(&pool, "n1", "echo hi").await.stdout, "hi\n");
    }
    assert_eq!(pool.connects("n1"), 5);
    assert_eq!(node.accepted() - before, 5);
    let t0 = Instant::now();
    while node.sessions() > 1 && t0.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(node.sessions(), 1, "the replaced connections were closed");
    assert!(node.channel_states() <= 1, "{}", node.channel_states());
}

/// Connect + one command and a warm command, sim node vs the real sshd harness; printed
/// (run with --nocapture to see the figures). Asserts only that the sim is not slower than
/// sshd by more than a generous factor, so the figures stay honest on a loaded machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_against_the_real_sshd() {
    const N: usize = 20;
    async fn measure(pool_for: impl Fn() -> SshPool, host: &str) -> (Duration, Duration) {
        // Cold: a fresh pool each time (TCP + handshake + auth + one command).
        let mut cold = Vec::new();
        for _ in 0..5 {
            let pool = pool_for();
            let t = Instant::now();
            let o = pool.exec(host, "true", &opts()).await.expect("exec");
            cold.push(t.elapsed());
            assert_eq!(o.exit_status, Some(0));
            pool.close_all().await;
        }
        let pool = pool_for();
        pool.exec(host, "true", &opts()).await.expect("warm up");
        let mut warm = Vec::new();
        for _ in 0..N {
            let t = Instant::now();
            let o = pool.exec(host, "echo ok", &opts()).await.expect("exec");
            warm.push(t.elapsed());
            assert_eq!(o.exit_status, Some(0));
        }
        cold.sort();
        warm.sort();
        (cold[cold.len() / 2], warm[warm.len() / 2])
    }
    let sim = Sim::start(&["n1"], &[]).await;
    let (sim_cold, sim_warm) = measure(|| sim.pool(), "n1").await;
    let real = tokio::task::block_in_place(|| support::Cluster::start_n(1));
    let (real_cold, real_warm) = measure(|| real.pool(), "node1").await;
    eprintln!(
        "latency (median): sim connect+command {sim_cold:?}, sim warm command {sim_warm:?}; \
         sshd connect+command {real_cold:?}, sshd warm command {real_warm:?}"
    );
    assert!(
        sim_warm < real_warm * 5 + Duration::from_millis(50),
        "sim {sim_warm:?} vs sshd {real_warm:?}"
    );
    assert!(
        sim_cold < real_cold * 5 + Duration::from_millis(200),
        "sim {sim_cold:?} vs sshd {real_cold:?}"
    );
}

/// ansible-playbook against sim nodes over its ssh connection plugin: `raw` tasks reach the
/// simulated shell and change simulated state; a module task (which needs Python on the
/// target) fails with the simulation's message and runs nothing on this host. (Without
/// pipelining the module path already stops at Ansible's remote temp dir: its backquotes
/// are refused, "Failed to create temporary directory", the host UNREACHABLE.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ansible_raw_tasks_change_simulated_state_and_modules_are_refused() {
    let sim = Sim::start(&["gw-1", "n2"], &["gw-1"]).await;
    let bin = support::ansible_bin_dir();
    let d = sim.dir.path();
    std::fs::write(
        d.join("hosts.ini"),
        ansible_inventory(&sim.nodes, &sim.client_key, &sim.known_hosts),
    )
    .expect("inventory");
    let marker = d.join("module-ran-here");
    std::fs::write(
        d.join("raw.yml"),
        format!(
            r#"---
- name: etcd I/O priority by raw commands
  hosts: sim
  gather_facts: false
  tasks:
    - name: BFQ on the data disk
      ansible.builtin.raw: echo bfq > /sys/block/sda/queue/scheduler
      become: true
    - name: nr_requests
      ansible.builtin.raw: echo 32 > /sys/block/sda/queue/nr_requests
      become: true
    - name: IOWeight, with become (sudo -H -S -n -u root /bin/sh -c ...)
      ansible.builtin.raw: systemctl set-property k3s.service IOWeight=10000
      become: true
    - name: Read back
      ansible.builtin.raw: cat /sys/block/sda/queue/scheduler
      register: sched
      changed_when: false
    - name: Check
      ansible.builtin.assert:
        that: "'[bfq]' in sched.stdout"
- name: Restart the tunnel on the gateway
  hosts: gw-1
  gather_facts: false
  tasks:
    - name: Restart
      ansible.builtin.raw: systemctl restart vpn-egress-tunnel.service
- name: A module task
  hosts: n2
  gather_facts: false
  tasks:
    - name: Touch a file (needs Python on the target)
      ansible.builtin.command: touch {marker}
"#,
            marker = marker.display()
        ),
    )
    .expect("playbook");
    let env = [
        ("ANSIBLE_HOME", d.join("ansible-home")),
        ("ANSIBLE_LOCAL_TEMP", d.join("local-tmp")),
        ("ANSIBLE_SSH_CONTROL_PATH_DIR", d.join("cp")),
    ];
    let _ = std::fs::create_dir_all(d.join("cp"));
    let mut cmd = Command::new(bin.join("ansible-playbook"));
    cmd.current_dir(d)
        .args(["-i", "hosts.ini", "raw.yml"])
        .env("ANSIBLE_HOST_KEY_CHECKING", "True")
        // Pipelining sends a module's payload on stdin to the interpreter instead of
        // uploading it: the simulation refuses the interpreter with its own message.
        .env("ANSIBLE_PIPELINING", "True")
        .env("ANSIBLE_RETRY_FILES_ENABLED", "False")
        .env("ANSIBLE_NOCOLOR", "1")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::task::block_in_place(|| cmd.output().expect("run ansible-playbook"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{text}");
    // The raw plays changed both nodes' simulated state.
    for n in &sim.nodes {
        let s = n.state();
        let s = s.lock().expect("lock");
        assert_eq!(s.disks["sda"].scheduler, "bfq", "{}: {text}", n.name());
        assert_eq!(s.disks["sda"].nr_requests, 32, "{}", n.name());
        assert_eq!(
            s.units["k3s.service"].io_weight,
            Some(10000),
            "{}",
            n.name()
        );
    }
    assert_eq!(
        sim.node("gw-1").state().lock().expect("lock").units[VPN_UNIT].restarts,
        1,
        "{text}"
    );
    // The module task failed on n2, saying why, and nothing ran here.
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("never runs Python"), "{text}");
    assert!(!marker.exists(), "an Ansible module ran on the real host");
    let recap = text.split("PLAY RECAP").nth(1).expect("recap");
    assert!(
        recap.contains("gw-1") && recap.contains("failed=0"),
        "{recap}"
    );
    assert!(
        recap
            .lines()
            .any(|l| l.starts_with("n2") && l.contains("failed=1")),
        "{recap}"
    );
}
