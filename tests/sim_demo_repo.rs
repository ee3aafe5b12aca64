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
    let findings = parity::check(&hk_console::gather::parity_input(&repo));
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
