//! How fast hk-console reads an infra repo, against the peer it must agree with.
//!
//! - `load_list/sample`: Inventory::load + the `--list` JSON, bundled sample.
//! - `load_list/generated-600`: the same on a generated 600-host inventory with group_vars.
//! - `repo_load/{sample,generated-600}`: hk-console.yaml + inventory + every environment derived (Jinja
//!   resolution included): what every command pays before it does anything.
//! - `process/hk-console-*`: the release binary `hk-console inventory --list -i FILE`, spawned.
//! - `peer/ansible-inventory-*`: the real `ansible-inventory -i FILE --list` on the same
//!   files, in the same run (skipped with a note if Ansible is not installed).
//!
//! Figures and ratios: docs/perf.md.
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use hk_console::repo::inventory::Inventory;
use hk_console::repo::listing::list_json;
use hk_console::repo::Repo;

fn sample_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory")
}

fn sample_inventory() -> PathBuf {
    sample_root().join("infra/ansible/inventory/hosts.ini")
}

/// 600 hosts in 30 racks under 3 sites, with group_vars per site and a Jinja-derived var.
fn generated(dir: &Path) -> PathBuf {
    let mut ini = String::new();
    for site in 0..3 {
        ini.push_str(&format!("[site{site}:children]\n"));
        for rack in 0..10 {
            ini.push_str(&format!("site{site}_rack{rack}\n"));
        }
        for rack in 0..10 {
            ini.push_str(&format!(
                "[site{site}_rack{rack}]\nnode-s{site}-r{rack}-[01:20] rack={rack} weight=1.5\n"
            ));
        }
    }
    std::fs::create_dir_all(dir.join("group_vars")).expect("mkdir");
    std::fs::write(dir.join("hosts.ini"), ini).expect("write");
    for site in 0..3 {
        std::fs::write(
            dir.join("group_vars").join(format!("site{site}.yml")),
            format!("vip: 10.{site}.0.1\nendpoint: \"{{{{ vip }}}}\"\nports: [6443, 2379, 2380]\nenabled: yes\n"),
        )
        .expect("write");
    }
    std::fs::write(
        dir.join("group_vars/all.yml"),
        "user: ops\nmode: 0755\nk3s_api_port: 6443\nk3s_primary_group: site0_rack0\nk3s_api_host: 10.0.0.1\n\
         kube_vip_address: \"{{ vip }}\"\nk3s_apiserver_endpoint: \"{{ kube_vip_address }}\"\n",
    )
    .expect("write");
    // Makes the directory a repo: one environment per site.
    std::fs::write(
        dir.join("hk-console.yaml"),
        "ansible_dir: .\ninventory: hosts.ini\nenvironments:\n  s0: { servers: site0 }\n  s1: { servers: site1 }\n  s2: { servers: site2 }\n",
    )
    .expect("write");
    dir.join("hosts.ini")
}

fn ansible_inventory() -> Option<PathBuf> {
    let dirs = std::env::var_os("HK_ANSIBLE_BIN_DIR")
        .map(PathBuf::from)
        .into_iter()
        .chain(
            std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
                .unwrap_or_default(),
        )
        .chain([
            PathBuf::from("target/hk-venv/bin"),
            PathBuf::from("/opt/hk-venv/bin"),
        ]);
    dirs.map(|d| d.join("ansible-inventory"))
        .find(|p| p.is_file())
}

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().expect("tmp");
    let big = generated(tmp.path());
    let vault_pass = sample_root().join(".vault-pass-sample");

    let mut g = c.benchmark_group("load_list");
    g.bench_function("sample", |b| {
        b.iter(|| list_json(&Inventory::load(black_box(&sample_inventory())).expect("load")))
    });
    g.bench_function("generated-600", |b| {
        b.iter(|| list_json(&Inventory::load(black_box(&big)).expect("load")))
    });
    g.finish();

    let mut g = c.benchmark_group("repo_load");
    g.bench_function("sample", |b| {
        b.iter(|| Repo::load(black_box(&sample_root())).expect("repo"))
    });
    g.bench_function("generated-600", |b| {
        b.iter(|| {
            let repo = Repo::load(black_box(tmp.path())).expect("repo");
            assert_eq!(repo.environments[0].vip.get(), Some("10.0.0.1"));
            repo
        })
    });
    g.finish();

    // Process against process: what a script calling either tool pays.
    let mut g = c.benchmark_group("process");
    g.sample_size(20);
    for (name, file) in [
        ("hk-console-sample", sample_inventory()),
        ("hk-console-generated-600", big.clone()),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| {
                let out = Command::new(env!("CARGO_BIN_EXE_hk-console"))
                    .env("XDG_STATE_HOME", tmp.path().join("state"))
                    .args(["inventory", "--list", "-i"])
                    .arg(&file)
                    .output()
                    .expect("hk-console");
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            })
        });
    }
    g.finish();

    match ansible_inventory() {
        None => eprintln!("note: ansible-inventory not found; peer benchmarks skipped (run tests/run-all.sh first)"),
        Some(exe) => {
            let mut g = c.benchmark_group("peer");
            g.sample_size(10).measurement_time(Duration::from_secs(20));
            for (name, file) in [("ansible-inventory-sample", sample_inventory()), ("ansible-inventory-generated-600", big.clone())] {
                g.bench_function(name, |b| {
                    b.iter(|| {
                        let out = Command::new(&exe)
                            .args(["-i"])
                            .arg(&file)
                            .arg("--list")
                            .arg("--vault-password-file")
                            .arg(&vault_pass)
                            .output()
                            .expect("ansible-inventory");
                        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
                    })
                });
            }
            g.finish();
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
