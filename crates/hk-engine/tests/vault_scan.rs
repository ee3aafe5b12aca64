//! A loaded repo's vaults are read once: the console asks for what to mask from its
//! executors, its etcd probe and its VPN look (three asks at console start), and a vault
//! password script (a password manager, which may ask the operator for a touch) must run
//! once for all of them. The sample repo, its password file turned into a script.

use std::cell::Cell;
use std::os::unix::fs::PermissionsExt as _;

use hk_engine::repo::vault::scan_repo_running;
use hk_engine::repo::Repo;

#[test]
fn a_password_script_runs_once_per_loaded_repo() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("repo");
    hk_test_support::fs::copy_dir(&hk_test_support::root().join("inventory"), &root);
    let password = std::fs::read_to_string(root.join(".vault-pass-sample")).expect("pw");
    let script = root.join("vault-pass.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\n# never run here: the runner below answers\n",
    )
    .expect("script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let cfg = root.join("infra/ansible/ansible.cfg");
    std::fs::write(
        &cfg,
        "[defaults]\nvault_password_file = ../../vault-pass.sh\n",
    )
    .expect("cfg");

    let runs = Cell::new(0);
    let runner = |path: &std::path::Path, _label: &str| -> Result<String, String> {
        assert!(path.ends_with("vault-pass.sh"), "{}", path.display());
        runs.set(runs.get() + 1);
        Ok(password.trim().to_string())
    };
    let secret = "+sample-not-a-real-secret";

    let repo = Repo::load(&root).expect("the copied sample loads");
    for ask in ["executors", "etcd probe", "vpn look"] {
        let scan = scan_repo_running(&repo, &runner);
        assert_eq!(scan.locked, None, "{ask}: {scan:?}");
        assert_ne!(scan.redactor().redact(secret), secret, "{ask}: not masked");
    }
    assert_eq!(runs.get(), 1, "the script ran once for the three asks");

    // A repo loaded again (the operator's edits read) is scanned again.
    let again = Repo::load(&root).expect("loads again");
    assert_ne!(
        scan_repo_running(&again, &runner).redactor().redact(secret),
        secret
    );
    assert_eq!(runs.get(), 2);
}
