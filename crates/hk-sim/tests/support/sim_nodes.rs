//! Simulated SSH nodes (`sim::ssh::SimNode`) for the tests that reach them with real
//! clients (hk-console's pool, OpenSSH, Ansible): started on loopback addresses the caller
//! picks, each accepting one fresh client key, with a known_hosts naming exactly them; and
//! the Ansible INI inventory that logs in to them with that key and that known_hosts.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use hk_sim::node::NodeState;
use hk_sim::ssh::{parse_authorized_keys, SimNode, SimNodeSpec};
use hk_sim::userland::{Sandbox, Userland};

use super::keygen;

pub struct SimNodes {
    pub dir: tempfile::TempDir,
    pub nodes: Vec<SimNode>,
    /// The client key every node accepts (no passphrase).
    pub key: PathBuf,
    pub known_hosts: PathBuf,
}

impl SimNodes {
    /// One node per name, at `address(i)` (port chosen by the OS), its state `state(name)`;
    /// the files live in a temp dir named with `prefix`.
    pub async fn start(
        prefix: &str,
        names: &[&str],
        address: impl Fn(usize) -> IpAddr,
        state: impl Fn(&str) -> NodeState,
    ) -> SimNodes {
        Self::start_with(prefix, names, address, state, None).await
    }

    /// [`SimNodes::start`] with each node's commands in its real userland (`sandbox`), its
    /// root under `dir/nodes/NAME`.
    pub async fn start_with(
        prefix: &str,
        names: &[&str],
        address: impl Fn(usize) -> IpAddr,
        state: impl Fn(&str) -> NodeState,
        sandbox: Option<Sandbox>,
    ) -> SimNodes {
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir()
            .expect("tempdir");
        let key = dir.path().join("id_ed25519");
        keygen(&key, "");
        let pubkey = std::fs::read_to_string(key.with_extension("pub")).expect("pub");
        let authorized = parse_authorized_keys(&pubkey, "id_ed25519.pub").expect("key");
        let mut nodes = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let state = Arc::new(Mutex::new(state(name)));
            let userland = match &sandbox {
                Some(s) => Some(
                    Userland::create(
                        s.clone(),
                        &dir.path().join("nodes").join(name),
                        name,
                        address(i),
                        state.clone(),
                    )
                    .await
                    .expect("node userland"),
                ),
                None => None,
            };
            let node = SimNode::start(SimNodeSpec {
                name: name.to_string(),
                address: address(i),
                port: 0,
                authorized_keys: authorized.clone(),
                state,
                host_key: None,
                userland,
            })
            .await
            .expect("start sim node");
            nodes.push(node);
        }
        let known_hosts = dir.path().join("known_hosts");
        let lines: Vec<String> = nodes
            .iter()
            .map(|n| n.known_hosts_line().expect("line"))
            .collect();
        std::fs::write(&known_hosts, lines.join("\n") + "\n").expect("known_hosts");
        SimNodes {
            dir,
            nodes,
            key,
            known_hosts,
        }
    }
}

/// An INI inventory of `nodes` in group `sim`, for Ansible's ssh connection plugin: user
/// `ops`, `key` only, strict host keys against `known_hosts`.
pub fn ansible_inventory(nodes: &[SimNode], key: &Path, known_hosts: &Path) -> String {
    let mut inv = String::from("[sim]\n");
    for n in nodes {
        inv.push_str(&format!(
            "{} ansible_host={} ansible_port={}\n",
            n.name(),
            n.addr().ip(),
            n.addr().port()
        ));
    }
    inv.push_str(&format!(
        "\n[sim:vars]\nansible_user=ops\nansible_ssh_private_key_file={key}\n\
         ansible_ssh_common_args='-F /dev/null -o UserKnownHostsFile={kh} -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes'\n",
        key = key.display(),
        kh = known_hosts.display(),
    ));
    inv
}
