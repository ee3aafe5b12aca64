//! The change record (`hk-console runs show`) of real runs: a headless demo run of
//! `packages-baseline` on prod (the gate policy's preview, approval and list-hosts; real
//! ansible over SSH to the simulated node) rendered as Markdown, held to a golden with the
//! times, run ids and temporary paths filtered; every gate with its answerer and every
//! step's final state are in it; the JSON form carries the same; `runs list` finds it by
//! a prefix of its id; a damaged journal is shown with the damage marked.
//! Needs ansible-playbook (HK_ANSIBLE_BIN_DIR, PATH or /opt/hk-venv/bin): fails, not skips.

use std::time::Duration;

use hk_console::record;
use hk_console::sim::demo;
use hk_console::sim::headless::{drive, HeadlessRun, OPERATOR};
use regex::Regex;

fn filtered(text: &str) -> String {
    let rules = [
        (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", "[time]"),
        (r"\d{8}T\d{9}Z", "[stamp]"),
        (r"/tmp/\.tmp[A-Za-z0-9]+", "[tmp]"),
        (r"\b\d+(\.\d+)? ?(ms|s)\b", "[dur]"),
    ];
    // Who took the run lock: this machine's login@host.
    let me = hk_console::cluster::lock::Claimant::this_console("", "", "").holder;
    let mut out = text.replace(&me, "[login@host]");
    for (re, to) in rules {
        out = Regex::new(re)
            .expect("regex")
            .replace_all(&out, to)
            .into_owned();
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_show_md_of_a_headless_demo_run_lists_every_gate_and_state() {
    let dirs = hk_console::exec::ansible::search_dirs();
    assert!(
        hk_console::exec::ansible::find_binary("ansible-playbook", &dirs).is_some(),
        "ansible-playbook not found: {}",
        hk_console::exec::ansible::INSTALL_HINT
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let d = demo::start("healthy", &dir.path().join("repo"))
        .await
        .unwrap_or_else(|e| panic!("demo: {e}"));
    let set = hk_console::runbook::embedded::load(&[]).expect("shipped runbooks");
    let req = HeadlessRun {
        runbook: "packages-baseline".into(),
        env: Some("prod".into()),
        host: Some("k3s-prod-2".into()),
        deadline: Duration::from_secs(180),
    };
    let runs = dir.path().join("runs");
    let report = drive(&d, set, &req, &runs, |_| {})
        .await
        .unwrap_or_else(|e| panic!("headless run: {e}"));
    assert!(report.succeeded, "{}", report.render());

    let id = report
        .journal
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .expect("run id");
    // Found by a prefix of its id, as the operator types it.
    let rec = record::load(&runs, &id[..20]).expect("the run's record");
    assert_eq!(rec.outcome, "succeeded");
    let gated: Vec<_> = rec.steps.iter().filter(|s| s.gate.is_some()).collect();
    assert!(!gated.is_empty());
    for s in &rec.steps {
        assert_eq!(s.state, "done", "step {}", s.n);
    }
    for s in &gated {
        assert_eq!(s.gate.as_ref().map(|g| g.by.as_str()), Some(OPERATOR));
    }
    // The preview's diff is in the record, not just its last lines.
    assert!(rec.steps.iter().any(|s| s.preview && !s.output.is_empty()));

    let md = rec.render_md();
    for s in &rec.steps {
        assert!(
            md.contains(&format!("| {} | ", s.n)),
            "step {} missing from:\n{md}",
            s.n
        );
    }
    // The golden holds the table and the decisions; the output section (ansible's own
    // words) is asserted above, not frozen.
    let head = md.split("#### Output").next().unwrap_or_default();
    insta::assert_snapshot!("runs_show_md_packages_baseline_prod", filtered(head));

    let json = serde_json::to_value(&rec).expect("json");
    assert_eq!(
        json["steps"].as_array().map(Vec::len),
        Some(rec.steps.len())
    );
    assert_eq!(json["outcome"], "succeeded");

    let (listed, unreadable) = record::list(&runs).expect("list");
    assert_eq!(listed.len(), 1);
    assert!(unreadable.is_empty());
    assert_eq!(listed[0].run_id, id);
    let text = record::show_list(&runs, false).expect("list text");
    assert!(
        text.contains("succeeded    packages-baseline prod by simulated-operator"),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&record::show_list(&runs, true).expect("list json")).expect("json");
    assert_eq!(json["runs"][0]["run_id"], id.as_str());
    let shown: serde_json::Value =
        serde_json::from_str(&record::show(&runs, &id, record::Format::Json).expect("show json"))
            .expect("json");
    assert_eq!(shown["run_id"], id.as_str());
    assert_eq!(
        record::show(&runs, &id, record::Format::Md).expect("show md"),
        md
    );

    // Damage: a line of garbage after the first records. The record is still shown, with
    // the damage named and what the lines before it say.
    let text = std::fs::read_to_string(&report.journal).expect("journal");
    let lines: Vec<&str> = text.lines().collect();
    let cut = 4.min(lines.len());
    let damaged = format!("{}\n{{not json\n", lines[..cut].join("\n"));
    std::fs::write(&report.journal, damaged).expect("damage");
    let rec = record::load_path(&report.journal).expect("salvaged");
    let damage = rec.damage.clone().expect("damage named");
    assert!(
        damage.starts_with(&format!("damaged at line {}", cut + 1)),
        "{damage}"
    );
    let text = rec.render_text();
    assert!(text.contains("DAMAGED JOURNAL: damaged at line"), "{text}");
    assert!(rec.render_md().contains("**damaged journal**"));
    assert_ne!(rec.outcome, "succeeded");
}

#[test]
fn an_unknown_or_ambiguous_run_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    match record::load(dir.path(), "2026") {
        Err(e) => assert!(e.to_string().starts_with("no run `2026` in "), "{e}"),
        Ok(_) => panic!("an empty directory holds no run"),
    }
}
