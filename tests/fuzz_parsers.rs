//! A mutation fuzzer on the stable toolchain for every parser a repo file or a journal
//! reaches: the INI inventory, the YAML loader, vars files (and their Jinja resolution),
//! `hk-console.yaml`, the runbook validator, the Flux overlay reader (its public entry), the
//! theme and console-config loaders, and journal replay/salvage.
//!
//! Each target starts from real seeds (the bundled sample's files, the shipped runbooks and
//! themes, a real journal) and applies random mutations: byte flips, cut and duplicated
//! ranges and lines, truncation, invalid UTF-8 and NUL bytes, and structural tokens repeated
//! many times (brackets, anchors and aliases, merge keys, Jinja delimiters). Every input must
//! come back as a value or an error, within a time bound, never a panic. A panic or a slow
//! input is written to `target/fuzz-crashes/` and fails the test; once fixed, it becomes a
//! fixture under `tests/fixtures/fuzz/<target>/`, replayed on every run.
//!
//! CI size: `HK_FUZZ_CASES` inputs per target (default 300, a few seconds each target).
//! A longer run: `HK_FUZZ_CASES=20000 HK_FUZZ_SEED=7 cargo test --release --test fuzz_parsers
//! -- --nocapture` (the seed makes a run repeatable; each target prints its figures).
use crate::machine_common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Duration;

use hk_console::journal;
use hk_console::repo::config::Config;
use hk_console::repo::inventory::Inventory;
use hk_console::repo::resolve::{HostContext, Resolver};
use hk_console::repo::vars::{self, Loaded};
use hk_console::runbook::machine::Input;
use hk_console::runbook::validate::validate_text;
use hk_console::ui::config::UiConfig;
use hk_console::ui::theme::{fallback_palette, parse_theme};
use hk_console::yaml;
use machine_common::{approve, record_health_run};

use crate::fs_common;
use fs_common::copy_dir;

/// Time one input may take: a second plus 20 µs per byte, so a linear parser passes even in
/// a debug build on a busy machine (yaml-rust2 scans about 2 µs a byte there, several times
/// that under load) while a quadratic one does not (40 KB of unclosed `[` once took
/// serde_yaml 5 s; 1 MB never finished). Measured as this thread's CPU time
/// ([`thread_cpu`]), not the wall's: a quadratic parser burns CPU, while a machine busy
/// with the rest of the suite only makes the wall longer (CI run 13: a 68 KB vars file
/// took 2.9 s of wall, over its 2.4 s, beside three other test binaries).
fn slow(len: usize) -> Duration {
    Duration::from_secs(1) + Duration::from_micros(20 * len as u64)
}

/// This thread's CPU time (CLOCK_THREAD_CPUTIME_ID): what a check costs, whatever else
/// the machine runs.
fn thread_cpu() -> Duration {
    use nix::time::{clock_gettime, ClockId};
    let t = clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).expect("the thread's CPU clock");
    Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32)
}

fn cases() -> usize {
    std::env::var("HK_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

fn seed() -> u64 {
    std::env::var("HK_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_1234_abcd_0001)
}

/// xorshift64*: small, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Tokens that steer parsers into their deep or costly paths.
const TOKENS: &[&[u8]] = &[
    b"[",
    b"{",
    b"]",
    b"}",
    b"- ",
    b": ",
    b"&a ",
    b"*a",
    b"<<: *a\n",
    b"!vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  6162\n",
    b"{{ ",
    b" }}",
    b"{% if x %}",
    b"'",
    b"\"",
    b"\\",
    b"\n",
    b"\r",
    b"\t",
    b"\0",
    b"\xff",
    b"\xc3",
    b"#",
    b"=",
    b"[0:99]",
    b"---\n",
    b"0x",
    b"1e999",
    b"-9223372036854775808",
    b"99999999999999999999999999",
];

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = b.len();
        match rng.below(10) {
            0 if len > 0 => {
                let i = rng.below(len);
                b[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                let j = (i + rng.below(64)).min(len);
                b.drain(i..j);
            }
            2 if len > 0 => {
                let i = rng.below(len);
                let j = (i + rng.below(128)).min(len);
                let dup = b[i..j].to_vec();
                b.splice(i..i, dup);
            }
            3 => b.truncate(rng.below(len + 1)),
            4 | 5 => {
                let tok = TOKENS[rng.below(TOKENS.len())];
                let i = rng.below(len + 1);
                b.splice(i..i, tok.iter().copied());
            }
            6 => {
                // A token repeated: deep nesting, long lines, many aliases.
                let tok = TOKENS[rng.below(TOKENS.len())];
                let times = [10, 300, 5_000, 40_000][rng.below(4)];
                let i = rng.below(len + 1);
                let rep: Vec<u8> = tok.repeat(times);
                b.splice(i..i, rep);
            }
            7 | 8 => {
                // Line-level: delete, duplicate or swap a line.
                let mut lines: Vec<Vec<u8>> =
                    b.split(|&c| c == b'\n').map(<[u8]>::to_vec).collect();
                if lines.len() > 1 {
                    let i = rng.below(lines.len());
                    match rng.below(3) {
                        0 => {
                            lines.remove(i);
                        }
                        1 => {
                            let l = lines[i].clone();
                            lines.insert(i, l);
                        }
                        _ => {
                            let j = rng.below(lines.len());
                            lines.swap(i, j);
                        }
                    }
                }
                b = lines.join(&b'\n');
            }
            _ => {
                // An alias bomb in the middle.
                let i = rng.below(len + 1);
                let mut bomb = b"\nz0: &z0 [x, x, x, x, x, x, x, x, x]\n".to_vec();
                for k in 1..9 {
                    bomb.extend_from_slice(
                        format!(
                            "z{k}: &z{k} [{}]\n",
                            vec![format!("*z{}", k - 1); 9].join(", ")
                        )
                        .as_bytes(),
                    );
                }
                b.splice(i..i, bomb);
            }
        }
    }
    b
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// What one target did.
struct Figures {
    target: &'static str,
    inputs: usize,
    ok: usize,
    findings: Vec<String>,
}

/// Run `check` on every fixture of `target`, then on `cases()` mutants of `seeds`.
fn fuzz(target: &'static str, seeds: &[Vec<u8>], check: impl FnMut(&[u8]) -> bool) -> Figures {
    fuzz_with(target, seeds, Duration::ZERO, check)
}

/// [`fuzz`] where each check also waits on the disk: `io` is added to every input's time
/// bound (the bound is for the parser's complexity, not for fsync latency).
fn fuzz_with(
    target: &'static str,
    seeds: &[Vec<u8>],
    io: Duration,
    mut check: impl FnMut(&[u8]) -> bool,
) -> Figures {
    let mut figures = Figures {
        target,
        inputs: 0,
        ok: 0,
        findings: Vec::new(),
    };
    let fixture_dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fuzz")
        .join(target);
    let mut inputs: Vec<(String, Vec<u8>)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir(&fixture_dir) {
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for p in paths {
            let bytes = std::fs::read(&p).expect("fixture");
            inputs.push((format!("fixture {}", p.display()), bytes));
        }
    }
    let mut rng = Rng(seed() ^ (target.len() as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    for i in 0..cases() {
        let s = &seeds[i % seeds.len()];
        inputs.push((format!("mutant {i}"), mutate(&mut rng, s)));
    }
    for (name, input) in inputs {
        figures.inputs += 1;
        let start = thread_cpu();
        let outcome = catch_unwind(AssertUnwindSafe(|| check(&input)));
        let took = thread_cpu().saturating_sub(start);
        let problem = match outcome {
            Err(_) => Some("panicked".to_string()),
            Ok(_) if took > slow(input.len()) + io => {
                Some(format!("took {took:?} for {} bytes", input.len()))
            }
            Ok(true) => {
                figures.ok += 1;
                None
            }
            Ok(false) => None,
        };
        if let Some(p) = problem {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("target/fuzz-crashes")
                .join(target);
            let _ = std::fs::create_dir_all(&dir);
            let file = dir.join(format!("{}.bin", figures.findings.len()));
            let _ = std::fs::write(&file, &input);
            figures.findings.push(format!(
                "{target}: {name} {p} (input kept at {})",
                file.display()
            ));
        }
    }
    eprintln!(
        "fuzz {target}: {} inputs, {} accepted, {} refused, {} findings",
        figures.inputs,
        figures.ok,
        figures.inputs - figures.ok - figures.findings.len(),
        figures.findings.len()
    );
    figures
}

fn assert_clean(figures: Figures) {
    assert!(
        figures.findings.is_empty(),
        "{} finding(s) in {}:\n{}",
        figures.findings.len(),
        figures.target,
        figures.findings.join("\n")
    );
    // A target that refuses everything exercises nothing past the first check.
    assert!(figures.ok > 0, "{}: no mutant was accepted", figures.target);
}

fn sample(rel: &str) -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).expect(rel)
}

fn sample_vars() -> Vec<Vec<u8>> {
    vec![
        sample("inventory/infra/ansible/inventory/group_vars/all.yml"),
        sample("inventory/infra/ansible/inventory/group_vars/k3s_prod/vars.yml"),
        sample("inventory/infra/ansible/inventory/group_vars/vpn_egress_gateway_prod/vars.yml"),
    ]
}

fn ctx() -> HostContext {
    HostContext {
        inventory_hostname: "k3s-prod-1".into(),
        groups: Default::default(),
        group_names: vec!["k3s_prod".into()],
    }
}

#[test]
fn fuzz_ini_inventory() {
    let seeds = vec![sample("inventory/infra/ansible/inventory/hosts.ini")];
    assert_clean(fuzz("ini", &seeds, |b| {
        Inventory::parse_ini(&text(b), Path::new("hosts.ini")).is_ok()
    }));
}

#[test]
fn fuzz_yaml_loader() {
    let mut seeds = sample_vars();
    seeds.push(sample("inventory/hk-console.yaml"));
    seeds.push(sample("runbooks/etcd-io-priority.yaml"));
    assert_clean(fuzz("yaml", &seeds, |b| {
        yaml::parse_documents(&text(b)).is_ok_and(|docs| {
            // Walk what was built: conversions recurse over it.
            docs.iter()
                .all(|d| d.to_json().is_object() || !d.contains_vaulted())
        })
    }));
}

#[test]
fn fuzz_vars_files_and_their_resolution() {
    let resolver = Resolver::new();
    assert_clean(fuzz("vars", &sample_vars(), |b| {
        match vars::parse_vars_text(&text(b), Path::new("group_vars/all.yml")) {
            Ok(Loaded::Vars(v)) => {
                let raw = v
                    .iter()
                    .map(|(k, v)| (k.clone(), v.value.clone()))
                    .collect();
                let _ = resolver.resolve_all(&ctx(), &raw);
                true
            }
            Ok(Loaded::Vaulted) => true,
            Err(e) => {
                // Refusals name the file.
                assert!(e.to_string().contains("group_vars/all.yml"), "{e}");
                false
            }
        }
    }));
}

#[test]
fn fuzz_hk_console_yaml() {
    let seeds = vec![sample("inventory/hk-console.yaml")];
    assert_clean(fuzz("config", &seeds, |b| {
        match Config::parse(Path::new("hk-console.yaml"), &text(b)) {
            Ok(_) => true,
            Err(e) => {
                assert!(e.to_string().starts_with("hk-console.yaml:"), "{e}");
                false
            }
        }
    }));
}

#[test]
fn fuzz_runbook_validator() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("runbooks");
    let mut seeds = Vec::new();
    for entry in std::fs::read_dir(dir).expect("runbooks") {
        seeds.push(std::fs::read(entry.expect("entry").path()).expect("runbook"));
    }
    seeds.sort();
    assert_clean(fuzz("runbook", &seeds, |b| {
        match validate_text("rb.yaml", &text(b)) {
            Ok(_) => true,
            Err(diags) => {
                assert!(!diags.is_empty(), "a refusal says why");
                false
            }
        }
    }));
}

#[test]
fn fuzz_themes_and_console_config() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("themes");
    let mut seeds = Vec::new();
    for entry in std::fs::read_dir(dir).expect("themes") {
        seeds.push(std::fs::read(entry.expect("entry").path()).expect("theme"));
    }
    seeds.sort();
    seeds.push(b"theme: light\nkeys:\n  home:\n    quit: q\n".to_vec());
    assert_clean(fuzz("theme", &seeds, |b| {
        let t = text(b);
        let (_, warnings) = parse_theme("t.yaml", &t, fallback_palette());
        let config = UiConfig::parse("config.yaml", &t);
        // Theme seeds are not console configs and the other way round: one clean is fine.
        warnings.is_empty() || config.warnings.is_empty()
    }));
}

#[test]
fn fuzz_flux_overlay_reader() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory");
    copy_dir(&src.join("clusters"), &root.join("clusters"));
    copy_dir(&src.join("platform"), &root.join("platform"));
    let files: Vec<PathBuf> = [
        "clusters/prod/kustomization.yaml",
        "clusters/prod/platform.yaml",
        "platform/cilium/kustomization.yaml",
        "platform/cilium/helmrelease.yaml",
    ]
    .iter()
    .map(|f| root.join(f))
    .collect();
    let originals: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(f).expect("seed"))
        .collect();
    let overlay = Path::new("clusters/prod");
    assert!(
        hk_console::repo::flux::effective_substitution(
            root,
            overlay,
            hk_console::repo::config::DEFAULT_FLUX_API_HOST_VAR,
        )
        .is_ok(),
        "the unmutated overlay reads"
    );
    // Seeds are tagged with the file they replace, so each mutant damages one file.
    let seeds: Vec<Vec<u8>> = originals
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let mut s = vec![i as u8];
            s.extend_from_slice(o);
            s
        })
        .collect();
    assert_clean(fuzz("flux", &seeds, |b| {
        let Some((&tag, body)) = b.split_first() else {
            return false;
        };
        let i = usize::from(tag) % files.len();
        std::fs::write(&files[i], body).expect("write");
        let ok = hk_console::repo::flux::effective_substitution(
            root,
            overlay,
            hk_console::repo::config::DEFAULT_FLUX_API_HOST_VAR,
        )
        .is_ok();
        std::fs::write(&files[i], &originals[i]).expect("restore");
        ok
    }));
}

#[test]
fn fuzz_journal_replay_and_salvage() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let seed_dir = tmp.path().join("seed");
    let seed = record_health_run(
        &seed_dir,
        1_000,
        vec![
            Input::Start,
            approve(1),
            Input::StepStarted { n: 2, attempt: 1 },
            Input::StepFinished {
                n: 2,
                attempt: 1,
                exit_code: Some(0),
                error: None,
            },
        ],
    );
    let seeds = vec![std::fs::read(&seed).expect("journal")];
    let dir = tmp.path().join("runs");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let path = dir.join("r.jsonl");
    // Each input is written, replayed, salvaged (its copies written and fsync'd) and
    // listed: on a disk busy with the rest of the suite the fsyncs alone once took over a
    // second for a 1 KB journal (CI's run 10), so the disk gets its own allowance.
    assert_clean(fuzz_with("journal", &seeds, Duration::from_secs(5), |b| {
        // Fresh each time: salvage keeps copies beside the journal.
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(&path, b).expect("write");
        let strict = journal::replay(&path).is_ok();
        let salvaged = journal::salvage(&path);
        let list = journal::list_runs(&dir).expect("list");
        // Never hidden: a journal is either a listed run or named as unreadable.
        assert_eq!(list.runs.len() + list.unreadable.len(), 1);
        if let Ok((_, Some(d))) = &salvaged {
            assert!(!strict, "salvage found damage strict replay accepted: {d}");
        }
        strict
    }));
}
