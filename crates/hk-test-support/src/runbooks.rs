//! A fake inventory shaped like the sample homelab, for the planner tests.

use std::collections::BTreeMap;

use hk_engine::runbook::plan::{Blocker, PlanEnv, PlaybookUse, Topology};

#[derive(Default)]
pub struct FakeTopology {
    pub groups: BTreeMap<String, Vec<String>>,
    pub vars: BTreeMap<(String, String), serde_json::Value>,
    /// What `blockers` answers.
    pub blocked: Vec<Blocker>,
    /// Every `blockers` question asked: the playbooks and the hosts.
    pub asked: std::sync::Mutex<Vec<(Vec<PlaybookUse>, Vec<String>)>>,
}

impl FakeTopology {
    pub fn group(mut self, name: &str, hosts: &[&str]) -> Self {
        self.groups
            .insert(name.into(), hosts.iter().map(|h| h.to_string()).collect());
        self
    }

    pub fn var(mut self, host: &str, var: &str, value: serde_json::Value) -> Self {
        self.vars.insert((host.into(), var.into()), value);
        self
    }
}

impl Topology for FakeTopology {
    fn hosts_in(&self, group: &str) -> Option<Vec<String>> {
        self.groups.get(group).cloned()
    }
    fn is_member(&self, host: &str, group: &str) -> bool {
        self.groups
            .get(group)
            .is_some_and(|g| g.iter().any(|h| h == host))
    }
    fn host_var(&self, host: &str, var: &str) -> Option<serde_json::Value> {
        self.vars.get(&(host.to_string(), var.to_string())).cloned()
    }
    fn blockers(&self, uses: &[PlaybookUse], hosts: &[String]) -> Vec<Blocker> {
        if let Ok(mut a) = self.asked.lock() {
            a.push((uses.to_vec(), hosts.to_vec()));
        }
        self.blocked.clone()
    }
}

/// The sample homelab's groups (children flattened, inventory order).
pub fn homelab() -> FakeTopology {
    let mut t = FakeTopology::default()
        .group("k3s_primary", &["k3s-dev-1"])
        .group("k3s_secondary", &["k3s-dev-2", "k3s-dev-3"])
        .group("k3s_servers", &["k3s-dev-1", "k3s-dev-2", "k3s-dev-3"])
        .group("vpn_egress_gateway", &["k3s-dev-3"])
        .group("k3s_prod_primary", &["k3s-prod-1"])
        .group("k3s_prod_secondary", &["k3s-prod-2", "k3s-prod-3"])
        .group("k3s_prod", &["k3s-prod-1", "k3s-prod-2", "k3s-prod-3"])
        .group("vpn_egress_gateway_prod", &["k3s-prod-3"]);
    // As group_vars/all.yml of the sample sets it, for every host.
    for h in [
        "k3s-dev-1",
        "k3s-dev-2",
        "k3s-dev-3",
        "k3s-prod-1",
        "k3s-prod-2",
        "k3s-prod-3",
    ] {
        t = t.var(h, "memattr_survey_required_group", "k3s_prod".into());
        t = t.var(h, "k3s_data_dir", "/var/lib/rancher/k3s".into());
    }
    // As group_vars/k3s_prod/vars.yml sets them (etcd-io-priority reads them back).
    for h in ["k3s-prod-1", "k3s-prod-2", "k3s-prod-3"] {
        t = t.var(h, "etcd_io_priority_nr_requests", 32.into());
        t = t.var(h, "etcd_io_priority_io_weight", 10000.into());
    }
    t
}

pub fn prod() -> PlanEnv {
    PlanEnv {
        name: "prod".into(),
        servers: "k3s_prod".into(),
        vpn_gateways: Some("vpn_egress_gateway_prod".into()),
        agents: None,
        primary_group: "k3s_prod_primary".into(),
        secondary_group: Some("k3s_prod_secondary".into()),
        vip: "192.168.2.9".into(),
        api_port: 6443,
        operator_present: false,
        // As the sample's hk-console.yaml marks it.
        protected: true,
        inventories: vec!["inventory/hosts.ini".into()],
        ansible_dir: "infra/ansible".into(),
        kubeconfig: Some(".cache/prod.kubeconfig".into()),
        host: None,
        names: seed_names(),
    }
}

pub fn dev() -> PlanEnv {
    PlanEnv {
        name: "dev".into(),
        servers: "k3s_servers".into(),
        vpn_gateways: Some("vpn_egress_gateway".into()),
        agents: None,
        primary_group: "k3s_primary".into(),
        secondary_group: Some("k3s_secondary".into()),
        vip: "192.168.1.49".into(),
        api_port: 6443,
        operator_present: true,
        protected: false,
        inventories: vec!["inventory/hosts.ini".into()],
        ansible_dir: "infra/ansible".into(),
        kubeconfig: Some(".cache/dev.kubeconfig".into()),
        host: None,
        names: seed_names(),
    }
}

/// The seed repo's names of the live objects (hk-console.yaml `names:` defaults).
pub fn seed_names() -> hk_engine::runbook::plan::PlanNames {
    use hk_engine::repo::config as c;
    hk_engine::runbook::plan::PlanNames {
        kube_vip_lease: Some(c::DEFAULT_KUBE_VIP_LEASE.into()),
        vpn_unit: Some(c::DEFAULT_VPN_UNIT.into()),
        vpn_interface: Some(c::DEFAULT_VPN_INTERFACE.into()),
        vpn_exit_ip_url: Some(c::DEFAULT_VPN_EXIT_IP_URL.into()),
        unresolved: Default::default(),
    }
}
