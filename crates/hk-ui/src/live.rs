//! The live state the console shows: the latest judged pane per (environment, kind).
//!
//! Owns: [`LiveState`] (what the live sources last sent, as [`Update`]s from
//! `observe::feed`), when a look counts as stale, and the read-only questions the strip and
//! the Live screen ask of it ([`LiveState::shown`], [`EnvVpn`], [`has_rule`], ...).
//! Must not: judge anything (every verdict arrives with its pane, from `checks::live`), draw,
//! or read the clock (ages are taken against the `now` it is given).

use std::collections::BTreeMap;

use hk_effects::observe::feed::{Feed, Update, VpnLook, ALL_ENVS};
use hk_engine::checks::live::{GatewayPane, Rule, Severity, Verdict};
use hk_engine::guard::blast;
use hk_engine::runbook::machine::Timestamp;

/// What a source sends: the four kube kinds come from one watcher task per environment, the
/// VPN look from a poller across environments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LiveKind {
    Vip,
    Agents,
    Rollout,
    Nodes,
    Vpn,
    Etcd,
}

/// A kube pane is stale when its environment's API server has confirmed nothing for this
/// long. Every update carries when the server last answered (the watcher's heartbeat reads
/// `/version` every 3 s), and an unchanged pane holds as of the watcher's latest update of
/// any kind; so a frozen server's panes turn stale within this (+ one heartbeat), under the
/// 15 s issue 26 asks, while a quiet but answering one's never do.
pub const STALE_AFTER_MS: u64 = 12_000;
/// The VPN and etcd looks are polled over SSH (every look is sent, changed or not): stale
/// when the latest look is older than one refresh budget (the poll period and the look's
/// own bound, `observe::sources::SSH_REFRESH_BUDGET`): a frozen homelab's VPN and etcd turn
/// `?` with their age as soon as a look that answers would have arrived.
pub const VPN_STALE_AFTER_MS: u64 =
    hk_effects::observe::sources::SSH_REFRESH_BUDGET.as_secs() * 1000;

impl LiveKind {
    pub const ALL: [LiveKind; 6] = [
        LiveKind::Vip,
        LiveKind::Agents,
        LiveKind::Rollout,
        LiveKind::Nodes,
        LiveKind::Vpn,
        LiveKind::Etcd,
    ];

    pub fn of(feed: &Feed) -> LiveKind {
        match feed {
            Feed::Vip(_) => LiveKind::Vip,
            Feed::Agents(_) => LiveKind::Agents,
            Feed::Rollout(_) => LiveKind::Rollout,
            Feed::Nodes(_) => LiveKind::Nodes,
            Feed::Vpn(_) => LiveKind::Vpn,
            Feed::Etcd(_) => LiveKind::Etcd,
        }
    }

    /// The kinds one environment's kube watcher sends.
    pub fn is_kube(self) -> bool {
        !matches!(self, LiveKind::Vpn | LiveKind::Etcd)
    }

    pub fn stale_after_ms(self) -> u64 {
        match self {
            // Both polled over SSH, every look sent.
            LiveKind::Vpn | LiveKind::Etcd => VPN_STALE_AFTER_MS,
            _ => STALE_AFTER_MS,
        }
    }
}

/// The last update of one (environment, kind), and the last one that could see everything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveEntry {
    pub latest: Update,
    /// The newest update without a could-not-look verdict, kept so a source that loses sight
    /// still shows what it last saw (and how long ago).
    pub last_good: Option<Update>,
}

/// Every pane's last update, by (environment as sent, kind).
#[derive(Debug, Clone, Default)]
pub struct LiveState {
    entries: BTreeMap<(String, LiveKind), LiveEntry>,
    /// When a run of this console changed what a kind shows (etcd's leadership moved):
    /// a look from before it is stale until the next one arrives.
    superseded: BTreeMap<(String, LiveKind), Timestamp>,
}

/// Whether any verdict is a could-not-look.
pub fn could_not_look(verdicts: &[Verdict]) -> bool {
    verdicts.iter().any(|v| v.rule == Rule::CouldNotLook)
}

/// Whether some verdict came from `rule` (a pane part was seen when its rule spoke).
pub fn has_rule(verdicts: &[Verdict], rule: Rule) -> bool {
    verdicts.iter().any(|v| v.rule == rule)
}

/// The could-not-look messages (each once, in order), for saying why a part is missing.
pub fn blind_reasons(verdicts: &[Verdict]) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for v in verdicts.iter().filter(|v| v.rule == Rule::CouldNotLook) {
        if !out.contains(&v.message.as_str()) {
            out.push(&v.message);
        }
    }
    out
}

/// The worst severity of some verdicts; `None` for none at all.
pub fn worst_of<'a>(verdicts: impl IntoIterator<Item = &'a Verdict>) -> Option<Severity> {
    verdicts
        .into_iter()
        .map(|v| v.severity)
        .reduce(Severity::worst)
}

impl LiveState {
    /// Keep `u` as the latest of its (environment, kind), unless what is held was seen later
    /// (an out-of-order message changes nothing). Returns whether it was kept.
    pub fn apply(&mut self, u: Update) -> bool {
        let key = (u.env.clone(), LiveKind::of(&u.feed));
        let good = !could_not_look(&u.feed.verdicts());
        match self.entries.get_mut(&key) {
            Some(e) if e.latest.at > u.at => false,
            Some(e) => {
                if good {
                    e.last_good = Some(u.clone());
                }
                e.latest = u;
                true
            }
            None => {
                let last_good = good.then(|| u.clone());
                self.entries.insert(
                    key,
                    LiveEntry {
                        latest: u,
                        last_good,
                    },
                );
                true
            }
        }
    }

    pub fn entry(&self, env: &str, kind: LiveKind) -> Option<&LiveEntry> {
        self.entries.get(&(env.to_string(), kind))
    }

    /// How many (environment, kind) entries are held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The VPN look that covers `env`: the newer of the all-environment look and one sent
    /// for `env` alone.
    pub fn vpn_entry(&self, env: &str) -> Option<&LiveEntry> {
        [
            self.entry(ALL_ENVS, LiveKind::Vpn),
            self.entry(env, LiveKind::Vpn),
        ]
        .into_iter()
        .flatten()
        .max_by_key(|e| e.latest.at)
    }

    /// When `env`'s kube watcher last said anything (its newest update of any kube kind).
    pub fn heard(&self, env: &str) -> Option<Timestamp> {
        LiveKind::ALL
            .iter()
            .filter(|k| k.is_kube())
            .filter_map(|k| self.entry(env, *k))
            .map(|e| e.latest.at)
            .max()
    }

    /// What the panes show of `kind` for `env` at `now`.
    /// What `kind` of `env` shows was changed at `at` by this console's own step (etcd's
    /// leadership moved): every look taken before it is stale from now on, never shown as
    /// what is true now, until a look after it arrives.
    pub fn supersede(&mut self, env: &str, kind: LiveKind, at: Timestamp) {
        self.superseded.insert((env.to_string(), kind), at);
    }

    pub fn shown(&self, env: &str, kind: LiveKind, now: Timestamp) -> Shown<'_> {
        let entry = match kind {
            LiveKind::Vpn => self.vpn_entry(env),
            k => self.entry(env, k),
        };
        let heard = if kind.is_kube() {
            self.heard(env)
        } else {
            None
        };
        let superseded = self.superseded.get(&(env.to_string(), kind)).copied();
        match entry {
            None => Shown::NoData,
            Some(e) => Shown::Seen(Seen {
                latest: {
                    let mut l = Look::new(&e.latest, heard, kind, now);
                    if superseded.is_some_and(|at| e.latest.at < at) {
                        l.stale = true;
                    }
                    l
                },
                // Only worth showing when the latest could not see everything; it held
                // until the latest arrived.
                last_good: e
                    .last_good
                    .as_ref()
                    .filter(|g| g.at < e.latest.at)
                    .map(|g| Look::new(g, None, kind, now)),
            }),
        }
    }
}

impl LiveState {
    /// The live blast radius of disrupting `hosts` of `env` (whose etcd members are
    /// `servers`) as the panes show it at `now`: a stale pane's facts are unknown with its
    /// age (`guard::blast`).
    pub fn blast(
        &self,
        env: &str,
        hosts: &[String],
        servers: &[String],
        now: Timestamp,
    ) -> Vec<blast::BlastLine> {
        blast::live_blast(hosts, servers, &self.blast_panes(env, now))
    }

    /// Where a plan that changes `order` (in its order) takes `env`'s VIP holder and etcd
    /// leader, as the panes show them at `now` (`guard::blast::holder_in_order`).
    pub fn holder_in_order(
        &self,
        env: &str,
        order: &[String],
        now: Timestamp,
    ) -> Option<blast::BlastLine> {
        blast::holder_in_order(order, &self.blast_panes(env, now))
    }

    /// The etcd pre-flight's refusing lines for a plan that changes `order` in `env`
    /// (`guard::blast::plan_refusals`).
    pub fn plan_refusals(
        &self,
        env: &str,
        order: &[String],
        servers: &[String],
        now: Timestamp,
    ) -> Vec<blast::BlastLine> {
        blast::plan_refusals(order, servers, &self.blast_panes(env, now))
    }

    /// The VIP, etcd and nodes panes of `env` as the blast radius reads them at `now`.
    fn blast_panes(&self, env: &str, now: Timestamp) -> blast::LivePanes<'_> {
        fn pick<'f, T>(
            s: Option<Seen<'f>>,
            f: impl Fn(&'f Feed) -> Option<&'f T>,
        ) -> blast::Seen<&'f T> {
            let Some(s) = s else {
                return blast::Seen::NotSeen;
            };
            let age_ms = s.latest.age_ms;
            match f(&s.latest.update.feed) {
                None => blast::Seen::NotSeen,
                Some(pane) if s.latest.stale => blast::Seen::Stale { pane, age_ms },
                Some(pane) => blast::Seen::Fresh { pane, age_ms },
            }
        }
        blast::LivePanes {
            vip: pick(self.shown(env, LiveKind::Vip, now).seen(), |f| match f {
                Feed::Vip(p) => Some(p),
                _ => None,
            }),
            etcd: pick(self.shown(env, LiveKind::Etcd, now).seen(), |f| match f {
                Feed::Etcd(p) => Some(p),
                _ => None,
            }),
            nodes: pick(self.shown(env, LiveKind::Nodes, now).seen(), |f| match f {
                Feed::Nodes(p) => Some(p),
                _ => None,
            }),
        }
    }
}

impl LiveState {
    /// The latest feed of `kind` for `env` (the VPN look: the one covering `env`).
    pub fn latest(&self, env: &str, kind: LiveKind) -> Option<&Feed> {
        let e = match kind {
            LiveKind::Vpn => self.vpn_entry(env),
            k => self.entry(env, k),
        };
        e.map(|e| &e.latest.feed)
    }

    /// Every verdict the all-environments strip judges `env` by: the latest look of each
    /// kind (the VPN look's gateways of `env`, and its cross-environment verdicts, which
    /// concern every environment and are counted with each).
    pub fn env_verdicts(&self, env: &str) -> Vec<Verdict> {
        let mut out = Vec::new();
        for kind in LiveKind::ALL {
            match self.latest(env, kind) {
                Some(Feed::Vpn(look)) => out.extend(
                    EnvVpn::of(look, env)
                        .verdicts()
                        .into_iter()
                        .map(|v| Verdict {
                            env: env.to_string(),
                            ..v.clone()
                        }),
                ),
                Some(f) => out.extend(f.verdicts()),
                None => {}
            }
        }
        out
    }

    /// [`LiveState::env_verdicts`] as of `now`: a kind whose look is stale counts no ✓ (its
    /// ok verdicts become unknown, saying since when), so the all-environments line does
    /// not read healthy on what a silent source last said.
    pub fn env_verdicts_at(&self, env: &str, now: Timestamp) -> Vec<Verdict> {
        let stale_since: Vec<(hk_engine::checks::live::Pane, Timestamp)> = LiveKind::ALL
            .iter()
            .filter_map(|k| match self.shown(env, *k, now) {
                Shown::Seen(s) if s.latest.stale => s
                    .latest
                    .update
                    .feed
                    .verdicts()
                    .first()
                    .map(|v| (v.pane, s.latest.vouched)),
                _ => None,
            })
            .collect();
        self.env_verdicts(env)
            .into_iter()
            .map(|v| match stale_since.iter().find(|(p, _)| *p == v.pane) {
                Some((_, since)) if v.severity == Severity::Ok => Verdict {
                    severity: Severity::Unknown,
                    message: format!(
                        "stale since {}: {}",
                        hk_engine::guard::health::clock(*since),
                        v.message
                    ),
                    ..v
                },
                _ => v,
            })
            .collect()
    }

    /// The summary's inputs for `env` at `now` (the parity findings are the caller's).
    pub fn summary_input<'a>(
        &'a self,
        env: &'a str,
        protected: bool,
        now: Timestamp,
    ) -> hk_effects::observe::summary::EnvInput<'a> {
        hk_effects::observe::summary::EnvInput {
            env,
            protected,
            verdicts: self.env_verdicts_at(env, now),
            agents: match self.latest(env, LiveKind::Agents) {
                Some(Feed::Agents(a)) => Some(a),
                _ => None,
            },
            rollout: match self.latest(env, LiveKind::Rollout) {
                Some(Feed::Rollout(r)) => Some(r),
                _ => None,
            },
            parity: None,
            objects: None,
        }
    }
}

/// The all-environments strip from what the live sources last sent: `envs` are (name,
/// protected, the names of its objects when known) in hk-console.yaml's order; `parity`,
/// the static check's findings when it ran; `objects`, the names for an environment
/// without its own.
pub fn summary(
    live: &LiveState,
    envs: &[(String, bool, Option<&hk_effects::observe::summary::Objects>)],
    parity: Option<&[hk_engine::checks::parity::Finding]>,
    runbooks: &[&hk_engine::runbook::schema::Runbook],
    objects: &hk_effects::observe::summary::Objects,
    now: Timestamp,
) -> hk_effects::observe::summary::Summary {
    let inputs: Vec<_> = envs
        .iter()
        .map(|(name, protected, own)| {
            let mut input = live.summary_input(name, *protected, now);
            input.objects = *own;
            input.parity = parity.map(|fs| {
                fs.iter()
                    .filter(|f| f.env.as_deref().is_none_or(|e| e == name))
                    .collect()
            });
            input
        })
        .collect();
    hk_effects::observe::summary::summarize(&inputs, runbooks, objects)
}

/// One update as shown at some moment.
#[derive(Debug, Clone, Copy)]
pub struct Look<'a> {
    pub update: &'a Update,
    /// How long ago the source last vouched for it: for a kube pane, its environment
    /// watcher's latest update (of any kind); for the VPN look, the look itself.
    pub age_ms: u64,
    /// How long ago this update was sent (the pane last changed).
    pub changed_ms: u64,
    pub stale: bool,
    /// When the source last vouched for it (what "stale since" names).
    pub vouched: Timestamp,
}

impl<'a> Look<'a> {
    fn new(update: &'a Update, heard: Option<Timestamp>, kind: LiveKind, now: Timestamp) -> Self {
        let vouched = heard.map_or(update.at, |h| h.max(update.at));
        let age_ms = now.0.saturating_sub(vouched.0);
        Look {
            update,
            age_ms,
            changed_ms: now.0.saturating_sub(update.at.0),
            stale: age_ms > kind.stale_after_ms(),
            vouched,
        }
    }
}

/// What there is to show of one kind.
#[derive(Debug, Clone, Copy)]
pub enum Shown<'a> {
    NoData,
    Seen(Seen<'a>),
}

#[derive(Debug, Clone, Copy)]
pub struct Seen<'a> {
    pub latest: Look<'a>,
    /// The last look that saw everything, when the latest could not and this one is older.
    pub last_good: Option<Look<'a>>,
}

impl<'a> Shown<'a> {
    pub fn seen(self) -> Option<Seen<'a>> {
        match self {
            Shown::NoData => None,
            Shown::Seen(s) => Some(s),
        }
    }
}

/// The VPN look narrowed to one environment: its gateways, and the cross-environment
/// verdicts (the eviction loop), which concern every environment they name and are shown
/// with each.
#[derive(Debug, Clone)]
pub struct EnvVpn<'a> {
    pub gateways: Vec<&'a GatewayPane>,
    pub across: &'a [Verdict],
}

impl<'a> EnvVpn<'a> {
    pub fn of(look: &'a VpnLook, env: &str) -> Self {
        EnvVpn {
            gateways: look.gateways.iter().filter(|g| g.env == env).collect(),
            across: &look.across,
        }
    }

    /// Every verdict that concerns the environment.
    pub fn verdicts(&self) -> Vec<&'a Verdict> {
        self.gateways
            .iter()
            .flat_map(|g| g.verdicts.iter())
            .chain(self.across.iter())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hk_engine::checks::live::{NodesPane, Pane};

    fn nodes(env: &str, at: u64, verdicts: Vec<Verdict>) -> Update {
        Update {
            env: env.into(),
            at: Timestamp(at),
            feed: Feed::Nodes(NodesPane {
                env: env.into(),
                nodes: Vec::new(),
                verdicts,
            }),
        }
    }

    fn verdict(rule: Rule, severity: Severity) -> Verdict {
        Verdict {
            pane: Pane::Nodes,
            rule,
            severity,
            env: "prod".into(),
            subject: "nodes".into(),
            message: "m".into(),
        }
    }

    #[test]
    fn keeps_the_newest_and_the_last_good_look() {
        let mut s = LiveState::default();
        assert!(s.apply(nodes(
            "prod",
            1_000,
            vec![verdict(Rule::NodeReady, Severity::Ok)]
        )));
        assert!(s.apply(nodes(
            "prod",
            5_000,
            vec![verdict(Rule::CouldNotLook, Severity::Unknown)]
        )));
        // Older than what is held: ignored.
        assert!(!s.apply(nodes("prod", 3_000, vec![])));
        let e = s.entry("prod", LiveKind::Nodes).expect("entry");
        assert_eq!(e.latest.at, Timestamp(5_000));
        assert_eq!(e.last_good.as_ref().map(|u| u.at), Some(Timestamp(1_000)));
        let seen = s
            .shown("prod", LiveKind::Nodes, Timestamp(40_000))
            .seen()
            .expect("seen");
        assert_eq!(seen.latest.age_ms, 35_000);
        assert!(seen.latest.stale);
        assert_eq!(seen.last_good.map(|l| l.age_ms), Some(39_000));
        assert!(s
            .shown("dev", LiveKind::Nodes, Timestamp(0))
            .seen()
            .is_none());
    }

    /// A look from before this console's own change (etcd's leadership moved) is stale at
    /// once, however young; the next look after it is not.
    #[test]
    fn a_look_older_than_a_change_this_console_made_is_stale_until_the_next() {
        let mut s = LiveState::default();
        s.apply(nodes("prod", 1_000, vec![]));
        let fresh = |s: &LiveState, now: u64| {
            !s.shown("prod", LiveKind::Nodes, Timestamp(now))
                .seen()
                .expect("seen")
                .latest
                .stale
        };
        assert!(fresh(&s, 1_500));
        s.supersede("prod", LiveKind::Nodes, Timestamp(2_000));
        assert!(!fresh(&s, 2_100), "a look from before the change");
        // Another environment's, and another kind's, are not touched.
        s.apply(nodes("dev", 1_000, vec![]));
        assert!(
            !s.shown("dev", LiveKind::Nodes, Timestamp(2_100))
                .seen()
                .expect("dev")
                .latest
                .stale
        );
        s.apply(nodes("prod", 3_000, vec![]));
        assert!(fresh(&s, 3_100), "the look after the change");
    }

    #[test]
    fn an_unchanged_kube_pane_holds_while_its_watcher_talks() {
        let mut s = LiveState::default();
        s.apply(nodes("prod", 1_000, vec![]));
        let vip = Update {
            env: "prod".into(),
            at: Timestamp(100_000),
            feed: Feed::Vip(hk_engine::checks::live::VipLeasePane::unjudged(
                "prod",
                std::net::IpAddr::from([192, 0, 2, 9]),
                6443,
            )),
        };
        s.apply(vip);
        let l = s
            .shown("prod", LiveKind::Nodes, Timestamp(101_000))
            .seen()
            .expect("seen")
            .latest;
        assert_eq!((l.age_ms, l.changed_ms, l.stale), (1_000, 100_000, false));
        // Another environment's watcher vouches for nothing here.
        assert_eq!(s.heard("dev"), None);
    }

    #[test]
    fn worst_ranks_critical_over_unknown() {
        let vs = [
            verdict(Rule::NodeReady, Severity::Ok),
            verdict(Rule::CouldNotLook, Severity::Unknown),
        ];
        assert_eq!(worst_of(&vs), Some(Severity::Unknown));
        assert_eq!(worst_of(&[]), None);
    }
    #[test]
    fn env_verdicts_gather_every_kind_and_narrow_the_vpn_look() {
        let mut st = LiveState::default();
        st.apply(nodes(
            "prod",
            1,
            vec![verdict(Rule::NodeReady, Severity::Critical)],
        ));
        st.apply(nodes(
            "dev",
            1,
            vec![verdict(Rule::NodeReady, Severity::Ok)],
        ));
        let gw = |env: &str, sev| GatewayPane {
            env: env.into(),
            host: format!("gw-{env}"),
            active_state: None,
            tunnel_exit: None,
            direct_exit: None,
            server: None,
            tunnel_addr: None,
            connects: vec![],
            connect_period_ms: None,
            verdicts: vec![Verdict {
                env: env.into(),
                ..verdict(Rule::VpnService, sev)
            }],
        };
        st.apply(Update {
            env: ALL_ENVS.into(),
            at: Timestamp(2),
            feed: Feed::Vpn(VpnLook {
                gateways: vec![gw("dev", Severity::Ok), gw("prod", Severity::Warn)],
                across: vec![verdict(Rule::VpnEvictionLoop, Severity::Critical)],
            }),
        });
        let prod = st.env_verdicts("prod");
        let rules: Vec<(Rule, Severity)> = prod.iter().map(|v| (v.rule, v.severity)).collect();
        assert_eq!(
            rules,
            vec![
                (Rule::NodeReady, Severity::Critical),
                (Rule::VpnService, Severity::Warn),
                (Rule::VpnEvictionLoop, Severity::Critical),
            ]
        );
        assert!(prod.iter().all(|v| v.env == "prod"), "{prod:#?}");
        let input = st.summary_input("dev", false, Timestamp(0));
        assert_eq!(input.verdicts.len(), 3);
        assert!(input.agents.is_none() && input.parity.is_none());
    }
}
