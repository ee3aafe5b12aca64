//! The SSH executor against real OpenSSH sshd nodes on loopback (see tests/support).
//! Needs `apt-get install -y openssh-server`; fails with that hint when sshd is absent.

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use hk_effects::exec::known_hosts::HostKeyVerdict;
use hk_effects::exec::redact::MASK;
use hk_effects::exec::ssh::{scan_host_key, trust_host, ExecOptions, TrustOutcome};
use hk_effects::exec::{
    classify, AnsibleRunner, Classified, Executor, Mutating, Redactor, RunOptions, SshError,
    SshOptions, SshPool, StepOutcome,
};
use hk_engine::runbook::plan::{PlannedStep, StepKind};
use support::{Agent, Cluster};
use tokio_util::sync::CancellationToken;

fn opts() -> ExecOptions {
    ExecOptions {
        timeout: Some(Duration::from_secs(20)),
        ..ExecOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_returns_output_and_exit_codes_on_every_node() {
    let c = Cluster::start();
    let pool = c.pool();
    for n in &c.nodes {
        let out = pool
            .exec(&n.name, "echo out-$((1+2)); echo err >&2; exit 3", &opts())
            .await
            .expect("exec");
        assert_eq!(out.exit_status, Some(3), "{}", n.name);
        assert_eq!(out.stdout, "out-3\n");
        assert_eq!(out.stderr, "err\n");
        let ok = pool.exec(&n.name, "true", &opts()).await.expect("exec");
        assert_eq!(ok.exit_status, Some(0));
    }
    // Killed by a signal: no exit status, the signal named as the operator knows it.
    let out = pool
        .exec("node1", "kill -TERM $$", &opts())
        .await
        .expect("exec");
    assert_eq!(out.exit_status, None);
    assert_eq!(out.exit_signal.as_deref(), Some("SIGTERM"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_is_capped_and_flagged() {
    let c = Cluster::start_n(1);
    let mut o = c.options();
    o.max_output = 1000;
    let pool = c.pool_with(o);
    let out = pool
        .exec(
            "node1",
            "head -c 100000 /dev/zero | tr '\\0' x; echo short >&2",
            &opts(),
        )
        .await
        .expect("exec");
    assert_eq!(out.stdout.len(), 1000);
    assert!(out.stdout_truncated);
    assert!(!out.stderr_truncated);
    assert_eq!(out.exit_status, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_stops_the_command_and_keeps_the_connection() {
    let c = Cluster::start_n(1);
    let pool = c.pool();
    let t0 = Instant::now();
    let err = pool
        .exec(
            "node1",
            "sleep 8",
            &ExecOptions {
                timeout: Some(Duration::from_millis(800)),
                ..ExecOptions::default()
            },
        )
        .await
        .expect_err("must time out");
    assert!(matches!(err, SshError::Timeout { .. }), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert!(err.to_string().contains("timed out"), "{err}");
    let out = pool
        .exec("node1", "echo again", &opts())
        .await
        .expect("exec");
    assert_eq!(out.stdout, "again\n");
    assert_eq!(pool.connects("node1"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_ends_a_running_command() {
    let c = Cluster::start_n(1);
    let pool = Arc::new(c.pool());
    let cancel = CancellationToken::new();
    let o = ExecOptions {
        cancel: cancel.clone(),
        ..ExecOptions::default()
    };
    let p2 = pool.clone();
    let task = tokio::spawn(async move { p2.exec("node1", "sleep 8", &o).await });
    tokio::time::sleep(Duration::from_millis(700)).await;
    let t0 = Instant::now();
    cancel.cancel();
    let res = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("cancel must end the command promptly")
        .expect("join");
    assert!(matches!(res, Err(SshError::Cancelled { .. })), "{res:?}");
    assert!(t0.elapsed() < Duration::from_secs(3));
    // The remote side was asked to KILL the command. (OpenSSH delivers it for non-root
    // logins; for root it answers "session signalling requires privilege separation", so
    // here only the request is checked, from sshd's debug log.)
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = c.nodes[0].log_text();
    assert!(log.contains("req signal"), "{log}");
    // The connection stays usable for the next command.
    let out = pool
        .exec("node1", "echo next", &opts())
        .await
        .expect("exec");
    assert_eq!(out.stdout, "next\n");
    assert_eq!(pool.connects("node1"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_host_key_is_refused_with_fingerprint() {
    let c = Cluster::start_n(1);
    let empty = c.dir.path().join("empty_known_hosts");
    std::fs::write(&empty, "").expect("write");
    let pool = c.pool_with(SshOptions::with_known_hosts(vec![empty.clone()]));
    let err = pool
        .exec("node1", "true", &opts())
        .await
        .expect_err("refused");
    let fp = c.nodes[0].host_key_fingerprint();
    match &err {
        SshError::UnknownHostKey {
            fingerprint,
            files,
            lookup,
            ..
        } => {
            assert_eq!(fingerprint, &format!("ssh-ed25519 {fp}"));
            assert_eq!(files, &empty.display().to_string());
            assert_eq!(lookup, &format!("[127.0.0.11]:{}", c.nodes[0].port));
        }
        other => panic!("expected UnknownHostKey, got {other}"),
    }
    assert!(err.to_string().contains(&fp));
    // Refused before authentication: sshd never accepted a key.
    assert_eq!(c.nodes[0].accepted(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_host_key_is_refused_with_where_it_was_expected() {
    let c = Cluster::start_n(2);
    // Record node2's key under node1's name: node1 now presents a "changed" key.
    let kh = c.dir.path().join("changed_known_hosts");
    let n2 = c.nodes[1].known_hosts_line();
    let key_part = n2.split_once(' ').expect("line").1;
    std::fs::write(
        &kh,
        format!(
            "# recorded earlier\n[127.0.0.11]:{} {key_part}\n",
            c.nodes[0].port
        ),
    )
    .expect("write");
    let pool = c.pool_with(SshOptions::with_known_hosts(vec![kh.clone()]));
    let err = pool
        .exec("node1", "true", &opts())
        .await
        .expect_err("refused");
    match &err {
        SshError::ChangedHostKey {
            fingerprint,
            expected,
            ..
        } => {
            assert_eq!(
                fingerprint,
                &format!("ssh-ed25519 {}", c.nodes[0].host_key_fingerprint())
            );
            assert_eq!(
                expected,
                &format!(
                    "{}:2: ssh-ed25519 {}",
                    kh.display(),
                    c.nodes[1].host_key_fingerprint()
                )
            );
        }
        other => panic!("expected ChangedHostKey, got {other}"),
    }
    assert_eq!(c.nodes[0].accepted(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trust_flow_appends_only_after_yes_and_never_over_a_changed_key() {
    let c = Cluster::start_n(2);
    let kh = c.dir.path().join("trust_known_hosts");
    let o = SshOptions::with_known_hosts(vec![kh.clone()]);
    let fp = format!("ssh-ed25519 {}", c.nodes[0].host_key_fingerprint());

    let scanned = scan_host_key(&c.settings(0), &o).await.expect("scan");
    assert_eq!(scanned.verdict, HostKeyVerdict::Unknown);
    assert_eq!(scanned.fingerprint, fp);

    // The operator says no: nothing is written, the host stays refused.
    let out = trust_host(&c.settings(0), &o, &kh, |_| false)
        .await
        .expect("trust");
    assert_eq!(
        out,
        TrustOutcome::Declined {
            fingerprint: fp.clone()
        }
    );
    assert!(!kh.exists());

    // The operator is shown the fingerprint and types yes.
    let mut shown = String::new();
    let out = trust_host(&c.settings(0), &o, &kh, |k| {
        shown = k.fingerprint.clone();
        true
    })
    .await
    .expect("trust");
    assert_eq!(shown, fp);
    assert!(matches!(out, TrustOutcome::Appended { .. }), "{out:?}");
    let pool = c.pool_with(o.clone());
    let got = pool
        .exec("node1", "echo trusted", &opts())
        .await
        .expect("exec");
    assert_eq!(got.stdout, "trusted\n");
    let again = trust_host(&c.settings(0), &o, &kh, |_| panic!("not asked again"))
        .await
        .expect("trust");
    assert_eq!(again, TrustOutcome::AlreadyTrusted { fingerprint: fp });

    // node1's key recorded under node2's name: node2's own key then looks "changed".
    let lines_before = std::fs::read_to_string(&kh).expect("read");
    let mut s2_dial = c.settings(1);
    s2_dial.host_alias = "node2-reinstalled".into();
    let kh_text = lines_before.replace(
        &format!("[{}]:{}", c.nodes[0].addr, c.nodes[0].port),
        &format!("[{}]:{}", c.nodes[1].addr, c.nodes[1].port),
    );
    std::fs::write(&kh, &kh_text).expect("write");
    let out = trust_host(&s2_dial, &o, &kh, |_| panic!("must not ask"))
        .await
        .expect("trust");
    match out {
        TrustOutcome::Changed { expected, .. } => {
            assert!(
                expected.contains(&format!("{}:1:", kh.display())),
                "{expected}"
            )
        }
        other => panic!("expected Changed, got {other:?}"),
    }
    assert_eq!(std::fs::read_to_string(&kh).expect("read"), kh_text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_auth_works_without_any_key_file() {
    let c = Cluster::start_n(1);
    let agent = Agent::start(c.dir.path());
    let mut o = c.options();
    o.agent_socket = Some(agent.socket.clone());
    let mut s = c.settings(0);
    s.identity_files.clear();
    // Without the key in the agent: refused, and the message says what was tried.
    let pool = SshPool::new(o.clone());
    pool.add_host(s.clone());
    let err = pool
        .exec("node1", "true", &opts())
        .await
        .expect_err("no key");
    assert!(matches!(err, SshError::AuthFailed { .. }), "{err}");
    assert!(err.to_string().contains("holds no keys"), "{err}");
    agent.add(&c.client_key);
    let pool = SshPool::new(o);
    pool.add_host(s);
    let out = pool
        .exec("node1", "echo via-agent", &opts())
        .await
        .expect("exec");
    assert_eq!(out.stdout, "via-agent\n");
    assert!(c.nodes[0].log_text().contains("Accepted publickey"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_file_auth_and_a_wrong_key_is_refused() {
    let c = Cluster::start_n(1);
    let pool = c.pool();
    let out = pool
        .exec("node1", "echo via-file", &opts())
        .await
        .expect("exec");
    assert_eq!(out.stdout, "via-file\n");

    let other = c.dir.path().join("other_key");
    support::keygen(&other, "");
    let mut s = c.settings(0);
    s.identity_files = vec![other.clone()];
    let pool = SshPool::new(c.options());
    pool.add_host(s);
    let err = pool
        .exec("node1", "true", &opts())
        .await
        .expect_err("refused");
    assert!(
        err.to_string()
            .contains(&format!("key file {} (refused)", other.display())),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passphrase_protected_key_gives_a_clear_message() {
    let c = Cluster::start_n(1);
    let locked = c.dir.path().join("locked_key");
    support::keygen(&locked, "correct horse battery");
    let mut s = c.settings(0);
    s.identity_files = vec![locked.clone()];
    let pool = SshPool::new(c.options());
    pool.add_host(s);
    let err = pool
        .exec("node1", "true", &opts())
        .await
        .expect_err("locked");
    let msg = err.to_string();
    assert!(msg.contains("passphrase"), "{msg}");
    assert!(
        msg.contains(&format!("ssh-add {}", locked.display())),
        "{msg}"
    );
    assert!(!msg.contains("correct horse"), "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_tcp_connection_serves_twenty_commands() {
    let c = Cluster::start_n(1);
    let pool = c.pool();
    for i in 0..20 {
        let out = pool
            .exec("node1", &format!("echo {i}"), &opts())
            .await
            .expect("exec");
        assert_eq!(out.stdout, format!("{i}\n"));
    }
    assert_eq!(pool.connects("node1"), 1);
    // sshd's own account: one authenticated connection, twenty sessions on it.
    let log = c.nodes[0].log_text();
    assert_eq!(c.nodes[0].accepted(), 1, "{log}");
    // Every session ran over the client port of that one accepted connection.
    let accepted = log
        .lines()
        .find(|l| l.contains("Accepted publickey"))
        .expect("accepted line");
    let port = accepted
        .split_whitespace()
        .skip_while(|w| *w != "port")
        .nth(1)
        .expect("client port");
    let sessions: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Starting session: command"))
        .collect();
    assert_eq!(sessions.len(), 20, "{log}");
    assert!(
        sessions
            .iter()
            .all(|l| l.contains(&format!("port {port} "))),
        "{sessions:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnects_after_sshd_is_killed_and_restarted() {
    let mut c = Cluster::start_n(1);
    let pool = c.pool();
    let out = pool
        .exec("node1", "echo before", &opts())
        .await
        .expect("exec");
    assert_eq!(out.stdout, "before\n");
    c.nodes[0].kill();
    // Let the client notice the drop (EOF on the socket).
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.nodes[0].restart();
    let out = pool
        .exec("node1", "echo after", &opts())
        .await
        .expect("exec after restart");
    assert_eq!(out.stdout, "after\n");
    assert_eq!(pool.connects("node1"), 2);
    assert_eq!(c.nodes[0].accepted(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_gives_up_with_backoff_when_the_node_stays_down() {
    let mut c = Cluster::start_n(1);
    let mut o = c.options();
    o.reconnect.attempts = 3;
    o.reconnect.initial = Duration::from_millis(100);
    let pool = c.pool_with(o);
    pool.exec("node1", "true", &opts()).await.expect("exec");
    c.nodes[0].kill();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t0 = Instant::now();
    let err = pool.exec("node1", "true", &opts()).await.expect_err("down");
    assert!(matches!(err, SshError::Connect { .. }), "{err}");
    // Two waits between three attempts: 100ms + 200ms.
    assert!(
        t0.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t0.elapsed()
    );
    assert!(err
        .to_string()
        .contains(&format!("127.0.0.11:{}", c.nodes[0].port)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_masked_in_output_and_streamed_lines() {
    let c = Cluster::start_n(1);
    let pool = c.pool();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let o = ExecOptions {
        redactor: Redactor::new(["vault-s3cret"]),
        sink: Some(tx),
        ..opts()
    };
    let out = pool
        .exec(
            "node1",
            "echo token=vault-s3cret; echo vault-s3cret >&2",
            &o,
        )
        .await
        .expect("exec");
    assert_eq!(out.stdout, format!("token={MASK}\n"));
    assert_eq!(out.stderr, format!("{MASK}\n"));
    drop(o);
    let mut lines = Vec::new();
    while let Some(l) = rx.recv().await {
        lines.push(l.text);
    }
    lines.sort();
    assert_eq!(lines, vec![MASK.to_string(), format!("token={MASK}")]);
}

fn ssh_step(n: usize, host: &str, cmd: &str, mutates: bool) -> PlannedStep {
    PlannedStep {
        n,
        id: "probe".into(),
        kind: StepKind::Ssh,
        host: Some(host.into()),
        mutates,
        gate: None,
        command: Some(vec!["ssh".into(), host.into(), cmd.into()]),
        expect: None,
        title: String::new(),
        cwd: None,
        source: None,
        blast_radius: None,
        declared_read_only: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executors_run_planned_steps_by_capability() {
    let c = Cluster::start_n(1);
    let pool = Arc::new(c.pool());
    let marker = c.dir.path().join("mutated");
    let Ok(Classified::ReadOnly(look)) = classify(&ssh_step(1, "node1", "hostname", false)) else {
        panic!("a read-only ssh step");
    };
    let change_step = ssh_step(2, "node1", &format!("touch {}", marker.display()), true);
    let Ok(Classified::Mutating(change)) = classify(&change_step) else {
        panic!("a mutating ssh step");
    };
    let observe = Executor::read_only(pool.clone(), AnsibleRunner::from_env(), Redactor::none());
    let StepOutcome::Ssh(out) = observe
        .run(&look, &RunOptions::default())
        .await
        .expect("run")
    else {
        panic!("ssh outcome");
    };
    assert_eq!(out.exit_status, Some(0));
    // `observe.run_mutating(&change, ..)` does not compile (see the doc test in exec/mod.rs).
    assert!(!marker.exists());
    let operate = Executor::mutating(
        pool,
        AnsibleRunner::from_env(),
        Redactor::none(),
        Mutating::grant("test"),
    );
    // With the proof of another step's start record, nothing is started.
    let other = support::recorded_start(&ssh_step(7, "node1", "true", true));
    let refused = operate
        .run_mutating(&change, &RunOptions::default(), &other.start)
        .await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.to_string().contains("start record is step 7's")),
        "{refused:?}"
    );
    assert!(!marker.exists());
    let recorded = support::recorded_start(&change_step);
    operate
        .run_mutating(&change, &RunOptions::default(), &recorded.start)
        .await
        .expect("run");
    assert!(marker.exists());
    // Both connections went through the one pool.
    assert_eq!(operate.ssh().connects("node1"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalives_are_sent_on_an_idle_connection() {
    let c = Cluster::start_n(1);
    let mut o = c.options();
    o.keepalive_interval = Duration::from_millis(200);
    let pool = c.pool_with(o);
    pool.connect("node1").await.expect("connect");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let log = c.nodes[0].log_text();
    assert!(log.contains("keepalive@openssh.com"), "{log}");
    // Still the same connection afterwards.
    pool.exec("node1", "true", &opts()).await.expect("exec");
    assert_eq!(pool.connects("node1"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drop_during_a_command_is_reported_not_retried() {
    let mut c = Cluster::start_n(1);
    let pool = Arc::new(c.pool());
    pool.connect("node1").await.expect("connect");
    let p2 = pool.clone();
    let marker = c.dir.path().join("ran");
    let cmd = format!("echo x >> {}; sleep 20", marker.display());
    let task = tokio::spawn(async move { p2.exec("node1", &cmd, &opts()).await });
    // Drop the connection once the command is running on the node (its marker written),
    // not after a fixed wait: on a loaded machine 800 ms was once not enough to start it.
    let t0 = std::time::Instant::now();
    while !marker.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the command never started on the node"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.nodes[0].kill();
    let res = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the drop must end the command")
        .expect("join");
    match res {
        Err(SshError::Channel { msg, .. }) => assert!(msg.contains("dropped"), "{msg}"),
        other => panic!("expected a dropped-connection error, got {other:?}"),
    }
    // Sent once, never re-sent on a new connection.
    c.nodes[0].restart();
    pool.exec("node1", "true", &opts()).await.expect("exec");
    assert_eq!(std::fs::read_to_string(&marker).expect("marker"), "x\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hashed_known_hosts_written_by_ssh_keygen_are_honoured() {
    let c = Cluster::start_n(2);
    let kh = c.dir.path().join("hashed_known_hosts");
    std::fs::copy(&c.known_hosts, &kh).expect("copy");
    let st = std::process::Command::new("ssh-keygen")
        .arg("-H")
        .arg("-f")
        .arg(&kh)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("ssh-keygen -H");
    assert!(st.success());
    let text = std::fs::read_to_string(&kh).expect("read");
    assert!(text.lines().all(|l| l.starts_with("|1|")), "{text}");
    assert!(!text.contains("127.0.0.1"), "{text}");
    let pool = c.pool_with(SshOptions::with_known_hosts(vec![kh]));
    for n in &c.nodes {
        let out = pool.exec(&n.name, "echo ok", &opts()).await.expect("exec");
        assert_eq!(out.stdout, "ok\n");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssh_config_fills_in_what_the_inventory_leaves_unsaid() {
    use hk_effects::exec::settings::{ConnectSettings, SshConfig, SshDefaults};
    let c = Cluster::start();
    let n = &c.nodes[1];
    let cfg_path = c.dir.path().join("ssh_config");
    std::fs::write(
        &cfg_path,
        format!(
            "Host lab-node\n    HostName {}\n    Port {}\n    User {}\n    IdentityFile {}\n",
            n.addr,
            n.port,
            Cluster::user(),
            c.client_key.display()
        ),
    )
    .expect("write");
    let cfg = SshConfig::load(&cfg_path).expect("load");
    let s = ConnectSettings::resolve(
        "lab-node",
        &Default::default(),
        &cfg,
        &SshDefaults::from_env(),
    )
    .expect("resolve");
    assert_eq!((s.address.as_str(), s.port), (n.addr.as_str(), n.port));
    let pool = SshPool::new(c.options());
    pool.add_host(s);
    let out = pool
        .exec("lab-node", "echo via-ssh-config", &opts())
        .await
        .expect("exec");
    assert_eq!(out.stdout, "via-ssh-config\n");
    assert_eq!(c.nodes[1].accepted(), 1);
    assert_eq!(c.nodes[0].accepted() + c.nodes[2].accepted(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_probes_share_one_connection_per_host() {
    let c = Cluster::start();
    let pool = Arc::new(c.pool());
    let mut tasks = Vec::new();
    for i in 0..12 {
        let p = pool.clone();
        let host = c.nodes[i % 3].name.clone();
        tasks.push(tokio::spawn(async move {
            p.exec(&host, &format!("echo {i}"), &opts()).await
        }));
    }
    for (i, t) in tasks.into_iter().enumerate() {
        let out = t.await.expect("join").expect("exec");
        assert_eq!(out.stdout, format!("{i}\n"));
    }
    for n in &c.nodes {
        assert_eq!(pool.connects(&n.name), 1, "{}", n.name);
        assert_eq!(n.accepted(), 1, "{}", n.name);
    }
}
