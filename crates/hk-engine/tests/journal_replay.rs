//! The journal: append-before-effect, replay equals the live run (event by event and all at
//! once), torn tails, corruption, interruption and resume, and the list of runs.

use hk_test_support::machine as machine_common;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use hk_engine::journal::{
    self, Header, Journal, JournalError, JournalWarning, Record, FORMAT_VERSION,
};
use hk_engine::runbook::machine::{
    Effect, Event, InFlight, Input, Mode, Run, RunOutcome, StepState, Timestamp,
};
use hk_engine::runbook::plan::Plan;
use machine_common::*;

fn new_journal(dir: &Path, plan: &Plan, mode: Mode, at: u64) -> (Journal, Run) {
    let header = Header::new(plan.clone(), mode, "alice", Timestamp(at));
    let journal = Journal::create(dir, &header).expect("create journal");
    let run = Run::with_mode(plan.clone(), mode).expect("plan");
    (journal, run)
}

fn lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .expect("read journal")
        .lines()
        .map(str::to_string)
        .collect()
}

/// Drive a journaled run through `inputs` (all must be accepted).
fn drive(journal: &mut Journal, run: &mut Run, inputs: Vec<Input>, t0: u64) {
    for (i, input) in inputs.into_iter().enumerate() {
        for input in started_first(run, input) {
            let name = input.name();
            journal
                .record(run, ev(t0 + i as u64, input))
                .unwrap_or_else(|e| panic!("input {i} ({name}) refused: {e}"));
        }
    }
}

fn etcd_to_running_apply() -> Vec<Input> {
    vec![
        Input::Start,
        typed(1, "prod"),
        Input::StepStarted { n: 2, attempt: 1 },
        Input::StepFinished {
            n: 2,
            attempt: 1,
            exit_code: Some(0),
            error: None,
        },
        Input::HostSetObserved {
            n: 2,
            attempt: 1,
            hosts: vec!["k3s-prod-3".into()],
        },
        typed(2, "1"),
        Input::StepFinished {
            n: 3,
            attempt: 1,
            exit_code: Some(0),
            error: None,
        },
        approve(3),
        Input::StepStarted { n: 4, attempt: 1 },
    ]
}

#[test]
fn header_then_one_fsynced_line_per_event_before_effects_are_returned() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut journal, mut run) = new_journal(dir.path(), &etcd_plan(), Mode::Operate, 1_000);
    let path = journal.path().to_path_buf();
    assert!(path.starts_with(dir.path()));
    assert_eq!(path.extension().and_then(|e| e.to_str()), Some("jsonl"));

    let first = lines(&path);
    assert_eq!(first.len(), 1);
    let header: Header = serde_json::from_str(&first[0]).expect("header");
    assert_eq!(header.format, FORMAT_VERSION);
    assert_eq!(header.runbook, "etcd-io-priority");
    assert_eq!(header.env, "prod");
    assert_eq!(header.operator, "alice");
    assert_eq!(header.started_at, Timestamp(1_000));
    assert_eq!(header.plan, etcd_plan(), "the full plan is in the header");

    // record() returns the effects only once the event is on disk as the last line.
    let effects = journal
        .record(&mut run, ev(2_000, Input::Start))
        .expect("start");
    assert!(matches!(&effects[..], [Effect::AskGate { n: 1, .. }]));
    let after_start = lines(&path);
    assert_eq!(after_start.len(), 2);
    let rec: Record = serde_json::from_str(&after_start[1]).expect("record");
    assert_eq!(rec.seq, 1);
    assert_eq!(rec.at, Timestamp(2_000));
    assert_eq!(rec.input, Input::Start);

    let effects = journal
        .record(&mut run, ev(2_001, typed(1, "prod")))
        .expect("typed");
    assert!(matches!(&effects[..], [Effect::Execute(_)]));
    let rec: Record = serde_json::from_str(lines(&path).last().expect("line")).expect("record");
    assert_eq!((rec.seq, rec.input), (2, typed(1, "prod")));

    // A refused event is not journaled and the run does not move.
    let before = run.clone();
    let err = journal
        .record(&mut run, ev(2_002, Input::Start))
        .expect_err("start twice");
    assert!(matches!(err, JournalError::Machine(_)));
    assert_eq!(run, before);
    assert_eq!(lines(&path).len(), 3);
    assert_eq!(journal.next_seq(), 3);

    // Plain append() also writes the line before returning its sequence number.
    let mut other = run.clone();
    let event = ev(2_003, Input::StepStarted { n: 2, attempt: 1 });
    let seq = journal.append(&event).expect("append");
    assert_eq!(seq, 3);
    assert_eq!(lines(&path).len(), 4);
    other.step(&event).expect("then step");
    assert_eq!(journal::replay(&path).expect("replay").records.len(), 3);
}

#[test]
fn create_refuses_an_existing_journal_and_bad_run_ids() {
    let dir = tempfile::tempdir().expect("tempdir");
    let header = Header::new(etcd_plan(), Mode::Operate, "alice", Timestamp(1));
    Journal::create(dir.path(), &header).expect("first");
    let err = Journal::create(dir.path(), &header).expect_err("second");
    assert!(matches!(err, JournalError::Exists { .. }), "{err}");
    let mut bad = header.clone();
    bad.run_id = "../escape".into();
    assert!(matches!(
        Journal::create(dir.path(), &bad),
        Err(JournalError::InvalidRunId { .. })
    ));
    // A plan the machine refuses never gets a journal (it could not be replayed).
    let mut dup = etcd_plan();
    dup.steps[2].n = 1;
    let err = Journal::begin(
        dir.path(),
        dup.clone(),
        Mode::Operate,
        "alice",
        Timestamp(7),
    )
    .expect_err("invalid plan");
    assert!(matches!(err, JournalError::Machine(_)), "{err}");
    let err = Journal::create(
        dir.path(),
        &Header::new(dup, Mode::Operate, "alice", Timestamp(7)),
    )
    .expect_err("invalid plan");
    assert!(matches!(err, JournalError::Machine(_)), "{err}");
    assert_eq!(fs::read_dir(dir.path()).expect("dir").count(), 1);
    // begin() gives the journal and a run not yet started.
    let (journal, run) = Journal::begin(
        dir.path(),
        memattr_plan(),
        Mode::Operate,
        "bob",
        Timestamp(8),
    )
    .expect("begin");
    assert_eq!(run.outcome(), RunOutcome::InProgress);
    assert_eq!(lines(journal.path()).len(), 1);
    assert!(!journal::operator_login().is_empty());
    // Nested directories are created.
    let nested = dir.path().join("state/hk-console/runs");
    Journal::create(
        &nested,
        &Header::new(health_plan(), Mode::Observe, "bob", Timestamp(2)),
    )
    .expect("nested");
}

#[test]
fn run_ids_sort_by_time_and_are_file_safe() {
    let id = journal::run_id_for(Timestamp(1_788_776_100_123), "etcd-io-priority", "prod");
    assert_eq!(id, "20260907T101500123Z-etcd-io-priority-prod");
    let odd = journal::run_id_for(Timestamp(0), "a/b c", "p:q");
    assert_eq!(odd, "19700101T000000000Z-a_b_c-p_q");
}

#[test]
fn runs_dir_follows_xdg_then_home() {
    use std::ffi::OsStr;
    assert_eq!(
        journal::runs_dir_from(Some(OsStr::new("/x/state")), Some(OsStr::new("/home/a"))),
        Some(PathBuf::from("/x/state/hk-console/runs"))
    );
    // A relative XDG_STATE_HOME is invalid per the spec and ignored.
    assert_eq!(
        journal::runs_dir_from(Some(OsStr::new("rel")), Some(OsStr::new("/home/a"))),
        Some(PathBuf::from("/home/a/.local/state/hk-console/runs"))
    );
    assert_eq!(
        journal::runs_dir_from(Some(OsStr::new("")), Some(OsStr::new("/home/a"))),
        Some(PathBuf::from("/home/a/.local/state/hk-console/runs"))
    );
    assert_eq!(journal::runs_dir_from(None, None), None);
}

/// Snapshot semantics shared by the property test: the run a reader sees for a journal.
fn as_read_back(live: &Run, last_at: Timestamp) -> Run {
    let mut r = live.clone();
    if !r.in_flight().is_empty() {
        r.step(&Event::new(last_at, Input::Resumed))
            .expect("resume");
    }
    r
}

#[test]
fn replay_event_by_event_equals_replay_all_at_once_for_generated_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut runs = 0;
    let mut events_total = 0;
    for (p, plan) in all_plans().into_iter().enumerate() {
        for mode in [Mode::Operate, Mode::Observe] {
            for seed in 0..40u64 {
                let at0 = 10_000 * (seed + 1) + p as u64 * 1_000_000;
                let header = Header {
                    run_id: format!("p{p}-{mode:?}-s{seed}"),
                    ..Header::new(plan.clone(), mode, "alice", Timestamp(at0))
                };
                let mut journal = Journal::create(dir.path(), &header).expect("create");
                let path = journal.path().to_path_buf();
                let mut live = Run::with_mode(plan.clone(), mode).expect("plan");
                let mut rng = Rng::new(seed * 7 + p as u64);
                let mut accepted: Vec<Event> = Vec::new();
                let mut snapshots: Vec<Run> = vec![live.clone()];
                // Incremental replay: one run fed each accepted event as it happens.
                let mut incremental = Run::with_mode(plan.clone(), mode).expect("plan");
                for t in 0..70u64 {
                    let event = ev(at0 + t, next_input(&live, &mut rng));
                    if journal.record(&mut live, event.clone()).is_ok() {
                        incremental
                            .step(&event)
                            .expect("incremental replay accepts");
                        assert_eq!(incremental, live);
                        let at = event.at;
                        accepted.push(event);
                        snapshots.push(live.clone());
                        // The file read back now shows the live run (in-flight work as
                        // interrupted, since a reader cannot know the process is alive).
                        if t % 5 == 0 {
                            let replayed = journal::replay(&path).expect("replay");
                            assert_eq!(replayed.run, as_read_back(&live, at));
                        }
                    }
                }
                // All at once, from the file.
                let replayed = journal::replay(&path).expect("replay");
                assert!(replayed
                    .warnings
                    .iter()
                    .all(|w| matches!(w, JournalWarning::Interrupted { .. })));
                let last_at = accepted.last().map_or(Timestamp(at0), |e| e.at);
                assert_eq!(replayed.run, as_read_back(&live, last_at));
                let from_file: Vec<Event> = replayed.records.iter().map(Record::event).collect();
                assert_eq!(from_file, accepted);
                for (i, r) in replayed.records.iter().enumerate() {
                    assert_eq!(r.seq, i as u64 + 1);
                }
                // Every prefix, all at once, equals the live run at that point.
                for (k, snap) in snapshots.iter().enumerate() {
                    let prefix = Run::replay(plan.clone(), mode, &accepted[..k]).expect("prefix");
                    assert_eq!(&prefix, snap, "prefix {k} of seed {seed}");
                }
                runs += 1;
                events_total += accepted.len();
            }
        }
    }
    assert_eq!(runs, 240);
    assert!(events_total > 6_000, "only {events_total} events journaled");
    assert_eq!(
        journal::list_runs(dir.path()).expect("list").runs.len(),
        240,
        "every journal lists"
    );
}

#[test]
fn a_torn_last_line_is_ignored_and_reported_then_cut_off_on_resume() {
    for tail in [&b"{\"seq\":3,\"at\":17,\"input\":{\"ty"[..], &[0u8; 12][..]] {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut journal, mut run) = new_journal(dir.path(), &etcd_plan(), Mode::Operate, 1);
        drive(
            &mut journal,
            &mut run,
            vec![Input::Start, typed(1, "prod")],
            10,
        );
        let path = journal.path().to_path_buf();
        drop(journal);
        let good_len = fs::metadata(&path).expect("meta").len();
        fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(tail))
            .expect("tear");

        let replayed = journal::replay(&path).expect("torn tail tolerated");
        // Running step 2 shows as interrupted; the torn line is named.
        let torn: Vec<_> = replayed
            .warnings
            .iter()
            .filter(|w| matches!(w, JournalWarning::TornTail { .. }))
            .collect();
        assert_eq!(
            torn,
            vec![&JournalWarning::TornTail {
                path: path.clone(),
                line: 4,
                bytes: tail.len(),
                truncated: false
            }]
        );
        let text = torn[0].to_string();
        assert!(
            text.starts_with(&format!("{}:4: torn last line", path.display())),
            "{text}"
        );
        assert_eq!(replayed.records.len(), 2);
        assert_eq!(replayed.run, as_read_back(&run, Timestamp(11)));
        // replay() does not touch the file.
        assert_eq!(
            fs::metadata(&path).expect("meta").len(),
            good_len + tail.len() as u64
        );

        // Resume cuts the torn bytes, reports it, and appends after the last whole line.
        let (mut journal, resumed, effects) =
            Journal::resume(&path, Timestamp(50)).expect("resume");
        assert!(resumed.warnings.contains(&JournalWarning::TornTail {
            path: path.clone(),
            line: 4,
            bytes: tail.len(),
            truncated: true
        }));
        assert!(resumed
            .warnings
            .iter()
            .any(|w| matches!(w, JournalWarning::Interrupted { steps, .. } if steps == &vec![2])));
        assert!(matches!(
            &effects[..],
            [Effect::RunFinished {
                outcome: hk_engine::runbook::machine::Outcome::Interrupted { n: 2 }
            }]
        ));
        let all = lines(&path);
        assert_eq!(all.len(), 4, "header, two events, the resume");
        let rec: Record = serde_json::from_str(&all[3]).expect("resume record");
        assert_eq!((rec.seq, rec.input), (3, Input::Resumed));
        let mut run = resumed.run;
        journal
            .record(
                &mut run,
                ev(
                    51,
                    Input::RetryApproved {
                        n: 2,
                        by: "alice".into(),
                    },
                ),
            )
            .expect("retry");
        let clean = journal::replay(&path).expect("replay after resume");
        // No torn tail any more; the retried step runs (so a reader sees it interrupted).
        assert_eq!(
            clean.warnings,
            vec![JournalWarning::Interrupted {
                path: path.clone(),
                steps: vec![2]
            }]
        );
        assert_eq!(clean.run, as_read_back(&run, Timestamp(51)));
        assert_eq!(run.step_record(2).map(|r| r.attempt), Some(2));
        assert_eq!(clean.records.len(), 4);
    }
}

#[test]
fn mid_file_corruption_is_an_error_naming_file_and_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut journal, mut run) = new_journal(dir.path(), &health_plan(), Mode::Operate, 1);
    drive(
        &mut journal,
        &mut run,
        vec![
            Input::Start,
            approve(1),
            Input::StepStarted { n: 2, attempt: 1 },
        ],
        10,
    );
    let path = journal.path().to_path_buf();
    drop(journal);
    let original = lines(&path);
    let write = |ls: &[String]| fs::write(&path, ls.join("\n") + "\n").expect("write");

    // Garbage on line 3.
    let mut ls = original.clone();
    ls[2] = "{\"seq\":2,\"at\":11,\"input\":{\"type\":\"gate-answ".into();
    write(&ls);
    let err = journal::replay(&path).expect_err("corrupt");
    assert!(
        matches!(err, JournalError::Corrupt { line: 3, .. }),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with(&format!("{}:3:", path.display())),
        "{err}"
    );

    // A missing line: the sequence jumps.
    let mut ls = original.clone();
    ls.remove(2);
    write(&ls);
    let err = journal::replay(&path).expect_err("gap");
    assert!(
        matches!(&err, JournalError::Corrupt { line: 3, what, .. } if what.contains("sequence number 3 where 2")),
        "{err}"
    );

    // Well-formed but impossible: the machine refuses it, naming the line.
    let mut ls = original.clone();
    ls[3] = r#"{"seq":3,"at":12,"input":{"type":"retry-approved","n":2,"by":"x"}}"#.into();
    write(&ls);
    let err = journal::replay(&path).expect_err("rejected");
    assert!(
        matches!(err, JournalError::Rejected { line: 4, .. }),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains(":4: the run state machine refused"),
        "{err}"
    );

    // A broken header.
    let mut ls = original.clone();
    ls[0] = "{\"format\":1".into();
    write(&ls);
    let err = journal::replay(&path).expect_err("header");
    assert!(
        matches!(err, JournalError::Corrupt { line: 1, .. }),
        "{err}"
    );

    // A newer format is refused rather than misread.
    let mut ls = original.clone();
    ls[0] = ls[0].replacen("\"format\":2", "\"format\":99", 1);
    write(&ls);
    let err = journal::replay(&path).expect_err("format");
    assert!(
        matches!(err, JournalError::NewerFormat { found: 99, .. }),
        "{err}"
    );

    // Nothing complete at all.
    fs::write(&path, "{\"format\":1,\"run").expect("write");
    let err = journal::replay(&path).expect_err("empty");
    assert!(
        matches!(err, JournalError::Corrupt { line: 1, .. }),
        "{err}"
    );

    // Resume refuses a corrupt journal and leaves it as it is.
    write(&{
        let mut ls = original.clone();
        ls[2] = "not json".into();
        ls
    });
    let before = fs::read(&path).expect("read");
    assert!(Journal::resume(&path, Timestamp(99)).is_err());
    assert_eq!(fs::read(&path).expect("read"), before);
}

#[test]
fn interrupted_steps_are_detected_and_need_a_retry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut journal, mut run) = new_journal(dir.path(), &etcd_plan(), Mode::Operate, 1);
    drive(&mut journal, &mut run, etcd_to_running_apply(), 10);
    let path = journal.path().to_path_buf();
    drop(journal); // the process dies with step 4 (the mutating apply) running

    let replayed = journal::replay(&path).expect("replay");
    assert_eq!(
        replayed.run.step_record(4).map(|r| r.state.clone()),
        Some(StepState::Interrupted {
            during: InFlight::Running
        })
    );
    assert_eq!(replayed.run.outcome(), RunOutcome::Interrupted);
    assert_eq!(
        replayed.warnings,
        vec![JournalWarning::Interrupted {
            path: path.clone(),
            steps: vec![4]
        }]
    );

    let (mut journal, resumed, effects) = Journal::resume(&path, Timestamp(100)).expect("resume");
    assert!(
        !effects.iter().any(|e| matches!(e, Effect::Execute(_))),
        "{effects:?}"
    );
    let mut run = resumed.run;
    // The dead process's outcome is absorbed; nothing re-runs the apply.
    let fx = journal
        .record(
            &mut run,
            ev(
                101,
                Input::StepFinished {
                    n: 4,
                    attempt: 1,
                    exit_code: Some(0),
                    error: None,
                },
            ),
        )
        .expect("absorbed");
    assert!(fx.is_empty());
    // The apply changed systems: a one-key retry is refused (nothing journaled); the
    // decision takes the probe's look first, then a typed re-run from the preview.
    let before = std::fs::read(&path).expect("journal");
    let err = journal
        .record(
            &mut run,
            ev(
                102,
                Input::RetryApproved {
                    n: 4,
                    by: "alice".into(),
                },
            ),
        )
        .expect_err("an interrupted change is decided, not retried");
    assert!(err.to_string().contains("not retried on one key"), "{err}");
    assert_eq!(std::fs::read(&path).expect("journal"), before);
    let fx = journal
        .record(
            &mut run,
            ev(
                103,
                Input::ProbeResult {
                    n: 4,
                    probe: 5,
                    ok: false,
                    detail: "scheduler is mq-deadline".into(),
                },
            ),
        )
        .expect("probe");
    assert!(fx.is_empty());
    let fx = journal
        .record(
            &mut run,
            ev(
                104,
                Input::RerunApproved {
                    n: 4,
                    by: "alice".into(),
                    typed: "prod".into(),
                },
            ),
        )
        .expect("re-run");
    // The preview (step 3) runs again first, a second attempt.
    assert!(
        matches!(&fx[..], [Effect::Execute(x)] if x.n() == 3 && x.attempt() == 2 && !x.mutates())
    );
    // A later replay agrees with the live run, the preview's attempt 2 running.
    let again = journal::replay(&path).expect("replay");
    assert_eq!(again.run.step_record(3).map(|r| r.attempt), Some(2));
    assert_eq!(again.run, as_read_back(&run, Timestamp(104)));
}

#[test]
fn resume_at_a_gate_asks_it_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut journal, mut run) = new_journal(dir.path(), &memattr_plan(), Mode::Operate, 1);
    drive(&mut journal, &mut run, vec![Input::Start, approve(1)], 10);
    drive(
        &mut journal,
        &mut run,
        vec![
            Input::StepFinished {
                n: 2,
                attempt: 1,
                exit_code: Some(0),
                error: None,
            },
            Input::HostSetObserved {
                n: 2,
                attempt: 1,
                hosts: vec![
                    "k3s-prod-1".into(),
                    "k3s-prod-2".into(),
                    "k3s-prod-3".into(),
                ],
            },
        ],
        20,
    );
    let path = journal.path().to_path_buf();
    drop(journal);
    let (_journal, resumed, effects) = Journal::resume(&path, Timestamp(30)).expect("resume");
    assert!(matches!(&effects[..], [Effect::AskGate { n: 2, .. }]));
    assert!(resumed.warnings.is_empty());
    // The authorisation granted before the restart is restored by the replay.
    assert!(resumed
        .run
        .is_authorised("memattr_survey_reboots_authorised"));
    assert_eq!(resumed.run.outcome(), RunOutcome::InProgress);
}

#[test]
fn list_runs_newest_first_with_outcomes() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert!(journal::list_runs(&dir.path().join("missing"))
        .expect("missing")
        .runs
        .is_empty());

    // Succeeded: node-health all the way.
    let (mut j, mut r) = new_journal(dir.path(), &health_plan(), Mode::Operate, 1_000);
    drive(
        &mut j,
        &mut r,
        vec![
            Input::Start,
            approve(1),
            Input::StepFinished {
                n: 2,
                attempt: 1,
                exit_code: Some(0),
                error: None,
            },
            Input::StepFinished {
                n: 3,
                attempt: 1,
                exit_code: Some(1),
                error: None,
            },
            Input::StepFinished {
                n: 4,
                attempt: 1,
                exit_code: Some(0),
                error: None,
            },
            Input::VerifyResult {
                n: 4,
                attempt: 1,
                ok: true,
                detail: "rolled out".into(),
            },
        ],
        1_001,
    );
    assert_eq!(r.outcome(), RunOutcome::Succeeded);
    // Failed.
    let (mut j, mut r) = new_journal(dir.path(), &health_plan(), Mode::Observe, 2_000);
    drive(
        &mut j,
        &mut r,
        vec![
            Input::Start,
            approve(1),
            Input::StepFinished {
                n: 2,
                attempt: 1,
                exit_code: Some(3),
                error: None,
            },
        ],
        2_001,
    );
    // Aborted.
    let (mut j, mut r) = new_journal(dir.path(), &etcd_plan(), Mode::Operate, 3_000);
    drive(
        &mut j,
        &mut r,
        vec![
            Input::Start,
            Input::Abort {
                by: "alice".into(),
                reason: "no".into(),
            },
        ],
        3_001,
    );
    // Interrupted.
    let (mut j, mut r) = new_journal(dir.path(), &etcd_plan(), Mode::Operate, 4_000);
    drive(&mut j, &mut r, etcd_to_running_apply(), 4_001);
    // In progress (awaiting a gate), with a torn tail.
    let (mut j, mut r) = new_journal(dir.path(), &memattr_plan(), Mode::Operate, 5_000);
    drive(&mut j, &mut r, vec![Input::Start], 5_001);
    fs::OpenOptions::new()
        .append(true)
        .open(j.path())
        .and_then(|mut f| f.write_all(b"{\"seq\""))
        .expect("tear");
    // Not a journal at all, and not a .jsonl file.
    fs::write(dir.path().join("broken.jsonl"), "hello\n").expect("write");
    fs::write(dir.path().join("notes.txt"), "ignore me").expect("write");

    let list = journal::list_runs(dir.path()).expect("list");
    let got: Vec<(u64, &str, RunOutcome)> = list
        .runs
        .iter()
        .map(|s| (s.started.0, s.runbook.as_str(), s.outcome))
        .collect();
    assert_eq!(
        got,
        vec![
            (5_000, "memattr-survey", RunOutcome::InProgress),
            (4_000, "etcd-io-priority", RunOutcome::Interrupted),
            (3_000, "etcd-io-priority", RunOutcome::Aborted),
            (2_000, "node-health", RunOutcome::Failed),
            (1_000, "node-health", RunOutcome::Succeeded),
        ]
    );
    assert_eq!(list.runs[0].warnings.len(), 1);
    assert!(list.runs[0].warnings[0].contains("torn last line"));
    assert_eq!(list.runs[3].mode, Mode::Observe);
    assert_eq!(list.runs[4].env, "dev");
    assert_eq!(list.runs[4].operator, "alice");
    assert!(list.runs[4].run_id.ends_with("-node-health-dev"));
    assert_eq!(list.unreadable.len(), 1);
    assert!(
        list.unreadable[0].to_string().contains("broken.jsonl:1:"),
        "{}",
        list.unreadable[0]
    );
}

#[test]
fn step_output_is_kept_beside_the_journal_and_never_read_as_a_run() {
    let dir = tempfile::tempdir().expect("tmp");
    let (mut journal, mut run) = new_journal(dir.path(), &etcd_plan(), Mode::Operate, 1_000);
    journal
        .record(&mut run, ev(1_001, Input::Start))
        .expect("start");
    journal
        .append_output(
            1,
            1,
            Timestamp(1_002),
            "playbook: playbooks/etcd-io-priority.yml",
        )
        .expect("output");
    journal
        .append_output(1, 1, Timestamp(1_003), "    hosts (1):")
        .expect("output");
    let out_path = journal::output_path(journal.path());
    assert!(
        out_path.to_string_lossy().ends_with(".output.jsonl"),
        "{}",
        out_path.display()
    );
    // The next journal record syncs the output first; both are on disk after it.
    journal
        .record(
            &mut run,
            ev(
                1_004,
                Input::Abort {
                    by: "alice".into(),
                    reason: "test".into(),
                },
            ),
        )
        .expect("abort");
    let kept = journal::read_output(journal.path()).expect("read");
    assert_eq!(kept.len(), 2);
    assert_eq!(
        (kept[1].n, kept[1].attempt, kept[1].line.as_str()),
        (1, 1, "    hosts (1):")
    );

    // A torn last output line (the process died mid-write) is dropped, not an error.
    fs::OpenOptions::new()
        .append(true)
        .open(&out_path)
        .and_then(|mut f| f.write_all(b"{\"n\":1,\"att"))
        .expect("tear");
    assert_eq!(journal::read_output(journal.path()).expect("read").len(), 2);

    // list_runs sees one run and no unreadable file: the output log is not a journal.
    let runs = journal::list_runs(dir.path()).expect("list");
    assert_eq!(runs.runs.len(), 1);
    assert!(runs.unreadable.is_empty(), "{:?}", runs.unreadable);
    // The journal itself still replays exactly.
    let replayed = journal::replay(journal.path()).expect("replay");
    assert_eq!(replayed.records.len(), 2);
}

/// A typed gate's optional note goes into the journal line and comes back on replay as the
/// step's gate record; a line written before typed gates took notes still replays.
#[test]
fn a_typed_gate_note_is_journaled_and_restored_by_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut journal, mut run) = new_journal(dir.path(), &etcd_plan(), Mode::Operate, 1_000);
    let path = journal.path().to_path_buf();
    let with_note = |n: usize, text: &str, note: &str| Input::TypedText {
        n,
        by: "alice".into(),
        text: text.into(),
        note: Some(note.into()),
    };
    let inputs = vec![
        Input::Start,
        // A wrong answer with a note: journaled, but the gate stays closed and keeps no record.
        with_note(1, "dev", "wrong window"),
        with_note(1, "prod", "change CHG-42 approved"),
        Input::StepStarted { n: 2, attempt: 1 },
        Input::StepFinished {
            n: 2,
            attempt: 1,
            exit_code: Some(0),
            error: None,
        },
        Input::HostSetObserved {
            n: 2,
            attempt: 1,
            hosts: vec!["k3s-prod-3".into()],
        },
        // The confirm-hosts answer without a note.
        typed(2, "1"),
    ];
    drive(&mut journal, &mut run, inputs, 2_000);
    let live_note = |r: &Run, n: usize| {
        r.step_record(n)
            .and_then(|rec| rec.gate.as_ref())
            .map(|g| (g.by.clone(), g.at, g.note.clone()))
    };
    assert_eq!(
        live_note(&run, 1),
        Some((
            "alice".into(),
            Timestamp(2_002),
            Some("change CHG-42 approved".into())
        ))
    );
    assert_eq!(
        live_note(&run, 2),
        Some(("op".into(), Timestamp(2_006), None))
    );

    // On disk: the note is in the typed-text line; a note-less answer has no note key.
    let all = lines(&path);
    let typed_lines: Vec<&String> = all.iter().filter(|l| l.contains("typed-text")).collect();
    assert_eq!(typed_lines.len(), 3, "{all:?}");
    assert!(
        typed_lines[0].contains(r#""note":"wrong window""#),
        "{}",
        typed_lines[0]
    );
    assert!(typed_lines[1].contains(r#""note":"change CHG-42 approved""#));
    assert!(!typed_lines[2].contains("note"), "{}", typed_lines[2]);

    // Replay restores the notes exactly.
    let replayed = journal::replay(&path).expect("replay");
    assert_eq!(replayed.run, as_read_back(&run, Timestamp(2_006)));
    assert_eq!(live_note(&replayed.run, 1), live_note(&run, 1));
    assert_eq!(live_note(&replayed.run, 2), live_note(&run, 2));
    assert!(replayed
        .records
        .iter()
        .any(|r| r.input == with_note(1, "dev", "wrong window")));

    // A journal written before typed gates took notes: the same line without the key.
    let old: Input =
        serde_json::from_str(r#"{"type":"typed-text","n":1,"by":"bob","text":"prod"}"#)
            .expect("an old typed-text line still parses");
    assert_eq!(
        old,
        Input::TypedText {
            n: 1,
            by: "bob".into(),
            text: "prod".into(),
            note: None
        }
    );
    let mut old_run = Run::new(etcd_plan()).expect("plan");
    old_run.step(&ev(1, Input::Start)).expect("start");
    old_run.step(&ev(2, old)).expect("old typed answer");
    let g = old_run
        .step_record(1)
        .and_then(|r| r.gate.clone())
        .expect("gate passed");
    assert_eq!((g.by.as_str(), g.note), ("bob", None));
}

/// Two consoles on one run would interleave events no replay can trust: while one holds the
/// journal, another cannot resume it (nor cut a "torn" tail that is really an append in
/// progress); once the first lets go, resuming works.
#[test]
fn a_journal_held_by_one_console_cannot_be_resumed_by_another() {
    let dir = tempfile::tempdir().expect("tmp");
    let (mut journal, mut run) = new_journal(dir.path(), &etcd_plan(), Mode::Operate, 1_000);
    journal
        .record(&mut run, ev(1_001, Input::Start))
        .expect("start");
    let path = journal.path().to_path_buf();
    // A partial line as if the holder were mid-append.
    fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(b"{\"seq\":2,"))
        .expect("partial");
    let before = fs::read(&path).expect("read");
    match Journal::resume(&path, Timestamp(2_000)) {
        Err(JournalError::Locked { path: p }) => assert_eq!(p, path),
        Err(other) => panic!("expected Locked, got {other}"),
        Ok(_) => panic!("a held journal was resumed"),
    }
    assert_eq!(
        fs::read(&path).expect("read"),
        before,
        "nothing cut while it was held"
    );
    drop(journal);
    let (_j, replayed, _fx) =
        Journal::resume(&path, Timestamp(2_000)).expect("resume once released");
    assert!(
        replayed.warnings.iter().any(|w| matches!(
            w,
            JournalWarning::TornTail {
                truncated: true,
                ..
            }
        )),
        "{:?}",
        replayed.warnings
    );
}
