//! What may change a system is derived, never declared (issue 34): a `--check --diff`
//! preview whose playbook holds `check_mode: false` tasks that can write runs them for real,
//! so the planner marks it mutating (an approval gate before it, observe refuses it naming
//! the task), whatever the runbook's `check:`/`read_only:` says. The derivation is held
//! against the real ansible-playbook: a callback plugin records what it ran with
//! `check_mode` False under `--check`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use hk_console::repo::check_mode::{derive, CheckDerivation};
use hk_console::repo::config::ReviewedReadOnly;
use hk_console::repo::roles::{AnsibleEnv, RoleSearch};
use hk_console::repo::Repo;
use hk_console::session::exec::ReadOnlyExecutors;
use hk_console::session::ObserveSession;

use crate::fs_common::copy_dir;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/check-mode")
}

fn corpus() -> PathBuf {
    fixtures().join("ansible")
}

/// The search with HOME in `dir`, no ANSIBLE_* variables: only the playbook's roles/.
fn search(ansible_dir: &Path, home: &Path) -> RoleSearch {
    RoleSearch::new(
        ansible_dir,
        &AnsibleEnv {
            home: Some(home.to_path_buf()),
            ..AnsibleEnv::default()
        },
    )
}

/// The runbook of the review's finding: one `check: true` ansible step, `read_only: true`.
fn finding_runbook(id: &str, playbook: &str) -> String {
    format!(
        "id: {id}\ntitle: Look at the tunnel (read-only, says its author)\nread_only: true\nenvironments: [dev, prod]\ntarget:\n  group: vpn_gateways\nsteps:\n  - id: look\n    kind: ansible\n    scope: once\n    playbook: {playbook}\n    check: true\n"
    )
}

/// The sample repo with the finding's two playbooks, and a runbooks dir with one runbook
/// over each.
fn finding_repo(tmp: &Path) -> (PathBuf, PathBuf) {
    let repo = tmp.join("repo");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory"),
        &repo,
    );
    let books = repo.join("infra/ansible/playbooks");
    for f in ["finding-raw.yml", "finding-local.yml"] {
        std::fs::copy(corpus().join(f), books.join(f)).expect("copy playbook");
    }
    let rb = tmp.join("rb");
    std::fs::create_dir_all(&rb).expect("mkdir");
    std::fs::write(
        rb.join("tunnel-raw.yaml"),
        finding_runbook("tunnel-raw", "playbooks/finding-raw.yml"),
    )
    .expect("runbook");
    std::fs::write(
        rb.join("tunnel-local.yaml"),
        finding_runbook("tunnel-local", "playbooks/finding-local.yml"),
    )
    .expect("runbook");
    (repo, rb)
}

fn plan_of(repo: &Path, rb: &Path, id: &str, env: &str) -> hk_console::runbook::plan::Plan {
    let loaded = Repo::load(repo).expect("repo");
    let set = hk_console::context::load_runbooks_of(Some(repo), Some(rb)).expect("runbooks");
    hk_console::context::plan_runbook(&loaded, &set, id, env, None).expect("plan")
}

/// Finding 1: observe refuses the runbook, naming the task (file:line, module), for the raw
/// variant and the delegate_to: localhost one; the runbook's `read_only: true` and
/// `check: true` do not override the derivation.
#[test]
fn observe_refuses_a_check_step_whose_playbook_runs_a_task_for_real() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (repo, rb) = finding_repo(tmp.path());
    for (id, at, module, local) in [
        (
            "tunnel-raw",
            "infra/ansible/playbooks/finding-raw.yml:7",
            "raw",
            false,
        ),
        (
            "tunnel-local",
            "infra/ansible/playbooks/finding-local.yml:6",
            "ansible.builtin.copy",
            true,
        ),
    ] {
        let plan = plan_of(&repo, &rb, id, "dev");
        assert!(plan.mutates, "{id}: {plan:#?}");
        let mut s = ObserveSession::plan(plan, ReadOnlyExecutors::default(), "t").expect("opens");
        let why = s
            .start(None, hk_console::time::now())
            .expect_err("observe must refuse")
            .to_string();
        assert!(
            why.contains(&format!("{at} ({module}): check_mode: false")),
            "{id}: {why}"
        );
        assert!(why.contains("runs tasks for real under --check"), "{why}");
        assert_eq!(
            why.contains("on the operator's machine (delegate_to: localhost"),
            local,
            "{id}: {why}"
        );
    }
}

/// Finding 2: in a guided prod run the preview of such a playbook is mutating, with an
/// approval gate before it, in `hk-console plan` (text and JSON).
#[test]
fn a_prod_preview_that_runs_a_task_for_real_is_gated_and_shown_mutating() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (repo, rb) = finding_repo(tmp.path());
    // The same playbook as a guided mutating step: prod's policy previews it first.
    std::fs::write(
        rb.join("tunnel-apply.yaml"),
        "id: tunnel-apply\ntitle: Apply the tunnel play\nenvironments: [prod]\ntarget:\n  group: vpn_gateways\nsteps:\n  - id: apply\n    kind: ansible\n    scope: once\n    playbook: playbooks/finding-raw.yml\n",
    )
    .expect("runbook");
    let plan = plan_of(&repo, &rb, "tunnel-apply", "prod");
    let check = plan
        .steps
        .iter()
        .find(|s| s.id == "apply.check")
        .unwrap_or_else(|| panic!("no preview: {plan:#?}"));
    assert!(check.mutates, "{check:#?}");
    let b = check.blast_radius.as_ref().expect("the preview's radius");
    assert_eq!(b.step, check.n);
    let at: Vec<&str> = b.runs_for_real.iter().map(|t| t.at.as_str()).collect();
    assert_eq!(at, ["infra/ansible/playbooks/finding-raw.yml:7"]);
    // An approval gate before it, naming it as the step it guards.
    let gate = plan
        .steps
        .iter()
        .take_while(|s| s.n < check.n)
        .filter(|s| s.gate == Some(hk_console::runbook::plan::Gate::ApproveDiff))
        .last()
        .unwrap_or_else(|| panic!("no approval before the preview: {plan:#?}"));
    assert_eq!(gate.blast_radius.as_ref().map(|b| b.step), Some(check.n));
    // The hosts it runs on are confirmed before the operator is asked to let it run.
    assert!(
        plan.steps
            .iter()
            .any(|s| s.n < gate.n && s.kind == hk_console::runbook::plan::StepKind::ListHosts),
        "no list-hosts before the preview's approval: {plan:#?}"
    );
    // No mutating step comes between the gate and the preview.
    assert!(plan
        .steps
        .iter()
        .filter(|s| s.n > gate.n && s.n < check.n)
        .all(|s| !s.mutates));

    let out = Command::new(env!("CARGO_BIN_EXE_hk-console"))
        .env("XDG_STATE_HOME", tmp.path().join("state"))
        .env_remove("HK_REPO")
        .env_remove("HK_RUNBOOKS")
        .args(["--repo"])
        .arg(&repo)
        .arg("--runbooks")
        .arg(&rb)
        .args(["plan", "tunnel-apply", "--env", "prod"])
        .output()
        .expect("hk-console plan");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let row = stdout
        .lines()
        .find(|l| l.contains("--check") && l.contains("RUNS FOR REAL"))
        .unwrap_or_else(|| panic!("no preview row:\n{stdout}"));
    assert!(row.contains("[M]"), "{row}");
    assert!(
        stdout.contains(
            "runs for real under --check: infra/ansible/playbooks/finding-raw.yml:7 (raw)"
        ),
        "{stdout}"
    );
}

/// The shipped runbooks still plan over the sample as before: their previews' probes are
/// modules that cannot write (kube-vip's `wait_for`), so no preview mutates.
#[test]
fn the_sample_previews_stay_read_only() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory");
    let loaded = Repo::load(&repo).expect("sample");
    let a = &loaded.ansible_dir;
    let home = tempfile::tempdir().expect("home");
    let mut books = 0;
    for entry in std::fs::read_dir(a.join("playbooks")).expect("playbooks") {
        let p = entry.expect("entry").path();
        let rel = p.strip_prefix(a).expect("under").display().to_string();
        let d = derive(
            &loaded.root,
            a,
            &rel,
            &search(a, home.path()),
            &loaded.config.reviewed_read_only,
        );
        assert!(d.real.is_empty(), "{rel}: {:#?}", d.real);
        books += 1;
    }
    assert!(books >= 10, "{books} playbooks read");
    let set = hk_console::context::load_runbooks_of(Some(&repo), None).expect("runbooks");
    let plan = hk_console::context::plan_runbook(&loaded, &set, "node-health", "prod", None)
        .expect("node-health plans");
    assert!(!plan.mutates, "{plan:#?}");
}

/// A review pins a task: it stays a probe, said in the plan's title with who and when; an
/// edit to the task voids the review and says the hash changed.
#[test]
fn a_review_is_pinned_to_the_task_text() {
    let tmp = tempfile::tempdir().expect("tmp");
    let a = tmp.path().join("ansible");
    copy_dir(&corpus(), &a);
    let rel = "ansible/roles/web/tasks/main.yml";
    let unreviewed = derive(tmp.path(), &a, "shapes.yml", &search(&a, tmp.path()), &[]);
    let probe = unreviewed
        .real
        .iter()
        .find(|r| r.file == rel && r.line == 3)
        .unwrap_or_else(|| panic!("{:#?}", unreviewed.real));
    let sha = probe
        .why
        .split("sha256: ")
        .nth(1)
        .and_then(|s| s.get(..64))
        .expect("the plan names the task's sha256")
        .to_string();
    let review = ReviewedReadOnly {
        file: rel.into(),
        line: 3,
        sha256: sha.clone(),
        by: "alice".into(),
        at: "2026-12-01".into(),
        config_line: 40,
    };
    let reviewed = derive(
        tmp.path(),
        &a,
        "shapes.yml",
        &search(&a, tmp.path()),
        std::slice::from_ref(&review),
    );
    assert!(!reviewed.real.iter().any(|r| r.file == rel && r.line == 3));
    assert_eq!(
        reviewed
            .reviewed
            .iter()
            .map(|r| (r.file.as_str(), r.line, r.by.as_str(), r.at.as_str()))
            .collect::<Vec<_>>(),
        [(rel, 3, "alice", "2026-12-01")]
    );
    // An edit voids it.
    let f = tmp.path().join(rel);
    let text = std::fs::read_to_string(&f).expect("read");
    std::fs::write(&f, text.replace("/proc/loadavg", "/proc/uptime")).expect("edit");
    let stale = derive(
        tmp.path(),
        &a,
        "shapes.yml",
        &search(&a, tmp.path()),
        std::slice::from_ref(&review),
    );
    let again = stale
        .real
        .iter()
        .find(|r| r.file == rel && r.line == 3)
        .expect("not reviewed once edited");
    assert!(
        again
            .why
            .contains(&format!("pinned sha256 {sha}, the task now hashes"))
            && again.why.contains("hk-console.yaml:40"),
        "{}",
        again.why
    );
    assert!(stale.reviewed.is_empty());
}

/// What cannot be read counts as running for real, and says why.
#[test]
fn an_unreadable_include_makes_the_preview_mutating() {
    let tmp = tempfile::tempdir().expect("tmp");
    let a = tmp.path();
    std::fs::write(
        a.join("p.yml"),
        "- hosts: all\n  tasks:\n    - include_tasks: \"{{ which }}.yml\"\n    - import_tasks: missing.yml\n    - include_role: { name: ghost }\n",
    )
    .expect("write");
    let d = derive(a, a, "p.yml", &search(a, a), &[]);
    let lines: Vec<(usize, &str)> = d.real.iter().map(|r| (r.line, r.module.as_str())).collect();
    assert_eq!(
        lines,
        [
            (3, "include_tasks"),
            (4, "import_tasks"),
            (5, "include_role")
        ],
        "{:#?}",
        d.real
    );
    assert!(d.real.iter().all(|r| r.why.contains("counts as mutating")));
}

/// The directory of ansible-playbook (the tests' one lookup). Missing is a failure with
/// the install hint, never a skip.
fn ansible_bin_dir() -> PathBuf {
    hk_test_support::ansible::dir_of("ansible-playbook")
}

/// One record of the callback plugin.
#[derive(serde::Deserialize)]
struct Ran {
    path: String,
    check_mode: String,
    status: String,
    action: String,
}

/// Run `playbook` of `dir` under `--check` against localhost (connection local), every
/// write under `out`; what ran with check_mode False (not skipped): `file:line` -> module.
fn ansible_ran_for_real(dir: &Path, playbook: &str, out: &Path) -> BTreeSet<(String, String)> {
    let bin = ansible_bin_dir();
    let record = out.join("record.jsonl");
    let st = Command::new(bin.join("ansible-playbook"))
        .current_dir(dir)
        .env("HK_RECORD_CHECK_MODE", &record)
        .env(
            "ANSIBLE_CALLBACK_PLUGINS",
            fixtures().join("callback_plugins"),
        )
        .env("ANSIBLE_CALLBACKS_ENABLED", "record_check_mode")
        .env("ANSIBLE_PYTHON_INTERPRETER", bin.join("python3"))
        .env("ANSIBLE_LOCAL_TEMP", out.join("tmp"))
        .env("ANSIBLE_HOME", out.join("ansible-home"))
        .env("ANSIBLE_ROLES_PATH", out.join("no-roles"))
        .args(["-i", "localhost,", "-c", "local", "--check", "-e"])
        .arg(format!("out_dir={}", out.display()))
        .arg(playbook)
        .output()
        .expect("ansible-playbook");
    assert!(
        st.status.success(),
        "{playbook}: {}\n{}",
        String::from_utf8_lossy(&st.stdout),
        String::from_utf8_lossy(&st.stderr)
    );
    let text = std::fs::read_to_string(&record).unwrap_or_default();
    let mut set = BTreeSet::new();
    for line in text.lines() {
        let r: Ran = serde_json::from_str(line).expect("record");
        if r.check_mode == "False" && r.status != "skipped" {
            let rel = Path::new(&r.path)
                .strip_prefix(dir)
                .unwrap_or(Path::new(&r.path))
                .display()
                .to_string();
            set.insert((rel, r.action));
        }
    }
    set
}

/// Every check_mode-false task hk-console derived (run for real, probe by module, probe by
/// review) as `file:line` -> module, paths relative to `dir`.
fn derived_check_mode_false(d: &CheckDerivation) -> BTreeSet<(String, String)> {
    d.real
        .iter()
        .map(|r| (format!("{}:{}", r.file, r.line), r.module.clone()))
        .chain(
            d.probes
                .iter()
                .map(|(f, l, m)| (format!("{f}:{l}"), m.clone())),
        )
        .chain(
            d.reviewed
                .iter()
                .map(|r| (format!("{}:{}", r.file, r.line), r.module.clone())),
        )
        .collect()
}

/// The derivation against the real ansible-playbook: for the corpus (the finding's two
/// playbooks, the shapes a repo uses, two small public roles' shapes) and the sample's
/// playbooks, every task ansible-playbook ran with check_mode False under --check is one
/// hk-console derived, with the same module; the only extras are named below, each
/// conservative.
#[test]
fn the_derivation_matches_what_ansible_playbook_runs_for_real() {
    let tmp = tempfile::tempdir().expect("tmp");
    let a = tmp.path().join("ansible");
    copy_dir(&corpus(), &a);
    let mut compared = 0;
    for book in [
        "finding-raw.yml",
        "finding-local.yml",
        "shapes.yml",
        "public-roles.yml",
    ] {
        let out = tmp.path().join(format!("out-{book}"));
        std::fs::create_dir_all(&out).expect("mkdir");
        let ran = ansible_ran_for_real(&a, book, &out);
        let d = derive(&a, &a, book, &search(&a, &out), &[]);
        let derived = derived_check_mode_false(&d);
        let missing: Vec<_> = ran.difference(&derived).collect();
        assert!(
            missing.is_empty(),
            "{book}: ansible ran for real, hk-console missed: {missing:?}"
        );
        let extra: BTreeSet<String> = derived.difference(&ran).map(|(at, _)| at.clone()).collect();
        // Conservative extras, both in shapes.yml: a check_mode template hk-console cannot
        // decide counts as false (it renders true at run time, line 42), and a handler is
        // counted whether or not anything notifies it (line 64 is never notified).
        let expected: BTreeSet<String> = match book {
            "shapes.yml" => ["shapes.yml:42", "shapes.yml:64"]
                .into_iter()
                .map(String::from)
                .collect(),
            _ => BTreeSet::new(),
        };
        assert_eq!(extra, expected, "{book}: {derived:#?} vs {ran:#?}");
        // What ansible ran for real beyond the probes is what hk-console calls a write.
        let real: BTreeSet<String> = d
            .real
            .iter()
            .map(|r| format!("{}:{}", r.file, r.line))
            .collect();
        for (at, module) in &ran {
            let probe = hk_console::repo::check_mode::WRITES_NOTHING
                .iter()
                .any(|(m, _)| module.ends_with(&format!(".{m}")) || module == m);
            assert_eq!(real.contains(at), !probe, "{book}: {at} ({module})");
        }
        compared += ran.len();
    }
    assert!(compared >= 20, "{compared} tasks compared");

    // The sample's playbooks: what ansible runs with check_mode False (kube-vip's wait_for
    // on localhost) is what hk-console derived, and none of it writes.
    let sample = tmp.path().join("sample");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory"),
        &sample,
    );
    let sa = sample.join("infra/ansible");
    let out = tmp.path().join("out-sample");
    std::fs::create_dir_all(&out).expect("mkdir");
    // kube-vip's probe waits for the VIP on the API port: here a port that answers at once.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = listener.local_addr().expect("addr").port();
    let book = "playbooks/kube-vip.yml";
    let bin = ansible_bin_dir();
    let record = out.join("record.jsonl");
    let st = Command::new(bin.join("ansible-playbook"))
        .current_dir(&sa)
        .env("HK_RECORD_CHECK_MODE", &record)
        .env(
            "ANSIBLE_CALLBACK_PLUGINS",
            fixtures().join("callback_plugins"),
        )
        .env("ANSIBLE_CALLBACKS_ENABLED", "record_check_mode")
        .env("ANSIBLE_PYTHON_INTERPRETER", bin.join("python3"))
        .env("ANSIBLE_HOME", out.join("ansible-home"))
        .args(["-i", "localhost,", "-c", "local", "--check", "-e"])
        .arg(format!(
            "k3s_hosts=all kube_vip_address=127.0.0.1 k3s_api_port={port}"
        ))
        .arg(book)
        .output()
        .expect("ansible-playbook");
    assert!(
        st.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&st.stdout),
        String::from_utf8_lossy(&st.stderr)
    );
    let ran: BTreeSet<(String, String)> = std::fs::read_to_string(&record)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Ran>(l).expect("record"))
        .filter(|r| r.check_mode == "False" && r.status != "skipped")
        .map(|r| {
            let rel = Path::new(&r.path)
                .strip_prefix(&sample)
                .unwrap_or(Path::new(&r.path))
                .display()
                .to_string();
            (rel, r.action)
        })
        .collect();
    let d = derive(&sample, &sa, book, &search(&sa, &out), &[]);
    assert_eq!(derived_check_mode_false(&d), ran);
    assert_eq!(ran.len(), 1, "{ran:?}");
    assert!(d.real.is_empty(), "{:#?}", d.real);
}
