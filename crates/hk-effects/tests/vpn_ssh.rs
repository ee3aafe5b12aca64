//! The VPN egress pane over SSH (crates/hk-effects/src/observe/vpn.rs) against REAL OpenSSH sshd nodes
//! (tests/support: 127.0.0.11-13), one per gateway of a throwaway infra repo.
//!
//! What is real: sshd and the login shell on the nodes, known_hosts checking and key auth,
//! hk-console's SSH pool and read-only executor, the shell quoting of every argument, the
//! parsing of the commands' output, and the judging by `checks::live`.
//! What is a STAND-IN: the gateway's own `systemctl`, `curl` and `journalctl` (no systemd,
//! no tunnel and no internet here, and nothing may leave 127.0.0.0/8). They are shell
//! scripts first on the sessions' PATH (crates/hk-test-nodes/src/gateway.rs) that record their argv
//! and print what each test writes; every look is preceded by a check that the sessions
//! find them, not the real tools.
use crate::support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hk_effects::exec::settings::{SshConfig, SshDefaults};
use hk_effects::observe::feed::{Feed, Update, VpnLook, ALL_ENVS};
use hk_effects::observe::vpn::{self, Gateways};
use hk_engine::checks::live::{exit_code, GatewayPane, Rule, Severity, Verdict};
use hk_engine::repo::Repo;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use support::gateway::{self, short_iso, GatewayTools};
use support::{keygen, Cluster};

/// Gateway host names, one per harness node, and their environments.
const HOSTS: [(&str, &str); 3] = [
    ("dev", "k3s-dev-3"),
    ("prod", "k3s-prod-3"),
    ("stage", "k3s-stage-1"),
];

struct Lab {
    cluster: Cluster,
    tools: Vec<GatewayTools>,
    root: PathBuf,
}

/// Three sshd nodes with the stand-ins, and an infra repo whose environments dev, prod and
/// stage each have one gateway (node 1, 2, 3). `extra` may add group_vars/host_vars.
fn lab(extra: impl FnOnce(&Path)) -> Lab {
    let mut cluster = Cluster::start();
    let tools = gateway::install(&mut cluster);
    let root = cluster.dir.path().join("repo");
    let inv = root.join("infra/ansible/inventory");
    std::fs::create_dir_all(&inv).expect("mkdir inventory");
    let mut config = String::from("known_hosts: known_hosts\nenvironments:\n");
    let mut ini = String::new();
    for (i, (env, host)) in HOSTS.iter().enumerate() {
        config.push_str(&format!(
            "  {env}: {{ servers: {env}_servers, vpn_gateways: {env}_gateways }}\n"
        ));
        let n = &cluster.nodes[i];
        ini.push_str(&format!(
            "[{env}_servers]\n{host} ansible_host={} ansible_port={} ansible_user={} \
             ansible_ssh_private_key_file={}\n\n[{env}_gateways]\n{host}\n\n",
            n.addr,
            n.port,
            Cluster::user(),
            cluster.client_key.display()
        ));
    }
    std::fs::write(root.join("hk-console.yaml"), config).expect("hk-console.yaml");
    std::fs::write(inv.join("hosts.ini"), ini).expect("hosts.ini");
    std::fs::copy(&cluster.known_hosts, root.join("known_hosts")).expect("known_hosts");
    extra(&inv);
    Lab {
        cluster,
        tools,
        root,
    }
}

impl Lab {
    fn repo(&self) -> Arc<Repo> {
        Arc::new(Repo::load(&self.root).expect("load the test repo"))
    }

    /// The gateways' SSH side as the console builds it: the known_hosts rules of
    /// `context::ssh_options` (the repo's known_hosts file), settings from hostvars; no
    /// ~/.ssh/config of the developer's.
    fn gateways(&self, repo: &Repo) -> Arc<Gateways> {
        let defaults = SshDefaults {
            user: Cluster::user(),
            home: self.cluster.dir.path().join("home"),
        };
        Arc::new(Gateways::for_repo_with(
            repo,
            hk_effects::context::ssh_options(repo),
            &SshConfig::empty(),
            &defaults,
        ))
    }

    async fn look(&self, repo: &Repo, gw: &Gateways) -> VpnLook {
        gateway::assert_stand_ins_first(&self.cluster, &self.tools).await;
        vpn::look(repo, &[], gw).await
    }

    fn tools(&self, host: &str) -> &GatewayTools {
        let i = HOSTS
            .iter()
            .position(|(_, h)| *h == host)
            .expect("a lab host");
        &self.tools[i]
    }
}

fn pane<'a>(look: &'a VpnLook, host: &str) -> &'a GatewayPane {
    look.gateways
        .iter()
        .find(|g| g.host == host)
        .unwrap_or_else(|| panic!("no pane for {host}: {look:#?}"))
}

fn one(p: &GatewayPane, rule: Rule) -> &Verdict {
    let v: Vec<&Verdict> = p.verdicts.iter().filter(|v| v.rule == rule).collect();
    assert_eq!(v.len(), 1, "{rule:?} on {}: {:#?}", p.host, p.verdicts);
    v[0]
}

fn all_verdicts(look: &VpnLook) -> Vec<Verdict> {
    Feed::Vpn(look.clone()).verdicts()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}

/// One OpenVPN 2.6 connect as `journalctl -u vpn-egress-tunnel -o short-iso` prints it (the
/// documented 2026-09-12 lines): at `t` (ms) to `server`, handed `addr`; then, if `drops`,
/// the `--ping-restart` 60 s later.
fn connect(host: &str, t: u64, server: &str, addr: &str, drops: bool) -> Vec<String> {
    let at = |ms: u64| format!("{} {host} openvpn[812]:", short_iso(ms));
    let mut l = vec![
        format!("{} UDPv4 link remote: [AF_INET]{server}", at(t)),
        format!(
            "{} [Server-10779-2a] Peer Connection Initiated with [AF_INET]{server}",
            at(t)
        ),
        format!(
            "{} PUSH: Received control message: 'PUSH_REPLY,redirect-gateway def1,ping 10,\
             ping-restart 60,route-gateway 10.72.192.1,topology subnet,ifconfig {addr} \
             255.255.192.0,peer-id 3,cipher AES-128-GCM'",
            at(t)
        ),
        format!("{} TUN/TAP device tun0 opened", at(t)),
        format!("{} net_addr_v4_add: {addr}/18 dev tun0", at(t)),
        format!("{} Initialization Sequence Completed", at(t)),
    ];
    if drops {
        let d = t + 60_000;
        l.push(format!(
            "{} [Server-10779-2a] Inactivity timeout (--ping-restart), restarting",
            at(d)
        ));
        l.push(format!(
            "{} SIGUSR1[soft,ping-restart] received, process restarting",
            at(d)
        ));
    }
    l
}

/// A tunnel up for hours: one connect, long before the window.
fn steady(host: &str, server: &str, addr: &str) -> Vec<String> {
    connect(host, now_ms() - 5 * 3600 * 1000, server, addr, false)
}

#[tokio::test]
async fn healthy_gateways_are_ok() {
    let lab = lab(|_| {});
    lab.tools("k3s-dev-3")
        .set_journal(&steady("k3s-dev-3", "158.173.241.112:1198", "10.72.192.7"));
    lab.tools("k3s-prod-3").set_tunnel_exit("158.173.241.41");
    lab.tools("k3s-prod-3").set_journal(&steady(
        "k3s-prod-3",
        "158.173.241.135:1198",
        "10.72.192.7",
    ));
    let repo = lab.repo();
    let gw = lab.gateways(&repo);
    let look = lab.look(&repo, &gw).await;

    assert_eq!(look.gateways.len(), 3, "{look:#?}");
    let v = all_verdicts(&look);
    assert!(
        v.iter().all(|v| v.severity == Severity::Ok),
        "every verdict ok: {v:#?}"
    );
    assert!(look.across.is_empty(), "{:#?}", look.across);
    assert_eq!(exit_code(&v), 0);
    let dev = pane(&look, "k3s-dev-3");
    assert_eq!(dev.env, "dev");
    assert_eq!(dev.active_state.as_deref(), Some("active"));
    assert_eq!(dev.tunnel_exit, Some("158.173.241.20".parse().expect("ip")));
    assert_eq!(dev.direct_exit, Some("203.0.113.7".parse().expect("ip")));
    assert_eq!(
        dev.server.map(|s| s.to_string()).as_deref(),
        Some("158.173.241.112:1198")
    );
    assert_eq!(
        dev.tunnel_addr.as_ref().map(ToString::to_string).as_deref(),
        Some("10.72.192.7 255.255.192.0")
    );
    assert!(
        dev.connects.is_empty(),
        "hours-old connect is outside the window"
    );
    let prod = pane(&look, "k3s-prod-3");
    assert_eq!(
        prod.tunnel_exit,
        Some("158.173.241.41".parse().expect("ip"))
    );
    assert!(one(prod, Rule::VpnExit).message.contains("158.173.241.41"));
}

#[tokio::test]
async fn tunnel_exit_equal_to_direct_exit_is_a_critical_leak() {
    let lab = lab(|_| {});
    // The tunnel interface routes out through the home ISP.
    lab.tools("k3s-prod-3").set_tunnel_exit("203.0.113.7");
    let repo = lab.repo();
    let gw = lab.gateways(&repo);
    let look = lab.look(&repo, &gw).await;

    let prod = pane(&look, "k3s-prod-3");
    let leak = one(prod, Rule::VpnExit);
    assert_eq!(leak.severity, Severity::Critical);
    for needle in ["LEAK", "tun0", "k3s-prod-3", "203.0.113.7"] {
        assert!(leak.message.contains(needle), "{needle}: {}", leak.message);
    }
    assert_eq!(
        one(pane(&look, "k3s-dev-3"), Rule::VpnExit).severity,
        Severity::Ok
    );
    assert_eq!(exit_code(&all_verdicts(&look)), 1);
}

#[tokio::test]
async fn failed_service_is_critical() {
    let lab = lab(|_| {});
    let t = lab.tools("k3s-dev-3");
    t.set_active("failed");
    // With the unit down, tun0 is gone: curl cannot bind to it.
    t.fail_tunnel_exit(45, "curl: (45) bind failed with errno 19: No such device");
    let repo = lab.repo();
    let gw = lab.gateways(&repo);
    let look = lab.look(&repo, &gw).await;

    let dev = pane(&look, "k3s-dev-3");
    assert_eq!(dev.active_state.as_deref(), Some("failed"));
    let s = one(dev, Rule::VpnService);
    assert_eq!(s.severity, Severity::Critical);
    assert!(
        s.message
            .contains("vpn-egress-tunnel.service is failed on k3s-dev-3"),
        "{}",
        s.message
    );
    let e = one(dev, Rule::VpnExit);
    assert_eq!(e.severity, Severity::Critical);
    assert!(e.message.contains("curl exited 45"), "{}", e.message);
    assert!(e.message.contains("No such device"), "{}", e.message);
    assert_eq!(exit_code(&all_verdicts(&look)), 1);
}

/// 2026-09-12, replayed against the clock: dev and prod gateways on one PIA server
/// (158.173.241.112:1198), both handed 10.72.192.7, each reconnecting every ~2 minutes
/// about a minute after the other (dev at 22:57:05, 22:59:03, 23:01:05, prod at 22:58:04,
/// 23:00:05, 23:02:04, looked at 23:03:30), shifted so the look happens now.
#[tokio::test]
async fn eviction_loop_of_2026_09_12_names_both_gateways() {
    let lab = lab(|_| {});
    let now = now_ms();
    let look_at = 23 * 3600 + 3 * 60 + 30;
    let at = |hms: &str| {
        let p: Vec<u64> = hms.split(':').map(|x| x.parse().expect("hms")).collect();
        now - (look_at - (p[0] * 3600 + p[1] * 60 + p[2])) * 1000
    };
    let pia = "158.173.241.112:1198";
    let journal = |host: &str, times: &[&str]| -> Vec<String> {
        times
            .iter()
            .flat_map(|t| connect(host, at(t), pia, "10.72.192.7", true))
            .collect()
    };
    lab.tools("k3s-dev-3")
        .set_journal(&journal("k3s-dev-3", &["22:57:05", "22:59:03", "23:01:05"]));
    lab.tools("k3s-prod-3").set_journal(&journal(
        "k3s-prod-3",
        &["22:58:04", "23:00:05", "23:02:04"],
    ));
    // Stage is on another pool member: not part of the loop.
    lab.tools("k3s-stage-1").set_journal(&steady(
        "k3s-stage-1",
        "158.173.241.135:1198",
        "10.72.192.7",
    ));
    let repo = lab.repo();
    let gw = lab.gateways(&repo);
    let look = lab.look(&repo, &gw).await;

    for host in ["k3s-dev-3", "k3s-prod-3"] {
        let p = pane(&look, host);
        assert_eq!(p.connects.len(), 3, "{host}: {:#?}", p.connects);
        let flap = one(p, Rule::VpnFlapping);
        assert_eq!(flap.severity, Severity::Warn, "{}", flap.message);
        assert!(flap.message.contains("every ~2m"), "{}", flap.message);
    }
    assert_eq!(look.across.len(), 1, "{:#?}", look.across);
    let e = &look.across[0];
    assert_eq!(e.rule, Rule::VpnEvictionLoop);
    assert_eq!(e.severity, Severity::Critical);
    for needle in [
        "k3s-dev-3 (dev)",
        "k3s-prod-3 (prod)",
        pia,
        "10.72.192.7 255.255.192.0",
        "~1m apart",
    ] {
        assert!(
            e.message.contains(needle),
            "{needle:?} not in {}",
            e.message
        );
    }
    assert!(!e.message.contains("k3s-stage-1"), "{}", e.message);
    assert_eq!(exit_code(&all_verdicts(&look)), 1);
}

#[tokio::test]
async fn what_cannot_be_seen_is_could_not_look_naming_the_host() {
    let lab = lab(|_| {});
    // dev: reachable, but its journal cannot be read.
    lab.tools("k3s-dev-3")
        .fail_journal(1, "Failed to get journal access: Permission denied");
    // prod: its host key is not the one recorded for it.
    let other = lab.cluster.dir.path().join("other_host_key");
    keygen(&other, "");
    let pubkey = std::fs::read_to_string(other.with_extension("pub")).expect("pub");
    let mut f = pubkey.split_whitespace();
    let (kt, k) = (f.next().expect("type"), f.next().expect("key"));
    let n2 = &lab.cluster.nodes[1];
    let known: Vec<String> = std::fs::read_to_string(lab.root.join("known_hosts"))
        .expect("known_hosts")
        .lines()
        .map(|l| {
            if l.starts_with(&format!("[{}]:{} ", n2.addr, n2.port)) {
                format!("[{}]:{} {kt} {k}", n2.addr, n2.port)
            } else {
                l.to_string()
            }
        })
        .collect();
    std::fs::write(lab.root.join("known_hosts"), known.join("\n") + "\n").expect("write");
    let repo = lab.repo();
    let gw = lab.gateways(&repo);
    gateway::assert_stand_ins_first(&lab.cluster, &lab.tools).await;
    // stage: its sshd is gone (the host is down).
    let mut lab = lab;
    lab.cluster.nodes[2].kill();
    let t0 = Instant::now();
    let look = vpn::look(&repo, &[], &gw).await;
    let took = t0.elapsed();
    eprintln!("look with one gateway down and one with a changed key: {took:?}");

    let dev = pane(&look, "k3s-dev-3");
    let j = one(dev, Rule::CouldNotLook);
    assert_eq!(j.severity, Severity::Unknown);
    for needle in ["k3s-dev-3", "journalctl", "exited 1", "Permission denied"] {
        assert!(j.message.contains(needle), "{needle}: {}", j.message);
    }
    // What could be seen on dev is still judged.
    assert_eq!(one(dev, Rule::VpnService).severity, Severity::Ok);
    assert_eq!(one(dev, Rule::VpnExit).severity, Severity::Ok);

    let prod = pane(&look, "k3s-prod-3");
    let c = one(prod, Rule::CouldNotLook);
    assert!(c.message.contains("k3s-prod-3"), "{}", c.message);
    assert!(c.message.contains("host key CHANGED"), "{}", c.message);
    assert_eq!(prod.verdicts.len(), 1, "{:#?}", prod.verdicts);
    assert!(
        lab.tools("k3s-prod-3").calls().is_empty(),
        "nothing may run on a host whose key changed"
    );

    let stage = pane(&look, "k3s-stage-1");
    let u = one(stage, Rule::CouldNotLook);
    assert!(u.message.contains("k3s-stage-1"), "{}", u.message);
    assert!(u.message.contains("cannot connect"), "{}", u.message);
    assert_eq!(stage.verdicts.len(), 1, "{:#?}", stage.verdicts);

    assert_eq!(exit_code(&all_verdicts(&look)), 2);
    assert!(took < Duration::from_secs(15), "{took:?}");
}

/// The commands that reach the gateways are exactly the four read-only ones, with the
/// hostvars' values where the repo sets them (quoted: a value the remote shell would
/// otherwise expand arrives as one literal word), the documented defaults where it does
/// not, and none at all where a hostvar cannot be rendered.
#[tokio::test]
async fn the_commands_sent_are_exactly_the_read_only_ones() {
    let lab = lab(|inv| {
        let hv = inv.join("host_vars");
        std::fs::create_dir_all(&hv).expect("host_vars");
        // Never fetched (curl is a stand-in), and loopback anyway.
        std::fs::write(
            hv.join("k3s-stage-1.yml"),
            "vpn_egress_gateway_service: vpn-egress@pia-se.service\n\
             vpn_egress_gateway_interface: wg-pia0\n\
             vpn_egress_gateway_exit_ip_url: \"http://127.0.0.1:9/ip?fmt=text&who='$(id)'#frag\"\n",
        )
        .expect("host_vars");
        let gv = inv.join("group_vars");
        std::fs::create_dir_all(&gv).expect("group_vars");
        std::fs::write(
            gv.join("prod_gateways.yml"),
            "vpn_egress_gateway_interface: \"{{ pia_interface_not_defined }}\"\n",
        )
        .expect("group_vars");
    });
    let repo = lab.repo();
    let gw = lab.gateways(&repo);
    let look = lab.look(&repo, &gw).await;

    let sorted = |mut c: Vec<Vec<String>>| {
        c.sort();
        c
    };
    let argv = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let expect = |service: &str, iface: &str, url: &str| {
        sorted(vec![
            argv(&["systemctl", "is-active", service]),
            argv(&["curl", "-sS", "--max-time", "10", "--interface", iface, url]),
            argv(&["curl", "-sS", "--max-time", "10", url]),
            argv(&[
                "journalctl",
                "-u",
                service,
                "--since",
                "-1800s",
                "-o",
                "short-iso",
                "--no-pager",
            ]),
        ])
    };
    // dev: nothing in the repo -> the documented values.
    assert_eq!(
        sorted(lab.tools("k3s-dev-3").calls()),
        expect("vpn-egress-tunnel.service", "tun0", "https://ipinfo.io/ip")
    );
    // stage: the repo's values, each arriving as the one word it is.
    assert_eq!(
        sorted(lab.tools("k3s-stage-1").calls()),
        expect(
            "vpn-egress@pia-se.service",
            "wg-pia0",
            "http://127.0.0.1:9/ip?fmt=text&who='$(id)'#frag"
        )
    );
    // prod: its interface cannot be rendered: nothing is sent, the reason names it.
    assert!(lab.tools("k3s-prod-3").calls().is_empty());
    let prod = pane(&look, "k3s-prod-3");
    let c = one(prod, Rule::CouldNotLook);
    for needle in [
        "k3s-prod-3",
        "vpn_egress_gateway_interface",
        "cannot be rendered",
    ] {
        assert!(c.message.contains(needle), "{needle}: {}", c.message);
    }
    // Judged with the repo's names.
    let stage = pane(&look, "k3s-stage-1");
    assert!(
        one(stage, Rule::VpnService)
            .message
            .contains("vpn-egress@pia-se.service is active on k3s-stage-1"),
        "{:#?}",
        stage.verdicts
    );
}

async fn next(rx: &mut mpsc::Receiver<Update>) -> Update {
    tokio::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .expect("an update within 20 s")
        .expect("the poller is running")
}

/// The poller: an update per period for every environment at once, each look fresh, one
/// SSH connection per host for all of them, and a prompt stop on cancel.
#[tokio::test]
async fn poller_sends_fresh_looks_over_one_connection_per_host() {
    let lab = lab(|_| {});
    let repo = lab.repo();
    let gw = lab.gateways(&repo);
    gateway::assert_stand_ins_first(&lab.cluster, &lab.tools).await;
    let accepted_before: Vec<usize> = lab.cluster.nodes.iter().map(|n| n.accepted()).collect();
    let (tx, mut rx) = mpsc::channel::<Update>(4);
    let cancel = CancellationToken::new();
    let handle = vpn::spawn_vpn_poll(
        Arc::clone(&repo),
        vec!["dev".into(), "prod".into(), "stage".into()],
        Arc::clone(&gw),
        Duration::from_millis(300),
        tx,
        cancel.clone(),
    );
    let vpn_of = |u: Update| match u.feed {
        Feed::Vpn(v) => v,
        other => panic!("not a VPN update: {other:?}"),
    };
    let first = next(&mut rx).await;
    assert_eq!(first.env, ALL_ENVS);
    let first_at = first.at;
    let v = vpn_of(first);
    assert_eq!(v.gateways.len(), 3);
    assert_eq!(
        pane(&v, "k3s-dev-3").active_state.as_deref(),
        Some("active")
    );

    lab.tools("k3s-dev-3").set_active("inactive");
    // A look may have started before the change: wait for one that shows it.
    let mut seen_inactive = false;
    for _ in 0..4 {
        let u = next(&mut rx).await;
        assert!(u.at.0 > first_at.0);
        let v = vpn_of(u);
        if pane(&v, "k3s-dev-3").active_state.as_deref() == Some("inactive") {
            assert_eq!(
                one(pane(&v, "k3s-dev-3"), Rule::VpnService).severity,
                Severity::Critical
            );
            seen_inactive = true;
            break;
        }
    }
    assert!(seen_inactive, "the service going down never showed");

    for (i, (_, host)) in HOSTS.iter().enumerate() {
        assert_eq!(
            gw.connects(host),
            1,
            "{host}: one connection for every poll"
        );
        assert_eq!(
            lab.cluster.nodes[i].accepted() - accepted_before[i],
            1,
            "{host}: sshd saw one login for every poll"
        );
        assert!(lab.tools(host).calls().len() >= 8, "two looks at least");
    }
    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(5), handle)
        .await
        .expect("the poller stops within 5 s of cancel")
        .expect("the poller did not panic");
}

/// The time of one look over three gateways, cold (three SSH handshakes) and warm (the
/// connections reused). Printed for docs/perf.md; bounded loosely so a hang fails.
#[tokio::test]
async fn one_look_over_three_gateways_is_timed() {
    let lab = lab(|_| {});
    let repo = lab.repo();
    let gw = lab.gateways(&repo);
    gateway::assert_stand_ins_first(&lab.cluster, &lab.tools).await;
    let t0 = Instant::now();
    let look = vpn::look(&repo, &[], &gw).await;
    let cold = t0.elapsed();
    assert_eq!(look.gateways.len(), 3);
    assert_eq!(exit_code(&all_verdicts(&look)), 0, "{look:#?}");
    let mut warm = Vec::new();
    for _ in 0..7 {
        let t = Instant::now();
        let look = vpn::look(&repo, &[], &gw).await;
        warm.push(t.elapsed());
        assert_eq!(exit_code(&all_verdicts(&look)), 0);
    }
    warm.sort();
    // The floor: the same twelve sessions (four per node at once, connections warm) that
    // run `true`, so what is sshd's and the shell's is told apart from the look's own.
    let pool = lab.cluster.pool();
    let mut floor = Vec::new();
    for round in 0..8 {
        let t = Instant::now();
        let runs = (0..12).map(|i| {
            let pool = &pool;
            async move {
                pool.exec(
                    &format!("node{}", i % 3 + 1),
                    "true",
                    &hk_effects::exec::ssh::ExecOptions::default(),
                )
                .await
                .expect("true over ssh")
            }
        });
        futures::future::join_all(runs).await;
        if round > 0 {
            floor.push(t.elapsed());
        }
    }
    floor.sort();
    eprintln!(
        "one VPN look over 3 gateways (4 commands each, real sshd, stand-in tools): \
         cold {cold:?}; warm min {:?} median {:?} max {:?}; floor (12 x `true`, same \
         sessions) min {:?} median {:?}",
        warm[0], warm[3], warm[6], floor[0], floor[3]
    );
    assert!(cold < Duration::from_secs(20), "{cold:?}");
    assert!(warm[3] < Duration::from_secs(10), "{:?}", warm[3]);
}

/// What is wrong with an environment itself (no such environment, a gateway group the
/// inventory lacks) is a could-not-look naming it, not an empty pane. No SSH involved.
#[tokio::test]
async fn environment_problems_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let inv = dir.path().join("infra/ansible/inventory");
    std::fs::create_dir_all(&inv).expect("mkdir");
    std::fs::write(
        dir.path().join("hk-console.yaml"),
        "environments:\n  dev: { servers: dev_servers, vpn_gateways: dev_gw_typo }\n",
    )
    .expect("config");
    std::fs::write(inv.join("hosts.ini"), "[dev_servers]\nk3s-dev-1\n").expect("ini");
    let repo = Repo::load(dir.path()).expect("repo");
    let gw = Gateways::for_repo_with(
        &repo,
        hk_effects::exec::SshOptions::with_known_hosts(Vec::new()),
        &SshConfig::empty(),
        &SshDefaults {
            user: "ops".into(),
            home: dir.path().to_path_buf(),
        },
    );
    let look = vpn::look(&repo, &["dev".into(), "staging".into()], &gw).await;
    assert!(look.gateways.is_empty());
    let msgs: Vec<String> = look.across.iter().map(|v| v.to_string()).collect();
    assert_eq!(msgs.len(), 2, "{msgs:#?}");
    assert!(look.across.iter().all(|v| v.rule == Rule::CouldNotLook));
    assert!(msgs[0].contains("dev_gw_typo"), "{}", msgs[0]);
    assert!(msgs[1].contains("no environment `staging`"), "{}", msgs[1]);
    assert_eq!(exit_code(&look.across), 2);
}
