//! Benchmark: 3 hosts x 10 read-only probes over reused russh connections, against OpenSSH
//! `ssh host cmd` once per probe, on the same three sshd nodes in the same run.
//!
//! `cargo bench --bench exec_probes` runs 5 rounds and prints the medians (the figures in
//! docs/perf.md). Under `cargo test` (no `--bench` argument) it runs one small round as a
//! smoke test, so the benchmark cannot rot.

use std::process::Stdio;
use std::time::{Duration, Instant};

use hk_console::exec::ssh::ExecOptions;
use hk_test_nodes::Cluster;

const PROBE: &str = "cat /proc/loadavg";

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

async fn russh_round(c: &Cluster, probes: usize) -> (Duration, Duration) {
    let pool = c.pool();
    let o = ExecOptions {
        timeout: Some(Duration::from_secs(30)),
        ..ExecOptions::default()
    };
    let t0 = Instant::now();
    let mut first_done = None;
    for i in 0..probes {
        for n in &c.nodes {
            let out = pool.exec(&n.name, PROBE, &o).await.expect("russh probe");
            assert_eq!(out.exit_status, Some(0));
        }
        if i == 0 {
            first_done = Some(t0.elapsed());
        }
    }
    let total = t0.elapsed();
    for n in &c.nodes {
        assert_eq!(pool.connects(&n.name), 1);
    }
    pool.close_all().await;
    // Total (connections included), and the steady state after the first probe per host.
    (total, total - first_done.unwrap_or_default())
}

fn openssh_round(c: &Cluster, probes: usize) -> Duration {
    let t0 = Instant::now();
    for _ in 0..probes {
        for (i, n) in c.nodes.iter().enumerate() {
            let st = c
                .openssh(i)
                .arg(PROBE)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("run ssh");
            assert!(st.success(), "ssh probe to {} failed", n.name);
        }
    }
    t0.elapsed()
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (rounds, probes) = if full { (5, 10) } else { (1, 1) };
    let c = Cluster::start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (mut ru, mut ru_steady, mut os) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (t, s) = rt.block_on(russh_round(&c, probes));
        ru.push(t);
        ru_steady.push(s);
        os.push(openssh_round(&c, probes));
    }
    let n = (probes * c.nodes.len()) as u32;
    let (ru, ru_steady, os) = (median(ru), median(ru_steady), median(os));
    println!(
        "exec_probes: {} hosts x {probes} probes (`{PROBE}`), median of {rounds} rounds",
        c.nodes.len()
    );
    println!(
        "  russh, one reused connection per host: total {ru:?} ({:?}/probe)",
        ru / n
    );
    if probes > 1 {
        let m = (probes - 1) as u32 * c.nodes.len() as u32;
        println!(
            "    steady state after connecting: {ru_steady:?} ({:?}/probe)",
            ru_steady / m
        );
    }
    println!(
        "  OpenSSH `ssh host cmd` per probe:      total {os:?} ({:?}/probe)",
        os / n
    );
    println!(
        "  ratio OpenSSH/russh (totals): {:.1}x",
        os.as_secs_f64() / ru.as_secs_f64()
    );
}
