//! The live strip, on every screen: one line per pane for the current environment (VIP
//! lease, Agent env with the rollout, VPN egress, Nodes), each in the colour of its worst
//! verdict and marked with that verdict's glyph (so it reads without colour too), saying
//! plainly when there is no data yet, when the look is stale (with its age), and when a
//! source could not look (with the last good look's age). On small terminals it folds to one
//! summary line ([`draw_summary`]).
//!
//! Owns: the one-line wording of each pane ([`vip_text`], [`agents_text`], [`rollout_text`],
//! [`vpn_text`], [`nodes_text`]), read from the judged panes' fields and verdict rules.
//! Must not: judge (severities and messages come with the panes from `checks::live`).

use std::collections::BTreeMap;

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

use crate::live::{
    blind_reasons, could_not_look, has_rule, worst_of, EnvVpn, LiveKind, LiveState, Look,
};
use crate::theme::Theme;
use hk_effects::observe::feed::Feed;
use hk_engine::checks::live::{
    AgentEnvPane, ConditionStatus, Endpoint, GatewayPane, NodesPane, RolloutPane, RolloutState,
    Rule, Severity, TcpProbe, Verdict, VipLeasePane,
};

use super::age;

/// The glyph of a severity (`·` for nothing judged).
pub fn glyph(s: Option<Severity>) -> &'static str {
    match s {
        None => "·",
        Some(Severity::Ok) => "✓",
        Some(Severity::Warn) => "!",
        Some(Severity::Critical) => "✗",
        Some(Severity::Unknown) => "?",
    }
}

/// The style of a severity (`text` for nothing judged).
pub fn style(t: &Theme, s: Option<Severity>) -> Style {
    s.map_or(t.text(), |s| t.severity(s))
}

/// The summary's words for a look that saw nothing.
const NO_LOOK: &str = "no look";

/// The four strip lines, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StripPane {
    Vip,
    Agents,
    Vpn,
    Nodes,
}

impl StripPane {
    pub const ALL: [StripPane; 4] = [
        StripPane::Vip,
        StripPane::Agents,
        StripPane::Vpn,
        StripPane::Nodes,
    ];

    pub fn title(self) -> &'static str {
        match self {
            StripPane::Vip => "VIP lease",
            StripPane::Agents => "Agent env",
            StripPane::Vpn => "VPN egress",
            StripPane::Nodes => "Nodes",
        }
    }

    fn short_title(self) -> &'static str {
        match self {
            StripPane::Vip => "VIP",
            StripPane::Agents => "Agents",
            StripPane::Vpn => "VPN",
            StripPane::Nodes => "Nodes",
        }
    }
}

/// One strip line, worded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StripLine {
    pub pane: StripPane,
    /// Nothing has come yet.
    pub no_data: bool,
    /// The worst verdict (of the latest looks); `None` when nothing was judged.
    pub worst: Option<Severity>,
    pub text: String,
    /// A few words for the one-line summary.
    pub short: String,
    /// Age of the oldest look on the line.
    pub age_ms: u64,
    pub stale: bool,
    /// When the oldest look on the line was last confirmed by its source (shown as "stale
    /// since HH:MM:SS" once stale).
    pub since: Option<hk_engine::checks::live::Timestamp>,
}

/// What the strip draws: the live panes' latest, of one environment, now.
#[derive(Clone, Copy)]
pub struct LiveView<'a> {
    pub live: &'a LiveState,
    /// The environment the strip expands (the run's, else the one in view).
    pub env: Option<&'a str>,
    pub now: hk_engine::runbook::machine::Timestamp,
    pub theme: &'a Theme,
}

/// The strip lines of the view's environment at its `now`.
pub fn strip_lines(lv: &LiveView) -> Vec<StripLine> {
    let env = lv.env.unwrap_or_default();
    StripPane::ALL
        .iter()
        .map(|p| strip_line(lv, env, *p))
        .collect()
}

fn looks<'a>(lv: &LiveView<'a>, env: &str, kind: LiveKind) -> Option<(Look<'a>, Option<Look<'a>>)> {
    lv.live
        .shown(env, kind, lv.now)
        .seen()
        .map(|s| (s.latest, s.last_good))
}

fn no_data(pane: StripPane) -> StripLine {
    StripLine {
        pane,
        no_data: true,
        worst: None,
        text: "no data yet".into(),
        short: "no data".into(),
        age_ms: 0,
        stale: false,
        since: None,
    }
}

/// A look that saw nothing at all: every verdict is a could-not-look.
fn blind(verdicts: &[Verdict]) -> bool {
    !verdicts.is_empty() && verdicts.iter().all(|v| v.rule == Rule::CouldNotLook)
}

/// The wording of a look that could not see: its reasons, and how old the last good look is.
fn blind_text(verdicts: &[Verdict], last_good: Option<Look>) -> String {
    let mut s = blind_reasons(verdicts).join("; ");
    if let Some(g) = last_good {
        s.push_str(&format!(" · last good look {} ago", age(g.age_ms)));
    }
    s
}

/// `text`, with the first could-not-look verdict (what, and why) added when part of the look
/// is missing.
fn with_blind_part(text: String, verdicts: &[Verdict]) -> String {
    let Some(v) = verdicts.iter().find(|v| v.rule == Rule::CouldNotLook) else {
        return text;
    };
    let part = format!("{}: {}", v.subject, v.message);
    if text.is_empty() {
        part
    } else {
        format!("{text} · {part}")
    }
}

fn strip_line(lv: &LiveView, env: &str, pane: StripPane) -> StripLine {
    match pane {
        StripPane::Vip => match looks(lv, env, LiveKind::Vip) {
            None => no_data(pane),
            Some((l, good)) => {
                let Feed::Vip(p) = &l.update.feed else {
                    return no_data(pane);
                };
                let (text, short) = if blind(&p.verdicts) {
                    (blind_text(&p.verdicts, good), NO_LOOK.into())
                } else {
                    (with_blind_part(vip_text(p), &p.verdicts), vip_short(p))
                };
                seen_line(pane, worst_of(&p.verdicts), text, short, &[l])
            }
        },
        StripPane::Agents => {
            let agents = looks(lv, env, LiveKind::Agents);
            let rollout = looks(lv, env, LiveKind::Rollout);
            if agents.is_none() && rollout.is_none() {
                return no_data(pane);
            }
            if let Some(line) = both_blind(pane, agents, rollout) {
                return line;
            }
            let mut parts = Vec::new();
            let mut shorts = Vec::new();
            let mut verdicts: Vec<&Verdict> = Vec::new();
            let mut seen = Vec::new();
            match agents {
                Some((l, good)) => {
                    if let Feed::Agents(a) = &l.update.feed {
                        verdicts.extend(&a.verdicts);
                        if blind(&a.verdicts) {
                            parts.push(format!("agents: {}", blind_text(&a.verdicts, good)));
                            shorts.push(NO_LOOK.to_string());
                        } else {
                            parts.push(agents_text(a));
                            shorts.push(agents_short(a));
                        }
                    }
                    seen.push(l);
                }
                None => parts.push("agents: no data yet".into()),
            }
            match rollout {
                Some((l, good)) => {
                    if let Feed::Rollout(r) = &l.update.feed {
                        verdicts.extend(&r.verdicts);
                        if blind(&r.verdicts) {
                            parts.push(format!("rollout: {}", blind_text(&r.verdicts, good)));
                        } else {
                            parts.push(rollout_text(r));
                            if let Some(s) = rollout_short(r) {
                                shorts.push(s);
                            }
                        }
                    }
                    seen.push(l);
                }
                None => parts.push("rollout: no data yet".into()),
            }
            seen_line(
                pane,
                worst_of(verdicts),
                parts.join(" · "),
                shorts.join(" "),
                &seen,
            )
        }
        StripPane::Vpn => match looks(lv, env, LiveKind::Vpn) {
            None => no_data(pane),
            Some((l, _)) => {
                let Feed::Vpn(look) = &l.update.feed else {
                    return no_data(pane);
                };
                let v = EnvVpn::of(look, env);
                seen_line(
                    pane,
                    worst_of(v.verdicts()),
                    vpn_text(&v, env),
                    vpn_short(&v),
                    &[l],
                )
            }
        },
        StripPane::Nodes => match looks(lv, env, LiveKind::Nodes) {
            None => no_data(pane),
            Some((l, good)) => {
                let Feed::Nodes(p) = &l.update.feed else {
                    return no_data(pane);
                };
                let (text, short) = if blind(&p.verdicts) {
                    (blind_text(&p.verdicts, good), NO_LOOK.into())
                } else {
                    (nodes_text(p), nodes_short(p))
                };
                seen_line(pane, worst_of(&p.verdicts), text, short, &[l])
            }
        },
    }
}

/// The agent pane and the rollout both blind for the same reason: say it once.
fn both_blind(
    pane: StripPane,
    agents: Option<(Look, Option<Look>)>,
    rollout: Option<(Look, Option<Look>)>,
) -> Option<StripLine> {
    let ((a, good), (r, _)) = (agents?, rollout?);
    let (Feed::Agents(ap), Feed::Rollout(rp)) = (&a.update.feed, &r.update.feed) else {
        return None;
    };
    if !blind(&ap.verdicts) || blind_reasons(&ap.verdicts) != blind_reasons(&rp.verdicts) {
        return None;
    }
    let verdicts = ap.verdicts.iter().chain(&rp.verdicts);
    Some(seen_line(
        pane,
        worst_of(verdicts),
        format!("agents and rollout: {}", blind_text(&ap.verdicts, good)),
        NO_LOOK.into(),
        &[a, r],
    ))
}

fn seen_line(
    pane: StripPane,
    worst: Option<Severity>,
    text: String,
    short: String,
    looks: &[Look],
) -> StripLine {
    let stale = looks.iter().any(|l| l.stale);
    // What was not confirmed lately is no good news: a stale line's ✓ is a `?`.
    let worst = match worst {
        Some(Severity::Ok) if stale => Some(Severity::Unknown),
        w => w,
    };
    StripLine {
        pane,
        no_data: false,
        worst,
        text,
        short,
        age_ms: looks.iter().map(|l| l.age_ms).max().unwrap_or(0),
        stale,
        since: looks.iter().map(|l| l.vouched).min(),
    }
}

// ---------------------------------------------------------------------------------------------
// Wording, one pane at a time (pure: a pane in, words out).

/// `held by k3s-prod-2, renewed 2s ago of 15s · 192.168.2.9:6443 answers in 3 ms`.
pub fn vip_text(p: &VipLeasePane) -> String {
    let mut parts = Vec::new();
    if has_rule(&p.verdicts, Rule::LeaseHeld) {
        match &p.holder {
            None => parts.push("NO HOLDER: nobody announces the VIP".to_string()),
            Some(h) => {
                let mut s = format!("held by {h}");
                match &p.holder_node {
                    Some(n) if n != h => s.push_str(&format!(" (node {n})")),
                    Some(_) => {}
                    None => s.push_str(&format!(" (no server of {})", p.env)),
                }
                // A fresh-looking lease whose holder's node is down is no ordinary yellow:
                // the line says why, not only the verdict list.
                let down = p
                    .verdicts
                    .iter()
                    .find(|v| v.rule == Rule::LeaseHolderReady && v.severity != Severity::Ok);
                if let Some(v) = down {
                    s.push_str(if v.severity == Severity::Unknown {
                        ", its node's readiness unknown"
                    } else {
                        ", its node NotReady"
                    });
                }
                if let Some(a) = p.renew_age_ms {
                    s.push_str(&format!(", renewed {} ago", age(a)));
                    if let Some(d) = p.lease_duration_seconds {
                        s.push_str(&format!(" of {d}s"));
                    }
                }
                let stale = p
                    .verdicts
                    .iter()
                    .any(|v| v.rule == Rule::LeaseFresh && v.severity == Severity::Warn);
                if stale {
                    s.push_str(" STALE");
                }
                parts.push(s);
            }
        }
    }
    let at = format!("{}:{}", p.vip, p.port);
    match &p.probe {
        Some(TcpProbe::Connected { latency_ms }) => {
            parts.push(format!("{at} answers in {latency_ms} ms"))
        }
        Some(TcpProbe::Failed { error }) => parts.push(format!("{at} does NOT answer: {error}")),
        None => {}
    }
    parts.join(" · ")
}

fn vip_short(p: &VipLeasePane) -> String {
    if matches!(p.probe, Some(TcpProbe::Failed { .. })) {
        return "VIP silent".into();
    }
    match (&p.holder, has_rule(&p.verdicts, Rule::LeaseHeld)) {
        (Some(h), _) => p.holder_node.clone().unwrap_or_else(|| h.clone()),
        (None, true) => "NO HOLDER".into(),
        (None, false) => "lease ?".into(),
    }
}

/// Agents that dial a node's own address, by (node, address): the count of each.
fn on_node_addresses(a: &AgentEnvPane) -> BTreeMap<(&str, &str), usize> {
    let mut m = BTreeMap::new();
    for r in &a.agents {
        if let Endpoint::NodeAddress { node, address } = &r.endpoint {
            *m.entry((node.as_str(), address.as_str())).or_insert(0) += 1;
        }
    }
    m
}

/// `3/3 agents on the VIP`, or `CRITICAL 2 of 3 agents dial node IPs: k3s-prod-1
/// 192.168.2.10`.
pub fn agents_text(a: &AgentEnvPane) -> String {
    let n = a.agents.len();
    if n == 0 {
        return "no cilium-agent pods".into();
    }
    let nodes = on_node_addresses(a);
    let k: usize = nodes.values().sum();
    if k > 0 {
        let named: Vec<String> = nodes
            .keys()
            .map(|(node, addr)| format!("{node} {addr}"))
            .collect();
        return format!(
            "CRITICAL {k} of {n} agents dial node IPs, not the VIP: {}",
            named.join(", ")
        );
    }
    let on_vip = a
        .agents
        .iter()
        .filter(|r| r.endpoint == Endpoint::Vip)
        .count();
    let on_lb = a
        .agents
        .iter()
        .filter(|r| r.endpoint == Endpoint::SupervisorLb)
        .count();
    let other = n - on_vip - on_lb;
    let lb = if on_lb > 0 {
        format!(", {on_lb} on the k3s load balancer")
    } else {
        String::new()
    };
    if other > 0 {
        format!("{on_vip}/{n} agents on the VIP{lb}, {other} elsewhere or unresolved")
    } else {
        format!("{on_vip}/{n} agents on the VIP{lb}")
    }
}

fn agents_short(a: &AgentEnvPane) -> String {
    let n = a.agents.len();
    let k: usize = on_node_addresses(a).values().sum();
    if k > 0 {
        format!("{k} on node IP")
    } else {
        let v = a
            .agents
            .iter()
            .filter(|r| matches!(r.endpoint, Endpoint::Vip | Endpoint::SupervisorLb))
            .count();
        let lb = a
            .agents
            .iter()
            .any(|r| r.endpoint == Endpoint::SupervisorLb);
        format!("{v}/{n} {}", if lb { "HA" } else { "VIP" })
    }
}

/// `rollout: rolled out`, `rollout: rolling, 1/3 updated`, `rollout STUCK: cilium-x on
/// k3s-prod-2 not ready 12m00s`, `no rollout; 2/3 agents available`; with no state, the rollout verdict's own words.
pub fn rollout_text(r: &RolloutPane) -> String {
    match &r.state {
        Some(RolloutState::RolledOut) => "rollout: rolled out".into(),
        Some(RolloutState::Rolling { updated, desired }) => {
            format!("rollout: rolling, {updated}/{desired} updated")
        }
        Some(RolloutState::Unavailable { available, desired }) => {
            format!("no rollout; {available}/{desired} agents available")
        }
        Some(RolloutState::Stuck {
            pod,
            node,
            not_ready_ms,
        }) => format!(
            "rollout STUCK: {pod} on {} not ready {}",
            node.as_deref().unwrap_or("no node"),
            age(*not_ready_ms)
        ),
        None => match r.verdicts.iter().find(|v| v.rule == Rule::Rollout) {
            Some(v) => format!("rollout: {}", v.message),
            None => "rollout: not judged".into(),
        },
    }
}

fn rollout_short(r: &RolloutPane) -> Option<String> {
    match &r.state {
        Some(RolloutState::RolledOut) => None,
        Some(RolloutState::Rolling { updated, desired }) => {
            Some(format!("rolling {updated}/{desired}"))
        }
        Some(RolloutState::Stuck { .. }) => Some("STUCK".into()),
        Some(RolloutState::Unavailable { available, desired }) => {
            Some(format!("{available}/{desired} available"))
        }
        None => Some("no DaemonSet".into()),
    }
}

/// A gateway whose exit through the tunnel is the direct (home ISP) exit, as its exit
/// verdict judged.
fn leaks(g: &GatewayPane) -> bool {
    g.tunnel_exit.is_some()
        && g.tunnel_exit == g.direct_exit
        && g.verdicts
            .iter()
            .any(|v| v.rule == Rule::VpnExit && v.severity == Severity::Critical)
}

fn flapping(g: &GatewayPane) -> bool {
    g.verdicts
        .iter()
        .any(|v| v.rule == Rule::VpnFlapping && v.severity == Severity::Warn)
}

fn service_down(g: &GatewayPane) -> Option<&str> {
    g.active_state
        .as_deref()
        .filter(|s| s.trim() != "active")
        .map(|s| {
            if s.trim().is_empty() {
                "in no state"
            } else {
                s
            }
        })
}

/// A gateway of which nothing could be seen.
fn gateway_blind(g: &GatewayPane) -> bool {
    g.active_state.is_none()
        && g.tunnel_exit.is_none()
        && g.direct_exit.is_none()
        && could_not_look(&g.verdicts)
}

/// `k3s-prod-3: exit 158.173.241.20`, `LEAK`, `tunnel failed`, `restarts every ~2m`.
pub fn gateway_text(g: &GatewayPane) -> String {
    let host = &g.host;
    if gateway_blind(g) {
        return format!("{host}: {}", blind_reasons(&g.verdicts).join("; "));
    }
    let mut s = if leaks(g) {
        format!(
            "{host}: LEAK, exits from {} without the tunnel",
            g.tunnel_exit.map(|i| i.to_string()).unwrap_or_default()
        )
    } else if let Some(state) = service_down(g) {
        format!("{host}: tunnel {state}")
    } else if let Some(ip) = g.tunnel_exit {
        format!("{host}: exit {ip}")
    } else if g
        .verdicts
        .iter()
        .any(|v| v.rule == Rule::VpnExit && v.severity == Severity::Critical)
    {
        format!("{host}: no exit through the tunnel")
    } else {
        format!("{host}: exit ?")
    };
    if flapping(g) {
        match g.connect_period_ms {
            Some(p) => s.push_str(&format!(", restarts every {}", age(p))),
            None => s.push_str(", flapping"),
        }
    }
    s
}

/// The eviction loops (naming both gateways) first, then each gateway of `env`.
pub fn vpn_text(v: &EnvVpn, env: &str) -> String {
    let mut parts: Vec<String> = v
        .across
        .iter()
        .filter(|x| x.rule == Rule::VpnEvictionLoop)
        .map(|x| format!("EVICTION LOOP {}", x.subject))
        .collect();
    parts.extend(v.gateways.iter().map(|g| gateway_text(g)));
    if parts.is_empty() {
        return format!("no VPN gateways in {env}");
    }
    parts.join(" · ")
}

fn vpn_short(v: &EnvVpn) -> String {
    if v.across.iter().any(|x| x.rule == Rule::VpnEvictionLoop) {
        "LOOP".into()
    } else if v.gateways.iter().any(|g| leaks(g)) {
        "LEAK".into()
    } else if v.gateways.iter().any(|g| service_down(g).is_some()) {
        "down".into()
    } else if v.gateways.iter().any(|g| flapping(g)) {
        "flapping".into()
    } else if v.gateways.iter().any(|g| gateway_blind(g)) {
        NO_LOOK.into()
    } else if v.gateways.is_empty() {
        "none".into()
    } else {
        "up".into()
    }
}

fn ready_count(p: &NodesPane) -> usize {
    p.nodes
        .iter()
        .filter(|n| n.ready == Some(ConditionStatus::True))
        .count()
}

/// `3/3 Ready`, naming nodes that are not, and servers the cluster does not list.
pub fn nodes_text(p: &NodesPane) -> String {
    let mut s = format!("{}/{} Ready", ready_count(p), p.nodes.len());
    let not: Vec<&str> = p
        .nodes
        .iter()
        .filter(|n| n.ready != Some(ConditionStatus::True))
        .map(|n| n.name.as_str())
        .collect();
    if !not.is_empty() {
        s.push_str(&format!(" · not Ready: {}", not.join(", ")));
    }
    let missing: Vec<&str> = p
        .verdicts
        .iter()
        .filter(|v| v.rule == Rule::NodeMissing)
        .map(|v| v.subject.strip_prefix("server ").unwrap_or(&v.subject))
        .collect();
    if !missing.is_empty() {
        s.push_str(&format!(" · not in the cluster: {}", missing.join(", ")));
    }
    with_blind_part(s, &p.verdicts)
}

fn nodes_short(p: &NodesPane) -> String {
    format!("{}/{}", ready_count(p), p.nodes.len())
}

// ---------------------------------------------------------------------------------------------
// Drawing.

/// One strip line's spans: title, glyph, (stale age), words, (fresh age).
fn spans(l: &StripLine, t: &Theme) -> Vec<Span<'static>> {
    if l.no_data {
        return vec![
            Span::styled(format!(" {:<10} ", l.pane.title()), t.muted()),
            Span::styled(format!("{} {}", glyph(None), l.text), t.muted()),
        ];
    }
    let st = style(t, l.worst);
    let mut v = vec![
        Span::styled(format!(" {:<10} ", l.pane.title()), t.text()),
        Span::styled(format!("{} ", glyph(l.worst)), st),
    ];
    if l.stale {
        let since = l
            .since
            .map(|s| format!(" since {}", hk_engine::guard::health::clock(s)))
            .unwrap_or_default();
        v.push(Span::styled(
            format!("stale{since} ({}) · ", age(l.age_ms)),
            t.warn(),
        ));
        v.push(Span::styled(l.text.clone(), t.muted()));
    } else {
        v.push(Span::styled(l.text.clone(), st));
        v.push(Span::styled(format!(" · {} ago", age(l.age_ms)), t.muted()));
    }
    v
}

/// The full strip: a rule with the environment, then one line per pane.
pub fn draw(f: &mut Frame, area: Rect, lv: &LiveView) {
    let t = lv.theme;
    let env = lv.env.unwrap_or("no environment");
    // A line wider than the strip ends in `…` rather than at the terminal's edge.
    let lines: Vec<Line> = strip_lines(lv)
        .iter()
        .map(|l| Line::from(super::fit::clip_spans(spans(l, t), usize::from(area.width))))
        .collect();
    f.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::TOP)
                .border_style(t.border())
                .title(Line::from(vec![
                    Span::styled(format!(" Live · {env} "), t.title()),
                    Span::styled("l: details ", t.muted()),
                ])),
        ),
        area,
    );
}

/// How much the one-line summary says of a pane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Detail {
    /// Every pane's words.
    All,
    /// Words only where something is wrong or stale.
    Problems,
    /// Titles and glyphs (and "stale").
    Glyphs,
}

fn summary_spans(lines: &[StripLine], t: &Theme, detail: Detail) -> Vec<Span<'static>> {
    let mut spans = Vec::new();
    for l in lines {
        spans.push(Span::styled(
            format!("{} ", l.pane.short_title()),
            t.muted(),
        ));
        let calm = !l.stale && l.worst.is_none_or(|w| w == Severity::Ok);
        let (words, st) = if l.no_data {
            ("–".to_string(), t.muted())
        } else if l.stale && detail == Detail::Glyphs {
            ("stale".to_string(), t.warn())
        } else if l.stale {
            (format!("stale {}", age(l.age_ms)), t.warn())
        } else if detail == Detail::Glyphs || (detail == Detail::Problems && calm) {
            (String::new(), style(t, l.worst))
        } else {
            (l.short.clone(), style(t, l.worst))
        };
        let text = if words.is_empty() {
            glyph(l.worst).to_string()
        } else {
            format!("{} {words}", glyph(l.worst))
        };
        spans.push(Span::styled(text, st));
        spans.push(Span::raw("  "));
    }
    spans
}

/// One line for small terminals: each pane's few words in its worst verdict's colour; where
/// the width is short, calm panes lose their words first, then every pane.
pub fn draw_summary(f: &mut Frame, area: Rect, lv: &LiveView) {
    let t = lv.theme;
    let lines = strip_lines(lv);
    let width = usize::from(area.width);
    let spans = [Detail::All, Detail::Problems, Detail::Glyphs]
        .into_iter()
        .map(|d| summary_spans(&lines, t, d))
        .find(|s| {
            let w: usize = s.iter().map(|x| x.content.chars().count()).sum();
            w.saturating_sub(2) <= width
        })
        .unwrap_or_else(|| summary_spans(&lines, t, Detail::Glyphs));
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}
