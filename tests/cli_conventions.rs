//! The conventions an operator who lives in kubectl and k9s expects, through the real
//! binary: shell completions (`bash -n` accepts bash's), a man page naming every command,
//! `paths` naming every place hk-console reads or writes, journals and the log private to
//! the operator (0600 files under 0700 directories), the operator's name from the password
//! database when neither LOGNAME nor USER is set, and the console's `--kubeconfig` refused
//! where it would name one cluster for several environments.

use hk_test_support::machine as machine_common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use clap::CommandFactory;
use hk_console::journal::{Header, Journal};
use hk_console::runbook::machine::{Mode, Timestamp};

fn bin(state: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hk-console"));
    c.env("XDG_STATE_HOME", state.join("state"))
        .env("XDG_CONFIG_HOME", state.join("config"))
        .env_remove("HK_REPO")
        .env_remove("HK_RUNBOOKS")
        .env_remove("KUBECONFIG");
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn show(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    )
}

/// Every subcommand's name, from the same definitions the binary parses with.
fn subcommands() -> Vec<String> {
    hk_console::cli::Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect()
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn completions_are_scripts_each_shell_accepts() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let names = subcommands();
    assert!(names.len() >= 12, "{names:?}");
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = bin(tmp.path())
            .args(["completions", shell])
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", show(&out));
        let script = text(&out.stdout);
        for name in &names {
            assert!(script.contains(name.as_str()), "{shell} completes `{name}`");
        }
        if shell == "bash" {
            let file = tmp.path().join("hk-console.bash");
            std::fs::write(&file, &out.stdout).expect("write script");
            let check = Command::new("bash")
                .arg("-n")
                .arg(&file)
                .output()
                .expect("bash");
            assert!(check.status.success(), "bash -n: {}", show(&check));
        }
    }
    let out = bin(tmp.path())
        .args(["completions", "tcsh"])
        .output()
        .expect("run");
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown shell: {}",
        show(&out)
    );
}

#[test]
fn man_renders_roff_naming_every_command() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = bin(tmp.path()).arg("man").output().expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let page = text(&out.stdout);
    assert!(page.contains("\n.TH hk-console 1"), "{page}");
    assert!(page.contains("\n.SH SUBCOMMANDS"), "{page}");
    for name in subcommands() {
        let entry = format!("hk\\-console\\-{}(1)", name.replace('-', "\\-"));
        assert!(page.contains(&entry), "man names `{entry}`");
    }
    // Every page it refers to, written with --dir.
    let dir = tmp.path().join("man1");
    let written = bin(tmp.path())
        .arg("man")
        .arg("--dir")
        .arg(&dir)
        .output()
        .expect("run");
    assert_eq!(written.status.code(), Some(0), "{}", show(&written));
    for name in subcommands().iter().filter(|n| n.as_str() != "help") {
        let file = dir.join(format!("hk-console-{name}.1"));
        let page =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(page.contains(".TH hk-console-"), "{}", file.display());
    }
    // Rendered by man itself where it is installed: the page is readable roff.
    if Command::new("man").arg("--version").output().is_ok() {
        let file = tmp.path().join("hk-console.1");
        std::fs::write(&file, &out.stdout).expect("write page");
        let shown = Command::new("man")
            .arg("-l")
            .arg(&file)
            .env("MANPAGER", "cat")
            .env("PAGER", "cat")
            .output()
            .expect("man");
        assert!(shown.status.success(), "man -l: {}", show(&shown));
        let shown = text(&shown.stdout);
        assert!(
            shown.contains("SUBCOMMANDS") && shown.contains("SYNOPSIS"),
            "{shown}"
        );
    }
}

#[test]
fn paths_lists_config_themes_state_logs_and_journals() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (config, state) = (tmp.path().join("config"), tmp.path().join("state"));
    let out = bin(tmp.path()).arg("paths").output().expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let t = text(&out.stdout);
    for (what, path) in [
        ("config", config.join("hk-console/config.yaml")),
        ("themes", config.join("hk-console/themes")),
        ("state", state.join("hk-console")),
        ("logs", state.join("hk-console/hk-console.log")),
        ("journals", state.join("hk-console/runs")),
    ] {
        let line = t
            .lines()
            .find(|l| l.starts_with(what))
            .unwrap_or_else(|| panic!("no `{what}` line:\n{t}"));
        assert!(line.contains(&path.display().to_string()), "{what}: {line}");
    }

    let out = bin(tmp.path())
        .args(["paths", "--json"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let whats: Vec<&str> = v
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|p| p["what"].as_str())
        .collect();
    assert_eq!(whats, ["config", "themes", "state", "logs", "journals"]);

    // Nowhere to put anything: said, and exit 2, not a guessed path.
    let out = bin(tmp.path())
        .arg("paths")
        .env_remove("XDG_STATE_HOME")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("HOME")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(text(&out.stdout).contains("(unknown"), "{}", show(&out));
}

#[test]
fn the_log_is_0600_under_a_0700_directory() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = bin(tmp.path()).arg("envs").output().expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let dir = tmp.path().join("state/hk-console");
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("hk-console.log")), 0o600);

    // A log left world-readable by an older version is narrowed on the next start.
    std::fs::set_permissions(
        dir.join("hk-console.log"),
        std::fs::Permissions::from_mode(0o644),
    )
    .expect("chmod");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    bin(tmp.path()).arg("envs").output().expect("run");
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("hk-console.log")), 0o600);
}

#[test]
fn journals_and_output_logs_are_0600_under_a_0700_directory() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let runs = tmp.path().join("state/hk-console/runs");
    let header = Header::new(
        machine_common::etcd_plan(),
        Mode::Operate,
        "alice",
        Timestamp(1),
    );
    let mut journal = Journal::create(&runs, &header).expect("create");
    journal
        .append_output(1, 1, Timestamp(2), "ok")
        .expect("output line");
    assert_eq!(mode(&runs), 0o700);
    assert_eq!(mode(&tmp.path().join("state/hk-console")), 0o700);
    let path = journal.path().to_path_buf();
    assert_eq!(mode(&path), 0o600, "{}", path.display());
    assert_eq!(mode(&hk_console::journal::output_path(&path)), 0o600);
}

/// Set in the child copy of this test binary that [`the_operator_is_the_login_name_when_user_is_unset`] starts.
const OPERATOR_CHILD: &str = "HK_TEST_OPERATOR_CHILD";

/// What the operator's name is in a child copy of this test binary whose environment has
/// no USER and no LOGNAME (and USER=`user`, if given): the environment is the process's,
/// so it changes in a process of its own, never under the other tests of this binary.
fn operator_in_child(user: Option<&str>) -> String {
    let name = match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::child_prints_the_operator"),
        None => "child_prints_the_operator".to_string(),
    };
    let mut cmd = Command::new(std::env::current_exe().expect("current exe"));
    cmd.args([
        "--exact",
        &name,
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env_remove("USER")
    .env_remove("LOGNAME")
    .env(OPERATOR_CHILD, "1");
    if let Some(u) = user {
        cmd.env("USER", u);
    }
    let out = cmd.output().expect("run the child test");
    let stdout = text(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "the child test did not run: {stdout}{}",
        text(&out.stderr)
    );
    stdout
        .lines()
        // The harness prints the test's name on the same line, before the child's output.
        .find_map(|l| l.split_once("operator=").map(|(_, name)| name.trim()))
        .unwrap_or_else(|| panic!("the child printed no operator: {stdout}"))
        .to_string()
}

#[test]
fn the_operator_is_the_login_name_when_user_is_unset() {
    let want = Command::new("id").arg("-un").output().expect("id -un");
    let want = text(&want.stdout).trim().to_string();
    assert!(!want.is_empty());
    assert_eq!(operator_in_child(None), want);
    assert_eq!(operator_in_child(Some("someone-else")), "someone-else");
}

#[test]
#[ignore = "run by the_operator_is_the_login_name_when_user_is_unset, in a child process"]
fn child_prints_the_operator() {
    if std::env::var_os(OPERATOR_CHILD).is_none() {
        return;
    }
    println!("operator={}", hk_console::journal::operator_login());
}

#[test]
fn a_console_kubeconfig_for_several_environments_is_refused() {
    // The bundled sample has dev and prod: one file cannot be both. Refused before any
    // terminal is needed (exit 2 naming the flag), not applied to both.
    let tmp = tempfile::tempdir().expect("tempdir");
    let kc = tmp.path().join("k.yaml");
    std::fs::write(&kc, "apiVersion: v1\nkind: Config\n").expect("write");
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory");
    for args in [vec!["observe"], vec!["run", "node-health", "--env", "dev"]] {
        let out = bin(tmp.path())
            .arg("--repo")
            .arg(&sample)
            .arg("--kubeconfig")
            .arg(&kc)
            .args(&args)
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", show(&out));
        let err = text(&out.stderr);
        if args[0] == "observe" {
            assert!(err.contains("--kubeconfig names one cluster"), "{err}");
        } else {
            // With --env the kubeconfig is taken; what stops it is the missing terminal.
            assert!(err.contains("terminal"), "{err}");
        }
    }
    // Where no cluster is reached, the flags would do nothing: refused, not ignored.
    for args in [
        vec!["demo", "--list", "--context", "x"],
        vec![
            "plan",
            "node-health",
            "--env",
            "dev",
            "--kubeconfig",
            "k.yaml",
        ],
        vec!["check", "--context", "x"],
    ] {
        let out = bin(tmp.path()).args(&args).output().expect("run");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", show(&out));
        assert!(text(&out.stderr).contains("cannot apply"), "{}", show(&out));
    }
}

/// `runs list` and `runs show` read the journals of a directory: the run is listed with its
/// runbook and operator, its Markdown record names the gate's answerer, and a run that is
/// not there is exit 2 naming it and the directory.
#[test]
fn runs_list_and_show_read_the_change_record() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let runs = tmp.path().join("runs");
    std::fs::create_dir_all(&runs).expect("mkdir");
    machine_common::record_health_run(
        &runs,
        1_000,
        vec![
            hk_console::runbook::machine::Input::Start,
            machine_common::approve(1),
        ],
    );
    let out = bin(tmp.path())
        .args(["runs", "list", "--json", "--dir"])
        .arg(&runs)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let listed = v["runs"].as_array().expect("runs");
    assert_eq!(listed.len(), 1, "{}", show(&out));
    assert_eq!(listed[0]["runbook"], "node-health");
    let id = listed[0]["run_id"].as_str().expect("id").to_string();

    let out = bin(tmp.path())
        .args(["runs", "show", &id, "--format", "md", "--dir"])
        .arg(&runs)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let md = text(&out.stdout);
    assert!(md.contains("node-health") && md.contains("alice"), "{md}");
    assert!(
        md.contains("answered by op"),
        "the gate names who answered it: {md}"
    );

    let out = bin(tmp.path())
        .args(["runs", "show", "no-such-run", "--dir"])
        .arg(&runs)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(text(&out.stderr).contains("no-such-run"), "{}", show(&out));
}
