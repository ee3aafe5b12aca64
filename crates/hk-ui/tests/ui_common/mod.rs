//! Shared fixtures for the console tests: an app over the fake homelab inventory, a
//! recording executor (a test double: it records what it is handed and runs nothing), a
//! driver that plays executor replies, a frame renderer on a fixed-size TestBackend, and
//! live updates judged by the real rules ([`live`]).
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use hk_effects::context::ContextError;
use hk_engine::runbook::embedded;
use hk_engine::runbook::machine::{Input, Timestamp};
use hk_engine::runbook::plan::{Gate, Plan, StepKind};
use hk_engine::runbook::schema::Runbook;
use hk_session::exec::{
    Capabilities, ExecReply, ExecRequest, MutatingExecutors, ReadOnlyExecutors, StepExecutor,
};
use hk_session::PlanSourceError;
use hk_ui::app::{App, AppParts, EnvSummary, Overlay, PlanSource};
use hk_ui::theme::ThemeSet;
use hk_ui::view;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use tokio::sync::mpsc;

pub mod live;
pub mod screens;
// The sample-shaped fake inventory every console test plans against.
pub use hk_test_support::runbooks::{dev, homelab, prod};

/// 2026-09-07T10:15:00.000Z: every test runs at this time, so snapshots do not move.
pub const T0: Timestamp = Timestamp(1_788_776_100_000);

pub struct FakePlans;

impl PlanSource for FakePlans {
    fn plan(
        &self,
        runbook: &Runbook,
        env: &str,
        host: Option<&str>,
    ) -> Result<Plan, PlanSourceError> {
        let mut penv = match env {
            "prod" => prod(),
            "dev" => dev(),
            other => {
                return Err(ContextError::UnknownEnv {
                    name: other.to_string(),
                    known: "dev, prod".into(),
                }
                .into())
            }
        };
        penv.host = host.map(str::to_string);
        Ok(hk_engine::runbook::plan::plan(runbook, &penv, &homelab())?)
    }
}

pub fn envs() -> Vec<EnvSummary> {
    vec![
        EnvSummary {
            name: "dev".into(),
            hosts: 3,
            vip: Some("192.168.1.49".into()),
            problems: vec![],
            servers: ["k3s-dev-1", "k3s-dev-2", "k3s-dev-3"]
                .map(String::from)
                .to_vec(),
            objects: None,
        },
        EnvSummary {
            name: "prod".into(),
            hosts: 3,
            vip: Some("192.168.2.9".into()),
            problems: vec![],
            servers: ["k3s-prod-1", "k3s-prod-2", "k3s-prod-3"]
                .map(String::from)
                .to_vec(),
            objects: None,
        },
    ]
}

pub fn parts(runs_dir: &std::path::Path) -> AppParts {
    AppParts {
        environments: envs(),
        runbooks: embedded::load(&[]).expect("shipped runbooks load"),
        not_offered: Default::default(),
        plans: Arc::new(FakePlans),
        runs_dir: Some(runs_dir.to_path_buf()),
        themes: ThemeSet::builtin(),
        theme: None,
        keymaps: Default::default(),
        config_warnings: Vec::new(),
        no_color: false,
        operator: "alice".into(),
        now: T0,
        faults: None,
        locking: None,
    }
}

/// Records what it is handed; runs nothing. Tests play the replies.
#[derive(Debug)]
pub struct Recorder {
    pub kind: StepKind,
    pub mutates: bool,
    pub seen: Arc<Mutex<Vec<ExecRequest>>>,
}

impl StepExecutor for Recorder {
    fn kind(&self) -> StepKind {
        self.kind
    }
    fn mutates(&self) -> bool {
        self.mutates
    }
    fn handle(&self, req: ExecRequest, _replies: mpsc::Sender<ExecReply>) {
        if let Ok(mut v) = self.seen.lock() {
            v.push(req);
        }
    }
}

pub const ALL_KINDS: [StepKind; 10] = [
    StepKind::ListHosts,
    StepKind::Ansible,
    StepKind::Ssh,
    StepKind::KubeWait,
    StepKind::Probe,
    StepKind::Gate,
    StepKind::Manual,
    StepKind::FluxReconcile,
    StepKind::EtcdLeader,
    StepKind::EtcdSnapshot,
];

pub fn read_only_recorders(kinds: &[StepKind]) -> ReadOnlyExecutors {
    let mut ro = ReadOnlyExecutors::default();
    for k in kinds {
        ro.add(Arc::new(Recorder {
            kind: *k,
            mutates: false,
            seen: Arc::default(),
        }))
        .expect("read-only recorder");
    }
    ro
}

pub fn operate_caps(ro_kinds: &[StepKind], mut_kinds: &[StepKind]) -> Capabilities {
    let mut m = MutatingExecutors::default();
    for k in mut_kinds {
        m.add(Arc::new(Recorder {
            kind: *k,
            mutates: true,
            seen: Arc::default(),
        }));
    }
    Capabilities::Operate {
        read_only: read_only_recorders(ro_kinds),
        mutating: m,
    }
}

/// Draw one frame of `app` at `w` x `h` and return the backend (its Display is the text
/// grid insta stores).
pub fn render(app: &mut App, w: u16, h: u16) -> TestBackend {
    app.update(hk_ui::action::Action::Resize(w, h));
    let mut term = Terminal::new(TestBackend::new(w, h)).expect("test terminal");
    term.draw(|f| view::draw(f, app)).expect("draw");
    term.backend().clone()
}

/// The text of a frame, one string.
pub fn text(b: &TestBackend) -> String {
    b.to_string()
}

pub fn key(c: char) -> crossterm::event::KeyEvent {
    crossterm::event::KeyEvent::new(
        crossterm::event::KeyCode::Char(c),
        crossterm::event::KeyModifiers::NONE,
    )
}

pub fn code(c: crossterm::event::KeyCode) -> crossterm::event::KeyEvent {
    crossterm::event::KeyEvent::new(c, crossterm::event::KeyModifiers::NONE)
}

pub fn ctrl(c: char) -> crossterm::event::KeyEvent {
    crossterm::event::KeyEvent::new(
        crossterm::event::KeyCode::Char(c),
        crossterm::event::KeyModifiers::CONTROL,
    )
}

pub fn type_str(app: &mut App, s: &str) {
    for c in s.chars() {
        app.handle_key(key(c));
    }
}

/// Play one outstanding executor request the way a successful executor would: started,
/// `output` lines, finished with the expected exit code; verification passes (a list-hosts
/// step lists exactly the expected hosts). Returns the request played, if any.
pub fn play_one(app: &mut App, output: &[&str]) -> Option<ExecRequest> {
    let req = app.outbox_mut().pop_front()?;
    let tag = req.tag();
    match &req {
        ExecRequest::Execute { step, attempt, .. } => {
            let (n, attempt) = (step.n, *attempt);
            for l in output {
                app.handle_exec(ExecReply::Output {
                    tag,
                    n,
                    attempt,
                    line: l.to_string(),
                });
            }
            let code = step.expect.as_ref().and_then(|e| e.exit_code).unwrap_or(0);
            app.handle_exec(ExecReply::Outcome {
                tag,
                input: Input::StepFinished {
                    n,
                    attempt,
                    exit_code: Some(code),
                    error: None,
                },
            });
        }
        ExecRequest::Verify { step, attempt, .. } => {
            let hosts = match (
                &step.gate,
                step.expect.as_ref().and_then(|e| e.hosts.clone()),
            ) {
                (_, Some(h)) => Some(h),
                (Some(Gate::ConfirmHosts { expected }), None) => Some(expected.clone()),
                _ => None,
            };
            let input = match hosts {
                Some(hosts) => Input::HostSetObserved {
                    n: step.n,
                    attempt: *attempt,
                    hosts,
                },
                None => Input::VerifyResult {
                    n: step.n,
                    attempt: *attempt,
                    ok: true,
                    detail: "expectations met".into(),
                },
            };
            app.handle_exec(ExecReply::Outcome { tag, input });
        }
        ExecRequest::Cancel { step, attempt, .. } => {
            app.handle_exec(ExecReply::Outcome {
                tag,
                input: Input::Cancelled {
                    n: step.n,
                    attempt: *attempt,
                    reason: "stopped by the operator".into(),
                },
            });
        }
    }
    Some(req)
}

/// Answer the open gate modal correctly through the keyboard.
pub fn answer_gate(app: &mut App) -> bool {
    let Some(Overlay::Gate(m)) = &app.overlay() else {
        return false;
    };
    let answer = match &m.gate {
        Gate::TypedConfirm { phrase } => Some(phrase.clone()),
        Gate::ConfirmHosts { expected } => Some(expected.len().to_string()),
        _ => None,
    };
    if let Some(a) = answer {
        type_str(app, &a);
    }
    app.handle_key(code(crossterm::event::KeyCode::Enter));
    true
}
