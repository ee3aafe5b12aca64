//! The VIP probed while a mutating step runs on a server (issue 39): a TCP connect to
//! VIP:port several times a second, each probe's time and outcome kept, summed at the end
//! by `guard::outage` into how long the VIP did not answer.
//!
//! Must not: send anything on the connection (it is closed at once), or outlive its step
//! (it stops when [`VipWatch::finish`] is called or it is dropped).

use std::net::SocketAddr;
use std::time::Duration;

use hk_engine::guard::outage::{summarize, Probe, VipOutage};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How often the VIP is probed, and how long one connect may take before it counts as
/// unanswered (a dead holder drops SYNs rather than refusing them).
pub const EVERY: Duration = Duration::from_millis(200);

/// How long reading the Lease's holder may take once the step has ended.
pub const LEASE_READ_BOUND: Duration = Duration::from_secs(3);

/// What a mutating step on a server probes: its environment's `VIP:PORT`, and where the
/// VIP's Lease is read once the step ends (the kubeconfig and the Lease's name), or why it
/// cannot be.
#[derive(Debug, Clone)]
pub struct VipTarget {
    pub addr: SocketAddr,
    pub lease: Result<(crate::cluster::KubeTarget, crate::cluster::WatchSettings), String>,
}

impl VipTarget {
    /// `NAMESPACE/NAME` of the Lease, or `the VIP's Lease` where its name is unknown.
    pub fn lease_name(&self) -> String {
        match &self.lease {
            Ok((_, s)) => format!("{}/{}", s.namespace, s.lease_name),
            Err(_) => "of the VIP".into(),
        }
    }

    /// Who holds the Lease now (one GET, bounded by [`LEASE_READ_BOUND`]).
    pub async fn holder(&self) -> Result<Option<String>, String> {
        let (target, settings) = self.lease.as_ref().map_err(Clone::clone)?;
        let read = async {
            let client = crate::cluster::client(target)
                .await
                .map_err(|e| e.to_string())?;
            let api: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
                kube::Api::namespaced(client, &settings.namespace);
            let lease = api
                .get_opt(&settings.lease_name)
                .await
                .map_err(|e| crate::cluster::explain(&e))?;
            Ok(lease
                .and_then(|l| l.spec)
                .and_then(|s| s.holder_identity)
                .filter(|h| !h.is_empty()))
        };
        match tokio::time::timeout(LEASE_READ_BOUND, read).await {
            Ok(r) => r,
            Err(_) => Err(format!("no answer within {} s", LEASE_READ_BOUND.as_secs())),
        }
    }
}

/// A running prober.
pub struct VipWatch {
    vip: SocketAddr,
    stop: CancellationToken,
    task: JoinHandle<Vec<Probe>>,
}

impl VipWatch {
    /// Start probing `vip` every `every`.
    pub fn start(vip: SocketAddr, every: Duration) -> VipWatch {
        let stop = CancellationToken::new();
        let s = stop.clone();
        let task = tokio::spawn(async move {
            let mut probes = Vec::new();
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = s.cancelled() => break,
                    _ = tick.tick() => {}
                }
                let at = hk_engine::journal::now();
                let answered = matches!(
                    tokio::time::timeout(every, tokio::net::TcpStream::connect(vip)).await,
                    Ok(Ok(_))
                );
                probes.push(Probe { at, answered });
            }
            probes
        });
        VipWatch { vip, stop, task }
    }

    /// Stop, and sum what was seen.
    pub async fn finish(mut self) -> VipOutage {
        self.stop.cancel();
        let probes = (&mut self.task).await.unwrap_or_default();
        summarize(&self.vip.to_string(), &probes)
    }
}

impl Drop for VipWatch {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real listener on loopback: answered while it listens, refused once it is closed,
    /// answered again when it is back on the same port.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_outage_on_a_real_socket_is_measured() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let w = VipWatch::start(addr, Duration::from_millis(50));
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(l);
        tokio::time::sleep(Duration::from_millis(600)).await;
        let back = std::net::TcpListener::bind(addr).expect("the same port again");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let o = w.finish().await;
        drop(back);
        assert!(o.probes >= 15, "{o:?}");
        assert!(o.unanswered >= 8, "{o:?}");
        assert!(!o.down_at_end, "{o:?}");
        // The gap was 600 ms; probes every 50 ms see it to within a probe or two.
        assert!((450..=800).contains(&o.total_ms), "{o:?}");
        assert!(o.line().contains("did not answer for"), "{}", o.line());
    }
}
