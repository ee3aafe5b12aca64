//! The cluster's run lock around real runs in the simulation, headless: a mutating run
//! takes `kube-system/hk-console-run-lock` on the demo's kube API (read through the API
//! while the run lives: holder login@host, the run's id and runbook) and releases it at the
//! end, both journaled; a second run while another console holds it does not start, naming
//! the holder, and writes no journal; `--no-cluster-lock` runs without it and journals
//! that; a stale lock refuses the start and is taken over only with the environment's
//! name typed and a reason, journaled in the new run and marked on the Lease for the old.
//! An interrupted run resumes only by taking the lock again under its own run id; on a stale
//! lock the console's resume gets the take-over prompt (asked off the UI task), and a lock
//! lost while the run lives is reported, on the frame's top line too.
//! Needs ansible-playbook (HK_ANSIBLE_BIN_DIR, PATH or /opt/hk-venv/bin): fails, not skips.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::demo_common::client;
use hk_console::cluster::lock::{self, Claimant, LOCK_NAME, LOCK_NAMESPACE, RUN_ID_ANNOTATION};
use hk_console::cluster::KubeOverrides;
use hk_console::record;
use hk_console::sim::demo::{self, Demo};
use hk_console::sim::headless::{drive_with_lock, HeadlessError, HeadlessRun};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

fn require_ansible() {
    let dirs = hk_console::exec::ansible::search_dirs();
    assert!(
        hk_console::exec::ansible::find_binary("ansible-playbook", &dirs).is_some(),
        "ansible-playbook not found: {}",
        hk_console::exec::ansible::INSTALL_HINT
    );
}

async fn lease(c: &kube::Client) -> Option<Lease> {
    Api::<Lease>::namespaced(c.clone(), LOCK_NAMESPACE)
        .get_opt(LOCK_NAME)
        .await
        .expect("read the lock Lease")
}

fn holder(l: &Option<Lease>) -> Option<String> {
    l.as_ref()?
        .spec
        .as_ref()?
        .holder_identity
        .clone()
        .filter(|h| !h.is_empty())
}

fn packages(host: &str) -> HeadlessRun {
    HeadlessRun {
        runbook: "packages-baseline".into(),
        env: Some("dev".into()),
        host: Some(host.into()),
        deadline: Duration::from_secs(300),
    }
}

async fn run(
    d: &Demo,
    runs: &std::path::Path,
    no_lock: bool,
) -> Result<hk_console::sim::headless::Report, HeadlessError> {
    let set = hk_console::runbook::embedded::load(&[]).expect("shipped runbooks");
    drive_with_lock(d, set, &packages("k3s-dev-2"), runs, no_lock, |l| {
        eprintln!("{l}")
    })
    .await
}

/// What every test here starts from: the demo (its dev cluster's API answering), a
/// client on that API, and a temporary directory for repos and runs.
struct Lab {
    dir: tempfile::TempDir,
    d: Demo,
    c: kube::Client,
}

async fn lab() -> Lab {
    require_ansible();
    let dir = tempfile::tempdir().expect("tempdir");
    let d = demo::start("healthy", &dir.path().join("repo"))
        .await
        .expect("demo");
    let c = client(&d, "dev").await;
    Lab { dir, d, c }
}

/// Another console's claim on dev's lock.
fn other(holder: &str, run_id: &str, runbook: &str) -> Claimant {
    Claimant {
        holder: holder.into(),
        run_id: run_id.into(),
        runbook: runbook.into(),
        env: "dev".into(),
    }
}

fn bob() -> Claimant {
    other(
        "bob@console-b",
        "20261203T120000000Z-memattr-survey-dev",
        "memattr-survey",
    )
}

/// Ann's console took dev's lock for 1 s and died: a stale lock.
async fn ann_left_a_stale_lock(c: &kube::Client) -> Claimant {
    let ann = other(
        "ann@console-a",
        "20261203T110000000Z-etcd-io-priority-dev",
        "etcd-io-priority",
    );
    drop(lock::acquire(c, &ann, 1).await.expect("ann takes it"));
    tokio::time::sleep(Duration::from_millis(2100)).await;
    ann
}

/// The console's executors and lock for the demo's repo, as `hk-console demo` builds them.
fn console_parts(
    d: &Demo,
) -> (
    hk_console::repo::Repo,
    hk_console::session::exec::Capabilities,
    Arc<hk_console::session::lock::RunLocking>,
) {
    use hk_console::session::executors::{capabilities_with, Clusters};
    let repo = hk_console::repo::Repo::load(&d.dir).expect("repo");
    let clusters = Arc::new(Clusters::for_repo(&repo, &KubeOverrides::default()));
    let (caps, _) = capabilities_with(&repo, false, clusters, &d.exec_setup());
    let locking = Arc::new(hk_console::session::lock::RunLocking::for_repo(
        &repo,
        &KubeOverrides::default(),
        false,
    ));
    (repo, caps, locking)
}

fn this_console() -> String {
    Claimant::this_console("x", "x", "x").holder
}

fn run_id_on(l: &Option<Lease>) -> Option<String> {
    l.as_ref()?
        .metadata
        .annotations
        .as_ref()?
        .get(RUN_ID_ANNOTATION)
        .cloned()
}

fn lock_notes(journal: &std::path::Path) -> Vec<String> {
    record::load_path(journal)
        .expect("record")
        .decisions
        .into_iter()
        .filter(|d| d.what == "run-lock")
        .filter_map(|d| d.note)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutating_run_takes_the_lock_and_releases_it_and_a_second_console_is_refused() {
    let Lab { dir, d, c } = lab().await;
    assert_eq!(holder(&lease(&c).await), None, "free before any run");

    // Watch the Lease through the API while the run lives.
    let seen: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let stop = tokio_util::sync::CancellationToken::new();
    let watcher = {
        let (c, seen, stop) = (c.clone(), Arc::clone(&seen), stop.clone());
        tokio::spawn(async move {
            while !stop.is_cancelled() {
                let l = lease(&c).await;
                if let Some(h) = holder(&l) {
                    let id = run_id_on(&l).unwrap_or_default();
                    seen.lock().expect("seen").push((h, id));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let r = run(&d, &dir.path().join("runs-a"), false)
        .await
        .expect("the run starts");
    stop.cancel();
    watcher.await.expect("watcher");
    assert!(r.succeeded, "{}", r.render());
    let me = this_console();
    let run_id = record::load_path(&r.journal).expect("record").run_id;
    let seen = seen.lock().expect("seen").clone();
    assert!(!seen.is_empty(), "the Lease was never held during the run");
    assert!(
        seen.iter().all(|(h, id)| h == &me && id == &run_id),
        "held by {seen:?}, expected {me} for run {run_id}"
    );
    let after = lease(&c).await;
    assert_eq!(holder(&after), None, "released at the end: {after:?}");
    let notes = lock_notes(&r.journal);
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(
        notes[0].starts_with(&format!("run lock taken by {me} (60 s")),
        "{notes:?}"
    );
    assert_eq!(notes[1], "run lock released");

    // Another console holds it: the run does not start, and says who.
    let _held = lock::acquire(&c, &bob(), 60).await.expect("bob takes it");
    let runs_b = dir.path().join("runs-b");
    match run(&d, &runs_b, false).await {
        Err(HeadlessError::Start { why, .. }) => {
            eprintln!("refused: {why}");
            assert!(
                why.contains("another console holds the run lock of `dev`: bob@console-b running memattr-survey"),
                "{why}"
            );
            assert!(why.contains(" since "), "{why}");
        }
        Err(other) => panic!("{other}"),
        Ok(r) => panic!("started while bob holds the lock: {}", r.render()),
    }
    assert!(
        std::fs::read_dir(&runs_b).map_or(true, |mut d| d.next().is_none()),
        "a refused run leaves no journal"
    );

    // --no-cluster-lock: it runs, journals that it took no lock, and leaves bob's alone.
    let r = run(&d, &dir.path().join("runs-c"), true)
        .await
        .expect("runs without the lock");
    assert!(r.succeeded, "{}", r.render());
    let notes = lock_notes(&r.journal);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].starts_with(&format!(
            "run without the cluster's run lock (--no-cluster-lock, by {me})"
        )),
        "{notes:?}"
    );
    assert_eq!(holder(&lease(&c).await).as_deref(), Some("bob@console-b"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_lock_is_taken_over_only_with_the_typed_answer_and_both_runs_see_it() {
    use hk_console::runbook::machine::Input;
    use hk_console::session::Session;
    let Lab { dir, d, c } = lab().await;
    let ann = ann_left_a_stale_lock(&c).await;

    // The console's session, as the app opens it (its lock asked on this task).
    let (repo, caps, locking) = console_parts(&d);
    let set = hk_console::runbook::embedded::load(&[]).expect("runbooks");
    let plans = hk_console::session::RepoPlans { repo };
    let (plan, _) = hk_console::session::open_plan(
        &set,
        &plans,
        "packages-baseline",
        Some("dev"),
        None,
        Some("k3s-dev-2"),
    )
    .expect("plan");
    let mut s = Session::plan(plan, &caps, "carol", Some(locking)).expect("session");
    let runs = dir.path().join("runs");
    let now = hk_console::journal::now();
    let why = s.start(Some(&runs), now).expect_err("stale: refused").0;
    assert!(
        why.contains("the run lock of `dev` is stale: ann@console-a running etcd-io-priority"),
        "{why}"
    );
    assert!(why.contains("last renewed"), "{why}");
    let (record, age) = s.stale_lock().cloned().expect("the prompt's facts");
    assert_eq!(record.holder, "ann@console-a");
    assert!(age >= 1000, "{age}");
    // Wrong name, no reason: refused, nothing journaled, the Lease unchanged.
    let err = s
        .take_over_and_start(Some(&runs), now, "prod", "ann is gone")
        .expect_err("wrong env");
    assert!(
        err.0.contains("type the environment's name `dev`"),
        "{err:?}"
    );
    let err = s
        .take_over_and_start(Some(&runs), now, "dev", " ")
        .expect_err("no reason");
    assert!(err.0.contains("reason"), "{err:?}");
    assert!(s.journal.is_none());
    assert_eq!(holder(&lease(&c).await).as_deref(), Some("ann@console-a"));

    let now = hk_console::journal::now();
    s.take_over_and_start(Some(&runs), now, "dev", "ann's laptop died")
        .expect("taken over and started");
    let me = this_console();
    assert_eq!(holder(&lease(&c).await), Some(me.clone()));
    // The new run's journal: the take-over first, before the start.
    let path = s.journal.as_ref().expect("journal").path().to_path_buf();
    let r = hk_console::journal::replay(&path).expect("replay");
    match &r.records[0].input {
        Input::RunLock { note } => {
            let said = note.to_string();
            assert!(said.starts_with("stale run lock of ann@console-a (run 20261203T110000000Z-etcd-io-priority-dev), last renewed "), "{said}");
            assert!(
                said.ends_with(&format!(
                    "taken over by {me} (typed `dev`): ann's laptop died"
                )),
                "{said}"
            );
        }
        other => panic!("first record: {other:?}"),
    }
    assert!(matches!(r.records[1].input, Input::Start));
    // Ann's run learns it from the Lease (what her console journals when it finds out).
    let note = hk_console::session::lock::lost_note(&c, &ann.run_id, "?".into()).await;
    let said = note.to_string();
    assert!(
        said.starts_with(&format!(
            "run lock taken over by {me} (run {}) at ",
            r.header.run_id
        )),
        "{said}"
    );
    assert!(note.to_string().ends_with(": ann's laptop died"), "{note}");
}

/// A packages-baseline run on dev driven to its end headless, then its journal cut as a
/// console killed mid-step leaves it (under `dir`/runs-i): that journal and the run's id.
async fn an_interrupted_run(d: &Demo, dir: &std::path::Path) -> (std::path::PathBuf, String) {
    let r = run(d, &dir.join("runs-a"), false)
        .await
        .expect("the run starts");
    assert!(r.succeeded, "{}", r.render());
    let journal = interrupted_copy(&r.journal, &dir.join("runs-i"));
    let run_id = record::load_path(&r.journal).expect("record").run_id;
    (journal, run_id)
}

/// The journal of `finished` cut just after its last step (the mutating one) started: what a
/// console killed mid-step leaves.
fn interrupted_copy(finished: &std::path::Path, into: &std::path::Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(finished).expect("journal");
    let lines: Vec<&str> = text.lines().collect();
    let cut = lines
        .iter()
        .rposition(|l| l.contains("\"type\":\"step-started\""))
        .unwrap_or_else(|| panic!("no step start in {}:\n{text}", finished.display()));
    std::fs::create_dir_all(into).expect("runs dir");
    let path = into.join(finished.file_name().expect("name"));
    std::fs::write(&path, lines[..=cut].join("\n") + "\n").expect("write");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_run_resumes_only_with_the_lock_held_by_itself() {
    use hk_console::runbook::machine::RunOutcome;
    use hk_console::session::Session;

    let Lab { dir, d, c } = lab().await;
    let (journal, run_id) = an_interrupted_run(&d, dir.path()).await;
    let (_, caps, locking) = console_parts(&d);

    // Another console holds dev's lock: the interrupted run opens to look at, never resumes.
    let held = lock::acquire(&c, &bob(), 60).await.expect("bob takes it");
    let before = std::fs::read_to_string(&journal).expect("journal");
    let opened = Session::open_journal(
        &journal,
        RunOutcome::Interrupted,
        &caps,
        "tester",
        hk_console::time::now(),
        Some(Arc::clone(&locking)),
    )
    .expect("opens");
    let said = format!("{:?}", opened.effects);
    assert!(
        said.contains("not resumed") && said.contains("bob@console-b"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(&journal).expect("journal"),
        before,
        "a run that did not resume journals nothing"
    );
    drop(opened);
    held.release().await.expect("bob lets go");

    // Free: it resumes holding the lock under its own run id, and journals that first.
    let notes_before = lock_notes(&journal);
    let opened = Session::open_journal(
        &journal,
        RunOutcome::Interrupted,
        &caps,
        "tester",
        hk_console::time::now(),
        Some(locking),
    )
    .expect("opens");
    let said = format!("{:?}", opened.effects);
    assert!(said.contains("resumed"), "{said}");
    assert!(!said.contains("not resumed"), "{said}");
    let l = lease(&c).await;
    let me = this_console();
    assert_eq!(holder(&l).as_deref(), Some(me.as_str()), "{l:?}");
    assert_eq!(run_id_on(&l).as_deref(), Some(run_id.as_str()));
    let taken = |notes: &[String]| {
        notes
            .iter()
            .filter(|n| n.starts_with(&format!("run lock taken by {me}")))
            .count()
    };
    let notes = lock_notes(&journal);
    assert_eq!(
        taken(&notes),
        taken(&notes_before) + 1,
        "the resume journals its own taking: {notes:?}"
    );

    // Another console writes itself into the Lease while the run lives: the run's lock
    // reports the loss at its next renewal (what the console's banner shows every frame).
    assert_eq!(opened.session.lock.trouble(), None);
    let patch = serde_json::json!({"spec": {"holderIdentity": "bob@console-b"}});
    Api::<Lease>::namespaced(c.clone(), LOCK_NAMESPACE)
        .patch(
            LOCK_NAME,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .expect("bob overwrites the Lease");
    let deadline = std::time::Instant::now() + Duration::from_secs(45);
    let trouble = loop {
        if let Some(t) = opened.session.lock.trouble() {
            break t;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the lost lock was never reported"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(
        trouble.contains("lost") && trouble.contains("bob@console-b"),
        "{trouble}"
    );
    drop(opened);
}

/// The console over the demo's repo, its journals in `runs`, its lock as `hk-console demo`
/// gives it (the app asks it off its task: the calls queue for the loop's lock pump).
fn console_app(d: &Demo, runs: &std::path::Path) -> hk_console::ui::app::App {
    use hk_console::ui::app::{App, AppParts};
    let (repo, caps, locking) = console_parts(d);
    let parts = AppParts {
        environments: vec![],
        runbooks: hk_console::runbook::embedded::load(&[]).expect("runbooks"),
        not_offered: Default::default(),
        plans: Arc::new(hk_console::session::RepoPlans { repo }),
        runs_dir: Some(runs.to_path_buf()),
        themes: hk_console::ui::theme::ThemeSet::builtin(),
        theme: None,
        keymaps: Default::default(),
        config_warnings: vec![],
        no_color: true,
        operator: "carol".into(),
        now: hk_console::journal::now(),
        faults: None,
        locking: Some(locking),
    };
    App::operate(parts, caps)
}

/// Run the app's queued lock calls as the console's loop does, until none is left: each
/// answer to the app.
async fn answer_locks(
    app: &mut hk_console::ui::app::App,
    locks: &mut hk_console::session::pump::LockPump,
) {
    while !app.lock_outbox().is_empty() {
        locks.run(app.lock_outbox_mut());
        let answer = tokio::time::timeout(Duration::from_secs(20), locks.recv())
            .await
            .expect("the lock call answers")
            .expect("an answer");
        app.set_now(hk_console::journal::now());
        app.handle_lock(answer);
    }
}

fn frame(app: &mut hk_console::ui::app::App, w: u16, h: u16) -> String {
    app.update(hk_console::ui::action::Action::Resize(w, h));
    let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(w, h)).expect("term");
    t.draw(|f| hk_console::ui::view::draw(f, app))
        .expect("draw");
    t.backend().to_string()
}

fn typed(app: &mut hk_console::ui::app::App, s: &str) {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    for c in s.chars() {
        app.handle_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
    }
}

fn press(app: &mut hk_console::ui::app::App, code: crossterm::event::KeyCode) {
    app.handle_key(crossterm::event::KeyEvent::new(
        code,
        crossterm::event::KeyModifiers::NONE,
    ));
}

/// An interrupted run opened from Recent runs while another console's lock is stale: the
/// resume waits on the lock off the UI task, then gets the take-over prompt (not the
/// start's refusal); a wrong environment name is refused in the prompt, the right one
/// with a reason takes it over and resumes the run, journaled in the resumed run and marked
/// on the Lease for ann's. Then another console overwrites the Lease: the next frame's top
/// line says the lock was lost, naming who holds it now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_on_a_stale_lock_gets_the_take_over_prompt_and_a_lost_lock_shows_on_the_frame() {
    use crossterm::event::KeyCode;
    use hk_console::ui::action::Action;
    use hk_console::ui::app::{Overlay, Screen};

    let Lab { dir, d, c } = lab().await;
    let (journal, run_id) = an_interrupted_run(&d, dir.path()).await;
    let ann = ann_left_a_stale_lock(&c).await;
    let mut app = console_app(&d, journal.parent().expect("runs dir"));
    let mut locks = hk_console::session::pump::LockPump::default();
    assert_eq!(app.runs().len(), 1, "{:?}", app.runs_error());
    app.update(Action::FocusNext); // runbooks -> runs
    app.update(Action::Open);
    assert_eq!(app.screen(), Screen::Run, "{:?}", app.status());
    let said = app.status().map(str::to_string).unwrap_or_default();
    assert_eq!(
        said,
        format!("run {run_id}: taking the run lock on dev to resume it…")
    );
    assert_eq!(app.lock_outbox().len(), 1);
    answer_locks(&mut app, &mut locks).await;

    // Stale: the take-over prompt, in the resume's words.
    let said = app.status().map(str::to_string).unwrap_or_default();
    println!("{said}");
    assert!(
        said.starts_with(&format!("run {run_id}: not resumed: the run lock of `dev` is stale: ann@console-a running etcd-io-priority")),
        "{said}"
    );
    assert!(
        said.contains("taking it over (the environment's name typed and a reason) resumes the run"),
        "{said}"
    );
    assert!(
        !said.contains("starting again") && !said.contains("does not start"),
        "{said}"
    );
    assert!(matches!(app.overlay(), Some(Overlay::Takeover(_))));
    let f = frame(&mut app, 160, 45);
    println!("{f}");
    for fact in [
        "holder: ann@console-a",
        "run: 20261203T110000000Z-etcd-io-priority-dev (etcd-io-priority)",
        "held since: ",
        "last renewed: ",
    ] {
        assert!(f.contains(fact), "{fact} not in\n{f}");
    }

    // A wrong environment name: refused in the prompt, nothing asked of the cluster.
    typed(&mut app, "prod");
    press(&mut app, KeyCode::Tab);
    typed(&mut app, "ann's laptop died");
    press(&mut app, KeyCode::Enter);
    match &app.overlay() {
        Some(Overlay::Takeover(m)) => assert!(
            m.error
                .as_deref()
                .is_some_and(|e| e.contains("type the environment's name `dev`")),
            "{:?}",
            m.error
        ),
        other => panic!("the prompt left: {other:?}"),
    }
    assert!(app.lock_outbox().is_empty());
    assert_eq!(holder(&lease(&c).await).as_deref(), Some("ann@console-a"));

    // The right name: taken over, and the run resumes.
    press(&mut app, KeyCode::BackTab);
    for _ in 0..4 {
        press(&mut app, KeyCode::Backspace);
    }
    typed(&mut app, "dev");
    press(&mut app, KeyCode::Enter);
    assert_eq!(app.lock_outbox().len(), 1, "{:?}", app.status());
    answer_locks(&mut app, &mut locks).await;
    println!("{:?}", app.status());
    assert!(
        !matches!(app.overlay(), Some(Overlay::Takeover(_))),
        "{:?}",
        app.status()
    );
    let a = app.active().expect("the run");
    assert!(a.journal.is_some() && !a.view_only, "resumed");
    let me = this_console();
    let l = lease(&c).await;
    assert_eq!(holder(&l).as_deref(), Some(me.as_str()));
    assert_eq!(run_id_on(&l).as_deref(), Some(run_id.as_str()));
    let notes = lock_notes(&journal);
    let took = notes
        .iter()
        .find(|n| n.starts_with("stale run lock of ann@console-a"))
        .unwrap_or_else(|| panic!("no take-over journaled: {notes:?}"));
    assert!(
        took.ends_with(&format!(
            "taken over by {me} (typed `dev`): ann's laptop died"
        )),
        "{took}"
    );
    let note = hk_console::session::lock::lost_note(&c, &ann.run_id, "?".into()).await;
    assert!(
        note.to_string()
            .starts_with(&format!("run lock taken over by {me} (run {run_id}) at ")),
        "{note}"
    );

    // Bob writes himself into the Lease mid-run: the banner line on top of the next frame.
    assert!(!frame(&mut app, 120, 40).contains("RUN LOCK:"));
    let patch = serde_json::json!({"spec": {"holderIdentity": "bob@console-b"}});
    Api::<Lease>::namespaced(c.clone(), LOCK_NAMESPACE)
        .patch(
            LOCK_NAME,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .expect("bob overwrites the Lease");
    let deadline = std::time::Instant::now() + Duration::from_secs(45);
    let f = loop {
        let f = frame(&mut app, 120, 40);
        if f.contains("RUN LOCK:") {
            break f;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no RUN LOCK banner:\n{f}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    println!("{f}");
    let top = f.lines().next().unwrap_or_default();
    assert!(
        top.contains("RUN LOCK: the run lock was lost: bob@console-b holds it now"),
        "{top}"
    );
}

/// Answers `s` as its executors and operator would (every step's work exits 0, the host set
/// is the one expected, each gate is approved or typed right) until the gate of a step
/// `stop` names opens: its number. None: nothing more was asked.
fn drive(
    s: &mut hk_console::session::Session,
    fx: Vec<hk_console::session::SessionEffect>,
    stop: &dyn Fn(usize) -> bool,
) -> Option<usize> {
    use hk_console::runbook::machine::{GateAnswer, Input};
    use hk_console::runbook::plan::{Gate, StepKind};
    use hk_console::session::exec::ExecRequest;
    use hk_console::session::SessionEffect;
    let now = hk_console::journal::now;
    let mut q: std::collections::VecDeque<SessionEffect> = fx.into();
    while let Some(e) = q.pop_front() {
        let more = match e {
            SessionEffect::Request(r) => match *r {
                ExecRequest::Execute { step, attempt, .. } => {
                    assert!(!step.mutates, "driven past a mutating step: {}", step.n);
                    let n = step.n;
                    // Its start is journaled already (before the request left).
                    s.feed(
                        Input::StepFinished {
                            n,
                            attempt,
                            exit_code: Some(0),
                            error: None,
                        },
                        now(),
                    )
                }
                ExecRequest::Verify { step, attempt, .. } => {
                    let n = step.n;
                    if step.kind == StepKind::ListHosts {
                        let hosts = step.host.clone().into_iter().collect();
                        s.feed(Input::HostSetObserved { n, attempt, hosts }, now())
                    } else {
                        s.feed(
                            Input::VerifyResult {
                                n,
                                attempt,
                                ok: true,
                                detail: "ok".into(),
                            },
                            now(),
                        )
                    }
                }
                ExecRequest::Cancel { .. } => Vec::new(),
            },
            SessionEffect::AskGate { n, gate } => {
                if stop(n) {
                    return Some(n);
                }
                let text = match gate {
                    Gate::ConfirmHosts { expected } => Some(expected.len().to_string()),
                    Gate::TypedConfirm { phrase } => Some(phrase),
                    _ => None,
                };
                let input = match text {
                    Some(text) => Input::TypedText {
                        n,
                        by: "carol".into(),
                        text,
                        note: None,
                    },
                    None => Input::GateAnswered {
                        n,
                        answer: GateAnswer::Approved {
                            by: "carol".into(),
                            note: None,
                        },
                    },
                };
                s.feed(input, now())
            }
            _ => Vec::new(),
        };
        q.extend(more);
    }
    None
}

/// Bob writes himself into dev's Lease; returns once `s`'s renewal has found the loss.
async fn bob_takes_the_lease(c: &kube::Client, s: &hk_console::session::Session) -> String {
    let patch = serde_json::json!({"spec": {"holderIdentity": "bob@console-b"}});
    Api::<Lease>::namespaced(c.clone(), LOCK_NAMESPACE)
        .patch(
            LOCK_NAME,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .expect("bob overwrites the Lease");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(t) = s.lock.trouble().filter(|t| t.contains("lost")) {
            return t;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the lost lock was never found"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A run whose lock is lost while it waits at the operator-present gate before its apply:
/// the loss is journaled when the session learns it (its tick), not at the run's end, and
/// the banner says nothing more runs; the gate's approval is refused (nothing journaled but
/// the loss). And a mutating step reached by an executor's reply (no gate in front of it)
/// never leaves the session while the lock is lost: it ends "not started", and its re-run
/// (the decision) is refused too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lock_stops_the_next_gate_and_every_mutating_step_and_is_journaled_when_learnt() {
    use hk_console::runbook::machine::{GateAnswer, Input, StepState};
    use hk_console::runbook::plan::StepKind;
    use hk_console::session::exec::ExecRequest;
    use hk_console::session::{Session, SessionEffect};

    let Lab { dir, d, c } = lab().await;
    let (mut repo, caps, _) = console_parts(&d);
    // A short lock: renewed every 2 s, so the loss is found quickly.
    repo.config.run_lock.duration_s = 6;
    let locking = Arc::new(hk_console::session::lock::RunLocking::for_repo(
        &repo,
        &KubeOverrides::default(),
        false,
    ));
    let set = hk_console::runbook::embedded::load(&[]).expect("runbooks");
    let plans = hk_console::session::RepoPlans { repo };
    let (plan, _) = hk_console::session::open_plan(
        &set,
        &plans,
        "packages-baseline",
        Some("dev"),
        None,
        Some("k3s-dev-2"),
    )
    .expect("plan");
    let apply = plan
        .steps
        .iter()
        .find(|s| s.mutates)
        .map(|s| s.n)
        .expect("a mutating step");
    let runs = dir.path().join("runs");
    let now = hk_console::journal::now;
    let journal_of = |s: &Session| s.journal.as_ref().expect("journal").path().to_path_buf();
    let lines = |p: &std::path::Path| std::fs::read_to_string(p).expect("journal");

    // 1. At the gate in front of the apply.
    let mut s =
        Session::plan(plan.clone(), &caps, "carol", Some(Arc::clone(&locking))).expect("session");
    let fx = s.start(Some(&runs), now()).expect("starts, the lock taken");
    let gate = drive(&mut s, fx, &|n| n == apply - 1).expect("the gate before the apply");
    let journal = journal_of(&s);
    let trouble = bob_takes_the_lease(&c, &s).await;
    assert!(
        trouble.contains("bob@console-b") && trouble.contains("nothing more runs"),
        "{trouble}"
    );
    // The console's tick learns it: journaled now, once.
    let said = format!("{:?}", s.lock_tick(now()));
    assert!(
        said.contains("run lock lost: bob@console-b holds it now"),
        "{said}"
    );
    assert_eq!(
        lock_notes(&journal).last().map(String::as_str),
        Some("run lock lost: bob@console-b holds it now")
    );
    assert!(s.lock_tick(now()).is_empty(), "journaled once");
    let before = lines(&journal);
    let fx = s.feed(
        Input::GateAnswered {
            n: gate,
            answer: GateAnswer::Approved {
                by: "carol".into(),
                note: None,
            },
        },
        now(),
    );
    let said = format!("{fx:?}");
    assert!(
        said.contains("refused (gate-answered): the run lock was lost: bob@console-b"),
        "{said}"
    );
    assert!(
        !fx.iter().any(|e| matches!(e, SessionEffect::Request(_))),
        "{said}"
    );
    assert_eq!(
        lines(&journal),
        before,
        "a refused approval journals nothing"
    );
    assert!(matches!(
        s.run.step_record(gate).map(|r| &r.state),
        Some(StepState::AwaitingGate { .. })
    ));
    // Aborted, its end journals the loss no second time.
    s.feed(
        Input::Abort {
            by: "carol".into(),
            reason: "lost the lock".into(),
        },
        now(),
    );
    let lost = lock_notes(&journal)
        .iter()
        .filter(|n| n.contains("lost"))
        .count();
    assert_eq!(lost, 1, "{:?}", lock_notes(&journal));
    drop(s);

    // 2. The same plan without its gates: the preview's own finish would hand out the apply.
    Api::<Lease>::namespaced(c.clone(), LOCK_NAMESPACE)
        .delete(LOCK_NAME, &Default::default())
        .await
        .expect("bob's Lease goes");
    let mut gateless = plan.clone();
    gateless.steps.retain(|s| s.kind != StepKind::Gate);
    let preview = gateless
        .steps
        .iter()
        .rev()
        .find(|s| s.n < apply)
        .map(|s| s.n)
        .expect("the preview");
    let gateless_ids: Vec<String> = gateless
        .steps
        .iter()
        .map(|s| format!("{} {} {:?}", s.n, s.id, s.kind))
        .collect();
    let mut s =
        Session::plan(gateless, &caps, "carol", Some(Arc::clone(&locking))).expect("session");
    let fx = s.start(Some(&runs), now()).expect("starts, the lock taken");
    // Driven up to the preview's start (its finish is held back).
    let mut fx = fx;
    let attempt = loop {
        let mut next = Vec::new();
        let mut at_preview = None;
        for e in fx {
            match e {
                SessionEffect::Request(r) => match *r {
                    ExecRequest::Execute { step, attempt, .. } if step.n == preview => {
                        at_preview = Some(attempt);
                    }
                    other => next.push(SessionEffect::Request(Box::new(other))),
                },
                e => next.push(e),
            }
        }
        if let Some(a) = at_preview {
            break a;
        }
        assert!(
            !next.is_empty(),
            "the preview (step {preview}) was never asked for: {:?}; plan {:?}",
            s.run.status(),
            gateless_ids
        );
        let mut more = Vec::new();
        drive_one(&mut s, next, &mut more);
        fx = more;
    };
    let journal = journal_of(&s);
    bob_takes_the_lease(&c, &s).await;
    let mut fx = s.feed(
        Input::StepFinished {
            n: preview,
            attempt,
            exit_code: Some(0),
            error: None,
        },
        now(),
    );
    // A look with a condition (the leader look before the move) is verified first: its
    // verdict is what hands out the step after it.
    if fx.iter().any(|e| matches!(e, SessionEffect::Request(r) if matches!(**r, ExecRequest::Verify { ref step, .. } if step.n == preview)))
    {
        fx = s.feed(
            Input::VerifyResult {
                n: preview,
                attempt,
                ok: true,
                detail: "ok".into(),
            },
            now(),
        );
    }
    let said = format!("{fx:?}");
    assert!(
        !fx.iter().any(|e| matches!(e, SessionEffect::Request(r) if matches!(**r, ExecRequest::Execute { ref step, .. } if step.mutates))),
        "the apply left while the lock was lost: {said}"
    );
    assert!(
        said.contains(&format!("step {apply} not started: the run lock was lost")),
        "{said}"
    );
    let rec = s.run.step_record(apply).expect("apply");
    assert!(
        matches!(rec.state, StepState::Failed { .. }) && rec.never_started,
        "{rec:?}"
    );
    assert!(s.run.needs_decision(apply));
    let text = lines(&journal);
    assert!(
        text.contains("the run lock was lost: bob@console-b holds it now"),
        "{text}"
    );
    assert_eq!(
        lock_notes(&journal).last().map(String::as_str),
        Some("run lock lost: bob@console-b holds it now")
    );
    // The decision's re-run is refused too while the lock is lost.
    let before = lines(&journal);
    let said = format!(
        "{:?}",
        s.decide(
            Input::RerunApproved {
                n: apply,
                by: "carol".into(),
                typed: "dev".into(),
            },
            now(),
        )
        .expect("accepted by the machine")
    );
    assert!(said.contains("refused (rerun-approved)"), "{said}");
    assert_eq!(lines(&journal), before);
}

/// One round of [`drive`]'s answers without a stop: what they asked next goes to `out`.
fn drive_one(
    s: &mut hk_console::session::Session,
    fx: Vec<hk_console::session::SessionEffect>,
    out: &mut Vec<hk_console::session::SessionEffect>,
) {
    use hk_console::runbook::machine::Input;
    use hk_console::runbook::plan::{Gate, StepKind};
    use hk_console::session::exec::ExecRequest;
    use hk_console::session::SessionEffect;
    let now = hk_console::journal::now;
    for e in fx {
        match e {
            SessionEffect::Request(r) => match *r {
                ExecRequest::Execute { step, attempt, .. } => {
                    let n = step.n;
                    out.extend(s.feed(
                        Input::StepFinished {
                            n,
                            attempt,
                            exit_code: Some(0),
                            error: None,
                        },
                        now(),
                    ));
                }
                ExecRequest::Verify { step, attempt, .. } if step.kind == StepKind::ListHosts => {
                    let hosts = step.host.clone().into_iter().collect();
                    out.extend(s.feed(
                        Input::HostSetObserved {
                            n: step.n,
                            attempt,
                            hosts,
                        },
                        now(),
                    ));
                }
                // Any other step's work did what it should (etcd's snapshot, its leader
                // look): what a real executor answers when its verdict was met.
                ExecRequest::Verify { step, attempt, .. } => out.extend(s.feed(
                    Input::VerifyResult {
                        n: step.n,
                        attempt,
                        ok: true,
                        detail: "met (the test's executor)".into(),
                    },
                    now(),
                )),
                _ => {}
            },
            SessionEffect::AskGate {
                n,
                gate: Gate::ConfirmHosts { expected },
            } => out.extend(s.feed(
                Input::TypedText {
                    n,
                    by: "carol".into(),
                    text: expected.len().to_string(),
                    note: None,
                },
                now(),
            )),
            _ => {}
        }
    }
}
