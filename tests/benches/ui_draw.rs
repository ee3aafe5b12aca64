//! Drawing cost of the run view with 100k output lines pushed and the live strip full, and
//! of the Live screen with every pane full (the 2026-09-06 agents, a stuck rollout, the
//! eviction loop: the longest verdict lists). `cargo bench --bench ui_draw`; figures go to
//! docs/perf.md.
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use hk_console::runbook::machine::Timestamp;
use hk_console::runbook::plan::StepKind;
use hk_console::session::exec::{ExecReply, ExecRequest};
use hk_console::ui::app::{App, Screen};
use hk_console::ui::output::OutputBuffer;
use hk_console::ui::view;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

#[path = "../../crates/hk-ui/tests/ui_common/mod.rs"]
mod ui_common;
use ui_common::live::*;
use ui_common::*;

const LINES: usize = 100_000;

fn line(i: usize) -> String {
    format!("TASK [etcd-io-priority : read back] ok: [k3s-prod-3] => (item=system.slice) line {i}")
}

fn app_with_output(dir: &std::path::Path) -> App {
    let mut app = App::operate(
        parts(dir),
        operate_caps(
            &[StepKind::ListHosts, StepKind::Ansible, StepKind::Ssh],
            &[],
        ),
    );
    app.open_runbook("etcd-io-priority", Some("prod"), None);
    app.handle_key(key('s'));
    let Some(ExecRequest::Execute {
        tag, step, attempt, ..
    }) = app.outbox_mut().pop_front()
    else {
        panic!("step 1 goes out");
    };
    for i in 0..LINES {
        app.handle_exec(ExecReply::Output {
            tag,
            n: step.n,
            attempt,
            line: line(i),
        });
    }
    app.set_current_env(Some("prod".into()));
    feed_live(&mut app);
    app
}

/// Every pane of prod, in the states with the most to show: all agents on a node address,
/// a rollout stuck on an unready pod, the eviction loop, plus healthy VIP and nodes.
fn feed_live(app: &mut App) {
    let at = Timestamp(T0.0 - 3_000);
    for u in [
        vip("prod", at),
        agents_on_node_ip(at),
        rollout_stuck(at),
        nodes_update("prod", at),
        vpn_eviction_loop(at),
    ] {
        app.handle_update(u);
    }
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut app = app_with_output(dir.path());
    let a = app.active().expect("run");
    eprintln!(
        "output ring: {} lines held of {} pushed, {} dropped; heap {} bytes now, text bound {} bytes",
        a.output.len(),
        LINES,
        a.output.dropped(),
        a.output.heap_bytes(),
        a.output.max_text_bytes()
    );
    let mut term = Terminal::new(TestBackend::new(160, 48)).expect("terminal");
    c.bench_function("draw run view 160x48, 100k lines pushed, live strip", |b| {
        b.iter(|| {
            term.draw(|f| view::draw(f, black_box(&app))).expect("draw");
        })
    });
    // Scrolled back: the window is taken from the middle of the ring.
    if let Some(a) = app.active_mut() {
        a.output.scroll_up(10_000);
    }
    c.bench_function("draw run view 160x48, scrolled 10k lines back", |b| {
        b.iter(|| {
            term.draw(|f| view::draw(f, black_box(&app))).expect("draw");
        })
    });
    // The Live screen, every pane full.
    let mut live = App::operate(parts(dir.path()), operate_caps(&[], &[]));
    live.set_current_env(Some("prod".into()));
    feed_live(&mut live);
    live.set_screen(Screen::Live);
    live.update(hk_console::ui::action::Action::Resize(160, 48));
    c.bench_function("draw Live screen 160x48, every pane full", |b| {
        b.iter(|| {
            term.draw(|f| view::draw(f, black_box(&live)))
                .expect("draw");
        })
    });
    c.bench_function("push 100k lines into the output ring", |b| {
        b.iter(|| {
            let mut o = OutputBuffer::default();
            for i in 0..LINES {
                o.push(&line(i));
            }
            black_box(o.len())
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(4));
    targets = bench
}
criterion_main!(benches);
