//! The live strip: VIP lease, Agent env, VPN egress for the current environment, each
//! saying plainly whether it has no data yet, is stale (with its age), or could not look.
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;

use crate::observe::types::{EndpointVerdict, Observation, ObservationBody, Pane};
use crate::ui::app::{App, STALE_AFTER_MS};
use crate::ui::theme::Theme;

use super::age;

/// What a pane has to show.
pub enum PaneView<'a> {
    NoData,
    Data {
        obs: &'a Observation,
        stale: bool,
    },
    Error {
        message: &'a str,
        at: u64,
        last: Option<&'a Observation>,
    },
}

pub fn pane_view<'a>(app: &'a App, pane: Pane) -> PaneView<'a> {
    let env = app.current_env.clone().unwrap_or_default();
    let data = app.live.latest.get(&(env.clone(), pane));
    let err = app.live.latest.get(&(format!("{env}#error"), pane));
    match (data, err) {
        (_, Some(e)) if data.is_none_or(|d| d.at <= e.at) => match &e.body {
            ObservationBody::Error { message, .. } => PaneView::Error {
                message,
                at: e.at.0,
                last: data,
            },
            _ => PaneView::NoData,
        },
        (Some(d), _) => PaneView::Data {
            obs: d,
            stale: app.now.0.saturating_sub(d.at.0) > STALE_AFTER_MS,
        },
        (None, _) => PaneView::NoData,
    }
}

pub fn draw(f: &mut Frame, area: Rect, app: &App) {
    let areas = Layout::horizontal([Constraint::Ratio(1, 3); 3]).split(area);
    for (pane, r) in Pane::ALL.iter().zip(areas.iter()) {
        draw_pane(f, *r, app, *pane);
    }
}

/// One line for small terminals: each pane's headline.
pub fn draw_summary(f: &mut Frame, area: Rect, app: &App) {
    let t = &app.theme;
    let mut spans = Vec::new();
    for pane in Pane::ALL {
        let (head, style) = headline(app, pane, t);
        spans.push(Span::styled(format!("{}: ", pane.title()), t.muted()));
        spans.push(Span::styled(head, style));
        spans.push(Span::raw("  "));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn headline(app: &App, pane: Pane, t: &Theme) -> (String, ratatui::style::Style) {
    match pane_view(app, pane) {
        PaneView::NoData => ("no data yet".into(), t.muted()),
        PaneView::Error { at, .. } => (
            format!("error {} ago", age(app.now.0.saturating_sub(at))),
            t.critical(),
        ),
        PaneView::Data { obs, stale: true } => (
            format!("stale {}", age(app.now.0.saturating_sub(obs.at.0))),
            t.warn(),
        ),
        PaneView::Data { obs, stale: false } => {
            let lines = body_lines(obs, t);
            match lines.into_iter().next() {
                Some(l) => (
                    l.spans.iter().map(|s| s.content.as_ref()).collect(),
                    l.spans.first().map_or(t.text(), |s| s.style),
                ),
                None => ("ok".into(), t.ok()),
            }
        }
    }
}

fn draw_pane(f: &mut Frame, area: Rect, app: &App, pane: Pane) {
    let t = &app.theme;
    let mut title = vec![Span::styled(format!(" {} ", pane.title()), t.title())];
    let lines: Vec<Line> = match pane_view(app, pane) {
        PaneView::NoData => vec![Line::from(Span::styled("no data yet", t.muted()))],
        PaneView::Error { message, at, last } => {
            title.push(Span::styled(
                format!("error {} ago ", age(app.now.0.saturating_sub(at))),
                t.critical(),
            ));
            let mut v = vec![Line::from(Span::styled(message.to_string(), t.critical()))];
            if let Some(o) = last {
                v.push(Line::from(Span::styled(
                    format!("last seen {} ago:", age(app.now.0.saturating_sub(o.at.0))),
                    t.muted(),
                )));
                v.extend(body_lines(o, t));
            }
            v
        }
        PaneView::Data { obs, stale } => {
            let a = age(app.now.0.saturating_sub(obs.at.0));
            if stale {
                title.push(Span::styled(format!("stale {a} "), t.warn()));
                body_lines(obs, t)
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
            } else {
                title.push(Span::styled(format!("{a} ago "), t.muted()));
                body_lines(obs, t)
            }
        }
    };
    f.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: true }).block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(t.border())
                .title(Line::from(title)),
        ),
        area,
    );
}

fn body_lines<'a>(obs: &'a Observation, t: &Theme) -> Vec<Line<'a>> {
    match &obs.body {
        ObservationBody::VipLease(v) => {
            let holder = match &v.holder {
                Some(h) => Line::from(vec![
                    Span::styled("held by ", t.text()),
                    Span::styled(h.as_str(), t.ok()),
                    Span::styled(
                        v.renewed_at.map_or(String::new(), |r| {
                            format!(" · renewed {} ago", age(obs.at.0.saturating_sub(r.0)))
                        }),
                        t.muted(),
                    ),
                ]),
                None => Line::from(Span::styled(
                    "no holder: nobody announces the VIP",
                    t.critical(),
                )),
            };
            let answers = match v.api_answers {
                Some(true) => Span::styled(format!("{} answers", v.vip), t.ok()),
                Some(false) => Span::styled(format!("{} does NOT answer", v.vip), t.critical()),
                None => Span::styled(format!("{} not probed", v.vip), t.muted()),
            };
            vec![holder, Line::from(answers)]
        }
        ObservationBody::AgentEnv(a) => {
            let total = a.agents.len();
            let on = a.on_vip();
            let mut v = vec![Line::from(Span::styled(
                format!("{on}/{total} agents dial the VIP"),
                if on == total && total > 0 {
                    t.ok()
                } else {
                    t.critical()
                },
            ))];
            for ag in a
                .agents
                .iter()
                .filter(|g| g.verdict != EndpointVerdict::Vip)
            {
                let host = ag.service_host.as_deref().unwrap_or("unset");
                let what = match ag.verdict {
                    EndpointVerdict::NodeIp => "a node IP: single-node dependency",
                    _ => "not the VIP",
                };
                v.push(Line::from(Span::styled(
                    format!("{} → {host} ({what})", ag.node),
                    t.critical(),
                )));
            }
            v
        }
        ObservationBody::VpnEgress(vpn) => {
            let mut v: Vec<Line> = vpn
                .evicting_pairs()
                .into_iter()
                .map(|(a, b)| {
                    Line::from(Span::styled(
                        format!("EVICTION LOOP: {a} and {b} share server and tunnel address"),
                        t.critical(),
                    ))
                })
                .collect();
            for g in &vpn.gateways {
                let (state, style) = if !g.tunnel_active {
                    ("tunnel down".to_string(), t.critical())
                } else if g.leaks() {
                    ("exits via the home ISP".to_string(), t.critical())
                } else {
                    (
                        format!("exit {}", g.exit_ip.as_deref().unwrap_or("unknown")),
                        t.ok(),
                    )
                };
                let mut spans = vec![
                    Span::styled(format!("{} ", g.host), t.text()),
                    Span::styled(state, style),
                ];
                if g.recent_restarts > 0 {
                    spans.push(Span::styled(
                        format!(" · {} restarts", g.recent_restarts),
                        t.warn(),
                    ));
                }
                v.push(Line::from(spans));
            }
            if vpn.gateways.is_empty() {
                v.push(Line::from(Span::styled("no gateways", t.muted())));
            }
            v
        }
        ObservationBody::Error { message, .. } => {
            vec![Line::from(Span::styled(message.as_str(), t.critical()))]
        }
    }
}
