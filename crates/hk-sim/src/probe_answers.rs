//! The simulated servers against the console's real etcd probe (`observe::etcd`): what the
//! probe's two commands read on a simulated node parses as the probe expects.

use hk_effects::observe::etcd::PSI_FILE;
use hk_engine::checks::live::{self, EtcdPolicy};

use crate::node::{Clock, NodeState, Psi};

/// The simulated servers answer the same two commands: their metrics parse, and a
/// starved disk shows in both the PSI and the WAL fsync tail.
#[test]
fn the_simulated_servers_answer_the_probe() {
    let mut calm = NodeState::new("k3s-prod-1", Clock::fixed(1_800_000_000_000));
    calm.etcd_leader = true;
    let m = live::parse_etcd_metrics(&calm.etcd_metrics()).expect("metrics");
    assert!(m.is_leader);
    assert_eq!(m.db_size_bytes, Some(25_165_824));
    let calm_p99 = m.wal_fsync_p99_ms.expect("p99");
    assert!(calm_p99 <= 10.0, "{calm_p99}");
    let psi = calm.read_file(PSI_FILE).expect("psi file");
    assert!(live::parse_psi(&psi).expect("psi").some_avg10 < 1.0);

    let mut starved = NodeState::new("k3s-prod-1", Clock::fixed(1_800_000_000_000));
    starved.io_pressure = Psi::stalled(11.36, 5.68);
    let m = live::parse_etcd_metrics(&starved.etcd_metrics()).expect("metrics");
    assert!(!m.is_leader);
    let p99 = m.wal_fsync_p99_ms.expect("p99");
    assert!(p99 > EtcdPolicy::default().fsync_critical_ms, "{p99}");
    let psi = live::parse_psi(&starved.read_file(PSI_FILE).expect("psi")).expect("psi");
    assert_eq!(psi.some_avg10, 11.36);
}
