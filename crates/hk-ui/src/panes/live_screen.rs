//! The Live screen (`l`): every live pane of the current environment in detail, and every
//! verdict message. VIP lease (holder, node, renew age vs duration, transitions, probe),
//! the agents table (pod, node, KUBERNETES_SERVICE_HOST:PORT, how it resolved, endpoint),
//! the rollout (state, counts, per node), the nodes (Ready, roles) and the VPN gateways
//! (service, tunnel and direct exits, server, tunnel address, reconnects and their period).
//! Read-only by nature: it works the same in observe mode.
//!
//! Owns: the screen's lines ([`lines`], pre-wrapped to the width so scrolling is by line),
//! and reporting how many it laid out (`App::live_lines`, the scroll bound: the view says
//! what it drew, the state never asks it to lay text out).
//! Must not: judge (severities and messages come with the panes) or change other state.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

use crate::live::{worst_of, EnvVpn, LiveKind, LiveState, Look, Shown};
use crate::theme::Theme;
use hk_effects::observe::feed::Feed;
use hk_engine::checks::live::{
    AgentEnvPane, ConditionStatus, Endpoint, GatewayPane, NodesPane, Resolved, RolloutPane,
    RolloutState, Rule, Severity, TcpProbe, Verdict, VipLeasePane,
};

use super::age;
use super::live::{glyph, style};

type Lines = Vec<Line<'static>>;

/// What the Live screen draws: the environment in view, the live panes' latest, the
/// session's event trail, and where it is scrolled to.
pub struct LiveScreenView<'a> {
    pub live: &'a LiveState,
    /// The environment in view.
    pub env: Option<&'a str>,
    pub timeline: &'a hk_effects::observe::timeline::Timeline,
    pub now: hk_engine::runbook::machine::Timestamp,
    pub theme: &'a Theme,
    /// The first shown line.
    pub scroll: usize,
    /// How many lines were laid out: the screen reports it back as the scroll bound.
    pub lines: &'a std::cell::Cell<usize>,
}

/// The etcd member table's width on this screen (every column; the screen scrolls).
const ETCD_TABLE_WIDTH: usize = 100;

/// The screen's text width inside its border, for a frame `width` wide.
fn inner_width(width: u16) -> usize {
    usize::from(width.saturating_sub(2)).max(20)
}

/// From this width the timeline is a column beside the panes (which keep 112 columns, so
/// their tables are not cut); below it, the last section of the scrolled panes, with the
/// newest event on the bottom border so it is in view without scrolling.
const TIMELINE_SIDE_MIN_WIDTH: u16 = 160;
const TIMELINE_SIDE_WIDTH: u16 = 48;

/// The Live screen: every pane of the environment in detail, and the session's event trail
/// (what changed and when).
pub fn draw(f: &mut Frame, area: Rect, sv: &LiveScreenView) {
    if area.width >= TIMELINE_SIDE_MIN_WIDTH {
        let [p, t] =
            Layout::horizontal([Constraint::Min(1), Constraint::Length(TIMELINE_SIDE_WIDTH)])
                .areas(area);
        draw_panes(f, p, sv, false);
        super::timeline::draw(f, t, sv.timeline, "", sv.theme);
    } else {
        draw_panes(f, area, sv, true);
    }
}

fn draw_panes(f: &mut Frame, area: Rect, sv: &LiveScreenView, with_trail: bool) {
    let t = sv.theme;
    let mut all = lines(sv, inner_width(area.width));
    if with_trail {
        all.push(Line::from(""));
        trail_section(&mut all, sv, inner_width(area.width));
    }
    // What was laid out goes back to the state as the scroll bound.
    sv.lines.set(all.len());
    let visible = usize::from(area.height.saturating_sub(2));
    let top = sv.scroll.min(all.len().saturating_sub(1));
    let env = sv.env.unwrap_or("no environment");
    let mut title = vec![Span::styled(format!(" Live · {env} "), t.title())];
    title.push(Span::styled(
        "e: next env · j/k scroll · esc back ",
        t.muted(),
    ));
    let mut block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.border())
        .title(Line::from(title));
    if all.len() > visible {
        block = block.title_bottom(
            Line::from(Span::styled(
                format!(
                    " lines {}-{} of {} ",
                    top + 1,
                    (top + visible).min(all.len()),
                    all.len()
                ),
                t.muted(),
            ))
            .right_aligned(),
        );
    }
    if with_trail {
        if let Some(e) = sv.timeline.events().next_back() {
            let w = usize::from(area.width.saturating_sub(4));
            let newest = format!(" newest: {} {} {} ", e.clock(), e.env, e.text);
            block = block.title_bottom(
                Line::from(Span::styled(
                    super::fit::clip(&newest, w / 2),
                    t.severity(e.severity),
                ))
                .left_aligned(),
            );
        }
    }
    let shown: Lines = all.into_iter().skip(top).take(visible).collect();
    f.render_widget(Paragraph::new(shown).block(block), area);
}

/// Every line of the screen, wrapped to `width`.
pub fn lines(sv: &LiveScreenView, width: usize) -> Lines {
    let t = sv.theme;
    let env = sv.env.unwrap_or_default();
    let mut out = Lines::new();
    if env.is_empty() {
        out.push(Line::from(Span::styled(
            "no environment: hk-console.yaml defines them",
            t.muted(),
        )));
        return out;
    }
    let sections: [(&str, LiveKind); 6] = [
        ("VIP lease", LiveKind::Vip),
        ("Agent env", LiveKind::Agents),
        ("Rollout (cilium DaemonSet)", LiveKind::Rollout),
        ("Nodes", LiveKind::Nodes),
        ("etcd", LiveKind::Etcd),
        ("VPN egress", LiveKind::Vpn),
    ];
    for (i, (title, kind)) in sections.into_iter().enumerate() {
        if i > 0 {
            out.push(Line::from(""));
        }
        section(&mut out, sv, env, title, kind, width);
    }
    out
}

/// The event trail as the screen's last section (narrow terminals): every event, newest
/// first, wrapped.
fn trail_section(out: &mut Lines, sv: &LiveScreenView, width: usize) {
    let t = sv.theme;
    out.push(Line::from(Span::styled(
        format!("Timeline · {} this session", sv.timeline.len()),
        t.title(),
    )));
    let rows = sv.timeline.len().max(1) * 4 + 1;
    out.extend(super::timeline::lines(
        sv.timeline,
        rows,
        width.saturating_sub(2),
        "",
        t,
    ));
}

fn section(
    out: &mut Lines,
    sv: &LiveScreenView,
    env: &str,
    title: &str,
    kind: LiveKind,
    width: usize,
) {
    let t = sv.theme;
    let seen = match sv.live.shown(env, kind, sv.now) {
        Shown::NoData => {
            out.push(heading(
                t,
                title,
                None,
                vec![Span::styled("no data yet", t.muted())],
            ));
            return;
        }
        Shown::Seen(s) => s,
    };
    let mut verdicts = feed_verdicts(&seen.latest.update.feed, env);
    // Worst first: in an incident the critical ones lead (stable within a severity).
    verdicts.sort_by_key(|v| std::cmp::Reverse(v.severity.rank()));
    let worst = match worst_of(verdicts.iter().copied()) {
        // Not confirmed lately: no ✓.
        Some(Severity::Ok) if seen.latest.stale => Some(Severity::Unknown),
        w => w,
    };
    out.push(heading(t, title, worst, age_tag(t, &seen.latest)));
    let mut shown = body(&seen.latest.update.feed, env, t);
    if seen.latest.stale {
        shown = muted(shown, t);
    }
    out.extend(shown);
    for v in verdicts {
        out.extend(verdict_lines(v, t, width));
    }
    if let Some(good) = seen.last_good {
        out.push(Line::from(Span::styled(
            format!(
                "  last good look {} ago ({}):",
                age(good.age_ms),
                good.update.at
            ),
            t.muted(),
        )));
        out.extend(muted(body(&good.update.feed, env, t), t));
    }
}

fn heading(
    t: &Theme,
    title: &str,
    worst: Option<Severity>,
    tag: Vec<Span<'static>>,
) -> Line<'static> {
    let mut v = vec![
        Span::styled(format!("{} ", glyph(worst)), style(t, worst)),
        Span::styled(title.to_string(), t.title()),
        Span::raw("  "),
    ];
    v.extend(tag);
    Line::from(v)
}

fn age_tag(t: &Theme, l: &Look) -> Vec<Span<'static>> {
    let mut v = if l.stale {
        vec![Span::styled(
            format!(
                "stale since {} ({})",
                hk_engine::guard::health::clock(l.vouched),
                age(l.age_ms)
            ),
            t.warn(),
        )]
    } else {
        vec![Span::styled(format!("{} ago", age(l.age_ms)), t.muted())]
    };
    // A pane the source vouches for without sending it again: since when it holds.
    let when = if age(l.changed_ms) != age(l.age_ms) {
        format!(" · unchanged since {} ({})", l.update.at, age(l.changed_ms))
    } else {
        format!(" ({})", l.update.at)
    };
    v.push(Span::styled(when, t.muted()));
    v
}

fn muted(lines: Lines, t: &Theme) -> Lines {
    lines
        .into_iter()
        .map(|l| {
            Line::from(
                l.spans
                    .into_iter()
                    .map(|s| Span::styled(s.content, t.muted()))
                    .collect::<Vec<_>>(),
            )
        })
        .collect()
}

/// The verdicts a feed holds that concern `env` (the VPN look: that environment's gateways
/// and the cross-environment verdicts).
fn feed_verdicts<'a>(feed: &'a Feed, env: &str) -> Vec<&'a Verdict> {
    match feed {
        Feed::Vip(p) => p.verdicts.iter().collect(),
        Feed::Agents(p) => p.verdicts.iter().collect(),
        Feed::Rollout(p) => p.verdicts.iter().collect(),
        Feed::Nodes(p) => p.verdicts.iter().collect(),
        Feed::Vpn(look) => EnvVpn::of(look, env).verdicts(),
        Feed::Etcd(p) => p.verdicts.iter().collect(),
    }
}

fn body(feed: &Feed, env: &str, t: &Theme) -> Lines {
    match feed {
        Feed::Vip(p) => vip_body(p, t),
        Feed::Agents(p) => agents_body(p, t),
        Feed::Rollout(p) => rollout_body(p, t),
        Feed::Nodes(p) => nodes_body(p, t),
        Feed::Vpn(look) => vpn_body(&EnvVpn::of(look, env), env, t),
        // The member table only: the verdicts follow as every section's do.
        Feed::Etcd(p) => super::etcd::table(p, ETCD_TABLE_WIDTH, t),
    }
}

/// `  label        value`.
fn field(t: &Theme, label: &str, value: impl Into<String>, st: Style) -> Line<'static> {
    Line::from(vec![
        Span::styled(format!("  {label:<13}"), t.muted()),
        Span::styled(value.into(), st),
    ])
}

fn vip_body(p: &VipLeasePane, t: &Theme) -> Lines {
    let lease_seen = p.verdicts.iter().any(|v| v.rule == Rule::LeaseHeld);
    let mut out = vec![field(t, "VIP", format!("{}:{}", p.vip, p.port), t.text())];
    let holder = match (&p.holder, &p.holder_node, lease_seen) {
        (Some(h), Some(n), _) => (format!("{h} (server {n})"), t.text()),
        (Some(h), None, _) => (format!("{h} (no server of {})", p.env), t.warn()),
        (None, _, true) => ("none: nobody announces the VIP".into(), t.critical()),
        (None, _, false) => ("not seen".into(), t.muted()),
    };
    out.push(field(t, "holder", holder.0, holder.1));
    let renewed = match (p.renew_age_ms, p.lease_duration_seconds) {
        (Some(a), Some(d)) => format!("{} ago (lease duration {d}s)", age(a)),
        (Some(a), None) => format!("{} ago (no lease duration)", age(a)),
        (None, Some(d)) => format!("never (lease duration {d}s)"),
        (None, None) => "not seen".into(),
    };
    out.push(field(t, "renewed", renewed, t.text()));
    out.push(field(
        t,
        "transitions",
        p.transitions.map_or("not seen".into(), |n| n.to_string()),
        t.text(),
    ));
    let probe = match &p.probe {
        Some(TcpProbe::Connected { latency_ms }) => (format!("answers in {latency_ms} ms"), t.ok()),
        Some(TcpProbe::Failed { error }) => (format!("no answer: {error}"), t.critical()),
        None => ("not probed".into(), t.muted()),
    };
    out.push(field(t, "probe", probe.0, probe.1));
    out
}

/// A table: a header row, then rows of styled cells, columns padded to their widest cell.
fn table(t: &Theme, header: &[&str], rows: Vec<Vec<(String, Style)>>) -> Lines {
    let mut w: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (i, (c, _)) in r.iter().enumerate() {
            if let Some(x) = w.get_mut(i) {
                *x = (*x).max(c.chars().count());
            }
        }
    }
    let pad = |s: &str, i: usize| {
        let n = w.get(i).copied().unwrap_or(0);
        format!("{s:<n$}  ")
    };
    let mut out = vec![Line::from(
        std::iter::once(Span::raw("  "))
            .chain(
                header
                    .iter()
                    .enumerate()
                    .map(|(i, h)| Span::styled(pad(h, i), t.muted())),
            )
            .collect::<Vec<_>>(),
    )];
    for r in rows {
        out.push(Line::from(
            std::iter::once(Span::raw("  "))
                .chain(
                    r.into_iter()
                        .enumerate()
                        .map(|(i, (c, st))| Span::styled(pad(&c, i), st)),
                )
                .collect::<Vec<_>>(),
        ));
    }
    out
}

/// The severity of the verdict of `rule` about `subject`, if there is one.
fn verdict_about(vs: &[Verdict], rule: Rule, subject: &str) -> Option<Severity> {
    vs.iter()
        .find(|v| v.rule == rule && v.subject == subject)
        .map(|v| v.severity)
}

fn resolved_value(r: &Resolved) -> &str {
    match r {
        Resolved::Value { value } => value,
        Resolved::Unset => "unset",
        Resolved::Unresolvable { .. } => "?",
    }
}

/// How the pane says the value was found (the pane carries the value, not its source).
fn resolution(host: &Resolved) -> String {
    match host {
        Resolved::Value { .. } => "resolved".into(),
        Resolved::Unset => "unset: kubelet default".into(),
        Resolved::Unresolvable { reason } => format!("unresolved: {reason}"),
    }
}

fn agents_body(p: &AgentEnvPane, t: &Theme) -> Lines {
    if p.agents.is_empty() {
        return vec![Line::from(Span::styled(
            "  no cilium-agent pods",
            t.muted(),
        ))];
    }
    let rows = p
        .agents
        .iter()
        .map(|a| {
            let subject = format!("pod {}", a.pod);
            let host_sev = verdict_about(&p.verdicts, Rule::AgentHost, &subject);
            let port_sev = verdict_about(&p.verdicts, Rule::AgentPort, &subject);
            let endpoint = match &a.endpoint {
                Endpoint::Vip => "the VIP".to_string(),
                Endpoint::SupervisorLb => "k3s load balancer (127.0.0.1:6444)".to_string(),
                Endpoint::NodeAddress { node, .. } => format!("node IP of {node}"),
                Endpoint::Other => "other".to_string(),
            };
            let ready = if a.ready {
                (format!("{} ready", a.phase), t.text())
            } else {
                (format!("{} not ready", a.phase), t.warn())
            };
            vec![
                (a.pod.clone(), t.text()),
                (a.node.clone().unwrap_or_else(|| "-".into()), t.text()),
                (
                    format!("{}:{}", resolved_value(&a.host), resolved_value(&a.port)),
                    style(t, worst_of_opt(host_sev, port_sev)),
                ),
                (resolution(&a.host), t.muted()),
                (
                    format!("{} {endpoint}", glyph(host_sev)),
                    style(t, host_sev),
                ),
                ready,
            ]
        })
        .collect();
    table(
        t,
        &[
            "POD",
            "NODE",
            "KUBERNETES_SERVICE_HOST:PORT",
            "FROM",
            "ENDPOINT",
            "POD STATE",
        ],
        rows,
    )
}

fn worst_of_opt(a: Option<Severity>, b: Option<Severity>) -> Option<Severity> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.worst(b)),
        (a, b) => a.or(b),
    }
}

fn rollout_body(p: &RolloutPane, t: &Theme) -> Lines {
    let state = match &p.state {
        Some(RolloutState::RolledOut) => ("rolled out".to_string(), t.ok()),
        Some(RolloutState::Rolling { updated, desired }) => (
            format!("rolling: {updated} of {desired} desired updated"),
            t.warn(),
        ),
        Some(RolloutState::Unavailable { available, desired }) => (
            format!("no rollout; {available} of {desired} available"),
            t.warn(),
        ),
        Some(RolloutState::Stuck {
            pod,
            node,
            not_ready_ms,
        }) => (
            format!(
                "STUCK: {pod} on {} not ready for {}",
                node.as_deref().unwrap_or("no node"),
                age(*not_ready_ms)
            ),
            t.critical(),
        ),
        None => ("not judged".to_string(), t.muted()),
    };
    let mut out = vec![field(t, "state", state.0, state.1)];
    if p.pods.is_empty() {
        out.push(field(t, "pods", "none seen", t.muted()));
        return out;
    }
    let n = p.pods.len();
    let updated = p.pods.iter().filter(|x| x.updated).count();
    let ready = p.pods.iter().filter(|x| x.ready).count();
    out.push(field(
        t,
        "pods",
        format!(
            "{n} · updated {updated} · ready {ready} · not ready {}",
            n - ready
        ),
        t.text(),
    ));
    let rows = p
        .pods
        .iter()
        .map(|x| {
            vec![
                (x.node.clone().unwrap_or_else(|| "-".into()), t.text()),
                (x.name.clone(), t.text()),
                (
                    if x.updated { "current" } else { "old" }.to_string(),
                    if x.updated { t.text() } else { t.warn() },
                ),
                if x.ready {
                    ("ready".to_string(), t.ok())
                } else {
                    ("not ready".to_string(), t.warn())
                },
                (
                    x.not_ready_since
                        .filter(|_| !x.ready)
                        .map_or(String::new(), |s| s.to_string()),
                    t.muted(),
                ),
            ]
        })
        .collect();
    out.extend(table(
        t,
        &["NODE", "POD", "TEMPLATE", "READY", "NOT READY SINCE"],
        rows,
    ));
    out
}

fn nodes_body(p: &NodesPane, t: &Theme) -> Lines {
    if p.nodes.is_empty() {
        return vec![Line::from(Span::styled("  no nodes seen", t.muted()))];
    }
    let rows = p
        .nodes
        .iter()
        .map(|n| {
            let sev = verdict_about(&p.verdicts, Rule::NodeReady, &format!("node {}", n.name));
            let ready = match n.ready {
                Some(ConditionStatus::True) => "Ready",
                Some(ConditionStatus::False) => "NotReady",
                Some(ConditionStatus::Unknown) => "Unknown",
                None => "no condition",
            };
            vec![
                (n.name.clone(), t.text()),
                (format!("{} {ready}", glyph(sev)), style(t, sev)),
                (
                    if n.roles.is_empty() {
                        "none".to_string()
                    } else {
                        n.roles.join(",")
                    },
                    t.text(),
                ),
            ]
        })
        .collect();
    table(t, &["NODE", "READY", "ROLES"], rows)
}

fn gateway_row(g: &GatewayPane, t: &Theme) -> Vec<(String, Style)> {
    let service_sev = g
        .verdicts
        .iter()
        .find(|v| v.rule == Rule::VpnService)
        .map(|v| v.severity);
    let exit_sev = g
        .verdicts
        .iter()
        .find(|v| v.rule == Rule::VpnExit)
        .map(|v| v.severity);
    let flap_sev = g
        .verdicts
        .iter()
        .find(|v| v.rule == Rule::VpnFlapping)
        .map(|v| v.severity);
    let ip = |x: Option<std::net::IpAddr>| x.map_or("?".to_string(), |i| i.to_string());
    let reconnects = match g.connect_period_ms {
        Some(p) => format!("{}, every {}", g.connects.len(), age(p)),
        None => g.connects.len().to_string(),
    };
    vec![
        (g.host.clone(), t.text()),
        (
            g.active_state.clone().unwrap_or_else(|| "?".into()),
            style(t, service_sev),
        ),
        (ip(g.tunnel_exit), style(t, exit_sev)),
        (ip(g.direct_exit), t.text()),
        (
            g.server.map_or("?".to_string(), |s| s.to_string()),
            t.text(),
        ),
        (
            g.tunnel_addr
                .as_ref()
                .map_or("?".to_string(), |a| a.to_string()),
            t.text(),
        ),
        (reconnects, style(t, flap_sev)),
    ]
}

fn vpn_body(v: &EnvVpn, env: &str, t: &Theme) -> Lines {
    if v.gateways.is_empty() {
        return vec![Line::from(Span::styled(
            format!("  no VPN gateways in {env}"),
            t.muted(),
        ))];
    }
    table(
        t,
        &[
            "HOST",
            "SERVICE",
            "TUNNEL EXIT",
            "DIRECT EXIT",
            "SERVER",
            "TUNNEL ADDRESS",
            "RECONNECTS",
        ],
        v.gateways.iter().map(|g| gateway_row(g, t)).collect(),
    )
}

/// `  ✗ message`, wrapped to `width` under its first word.
fn verdict_lines(v: &Verdict, t: &Theme, width: usize) -> Lines {
    let st = t.severity(v.severity);
    let indent = 4;
    wrap(&v.message, width.saturating_sub(indent).max(10))
        .into_iter()
        .enumerate()
        .map(|(i, chunk)| {
            let lead = if i == 0 {
                format!("  {} ", glyph(Some(v.severity)))
            } else {
                " ".repeat(indent)
            };
            Line::from(vec![Span::styled(lead, st), Span::styled(chunk, st)])
        })
        .collect()
}

/// Greedy word wrap at `width` characters; a word longer than the width is cut.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut cur_len = 0;
    for word in text.split_whitespace() {
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let need = if cur_len == 0 {
                word.len()
            } else {
                cur_len + 1 + word.len()
            };
            if need <= width {
                if cur_len > 0 {
                    cur.push(' ');
                }
                cur.extend(word.iter());
                cur_len = need;
                break;
            }
            if cur_len > 0 {
                out.push(std::mem::take(&mut cur));
                cur_len = 0;
                continue;
            }
            let rest = word.split_off(width);
            out.push(word.iter().collect());
            word = rest;
            if word.is_empty() {
                break;
            }
        }
    }
    if cur_len > 0 || out.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn wraps_at_words_and_cuts_long_ones() {
        assert_eq!(wrap("a bb ccc", 4), vec!["a bb", "ccc"]);
        assert_eq!(wrap("abcdefghij", 4), vec!["abcd", "efgh", "ij"]);
        assert_eq!(wrap("", 4), vec![""]);
        assert_eq!(wrap("x  y", 10), vec!["x y"]);
    }
}
