//! Secrets stay secret through a preview and an apply: the demo (real ansible-playbook,
//! the simulated gateway) runs a play that writes the VPN credentials file with `--check
//! --diff` (its diff holds the vaulted password) and prints the password in a debug task,
//! then halts on the apply. The console's executors mask every vaulted value, learned with
//! the repo's vault password file: no vaulted value reaches the output ring (the screen's
//! lines of the halted step), the journal, the run's output file or the log, and the masks
//! are there where the secret was. A password file that is a script is run as Ansible
//! runs it, and its password masks the same way. Without a password hk-console can use (a
//! vault identity list, which it does not evaluate), the diff lines are withheld and say
//! why.
//! Needs ansible-playbook (HK_ANSIBLE_BIN_DIR, PATH or /opt/hk-venv/bin): fails, not skips.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use hk_console::exec::redact::{MASK, WITHHELD};
use hk_console::sim::demo::{self, Demo};
use hk_console::sim::headless::{drive, HeadlessRun, Report};

const SECRET: &str = "sample-not-a-real-secret";
const USERNAME: &str = "p0000000";

/// Every tracing event of this test binary, at TRACE, goes to this file.
fn log_file() -> &'static Path {
    static LOG: OnceLock<PathBuf> = OnceLock::new();
    LOG.get_or_init(|| {
        let path = std::env::temp_dir().join(format!("inject-secrets-{}.log", std::process::id()));
        let file = std::fs::File::create(&path).expect("log file");
        tracing_subscriber::fmt()
            .with_max_level(tracing_subscriber::filter::LevelFilter::TRACE)
            .with_ansi(false)
            .with_writer(std::sync::Mutex::new(file))
            .try_init()
            .expect("one subscriber");
        path
    })
}

fn require_ansible() {
    let dirs = hk_console::exec::ansible::search_dirs();
    assert!(
        hk_console::exec::ansible::find_binary("ansible-playbook", &dirs).is_some(),
        "ansible-playbook not found: {}",
        hk_console::exec::ansible::INSTALL_HINT
    );
}

const RUNBOOK: &str = r#"id: vpn-credentials
title: Write the VPN client's credentials
environments: [dev]
target:
  group: vpn_gateways
steps:
  - id: credentials
    kind: ansible
    playbook: playbooks/vpn.egress.gateway.yml
    extra_vars:
      vpn_egress_gateway_hosts: "{{ env.vpn_gateways }}"
    CHECK
"#;

/// The play: the credentials file (written beside the controller, so the simulated node
/// needs no Python) shows the vaulted values in its `--diff`; `say` adds a careless debug
/// task and a failure message holding the password, so the apply halts with it in view.
fn playbook(dest: &Path, say: bool) -> String {
    let mut p = format!(
        r#"---
- name: VPN client credentials
  hosts: "{{{{ vpn_egress_gateway_hosts | default('vpn_egress_gateway') }}}}"
  gather_facts: false
  tasks:
    - name: The client's credentials file
      delegate_to: localhost
      ansible.builtin.copy:
        content: "{{{{ vpn_egress_gateway_pia_username }}}}\n{{{{ vpn_egress_gateway_pia_password }}}}\n"
        dest: "{}"
        mode: "0600"
"#,
        dest.display()
    );
    if say {
        p.push_str(
            r#"    - name: A careless debug task
      ansible.builtin.debug:
        msg: "pia password is {{ vpn_egress_gateway_pia_password }}"
    - name: Halt the apply with the password in its message
      ansible.builtin.fail:
        msg: "halting after {{ vpn_egress_gateway_pia_password }}"
      when: not ansible_check_mode
"#,
        );
    }
    p
}

/// How the demo's ansible.cfg gives the vault password.
#[derive(Clone, Copy, PartialEq)]
enum Password {
    /// `vault_password_file` naming the sample's plain file.
    File,
    /// `vault_password_file` naming an executable that prints it.
    Script,
    /// `vault_identity_list = default@FILE`, no `vault_password_file`.
    IdentityList,
    /// `vault_password_file` naming a script that takes 3 s, longer than the console is
    /// given (HK_VAULT_SCRIPT_TIMEOUT_S, set by the test that uses it): Ansible waits.
    SlowScript,
}

async fn run_on_demo(
    tmp: &Path,
    check_line: &str,
    say: bool,
    script_password: Password,
) -> (Report, PathBuf) {
    run_runbook_on_demo(
        tmp,
        &RUNBOOK.replace("CHECK", check_line),
        say,
        script_password,
    )
    .await
}

async fn run_runbook_on_demo(
    tmp: &Path,
    runbook: &str,
    say: bool,
    script_password: Password,
) -> (Report, PathBuf) {
    require_ansible();
    let d: Demo = demo::start("healthy", &tmp.join("repo"))
        .await
        .unwrap_or_else(|e| panic!("demo: {e}"));
    let ansible_dir = d.dir.join("infra/ansible");
    std::fs::write(
        ansible_dir.join("playbooks/vpn.egress.gateway.yml"),
        playbook(&tmp.join("pia.auth"), say),
    )
    .expect("playbook");
    if script_password == Password::IdentityList {
        let pw_file = d.dir.join(".vault-pass-sample");
        let cfg = ansible_dir.join("ansible.cfg");
        let text = std::fs::read_to_string(&cfg).expect("ansible.cfg");
        let line = "vault_password_file = ../../.vault-pass-sample";
        assert!(text.contains(line), "{text}");
        std::fs::write(
            &cfg,
            text.replace(
                line,
                &format!("vault_identity_list = default@{}", pw_file.display()),
            ),
        )
        .expect("ansible.cfg");
    }
    if matches!(script_password, Password::Script | Password::SlowScript) {
        // Ansible runs an executable password file, and so does hk-console.
        let pw_file = d.dir.join(".vault-pass-sample");
        let pw = std::fs::read_to_string(&pw_file).expect("password");
        let wait = if script_password == Password::SlowScript {
            "sleep 3\n"
        } else {
            ""
        };
        std::fs::write(&pw_file, format!("#!/bin/sh\n{wait}echo '{}'\n", pw.trim()))
            .expect("script");
        let st = std::process::Command::new("chmod")
            .arg("+x")
            .arg(&pw_file)
            .status()
            .expect("chmod");
        assert!(st.success());
    }
    let set = hk_console::runbook::embedded::load(&[(
        "vpn-credentials.yaml".into(),
        runbook.to_string(),
    )])
    .expect("runbook");
    let runs = tmp.join("runs");
    let req = HeadlessRun {
        runbook: "vpn-credentials".into(),
        env: Some("dev".into()),
        host: None,
        deadline: Duration::from_secs(180),
    };
    let mut lines = Vec::new();
    let report = drive(&d, set, &req, &runs, |l| lines.push(l.to_string()))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", lines.join("\n")));
    eprintln!("{}", report.render());
    for l in &lines {
        assert!(!l.contains(SECRET), "progress line: {l}");
    }
    (report, runs)
}

/// Every file under `dir`, read whole.
fn files_under(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let text = String::from_utf8_lossy(&std::fs::read(&p).expect("read")).into_owned();
                out.push((p, text));
            }
        }
    }
    out
}

fn assert_no_secret(what: &str, text: &str) {
    let b64 = data_encoding::BASE64.encode(SECRET.as_bytes());
    for s in [SECRET, b64.as_str(), USERNAME] {
        assert!(
            !text.contains(s),
            "{what} holds a vaulted value ({s}):\n{text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vaulted_values_are_masked_through_a_preview_and_an_apply() {
    let log = log_file();
    let tmp = tempfile::tempdir().expect("tmp");
    let (report, runs) = run_on_demo(tmp.path(), "check_first: true", true, Password::File).await;
    assert_masked_through_preview_and_apply(tmp.path(), &report, &runs, log);
}

/// The same, with the password from a script (as an operator's password manager gives it):
/// hk-console runs it as ansible-playbook does and masks with what it printed (it said
/// "a script, which hk-console does not run" and withheld every diff line).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_script_is_run_and_its_vaulted_values_are_masked() {
    let log = log_file();
    let tmp = tempfile::tempdir().expect("tmp");
    let (report, runs) = run_on_demo(tmp.path(), "check_first: true", true, Password::Script).await;
    assert_masked_through_preview_and_apply(tmp.path(), &report, &runs, log);
}

fn assert_masked_through_preview_and_apply(tmp: &Path, report: &Report, runs: &Path, log: &Path) {
    // The preview ran and was approved; the apply halted on the failing task.
    assert!(!report.succeeded, "{}", report.render());
    let by_id = |id: &str| {
        report
            .steps
            .iter()
            .find(|s| s.id == id)
            .unwrap_or_else(|| panic!("no step {id}: {}", report.render()))
    };
    assert_eq!(
        by_id("credentials.check").state,
        "done",
        "{}",
        report.render()
    );
    assert_eq!(
        by_id("credentials.approve").state,
        "done",
        "{}",
        report.render()
    );
    assert_eq!(by_id("credentials").state, "failed", "{}", report.render());

    // The screen: the output ring's lines of the halted step (the debug task and the
    // failure message held the password; both are masked).
    let screen = report.failed_output.join("\n");
    assert_no_secret("the output ring", &screen);
    assert!(
        screen.contains(&format!("pia password is {MASK}")),
        "the debug line is not there, masked:\n{screen}"
    );

    // The run's files: the journal and the output file (with the preview's diff).
    let files = files_under(runs);
    assert!(files.len() >= 2, "{files:?}");
    let mut saw_masked_diff = false;
    for (path, text) in &files {
        assert_no_secret(&path.display().to_string(), text);
        saw_masked_diff |= text.contains(&format!("+{MASK}"));
    }
    assert!(
        saw_masked_diff,
        "no masked diff line in the run's files: the preview's diff was not there"
    );
    // The apply's first task wrote the real values: they did flow through ansible.
    let written = std::fs::read_to_string(tmp.join("pia.auth")).expect("written");
    assert!(written.contains(SECRET), "{written}");

    // The log.
    let log_text = std::fs::read_to_string(log).expect("log");
    assert_no_secret("the log", &log_text);
}

/// A vault identity list (`vault_identity_list = default@FILE`, no password file) is read
/// like the password file: its vaulted values are masked through a preview and an apply
/// (they were withheld: hk-console did not evaluate identity lists).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vault_identity_list_is_read_and_its_vaulted_values_are_masked() {
    let log = log_file();
    let tmp = tempfile::tempdir().expect("tmp");
    let (report, runs) = run_on_demo(
        tmp.path(),
        "check_first: true",
        true,
        Password::IdentityList,
    )
    .await;
    assert_masked_through_preview_and_apply(tmp.path(), &report, &runs, log);
}

/// Where hk-console cannot learn the password (here a password script slower than the time
/// it is given; Ansible, which waits, opens the vault), every changed line of the diff is
/// withheld, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_password_hk_console_reads_the_diff_is_withheld() {
    let log = log_file();
    let tmp = tempfile::tempdir().expect("tmp");
    // The only test here that runs a slow script; the others' scripts answer at once. Rust's
    // own environment reads take the lock set_var takes.
    std::env::set_var(hk_console::vault_script::TIMEOUT_ENV, "1");
    let (report, runs) = run_on_demo(tmp.path(), "check: true", false, Password::SlowScript).await;
    assert!(report.succeeded, "{}", report.render());
    let files = files_under(&runs);
    let mut withheld = 0;
    for (path, text) in &files {
        assert_no_secret(&path.display().to_string(), text);
        withheld += text.matches(WITHHELD).count();
        if text.contains(WITHHELD) {
            assert!(
                text.contains("(a script) failed: no answer within 1.0 s (killed)"),
                "{}: the withheld line does not say why:\n{text}",
                path.display()
            );
        }
    }
    // `--- before`, `+++ after`, `@@`, and the two added lines at least.
    assert!(withheld >= 4, "{withheld} withheld diff lines");
    assert_no_secret("the log", &std::fs::read_to_string(log).expect("log"));
}

/// The sample repo's vault password (the demo copies the sample's password file).
fn vault_password() -> String {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory/.vault-pass-sample");
    std::fs::read_to_string(file)
        .expect("the sample's vault password file")
        .trim()
        .to_string()
}

/// A runbook that carries a vaulted value and the vault password written literally (an
/// author's paste): the plan header the journal starts with holds both in the step's
/// argv and title, and neither may reach the run's files: the journal's bytes hold masks
/// where they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vaulted_value_or_the_vault_password_in_a_runbook_is_masked_in_the_journal() {
    let log = log_file();
    let tmp = tempfile::tempdir().expect("tmp");
    let password = vault_password();
    assert!(password.len() >= 8, "the sample's password: {password:?}");
    let runbook = format!(
        r#"id: vpn-credentials
title: Write the VPN client's credentials ({SECRET})
environments: [dev]
target:
  group: vpn_gateways
steps:
  - id: credentials
    title: "Credentials, pasted: {SECRET} with {password}"
    kind: ansible
    playbook: playbooks/vpn.egress.gateway.yml
    extra_vars:
      vpn_egress_gateway_hosts: "{{{{ env.vpn_gateways }}}}"
      pasted_secret: "{SECRET}"
      pasted_password: "{password}"
    check: true
"#
    );
    let (report, runs) = run_runbook_on_demo(tmp.path(), &runbook, false, Password::File).await;
    assert!(report.succeeded, "{}", report.render());
    // The summary a headless run prints names the step by its title: masked there too.
    let summary = report.render();
    assert_no_secret("the headless summary", &summary);
    assert!(!summary.contains(&password), "{summary}");
    assert!(
        summary.contains(&format!("Credentials, pasted: {MASK} with {MASK}")),
        "{summary}"
    );
    let files = files_under(&runs);
    let journals: Vec<&(PathBuf, String)> = files
        .iter()
        .filter(|(p, _)| {
            p.extension().is_some_and(|e| e == "jsonl")
                && !p.to_string_lossy().ends_with(".output.jsonl")
        })
        .collect();
    assert_eq!(journals.len(), 1, "one journal: {files:?}");
    for (path, text) in &files {
        assert_no_secret(&path.display().to_string(), text);
        assert!(
            !text.contains(&password),
            "{} holds the vault password:\n{text}",
            path.display()
        );
    }
    // The masks are where the pasted values were: the header's argv and title.
    let header = journals[0].1.lines().next().expect("a header line");
    assert!(
        header.contains(&format!("pasted_secret={MASK}"))
            || header.contains(&format!("\"pasted_secret\":\"{MASK}\"")),
        "the header's argv does not hold the mask: {header}"
    );
    assert!(
        header.contains(&format!("Credentials, pasted: {MASK} with {MASK}")),
        "the header's step title does not hold the masks: {header}"
    );
    // The journal still replays (the run is in `runs list` and `runs show`).
    let replayed = hk_console::journal::replay(&journals[0].0).expect("the masked journal replays");
    assert_eq!(replayed.header.runbook, "vpn-credentials");
    let log_text = std::fs::read_to_string(log).expect("log");
    assert_no_secret("the log", &log_text);
    assert!(
        !log_text.contains(&password),
        "the log holds the vault password"
    );
}
