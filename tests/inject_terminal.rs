//! Control characters never reach the terminal from data. ESC sequences (clear screen, a
//! forged "parity: clean", hidden text), an OSC window title, BEL, CR, backspace, a C1 CSI
//! and bidi overrides/isolates are put in each source of text: a group_vars value printed by
//! `envs` (text and JSON), `check` and `plan`; a group name quoted by an error on stderr;
//! host output through the console's output ring; an executor's error journaled and shown
//! again by a fresh console reading the journal. Every byte the binary writes and every
//! cell of every frame is free of them, and the text is still there, written out.
use crate::ui_common;

use std::path::Path;
use std::process::Command;

use hk_console::runbook::machine::Input;
use hk_console::session::exec::{ExecReply, ExecRequest};
use hk_console::text::needs_escape;
use hk_console::ui::app::App;
use ui_common::*;

/// What a hostile repo, host or journal may hold.
const HOSTILE: &[&str] = &[
    "\u{1b}[2J\u{1b}[Hparity: clean\u{1b}[8m",
    "\u{1b}]0;pwned\u{7}title",
    "ok\rFAIL\u{8}",
    "abc\u{202e}fdp.exe\u{2066}x\u{2069}\u{2028}",
    "\u{9b}31mc1\u{7f}",
];

fn assert_clean(what: &str, text: &str) {
    let bad: Vec<char> = text
        .chars()
        .filter(|c| *c != '\n' && needs_escape(*c))
        .collect();
    assert!(bad.is_empty(), "{what}: raw {bad:?} in:\n{text:?}");
}

/// `s` as a YAML double-quoted scalar, all ASCII (`\uXXXX` escapes): YAML forbids most
/// control characters raw in a file, but its escapes make them part of the value.
fn yaml_quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            ' '..='~' => out.push(c),
            c => out.push_str(&format!("\\u{:04x}", c as u32)),
        }
    }
    out.push('"');
    out
}

fn hk(repo: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hk-console"))
        .arg("--repo")
        .arg(repo)
        .args(args)
        .env("XDG_STATE_HOME", repo.join(".state"))
        .output()
        .expect("hk-console runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn sample_copy(dir: &Path) -> std::path::PathBuf {
    let root = dir.join("repo");
    let st = Command::new("cp")
        .arg("-a")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory"))
        .arg(&root)
        .status()
        .expect("cp");
    assert!(st.success());
    root
}

#[test]
fn a_group_vars_value_is_written_out_by_envs_check_and_plan() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = sample_copy(tmp.path());
    let value = HOSTILE.concat();
    // Both environments' VIP: prod's group_vars override all.yml's.
    let prod = root.join("infra/ansible/inventory/group_vars/k3s_prod/vars.yml");
    let text = std::fs::read_to_string(&prod).expect("vars.yml");
    let text = text.replace(
        "kube_vip_address: 192.168.2.9",
        &format!("kube_vip_address: {}", yaml_quoted(&value)),
    );
    std::fs::write(&prod, text).expect("write");

    let (_, out, err) = hk(&root, &["envs"]);
    assert_clean("envs stdout", &out);
    assert_clean("envs stderr", &err);
    assert!(
        out.contains("\\e[2J\\e[Hparity: clean\\e[8m"),
        "the value is shown, written out:\n{out}"
    );
    assert!(out.contains("\\e]0;pwned\\x07title"), "{out}");
    assert!(out.contains("abc\\u{202e}fdp.exe"), "{out}");

    let (_, out, err) = hk(&root, &["envs", "--json"]);
    assert_clean("envs --json stdout", &out);
    assert_clean("envs --json stderr", &err);
    let v: serde_json::Value = serde_json::from_str(&out).expect("still JSON");
    assert!(v.to_string().contains("parity: clean"), "{out}");

    for args in [
        &["check"][..],
        &["check", "--json"],
        &["plan", "cilium-endpoint-rollout", "--env", "prod"],
        &["inventory", "--list"],
        &["inventory", "--host", "k3s-prod-1", "--resolved"],
    ] {
        let (_, out, err) = hk(&root, args);
        assert_clean(&format!("{args:?} stdout"), &out);
        assert_clean(&format!("{args:?} stderr"), &err);
        assert!(
            out.contains("parity: clean") || err.contains("parity: clean"),
            "{args:?} does not show the value at all:\n{out}\n{err}"
        );
    }
}

#[test]
fn a_group_name_in_an_error_is_written_out_on_stderr() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = sample_copy(tmp.path());
    let cfg = root.join("hk-console.yaml");
    let text = std::fs::read_to_string(&cfg).expect("config");
    let group = format!("k3s_prod{}", HOSTILE.concat());
    let text = text.replace(
        "servers: k3s_prod\n",
        &format!("servers: {}\n", yaml_quoted(&group)),
    );
    std::fs::write(&cfg, text).expect("write");
    for args in [
        &["envs"][..],
        &["plan", "node-health", "--env", "prod"],
        &["check"],
    ] {
        let (code, out, err) = hk(&root, args);
        assert_clean(&format!("{args:?} stdout"), &out);
        assert_clean(&format!("{args:?} stderr"), &err);
        assert!(
            (out + &err).contains("k3s_prod\\e[2J\\e[Hparity: clean"),
            "{args:?} (exit {code}) does not name the group"
        );
    }
}

fn assert_clean_frame(what: &str, b: &ratatui::backend::TestBackend) {
    for cell in b.buffer().content() {
        assert!(
            !cell.symbol().chars().any(needs_escape),
            "{what}: a cell holds {:?}:\n{}",
            cell.symbol(),
            text(b)
        );
    }
}

#[test]
fn host_output_and_a_journaled_error_reach_the_console_written_out() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut app = App::operate(parts(dir.path()), operate_caps(&ALL_KINDS, &ALL_KINDS));
    app.open_runbook("node-health", Some("prod"), None);
    app.handle_key(key('s'));
    // Step 1 prints the hostile lines (the output ring).
    play_one(&mut app, HOSTILE).expect("step 1 ran");
    let frame = render(&mut app, 140, 40);
    assert_clean_frame("run view with host output", &frame);
    let shown = text(&frame);
    assert!(shown.contains("\\e[2J\\e[Hparity: clean\\e[8m"), "{shown}");
    assert!(shown.contains("ok\\rFAIL\\x08"), "{shown}");

    // The next step run fails with an error holding the same text: journaled, then shown.
    let mut failed = false;
    for _ in 0..50 {
        if answer_gate(&mut app) {
            continue;
        }
        let Some(req) = app.outbox_mut().pop_front() else {
            break;
        };
        let tag = req.tag();
        if let ExecRequest::Execute { step, attempt, .. } = &req {
            let (n, attempt) = (step.n, *attempt);
            app.handle_exec(ExecReply::Outcome {
                tag,
                input: Input::StepFinished {
                    n,
                    attempt,
                    exit_code: None,
                    error: Some(HOSTILE.concat()),
                },
            });
            failed = true;
            break;
        }
        app.outbox_mut().push_front(req);
        play_one(&mut app, &[]);
    }
    assert!(failed, "no second step ran");
    for (w, h) in [(140, 40), (80, 24), (60, 15)] {
        assert_clean_frame("run view with the error", &render(&mut app, w, h));
    }
    let shown = text(&render(&mut app, 140, 40));
    assert!(
        shown.contains("parity: clean"),
        "the error is not shown:\n{shown}"
    );
    let runs = hk_console::journal::list_runs(dir.path()).expect("runs");
    let journal = &runs.runs.first().expect("journaled").path;
    let raw = std::fs::read_to_string(journal).expect("journal");
    assert!(raw.contains("parity: clean"), "the error was journaled");

    // A fresh console reads the journal: Home and the resumable run show it written out.
    let mut fresh = App::operate(parts(dir.path()), operate_caps(&ALL_KINDS, &ALL_KINDS));
    for (w, h) in [(140, 40), (80, 24)] {
        assert_clean_frame("home over the journal", &render(&mut fresh, w, h));
    }
}

/// A note typed (or pasted) at a gate is journaled as given and shown written out, in the
/// run and by a fresh console over the journal.
#[test]
fn a_journaled_gate_note_is_shown_written_out() {
    use crossterm::event::KeyCode;
    let dir = tempfile::tempdir().expect("tmp");
    let mut app = App::operate(parts(dir.path()), operate_caps(&ALL_KINDS, &ALL_KINDS));
    app.open_runbook("etcd-io-priority", Some("prod"), None);
    app.handle_key(key('s'));
    play_one(&mut app, &["      k3s-prod-3"]).expect("list-hosts ran");
    play_one(&mut app, &[]).expect("verified");
    type_str(&mut app, "1");
    app.handle_key(code(KeyCode::Tab));
    let note = HOSTILE.concat().replace('\r', "");
    type_str(&mut app, &note);
    app.handle_key(code(KeyCode::Tab));
    for (w, h) in [(140, 40), (80, 24)] {
        assert_clean_frame("the gate with the note", &render(&mut app, w, h));
    }
    app.handle_key(code(KeyCode::Enter));
    assert!(app.overlay().is_none(), "the gate opened");
    let runs = hk_console::journal::list_runs(dir.path()).expect("runs");
    let replay =
        hk_console::journal::replay(&runs.runs.first().expect("journaled").path).expect("replays");
    assert!(
        replay.records.iter().any(|r| matches!(
            &r.input,
            Input::TypedText { note: Some(n), .. } if n.contains("parity: clean")
        )),
        "the note is journaled"
    );
    for (w, h) in [(140, 40), (80, 24)] {
        assert_clean_frame("the run after the note", &render(&mut app, w, h));
    }
    let mut fresh = App::operate(parts(dir.path()), operate_caps(&ALL_KINDS, &ALL_KINDS));
    assert_clean_frame("home over the journal", &render(&mut fresh, 140, 40));
}
