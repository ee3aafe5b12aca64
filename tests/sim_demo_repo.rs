//! The demo's repo: the embedded sample written out and moved onto loopback, consistent
//! enough that the static parity check still passes on it, and refused if anything the
//! console dials would leave the machine.

use std::net::IpAddr;

use hk_console::checks::parity;
use hk_console::repo::Repo;
use hk_console::sim::demo_repo::{prepare, sample_files, verify_loopback, write_sample};

#[test]
fn sample_is_embedded_whole() {
    let files: Vec<&str> = sample_files().iter().map(|(p, _)| *p).collect();
    assert!(files.contains(&"hk-console.yaml"), "{files:?}");
    assert!(
        files.contains(&"infra/ansible/inventory/hosts.ini"),
        "{files:?}"
    );
    // The same bytes as the checkout's sample.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory");
    for (rel, text) in sample_files() {
        let on_disk = std::fs::read_to_string(root.join(rel)).expect("read sample file");
        assert_eq!(&on_disk, text, "{rel}");
    }
}

#[test]
fn everything_dialled_is_loopback_and_parity_still_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (repo, plan) = prepare(dir.path()).expect("prepare demo repo");
    // One address per host, all distinct, all loopback.
    let mut seen = std::collections::BTreeSet::new();
    for (host, addr) in &plan.hosts {
        assert!(addr.is_loopback(), "{host} {addr}");
        assert!(seen.insert(*addr), "{host} shares {addr}");
    }
    assert_eq!(plan.hosts.len(), repo.inventory.hosts().len());
    for env in &repo.environments {
        let vip: IpAddr = env.vip.get().expect("vip").parse().expect("vip ip");
        assert!(vip.is_loopback(), "{} vip {vip}", env.name);
        assert_eq!(IpAddr::V4(plan.vips[&env.name]), vip);
        for s in &env.servers {
            let a: IpAddr = s.address.parse().expect("server ip");
            assert_eq!(IpAddr::V4(plan.hosts[&s.name]), a, "{}", s.name);
        }
    }
    // The Flux overlays moved with the inventory: the parity check sees no violation.
    let findings = parity::check(&hk_console::gather::parity_input(
        &repo,
        hk_console::exec::kustomize::Kustomize::shared(),
    ));
    let errors: Vec<String> = findings
        .iter()
        .filter(|f| parity::exit_code(std::slice::from_ref(*f)) == 1)
        .map(|f| f.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    // And the sample on disk is untouched by any of this.
    let sample = Repo::load(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory"))
        .expect("sample loads");
    assert!(verify_loopback(&sample).is_err());
}

#[test]
fn an_address_left_off_machine_is_refused_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_sample(dir.path()).expect("write sample");
    let repo = Repo::load(dir.path()).expect("load");
    let err = verify_loopback(&repo).expect_err("the sample's addresses are not loopback");
    let msg = err.to_string();
    assert!(msg.contains("refusing to start"), "{msg}");
    assert!(msg.contains("ansible_host=192.168."), "{msg}");
}

/// Issue 28: a fresh clone of an infra repo has no `.cache/`; the demo makes it for the
/// kubeconfigs it writes (it ended with "cannot write the kubeconfig .../.cache/dev.kubeconfig:
/// No such file or directory").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repo_without_a_cache_directory_is_rehearsed() {
    let src = tempfile::tempdir().expect("tempdir");
    write_sample(src.path()).expect("write sample");
    let cache = src.path().join(".cache");
    if cache.exists() {
        std::fs::remove_dir_all(&cache).expect("remove .cache");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let demo = hk_console::sim::demo::start_with("healthy", dir.path(), Some(src.path()), None)
        .await
        .unwrap_or_else(|e| panic!("the demo starts on a repo with no .cache/: {e}"));
    for name in ["dev.kubeconfig", "prod.kubeconfig"] {
        let kc = dir.path().join(".cache").join(name);
        let text = std::fs::read_to_string(&kc).unwrap_or_else(|e| panic!("{}: {e}", kc.display()));
        assert!(text.contains("current-context:"), "{text}");
    }
    drop(demo);
}

/// A kubeconfig name that would put the demo's kubeconfig outside its directory (absolute,
/// or climbing with `..`) is refused, naming the variable: nothing is written there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeconfig_name_outside_the_demo_directory_is_refused() {
    for bad in [
        "/tmp/hk-demo-would-overwrite.kubeconfig",
        "../outside.kubeconfig",
    ] {
        let src = tempfile::tempdir().expect("tempdir");
        write_sample(src.path()).expect("write sample");
        let vars = src
            .path()
            .join("infra/ansible/inventory/group_vars/k3s_prod/vars.yml");
        let text = std::fs::read_to_string(&vars).expect("prod vars");
        assert!(text.contains("cluster_kubeconfig_name: prod.kubeconfig"));
        std::fs::write(
            &vars,
            text.replace(
                "cluster_kubeconfig_name: prod.kubeconfig",
                &format!("cluster_kubeconfig_name: {bad}"),
            ),
        )
        .expect("write vars");
        let dir = tempfile::tempdir().expect("tempdir");
        let err =
            match hk_console::sim::demo::start_with("healthy", dir.path(), Some(src.path()), None)
                .await
            {
                Ok(_) => panic!("{bad}: the demo started"),
                Err(e) => e.to_string(),
            };
        assert!(
            err.contains("cluster_kubeconfig_name") && err.contains(bad) && err.contains("prod"),
            "{err}"
        );
        assert!(!std::path::Path::new("/tmp/hk-demo-would-overwrite.kubeconfig").exists());
        assert!(!dir.path().join("outside.kubeconfig").exists());
    }
}

fn public_repo(name: &str, into: &std::path::Path) -> std::path::PathBuf {
    let repo = into.join(name);
    crate::demo_common::copy_tree(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/public-repos")
            .join(name),
        &repo,
    );
    let sh = std::process::Command::new("sh")
        .arg("SETUP.sh")
        .current_dir(&repo)
        .output()
        .expect("SETUP.sh");
    assert!(sh.status.success(), "{sh:?}");
    let init = std::process::Command::new(env!("CARGO_BIN_EXE_hk-console"))
        .arg("--repo")
        .arg(&repo)
        .args(["init", "--write"])
        .env("XDG_STATE_HOME", into.join("state"))
        .env_remove("HK_REPO")
        .output()
        .expect("init");
    assert_eq!(init.status.code(), Some(0), "{init:?}");
    repo
}

/// Issue 36: kriegalex--k3s-ansible's inventory has a `localhost` with
/// `ansible_connection: local` (its local plays). `demo --repo` refused it ("localhost has
/// no ansible_host address"); running its plays for real on this machine would be worse. In
/// the demo's copy it is a node of its own: host_vars beside the inventory give it a
/// loopback address, SSH and the node's python3, which the real ansible-inventory reads as
/// hk-console does.
#[test]
fn a_local_connection_host_is_a_node_of_its_own_in_the_demo() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = public_repo("kriegalex--k3s-ansible", tmp.path());
    let dir = tmp.path().join("demo");
    let (loaded, plan) =
        hk_console::sim::demo_repo::prepare_from(&dir, Some(&repo)).expect("the demo's copy");
    let addr = plan.hosts["localhost"];
    assert!(addr.is_loopback(), "{addr}");
    let written = std::fs::read_to_string(dir.join("inventory/host_vars/localhost.yml"))
        .expect("host_vars/localhost.yml");
    assert!(written.contains("ansible_connection: local"), "{written}");
    // What the real ansible-inventory says of it in the copy, and what hk-console says.
    let vault = tmp.path().join("vault-pass");
    std::fs::write(&vault, "not-needed\n").expect("vault pass");
    let out =
        std::process::Command::new(crate::support::ansible_bin_dir().join("ansible-inventory"))
            .args(["--host", "localhost"])
            .current_dir(&dir)
            .env("ANSIBLE_VAULT_PASSWORD_FILE", &vault)
            .env("ANSIBLE_HOME", tmp.path().join("ansible-home"))
            .output()
            .expect("ansible-inventory");
    assert!(out.status.success(), "{out:?}");
    let vars: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(vars["ansible_connection"], "ssh", "{vars:#}");
    assert_eq!(vars["ansible_host"], addr.to_string(), "{vars:#}");
    assert_eq!(vars["ansible_python_interpreter"], "/usr/bin/python3");
    let ours = |var: &str| {
        loaded
            .resolve_var("localhost", var)
            .and_then(|r| r.value()?.as_str().map(str::to_string))
    };
    assert_eq!(ours("ansible_connection").as_deref(), Some("ssh"));
    assert_eq!(ours("ansible_host"), Some(addr.to_string()));
}

/// A host whose connection is neither SSH nor local (a container's, say) would run its tasks
/// on this machine whatever its address: the demo refuses it by name.
#[test]
fn a_host_on_another_connection_is_refused_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_sample(dir.path()).expect("write sample");
    let hv = dir.path().join("infra/ansible/inventory/host_vars");
    std::fs::create_dir_all(&hv).expect("host_vars");
    std::fs::write(
        hv.join("k3s-dev-1.yml"),
        "ansible_connection: community.docker.docker\n",
    )
    .expect("host_vars file");
    let repo = Repo::load(dir.path()).expect("load");
    let err = verify_loopback(&repo).expect_err("a docker connection");
    let msg = err.to_string();
    assert!(
        msg.contains("k3s-dev-1 ansible_connection=community.docker.docker (runs on this machine, not a node)"),
        "{msg}"
    );
}

/// Issue 36: jensens--k3s-ansible names its hosts by IPv6 address. The demo rewrites dotted
/// quads only, and refused them ("would leave this machine"); each is now a node of its own
/// through host_vars, and the real ansible-inventory connects it to its loopback address.
#[test]
fn hosts_named_by_ipv6_address_are_nodes_of_their_own_in_the_demo() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = public_repo("jensens--k3s-ansible", tmp.path());
    let dir = tmp.path().join("demo");
    let (loaded, plan) =
        hk_console::sim::demo_repo::prepare_from(&dir, Some(&repo)).expect("the demo's copy");
    let host = "2001:db8::11";
    let addr = plan.hosts[host];
    assert!(addr.is_loopback(), "{addr}");
    let out =
        std::process::Command::new(crate::support::ansible_bin_dir().join("ansible-inventory"))
            .args(["--host", host])
            .current_dir(dir.join("ansible"))
            .env("ANSIBLE_HOME", tmp.path().join("ansible-home"))
            .output()
            .expect("ansible-inventory");
    assert!(out.status.success(), "{out:?}");
    let vars: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(vars["ansible_host"], addr.to_string(), "{vars:#}");
    let ours = loaded
        .resolve_var(host, "ansible_host")
        .and_then(|r| r.value()?.as_str().map(str::to_string));
    assert_eq!(ours, Some(addr.to_string()));
}
