//! Live updates for the console tests, judged by the real rules of `checks::live` from the
//! inputs a watcher or the VPN look would hand them (a Lease, cilium-agent pods, the
//! DaemonSet, Nodes, a gateway's systemd state, exit probes and journal). Nothing here makes
//! a verdict by hand: the states are the rules' answers to these inputs.
//!
//! States: healthy, the 2026-09-06 incident (every prod agent dials k3s-prod-1's own address),
//! a rollout stuck on an unready updated pod, the 2026-09-12 eviction loop (dev and prod
//! gateways on one PIA server with one tunnel address), and could-not-look.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::IpAddr;

use hk_effects::observe::feed::{Feed, Update, VpnLook, ALL_ENVS};
use hk_engine::checks::live::*;

/// kube-vip's default control-plane Lease.
pub const LEASE: &str = "plndr-cp-lock";
pub const GOOD_PIA: &str = "158.173.241.135:1198";
pub const BAD_PIA: &str = "158.173.241.112:1198";

fn ip(s: &str) -> IpAddr {
    s.parse().expect("fixture address")
}

/// The environment's VIP, port and servers, as the inventory gives them.
pub fn topo(env: &str) -> EnvTopology {
    let (vip, net) = match env {
        "prod" => ("192.168.2.9", "192.168.2"),
        _ => ("192.168.1.49", "192.168.1"),
    };
    let first = if env == "prod" { 10 } else { 50 };
    EnvTopology {
        env: env.into(),
        vip: ip(vip),
        api_port: 6443,
        agents: Vec::new(),
        servers: (1..=3)
            .map(|i| Server {
                name: format!("k3s-{env}-{i}"),
                address: ip(&format!("{net}.{}", first + i - 1)),
            })
            .collect(),
    }
}

fn update(env: &str, at: Timestamp, feed: Feed) -> Update {
    Update {
        env: env.into(),
        at,
        feed,
    }
}

// ------------------------------------------------------------------------------------------
// VIP lease

pub fn vip_input(holder: &str, at: Timestamp) -> VipLeaseInput {
    VipLeaseInput {
        lease: Look::seen(Some(LeaseObs {
            name: LEASE.into(),
            holder_identity: Some(holder.into()),
            renew_time: Some(Timestamp(at.0 - 2_000)),
            lease_duration_seconds: Some(15),
            lease_transitions: Some(4),
        })),
        probe: Look::seen(TcpProbe::Connected { latency_ms: 3 }),
        now: at,
    }
}

pub fn vip(env: &str, at: Timestamp) -> Update {
    let holder = format!("k3s-{env}-2");
    update(
        env,
        at,
        Feed::Vip(vip_lease(&topo(env), &vip_input(&holder, at))),
    )
}

/// The holder stopped renewing 45 s ago, three times the lease duration, and the VIP still
/// answers (a former holder's ARP): stale, a warning.
pub fn vip_stale_renew(at: Timestamp) -> Update {
    let mut input = vip_input("k3s-prod-1", at);
    if let Look::Seen {
        value: Some(lease), ..
    } = &mut input.lease
    {
        lease.renew_time = Some(Timestamp(at.0 - 45_000));
    }
    update("prod", at, Feed::Vip(vip_lease(&topo("prod"), &input)))
}

// ------------------------------------------------------------------------------------------
// Agents and the rollout

fn literal(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        source: EnvSource::Literal {
            value: value.into(),
        },
    }
}

/// One cilium-agent per server, each with `host` as KUBERNETES_SERVICE_HOST.
pub fn agent_pods(env: &str, host: &str) -> Vec<AgentPod> {
    let ids = ["4xk2p", "9fzq7", "b7lmd"];
    topo(env)
        .servers
        .iter()
        .zip(ids)
        .map(|(s, id)| AgentPod {
            name: format!("cilium-{id}"),
            node: Some(s.name.clone()),
            phase: "Running".into(),
            ready: true,
            env: vec![
                literal(SERVICE_HOST_VAR, host),
                literal(SERVICE_PORT_VAR, "6443"),
            ],
            env_from: Vec::new(),
        })
        .collect()
}

pub fn agents(env: &str, at: Timestamp) -> Update {
    let t = topo(env);
    let pods = agent_pods(env, &t.vip.to_string());
    update(
        env,
        at,
        Feed::Agents(agent_env(&t, &Look::seen(pods), &BTreeMap::new())),
    )
}

/// 2026-09-06: every prod agent carries KUBERNETES_SERVICE_HOST=192.168.2.10, k3s-prod-1's
/// own address, while the VIP .9 is live.
pub fn agents_on_node_ip(at: Timestamp) -> Update {
    let t = topo("prod");
    let pods = agent_pods("prod", "192.168.2.10");
    update(
        "prod",
        at,
        Feed::Agents(agent_env(&t, &Look::seen(pods), &BTreeMap::new())),
    )
}

fn ds(updated: u32, ready: u32, unavailable: u32) -> DaemonSetStatus {
    DaemonSetStatus {
        name: "cilium".into(),
        generation: 7,
        observed_generation: 7,
        desired: 3,
        updated,
        ready,
        available: ready,
        unavailable,
    }
}

fn rollout_pods(env: &str, not_ready: Option<(usize, Timestamp)>) -> Vec<RolloutPod> {
    let ids = ["4xk2p", "9fzq7", "b7lmd"];
    topo(env)
        .servers
        .iter()
        .zip(ids)
        .enumerate()
        .map(|(i, (s, id))| {
            let down = not_ready.filter(|(n, _)| *n == i);
            RolloutPod {
                name: format!("cilium-{id}"),
                node: Some(s.name.clone()),
                // Node by node: those before the stuck one are updated, after it not yet.
                updated: not_ready.is_none_or(|(n, _)| i <= n),
                ready: down.is_none(),
                not_ready_since: down.map(|(_, since)| since),
            }
        })
        .collect()
}

/// Five minutes not ready and the rollout counts as stuck.
pub const STUCK_AFTER_MS: u64 = 5 * 60 * 1000;

pub fn rollout_done(env: &str, at: Timestamp) -> Update {
    update(
        env,
        at,
        Feed::Rollout(rollout(
            env,
            &Look::seen(Some(ds(3, 3, 0))),
            &rollout_pods(env, None),
            at,
            STUCK_AFTER_MS,
        )),
    )
}

/// The DaemonSet updated k3s-prod-1, then k3s-prod-2's new pod never became ready (12
/// minutes): the rollout will not pass it, k3s-prod-3 still runs the old template.
pub fn rollout_stuck(at: Timestamp) -> Update {
    let since = Timestamp(at.0 - 12 * 60 * 1000);
    update(
        "prod",
        at,
        Feed::Rollout(rollout(
            "prod",
            &Look::seen(Some(ds(2, 2, 1))),
            &rollout_pods("prod", Some((1, since))),
            at,
            STUCK_AFTER_MS,
        )),
    )
}

// ------------------------------------------------------------------------------------------
// Nodes

pub fn node_obs(env: &str) -> Vec<NodeObs> {
    topo(env)
        .servers
        .iter()
        .map(|s| NodeObs {
            name: s.name.clone(),
            ready: Some(ConditionStatus::True),
            labels: [
                "node-role.kubernetes.io/control-plane",
                "node-role.kubernetes.io/etcd",
                "node-role.kubernetes.io/master",
            ]
            .iter()
            .map(|k| (k.to_string(), "true".to_string()))
            .collect(),
            addresses: vec![s.address],
        })
        .collect()
}

/// k3s-prod-2's kubelet stopped posting status.
pub fn nodes_one_not_ready(at: Timestamp) -> Update {
    let mut obs = node_obs("prod");
    obs[1].ready = Some(ConditionStatus::Unknown);
    update(
        "prod",
        at,
        Feed::Nodes(nodes(&topo("prod"), &Look::seen(obs))),
    )
}

pub fn nodes_update(env: &str, at: Timestamp) -> Update {
    update(
        env,
        at,
        Feed::Nodes(nodes(&topo(env), &Look::seen(node_obs(env)))),
    )
}

// ------------------------------------------------------------------------------------------
// VPN egress

/// One tunnel (re)connect as OpenVPN logs it, `journalctl -o short-iso-precise` style.
fn connect_lines(host: &str, at: Timestamp, server: &str, addr: &str) -> Vec<String> {
    let ts = at.to_string();
    vec![
        format!("{ts} {host} openvpn[812]: [Server-10779-2a] Peer Connection Initiated with [AF_INET]{server}"),
        format!("{ts} {host} openvpn[812]: PUSH: Received control message: 'PUSH_REPLY,route-gateway 10.72.192.1,topology subnet,ifconfig {addr} 255.255.192.0,peer-id 0'"),
        format!("{ts} {host} openvpn[812]: Initialization Sequence Completed"),
    ]
}

fn gateway_obs(env: &str, host: &str, tunnel_exit: &str, journal: Vec<String>) -> GatewayObs {
    GatewayObs {
        env: env.into(),
        host: host.into(),
        service: "vpn-egress-tunnel.service".into(),
        interface: "tun0".into(),
        active_state: Look::seen("active".into()),
        tunnel_exit: Look::seen(Ok(ip(tunnel_exit))),
        direct_exit: Look::seen(Ok(ip("203.0.113.7"))),
        journal: Look::seen(journal),
    }
}

fn vpn_update(at: Timestamp, gateways: Vec<GatewayPane>) -> Update {
    let across = vpn_across(&gateways);
    update(ALL_ENVS, at, Feed::Vpn(VpnLook { gateways, across }))
}

/// dev on one PIA server, prod on another (the fix of 2026-09-12): one connect each, long
/// ago enough to be calm.
pub fn vpn_healthy(at: Timestamp) -> Update {
    let policy = VpnPolicy::default();
    let since = Timestamp(at.0 - 20 * 60 * 1000);
    let dev = gateway_obs(
        "dev",
        "k3s-dev-3",
        "158.173.241.20",
        connect_lines("k3s-dev-3", since, BAD_PIA, "10.72.192.7"),
    );
    let prod = gateway_obs(
        "prod",
        "k3s-prod-3",
        "158.173.241.41",
        connect_lines("k3s-prod-3", since, GOOD_PIA, "10.72.192.7"),
    );
    vpn_update(
        at,
        vec![
            vpn_gateway(&dev, at, &policy),
            vpn_gateway(&prod, at, &policy),
        ],
    )
}

/// 2026-09-12: both gateways on one PIA server, handed one tunnel address; each reconnect
/// steals it from the other, so each restarts every ~2 minutes, a minute apart.
pub fn vpn_eviction_loop(at: Timestamp) -> Update {
    let policy = VpnPolicy::default();
    let journal = |host: &str, first_ago_ms: u64| -> Vec<String> {
        (0..4)
            .flat_map(|i| {
                let t = Timestamp(at.0 - first_ago_ms + i * 120_000);
                connect_lines(host, t, BAD_PIA, "10.72.192.7")
            })
            .collect()
    };
    let dev = gateway_obs(
        "dev",
        "k3s-dev-3",
        "158.173.241.20",
        journal("k3s-dev-3", 500_000),
    );
    let prod = gateway_obs(
        "prod",
        "k3s-prod-3",
        "158.173.241.20",
        journal("k3s-prod-3", 440_000),
    );
    vpn_update(
        at,
        vec![
            vpn_gateway(&dev, at, &policy),
            vpn_gateway(&prod, at, &policy),
        ],
    )
}

/// prod's tunnel is up but traffic leaves from the home ISP's address.
pub fn vpn_leak(at: Timestamp) -> Update {
    let policy = VpnPolicy::default();
    let since = Timestamp(at.0 - 20 * 60 * 1000);
    let prod = gateway_obs(
        "prod",
        "k3s-prod-3",
        "203.0.113.7",
        connect_lines("k3s-prod-3", since, GOOD_PIA, "10.72.192.9"),
    );
    vpn_update(at, vec![vpn_gateway(&prod, at, &policy)])
}

// ------------------------------------------------------------------------------------------
// Whole states

/// Every kube pane of `env`, healthy.
pub fn healthy(env: &str, at: Timestamp) -> Vec<Update> {
    vec![
        vip(env, at),
        agents(env, at),
        rollout_done(env, at),
        nodes_update(env, at),
    ]
}

pub const API_DOWN: &str = "GET https://192.168.2.9:6443/api/v1/nodes: connect: connection refused";

/// Nothing could be read: the API server refuses, the VIP probe cannot run, SSH to the
/// gateways is refused.
pub fn could_not_look(at: Timestamp) -> Vec<Update> {
    let t = topo("prod");
    let policy = VpnPolicy::default();
    let gw = |env: &str, host: &str| GatewayObs {
        env: env.into(),
        host: host.into(),
        service: "vpn-egress-tunnel.service".into(),
        interface: "tun0".into(),
        active_state: Look::could_not(format!("ssh {host}: connection refused")),
        tunnel_exit: Look::could_not(format!("ssh {host}: connection refused")),
        direct_exit: Look::could_not(format!("ssh {host}: connection refused")),
        journal: Look::could_not(format!("ssh {host}: connection refused")),
    };
    vec![
        update(
            "prod",
            at,
            Feed::Vip(vip_lease(
                &t,
                &VipLeaseInput {
                    lease: Look::could_not(API_DOWN),
                    probe: Look::seen(TcpProbe::Failed {
                        error: "connection refused".into(),
                    }),
                    now: at,
                },
            )),
        ),
        update(
            "prod",
            at,
            Feed::Agents(agent_env(&t, &Look::could_not(API_DOWN), &BTreeMap::new())),
        ),
        update(
            "prod",
            at,
            Feed::Rollout(rollout(
                "prod",
                &Look::could_not(API_DOWN),
                &[],
                at,
                STUCK_AFTER_MS,
            )),
        ),
        update(
            "prod",
            at,
            Feed::Nodes(nodes(&t, &Look::could_not(API_DOWN))),
        ),
        vpn_update(
            at,
            vec![
                vpn_gateway(&gw("dev", "k3s-dev-3"), at, &policy),
                vpn_gateway(&gw("prod", "k3s-prod-3"), at, &policy),
            ],
        ),
    ]
}

// ------------------------------------------------------------------------------------------
// etcd

/// One member's metrics as k3s serves them (leader or follower, calm disk).
fn etcd_member(host: &str, address: IpAddr, leader: bool) -> EtcdMemberObs {
    let text = format!(
        "etcd_server_is_leader {}\netcd_server_has_leader 1\n\
         etcd_mvcc_db_total_size_in_bytes 25165824\netcd_server_quota_backend_bytes 2147483648\n\
         etcd_disk_wal_fsync_duration_seconds_bucket{{le=\"0.002\"}} 100\n\
         etcd_disk_wal_fsync_duration_seconds_bucket{{le=\"+Inf\"}} 100\n\
         etcd_disk_wal_fsync_duration_seconds_count 100\n",
        u8::from(leader)
    );
    EtcdMemberObs {
        host: host.into(),
        address: address.to_string(),
        metrics: Look::seen(parse_etcd_metrics(&text).expect("fixture metrics")),
        io_pressure: Look::seen(IoPressure {
            some_avg10: 0.1,
            some_avg60: 0.1,
            full_avg10: None,
        }),
    }
}

/// What each server's member answers on etcd's client API when all of `servers` are
/// members, agree, and follow `leader`'s: member i+1 on server i, no alarm, quorum reads
/// answered.
pub fn etcd_client(servers: &[&str], leader: &str) -> Vec<EtcdClientObs> {
    let id = |h: &str| servers.iter().position(|s| *s == h).map(|i| i as u64 + 1);
    let list = EtcdMemberList {
        cluster_id: 7,
        answered_by: 1,
        members: servers
            .iter()
            .map(|s| EtcdMemberInfo {
                id: id(s).unwrap_or(0),
                name: format!("{s}-0a1b2c3d"),
                peer_urls: vec![format!("https://{s}:2380")],
                client_urls: vec![format!("https://{s}:2379")],
                learner: false,
            })
            .collect(),
    };
    servers
        .iter()
        .map(|s| EtcdClientObs {
            host: s.to_string(),
            members: Look::seen(list.clone()),
            status: Look::seen(EtcdStatus {
                member_id: id(s).unwrap_or(0),
                leader: id(leader),
                raft_term: 2,
                raft_index: 1_000,
                applied_index: 1_000,
                db_size: 25_165_824,
                db_size_in_use: None,
                learner: false,
                errors: vec![],
                version: "3.6.4".into(),
            }),
            alarms: Look::seen(vec![]),
            quorum_read: Look::seen(()),
            leader_changes: None,
        })
        .collect()
}

/// prod after `holder-dies` twice: k3s-prod-1 and k3s-prod-2 NotReady, `/readyz/etcd`
/// through the VIP 500 (the simulated server's words), k3s-prod-1's last metrics still
/// saying it leads, the lease on k3s-prod-2 not yet expired, no rollout running. The nodes,
/// VIP, rollout and etcd panes (quorum judged), at `at`.
pub fn etcd_no_quorum(at: Timestamp) -> Vec<Update> {
    let t = topo("prod");
    let mut obs = node_obs("prod");
    obs[0].ready = Some(ConditionStatus::Unknown);
    obs[1].ready = Some(ConditionStatus::False);
    let members: Vec<EtcdMemberObs> = t
        .servers
        .iter()
        .enumerate()
        .map(|(i, s)| etcd_member(&s.name, s.address, i == 0))
        .collect();
    let mut pane = etcd("prod", &members, &EtcdPolicy::default());
    judge_quorum(
        &mut pane,
        &EtcdApiObs {
            readyz: Look::seen(EtcdReady::Failed {
                detail: "500 internal server error: etcd: context deadline exceeded".into(),
            }),
            servers_ready: Look::seen(obs.iter().map(|n| (n.name.clone(), n.ready)).collect()),
        },
    );
    let nodes_pane = nodes(&t, &Look::seen(obs));
    // The lease moved to k3s-prod-2 before it died: still fresh, its node NotReady.
    let mut vip = vip_lease(&t, &vip_input("k3s-prod-2", at));
    vip.verdicts.extend(holder_ready(&vip, &nodes_pane));
    // No rollout: every pod on the current template, the dead servers' agents unready.
    let mut pods = rollout_pods("prod", None);
    for p in pods.iter_mut().take(2) {
        p.ready = false;
        p.not_ready_since = Some(Timestamp(at.0 - 10_000));
    }
    let ro = rollout(
        "prod",
        &Look::seen(Some(ds(3, 1, 2))),
        &pods,
        at,
        STUCK_AFTER_MS,
    );
    vec![
        update("prod", at, Feed::Nodes(nodes_pane)),
        update("prod", at, Feed::Vip(vip)),
        update("prod", at, Feed::Rollout(ro)),
        update("prod", at, Feed::Etcd(pane)),
    ]
}

/// prod's VIP lease held by `holder`, etcd led by `leader` (calm disks, quorum judged with
/// `not_ready` NotReady), and its nodes (`not_ready` NotReady), at `at`: what the gates'
/// live blast radius reads.
pub fn prod_cluster(holder: &str, leader: &str, not_ready: &[&str], at: Timestamp) -> Vec<Update> {
    prod_cluster_with(holder, leader, not_ready, at, false)
}

/// [`prod_cluster`] with, when `learner`, an unstarted learner in etcd's membership (a
/// server join that stopped half way): only etcd's own member list shows it.
pub fn prod_cluster_with(
    holder: &str,
    leader: &str,
    not_ready: &[&str],
    at: Timestamp,
    learner: bool,
) -> Vec<Update> {
    let t = topo("prod");
    let mut obs = node_obs("prod");
    for n in obs.iter_mut() {
        if not_ready.contains(&n.name.as_str()) {
            n.ready = Some(ConditionStatus::False);
        }
    }
    let members: Vec<EtcdMemberObs> = t
        .servers
        .iter()
        .map(|s| etcd_member(&s.name, s.address, s.name == leader))
        .collect();
    let mut pane = etcd("prod", &members, &EtcdPolicy::default());
    let names: Vec<&str> = t.servers.iter().map(|s| s.name.as_str()).collect();
    let mut client = etcd_client(&names, leader);
    if learner {
        for c in client.iter_mut() {
            if let Look::Seen { value } = &mut c.members {
                value.members.push(EtcdMemberInfo {
                    id: 99,
                    name: String::new(),
                    peer_urls: vec!["https://192.0.2.250:2380".into()],
                    client_urls: vec![],
                    learner: true,
                });
            }
        }
    }
    judge_members(
        &mut pane,
        &client,
        &PreflightPolicy::default(),
        &BTreeMap::new(),
    );
    judge_quorum(
        &mut pane,
        &EtcdApiObs {
            readyz: Look::seen(EtcdReady::Ok),
            servers_ready: Look::seen(obs.iter().map(|n| (n.name.clone(), n.ready)).collect()),
        },
    );
    vec![
        update("prod", at, Feed::Vip(vip_lease(&t, &vip_input(holder, at)))),
        update("prod", at, Feed::Nodes(nodes(&t, &Look::seen(obs)))),
        update("prod", at, Feed::Etcd(pane)),
    ]
}
