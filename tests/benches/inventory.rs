//! How fast, and in how much memory, hk-console reads an infra repo, against the peer it must
//! agree with. Figures and the commands that produced them: docs/perf.md, "Inventory".
//!
//! Generated inventories (`generated(dir, n)`): `n` hosts in racks of 20 (`[site<S>_rack<R>]`,
//! each host with two inline vars), ten racks a site (`[site<S>:children]`), a group_vars file
//! per site (a Jinja-derived var, a list, a YAML 1.1 boolean) and `group_vars/all.yml`; an
//! hk-console.yaml with one environment per site of the first three.
//!
//! - `load_list/{100,2000,10000}`: `Inventory::load` + the streamed `--list` JSON, in-process;
//!   `load_list/yaml-2000`: the same 2,000 hosts written as a YAML inventory (`hosts.yml`
//!   beside the hosts.ini, the same group_vars), and `process/`/`peer/` `*-yaml-2000` for it.
//! - `inventory_load/{sample,sample+2000-unrelated}`: `Inventory::load` of those repos'
//!   hosts.ini alone (parse, graph, vars files, merge budget).
//! - `repo_load/{sample,sample+2000-unrelated}`: hk-console.yaml + inventory + environments
//!   derived, on the bundled sample and on a copy whose hosts.ini also has 2,000 hosts in
//!   groups no environment uses: what `envs`/`check`/`plan` pay before they start.
//! - `process/hk-console-list-*`: the release binary `hk-console inventory --list -i FILE`.
//! - `peer/ansible-inventory-*`: the real `ansible-inventory -i FILE --list` on the same files
//!   in the same run (100 and 2,000 hosts; 10,000 only with HK_BENCH_PEER_10K=1: ~20 s a run).
//! - Before criterion starts, peak RSS of one run of each process (`/usr/bin/time -f %M`),
//!   printed as a table (criterion has no memory figure).
//!
//! `HK_BENCH_WRITE=DIR cargo bench --bench inventory` writes the generated files under DIR
//! (`DIR/gen-<n>/hosts.ini`, `DIR/sample-unrelated/`) and exits: the inputs of the
//! whole-process measurements in docs/perf.md.
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use criterion::Criterion;
use hk_console::repo::inventory::Inventory;
use hk_console::repo::listing::write_list;
use hk_console::repo::Repo;

const SIZES: [usize; 3] = [100, 2_000, 10_000];

fn sample_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory")
}

/// `n` hosts (a multiple of 20) as described in the module docs; returns the hosts.ini.
fn generated(dir: &Path, n: usize) -> PathBuf {
    let racks = n.div_ceil(20);
    let sites = racks.div_ceil(10);
    let mut ini = String::new();
    for site in 0..sites {
        ini.push_str(&format!("[site{site}:children]\n"));
        for rack in (site * 10..(site * 10 + 10)).filter(|r| *r < racks) {
            ini.push_str(&format!("site{site}_rack{rack}\n"));
        }
    }
    for rack in 0..racks {
        ini.push_str(&format!(
            "[site{}_rack{rack}]\nnode-r{rack}-[01:20] rack={rack} weight=1.5\n",
            rack / 10
        ));
    }
    std::fs::create_dir_all(dir.join("group_vars")).expect("mkdir");
    std::fs::write(dir.join("hosts.ini"), ini).expect("write");
    for site in 0..sites {
        std::fs::write(
            dir.join("group_vars").join(format!("site{site}.yml")),
            format!("vip: 10.{}.{}.1\nendpoint: \"{{{{ vip }}}}\"\nports: [6443, 2379, 2380]\nenabled: yes\n", site / 250, site % 250),
        )
        .expect("write");
    }
    std::fs::write(
        dir.join("group_vars/all.yml"),
        "user: ops\nmode: 0755\nk3s_api_port: 6443\nk3s_primary_group: site0_rack0\nk3s_api_host: 10.0.0.1\n\
         kube_vip_address: \"{{ vip }}\"\nk3s_apiserver_endpoint: \"{{ kube_vip_address }}\"\n",
    )
    .expect("write");
    let mut cfg = String::from("ansible_dir: .\ninventory: hosts.ini\nenvironments:\n");
    for site in 0..sites.min(3) {
        cfg.push_str(&format!("  s{site}: {{ servers: site{site} }}\n"));
    }
    std::fs::write(dir.join("hk-console.yaml"), cfg).expect("write");
    dir.join("hosts.ini")
}

/// The inventory `generated(dir, n)` wrote, as the yaml plugin's format: `dir/hosts.yml`.
fn generated_yaml(dir: &Path, n: usize) -> PathBuf {
    let racks = n.div_ceil(20);
    let sites = racks.div_ceil(10);
    let mut yaml = String::from("all:\n  children:\n");
    for site in 0..sites {
        yaml.push_str(&format!("    site{site}:\n      children:\n"));
        for rack in (site * 10..(site * 10 + 10)).filter(|r| *r < racks) {
            yaml.push_str(&format!(
                "        site{site}_rack{rack}:\n          hosts:\n            node-r{rack}-[01:20]: {{rack: {rack}, weight: 1.5}}\n"
            ));
        }
    }
    let file = dir.join("hosts.yml");
    std::fs::write(&file, yaml).expect("write");
    file
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if e.file_type().expect("type").is_dir() {
            copy_dir(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).expect("copy");
        }
    }
}

/// The bundled sample repo, its hosts.ini grown by 2,000 hosts in 100 groups that no
/// environment uses (each host with an address, a group_vars file per tenth group).
fn sample_with_unrelated(dir: &Path) -> PathBuf {
    copy_dir(&sample_root(), dir);
    let inv_dir = dir.join("infra/ansible/inventory");
    let ini = inv_dir.join("hosts.ini");
    let mut text = std::fs::read_to_string(&ini).expect("read");
    for g in 0..100 {
        text.push_str(&format!("\n[lab{g}]\n"));
        for h in 0..20 {
            text.push_str(&format!(
                "lab{g}-n{h} ansible_host=10.{}.{g}.{h} slot={h}\n",
                100 + g / 50
            ));
        }
        if g % 10 == 0 {
            std::fs::write(
                inv_dir.join("group_vars").join(format!("lab{g}.yml")),
                "lab_owner: research\nlab_vip: \"{{ ansible_host }}\"\n",
            )
            .expect("write");
        }
    }
    std::fs::write(&ini, text).expect("write");
    dir.to_path_buf()
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

/// Peak RSS in KiB of one run of `cmd`, by `/usr/bin/time -f %M` (None without it).
fn peak_rss_kib(cmd: &[&std::ffi::OsStr]) -> Option<u64> {
    let time = Path::new("/usr/bin/time");
    if !time.is_file() {
        return None;
    }
    let out = Command::new(time)
        .args(["-f", "peak-rss-kib %M"])
        .args(cmd)
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .find_map(|l| l.strip_prefix("peak-rss-kib "))
        .and_then(|n| n.trim().parse().ok())
}

fn list_cmd(file: &Path) -> Vec<std::ffi::OsString> {
    vec![
        env!("CARGO_BIN_EXE_hk-console").into(),
        "inventory".into(),
        "--list".into(),
        "-i".into(),
        file.into(),
    ]
}

fn peer_cmd(exe: &Path, file: &Path) -> Vec<std::ffi::OsString> {
    vec![exe.into(), "-i".into(), file.into(), "--list".into()]
}

fn run_ok(cmd: &[std::ffi::OsString], state: &Path) {
    let out = Command::new(&cmd[0])
        .args(&cmd[1..])
        .env("XDG_STATE_HOME", state)
        .output()
        .expect("spawn");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn main() {
    let keep = std::env::var_os("HK_BENCH_WRITE").map(PathBuf::from);
    let tmp = tempfile::tempdir().expect("tmp");
    let base = keep.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let gens: Vec<(usize, PathBuf)> = SIZES
        .iter()
        .map(|&n| (n, generated(&base.join(format!("gen-{n}")), n)))
        .collect();
    let yaml_2000 = generated_yaml(&base.join("gen-2000"), 2_000);
    let unrelated = sample_with_unrelated(&base.join("sample-unrelated"));
    if let Some(dir) = keep {
        eprintln!("wrote the bench inputs under {}", dir.display());
        return;
    }
    let state = tmp.path().join("state");
    let peer = ansible_inventory();
    let peer_10k = std::env::var_os("HK_BENCH_PEER_10K").is_some();

    eprintln!("peak RSS, one run each (KiB):");
    for (n, file) in &gens {
        let ours = peak_rss_kib(
            &list_cmd(file)
                .iter()
                .map(|s| s.as_os_str())
                .collect::<Vec<_>>(),
        );
        let theirs = match &peer {
            Some(exe) if *n < 10_000 || peer_10k => peak_rss_kib(
                &peer_cmd(exe, file)
                    .iter()
                    .map(|s| s.as_os_str())
                    .collect::<Vec<_>>(),
            ),
            _ => None,
        };
        eprintln!("  {n:>6} hosts: hk-console {ours:?}, ansible-inventory {theirs:?}");
    }

    let mut c = Criterion::default().configure_from_args();
    let mut g = c.benchmark_group("load_list");
    for (n, file) in &gens {
        g.bench_function(n.to_string(), |b| {
            b.iter(|| {
                let inv = Inventory::load(black_box(file)).expect("load");
                write_list(&inv, &mut std::io::sink()).expect("list");
            })
        });
    }
    g.bench_function("yaml-2000", |b| {
        b.iter(|| {
            let inv = Inventory::load(black_box(&yaml_2000)).expect("load");
            write_list(&inv, &mut std::io::sink()).expect("list");
        })
    });
    g.finish();

    // The inventory alone (parse, graph, group_vars/host_vars, merge budget): where the
    // unrelated hosts' cost is, without the environments' Jinja around it.
    let unrelated_ini = unrelated.join("infra/ansible/inventory/hosts.ini");
    let sample_ini = sample_root().join("infra/ansible/inventory/hosts.ini");
    let mut g = c.benchmark_group("inventory_load");
    g.bench_function("sample", |b| {
        b.iter(|| Inventory::load(black_box(&sample_ini)).expect("inventory"))
    });
    g.bench_function("sample+2000-unrelated", |b| {
        b.iter(|| Inventory::load(black_box(&unrelated_ini)).expect("inventory"))
    });
    g.finish();

    let mut g = c.benchmark_group("repo_load");
    g.bench_function("sample", |b| {
        b.iter(|| Repo::load(black_box(&sample_root())).expect("repo"))
    });
    g.bench_function("sample+2000-unrelated", |b| {
        b.iter(|| Repo::load(black_box(&unrelated)).expect("repo"))
    });
    g.finish();

    let mut g = c.benchmark_group("process");
    g.sample_size(10);
    for (n, file) in &gens {
        let cmd = list_cmd(file);
        g.bench_function(format!("hk-console-list-{n}"), |b| {
            b.iter(|| run_ok(&cmd, &state))
        });
    }
    let yaml_cmd = list_cmd(&yaml_2000);
    g.bench_function("hk-console-list-yaml-2000", |b| {
        b.iter(|| run_ok(&yaml_cmd, &state))
    });
    g.finish();

    match &peer {
        None => eprintln!(
            "note: ansible-inventory not found; peer benchmarks skipped (set HK_ANSIBLE_BIN_DIR)"
        ),
        Some(exe) => {
            let mut g = c.benchmark_group("peer");
            g.sample_size(10).measurement_time(Duration::from_secs(30));
            for (n, file) in gens.iter().filter(|(n, _)| *n < 10_000 || peer_10k) {
                let cmd = peer_cmd(exe, file);
                g.bench_function(format!("ansible-inventory-list-{n}"), |b| {
                    b.iter(|| run_ok(&cmd, &state))
                });
            }
            let cmd = peer_cmd(exe, &yaml_2000);
            g.bench_function("ansible-inventory-list-yaml-2000", |b| {
                b.iter(|| run_ok(&cmd, &state))
            });
            g.finish();
        }
    }
    c.final_summary();
}
