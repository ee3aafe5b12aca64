//! Parity with the real tool: for every inventory under tests/fixtures/inventories/ (and the
//! bundled sample infra repo), `list_json` must equal what `ansible-inventory -i FILE --list`
//! prints, as JSON (key order free). Keys that live in vaulted files are excepted: our loader
//! never decrypts them, while Ansible is given the password so it can read the same files.
//! The test decrypts only to learn which key names to except.
//!
//! Needs ansible-core 2.19 (`ansible-inventory`, `ansible-vault`, `ansible`): found through
//! `$HK_ANSIBLE_BIN_DIR`, else `PATH`, else /opt/hk-venv/bin. Missing is a FAILURE.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use hk_engine::repo::inventory::Inventory;
use hk_engine::repo::listing::list_json;
use serde_json::Value;

use hk_test_support::ansible::bin as ansible_bin;

fn fixtures_dir() -> PathBuf {
    hk_test_support::root().join("tests/fixtures/inventories")
}

/// One isolated working directory for all Ansible runs: no ansible.cfg, no group_vars
/// beside the playbook dir, so only the inventory's own files count.
fn sandbox() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("ansible.cfg"), "[defaults]\n").expect("cfg");
    dir
}

fn ansible_cmd(bin: &Path, sandbox: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.current_dir(sandbox)
        .env("ANSIBLE_CONFIG", sandbox.join("ansible.cfg"))
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_DEPRECATION_WARNINGS", "False")
        .env("ANSIBLE_LOCAL_TEMP", sandbox.join("tmp"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

struct Case {
    name: String,
    ini: PathBuf,
    vault_pass: Option<PathBuf>,
}

fn spawn_list(case: &Case, sandbox: &Path) -> Child {
    let mut cmd = ansible_cmd(&ansible_bin("ansible-inventory"), sandbox);
    // A source Ansible cannot parse must fail the run, not become an empty inventory.
    cmd.env("ANSIBLE_INVENTORY_UNPARSED_FAILED", "True");
    cmd.arg("-i").arg(&case.ini).arg("--list");
    if let Some(p) = &case.vault_pass {
        cmd.arg("--vault-password-file").arg(p);
    }
    cmd.spawn().expect("spawn ansible-inventory")
}

fn finish(child: Child, what: &str) -> String {
    finish_with_stderr(child, what).0
}

/// The run's stdout and stderr; a failed run fails the test.
fn finish_with_stderr(child: Child, what: &str) -> (String, String) {
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{what} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8(out.stdout).expect("utf-8 output"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The key names inside a vaulted file, learnt by asking ansible-vault (test only).
fn vaulted_keys(file: &Path, pass: &Path, sandbox: &Path) -> BTreeSet<String> {
    let mut cmd = ansible_cmd(&ansible_bin("ansible-vault"), sandbox);
    cmd.arg("view")
        .arg("--vault-password-file")
        .arg(pass)
        .arg(file);
    let text = finish(
        cmd.spawn().expect("spawn ansible-vault"),
        "ansible-vault view",
    );
    let doc = hk_engine::yaml::parse_one(&text).expect("vaulted file is YAML");
    doc.as_map()
        .expect("vaulted file is a mapping")
        .iter()
        .filter_map(|(k, _)| k.as_key())
        .collect()
}

/// `{"__ansible_vault": ciphertext}` (Ansible) and our masked form compare equal.
fn normalize(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if map.len() == 1 && map.contains_key("__ansible_vault") {
                *v = Value::String("<vaulted>".into());
                return;
            }
            map.values_mut().for_each(normalize);
        }
        Value::Array(items) => items.iter_mut().for_each(normalize),
        _ => {}
    }
}

fn drop_keys(v: &mut Value, keys: &BTreeSet<String>) {
    if let Some(hostvars) = v
        .pointer_mut("/_meta/hostvars")
        .and_then(Value::as_object_mut)
    {
        for vars in hostvars.values_mut() {
            if let Some(vars) = vars.as_object_mut() {
                vars.retain(|k, _| !keys.contains(k));
            }
        }
        hostvars.retain(|_, vars| vars.as_object().is_some_and(|m| !m.is_empty()));
    }
}

fn diff(name: &str, ours: &Value, theirs: &Value) -> String {
    let mut lines = vec![format!(
        "{name}: list_json differs from ansible-inventory --list"
    )];
    let (Some(o), Some(t)) = (ours.as_object(), theirs.as_object()) else {
        return lines.join("\n");
    };
    let keys: BTreeSet<&String> = o.keys().chain(t.keys()).collect();
    for k in keys {
        if k == "_meta" {
            continue;
        }
        if o.get(k) != t.get(k) {
            lines.push(format!(
                "  group {k}: ours {:?} ansible {:?}",
                o.get(k),
                t.get(k)
            ));
        }
    }
    let empty = serde_json::Map::new();
    let oh = ours
        .pointer("/_meta/hostvars")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let th = theirs
        .pointer("/_meta/hostvars")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let hosts: BTreeSet<&String> = oh.keys().chain(th.keys()).collect();
    for h in hosts {
        let (ov, tv) = (oh.get(h), th.get(h));
        if ov == tv {
            continue;
        }
        let (Some(ov), Some(tv)) = (ov.and_then(Value::as_object), tv.and_then(Value::as_object))
        else {
            lines.push(format!("  hostvars {h}: ours {ov:?} ansible {tv:?}"));
            continue;
        };
        let vars: BTreeSet<&String> = ov.keys().chain(tv.keys()).collect();
        for k in vars {
            if ov.get(k) != tv.get(k) {
                lines.push(format!(
                    "  hostvars {h}.{k}: ours {:?} ansible {:?}",
                    ov.get(k),
                    tv.get(k)
                ));
            }
        }
    }
    if ours.pointer("/_meta/profile") != theirs.pointer("/_meta/profile") {
        lines.push("  _meta.profile differs".into());
    }
    lines.join("\n")
}

fn fixture_cases() -> Vec<Case> {
    let mut cases: Vec<Case> = std::fs::read_dir(fixtures_dir())
        .expect("fixtures dir")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.join("hosts.ini").is_file())
        .map(|p| Case {
            name: p.file_name().expect("name").to_string_lossy().into_owned(),
            ini: p.join("hosts.ini"),
            vault_pass: Some(p.join("vault-pass.txt")).filter(|v| v.is_file()),
        })
        .collect();
    cases.sort_by(|a, b| a.name.cmp(&b.name));
    cases
}

/// Run every case's ansible-inventory at once (they take ~1 s each), then compare.
fn check_cases(cases: &[Case]) -> Vec<String> {
    let sb = sandbox();
    let children: Vec<Child> = cases.iter().map(|c| spawn_list(c, sb.path())).collect();
    let mut failures = Vec::new();
    for (case, child) in cases.iter().zip(children) {
        let (stdout, stderr) =
            finish_with_stderr(child, &format!("ansible-inventory on {}", case.name));
        let mut theirs: Value =
            serde_json::from_str(&stdout).expect("ansible-inventory prints JSON");
        let inv = match Inventory::load(&case.ini) {
            Ok(inv) => inv,
            Err(e) => {
                failures.push(format!("{}: our loader failed: {e}", case.name));
                continue;
            }
        };
        // What the yaml plugin skips it warns about; so do we, once per skip, naming the line.
        let theirs_skips = stderr
            .lines()
            .filter(|l| l.starts_with("[WARNING]: Skipping"))
            .count();
        let ours_skips = inv
            .warnings()
            .iter()
            .filter(|w| w.contains(": Skipping"))
            .count();
        if theirs_skips != ours_skips {
            failures.push(format!(
                "{}: ansible-inventory warned of {theirs_skips} skipped entries, we of {ours_skips}: {:?}\n{stderr}",
                case.name,
                inv.warnings()
            ));
        }
        let mut ours = list_json(&inv);
        let mut except = BTreeSet::new();
        for file in inv.vaulted_files() {
            let pass = case.vault_pass.as_ref().unwrap_or_else(|| {
                panic!(
                    "{}: vaulted file {} but no password",
                    case.name,
                    file.display()
                )
            });
            except.extend(vaulted_keys(file, pass, sb.path()));
        }
        normalize(&mut ours);
        normalize(&mut theirs);
        drop_keys(&mut ours, &except);
        drop_keys(&mut theirs, &except);
        if ours != theirs {
            failures.push(diff(&case.name, &ours, &theirs));
        }
    }
    failures
}

#[test]
fn list_json_equals_ansible_inventory_on_every_fixture() {
    let cases = fixture_cases();
    assert!(
        cases.len() >= 10,
        "expected at least 10 fixtures, found {}",
        cases.len()
    );
    let failures = check_cases(&cases);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn list_json_equals_ansible_inventory_on_the_bundled_sample() {
    let root = hk_test_support::root().join("inventory");
    let ini = root.join("infra/ansible/inventory/hosts.ini");
    assert!(
        ini.is_file(),
        "the bundled sample inventory is missing: {}",
        ini.display()
    );
    let pass = root.join(".vault-pass-sample");
    let case = Case {
        name: "sample".into(),
        ini,
        vault_pass: Some(pass).filter(|p| p.is_file()),
    };
    let inv = Inventory::load(&case.ini).expect("sample loads");
    assert!(
        !inv.vaulted_files().is_empty(),
        "the sample carries a vaulted file"
    );
    let failures = check_cases(&[case]);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn vaulted_files_are_reported_and_never_read() {
    let dir = fixtures_dir().join("vaulted");
    let inv = Inventory::load(&dir.join("hosts.ini")).expect("load");
    let vaulted: Vec<String> = inv
        .vaulted_files()
        .iter()
        .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
        .collect();
    assert_eq!(vaulted, ["vault.yml"]);
    let gw1 = inv.host_vars("gw1").expect("gw1");
    assert!(
        !gw1.contains_key("pia_user"),
        "a vaulted file's keys are unknown"
    );
    // The plain file's value stands (Ansible, with the password, would let vault.yml win).
    assert_eq!(gw1["shared_secret"].value, "from_plain");
    assert!(gw1["become_pass"].secret, "inline !vault is a secret var");
    assert_eq!(
        gw1["become_pass"].value,
        hk_engine::yaml::VAULTED_PLACEHOLDER
    );
    let listed = list_json(&inv).to_string();
    assert!(
        !listed.contains("$ANSIBLE_VAULT"),
        "no ciphertext in the listing"
    );
}

#[test]
fn provenance_names_the_winning_file_and_line() {
    let dir = fixtures_dir().join("ladder");
    let inv = Inventory::load(&dir.join("hosts.ini")).expect("load");
    let at = |host: &str, var: &str| {
        let v = &inv.host_vars(host).expect("host")[var];
        let file = v
            .origin
            .file
            .strip_prefix(&dir)
            .unwrap_or(&v.origin.file)
            .display()
            .to_string();
        (file, v.origin.line)
    };
    // host_vars file beats everything.
    assert_eq!(at("w1", "lvl"), ("host_vars/w1.yml".to_string(), 1));
    // Directory form of host_vars.
    assert_eq!(at("w2", "lvl"), ("host_vars/w2/a.yml".to_string(), 1));
    assert_eq!(at("w3", "lvl"), ("host_vars/w3.json".to_string(), 1));
    // INI inline var and INI group var carry the INI line.
    assert_eq!(at("w1", "inline_only"), ("hosts.ini".to_string(), 2));
    assert_eq!(at("w1", "group_ini"), ("hosts.ini".to_string(), 10));
    assert_eq!(at("w1", "all_ini"), ("hosts.ini".to_string(), 7));
    assert_eq!(
        at("w1", "gv_all_only"),
        ("group_vars/all.yml".to_string(), 2)
    );
    let fmt = inv.host_vars("w1").expect("w1")["group_ini"]
        .origin
        .to_string();
    assert!(fmt.ends_with("hosts.ini:10:1"), "{fmt}");
}

/// Ansible walks a group's descendants level by level through a Python `set`: when two
/// groups of one level both bring new children, their order differs from run to run (seen
/// on the `deep` fixture). Only where that cannot happen is the order Ansible's to compare.
fn order_is_defined(inv: &Inventory, group: &str) -> bool {
    let kids = |g: &str| inv.children_of(g).unwrap_or_default();
    let mut seen: BTreeSet<String> = kids(group).into_iter().collect();
    seen.insert(group.to_string());
    let mut level: Vec<String> = seen.iter().cloned().collect();
    while !level.is_empty() {
        let mut next = Vec::new();
        let mut contributors = 0;
        for g in &level {
            let new: Vec<String> = kids(g).into_iter().filter(|c| !seen.contains(c)).collect();
            if !new.is_empty() {
                contributors += 1;
            }
            next.extend(new);
        }
        if contributors > 1 {
            return false;
        }
        seen.extend(next.iter().cloned());
        level = next;
    }
    true
}

/// `hosts_in` follows `ansible GROUP --list-hosts` order. (Not `ansible-playbook
/// --list-hosts`: that one prints a Python set, in a different order on every run.)
#[test]
fn hosts_in_matches_ansible_list_hosts() {
    let pairs = [
        ("children", "all"),
        ("children", "servers"),
        ("children", "prod"),
        ("children", "dev"),
        ("tricky", "all"),
        ("deep", "l1"),
        ("deep", "all"),
        ("ungrouped", "all"),
        ("ranges", "all"),
    ];
    let sb = sandbox();
    let children: Vec<Child> = pairs
        .iter()
        .map(|(fixture, g)| {
            let ini = fixtures_dir().join(fixture).join("hosts.ini");
            let mut cmd = ansible_cmd(&ansible_bin("ansible"), sb.path());
            cmd.arg("-i").arg(&ini).arg(g).arg("--list-hosts");
            cmd.spawn().expect("spawn ansible")
        })
        .collect();
    for ((fixture, g), child) in pairs.iter().zip(children) {
        let out = finish(child, &format!("ansible {g} --list-hosts on {fixture}"));
        let theirs: Vec<String> = out
            .lines()
            .filter(|l| l.starts_with("    "))
            .map(|l| l.trim().to_string())
            .collect();
        let inv = Inventory::load(&fixtures_dir().join(fixture).join("hosts.ini")).expect("load");
        let ours = inv.hosts_in(g).expect("group");
        if order_is_defined(&inv, g) {
            assert_eq!(ours, theirs, "hosts of {g} in {fixture}");
        } else {
            let (mut a, mut b) = (ours.clone(), theirs.clone());
            a.sort();
            b.sort();
            assert_eq!(a, b, "hosts of {g} in {fixture} (as sets)");
        }
        if *g == "all" {
            assert_eq!(inv.hosts(), ours, "hosts() of {fixture}");
        }
    }
}

/// Malformed inventories: Ansible refuses each one, and our loader refuses it too with a
/// typed error naming file:line (Ansible 2.19 names only the file) and Ansible's reason.
#[test]
fn malformed_inventories_fail_like_ansible_with_file_and_line() {
    let dir = hk_test_support::root().join("tests/fixtures/inventories-bad");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("bad fixtures")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "ini"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "expected at least 10 malformed fixtures");
    // One ansible-inventory for all of them: each failing source gets its own pair of
    // warnings, the reason and then "Unable to parse PATH as an inventory source".
    let sb = sandbox();
    let mut cmd = ansible_cmd(&ansible_bin("ansible-inventory"), sb.path());
    for f in &files {
        cmd.arg("-i").arg(f);
    }
    cmd.arg("--list");
    let out = cmd.output().expect("run ansible-inventory");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut reasons: std::collections::HashMap<String, String> = Default::default();
    let mut last = String::new();
    for l in stderr.lines() {
        if let Some((_, r)) = l.split_once("plugin: Failed to parse inventory: ") {
            last = r.trim_end_matches('.').to_string();
        } else if let Some(rest) = l.strip_prefix("[WARNING]: Unable to parse ") {
            if let Some(path) = rest.strip_suffix(" as an inventory source") {
                reasons.insert(path.to_string(), std::mem::take(&mut last));
            }
        }
    }
    let mut failures = Vec::new();
    for file in &files {
        let name = file
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        let Some(reason) = reasons.get(&file.display().to_string()).cloned() else {
            failures.push(format!("{name}: ansible-inventory accepted it\n{stderr}"));
            continue;
        };
        let text = std::fs::read_to_string(file).expect("read");
        let line: usize = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect-line: "))
            .and_then(|n| n.trim().parse().ok())
            .expect("first line says `# expect-line: N`");
        match Inventory::load(file) {
            Ok(_) => failures.push(format!(
                "{name}: our loader accepted it (Ansible: {reason})"
            )),
            Err(e) => {
                let msg = e.to_string();
                let want_prefix = format!("{}:{line}: ", file.display());
                if !msg.starts_with(&want_prefix) {
                    failures.push(format!("{name}: expected `{want_prefix}...`, got `{msg}`"));
                }
                if reason.is_empty() || !msg.contains(&reason) {
                    failures.push(format!("{name}: Ansible says `{reason}`, we say `{msg}`"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `inventory --list` streams its JSON (repo::listing::write_list); it must be byte for
/// byte what the tree-building `list_json` printed, on every fixture and the sample.
#[test]
fn streamed_list_is_byte_identical_to_list_json() {
    let mut files: Vec<PathBuf> = fixture_cases().into_iter().map(|c| c.ini).collect();
    files.push(hk_test_support::root().join("inventory/infra/ansible/inventory/hosts.ini"));
    // Values the terminal-safety escaping touches, split across the writer's chunks.
    let tmp = tempfile::tempdir().expect("tmp");
    let odd = tmp.path().join("hosts.ini");
    let mut ini = String::from("[g]\n");
    for i in 0..400 {
        ini.push_str(&format!(
            "h{i} v=\"x\\x7f\\u202e\u{e9}\u{1F600}{}\" n={i}\n",
            "y".repeat(i % 37)
        ));
    }
    std::fs::write(&odd, ini).expect("write");
    files.push(odd);
    for file in files {
        let inv = Inventory::load(&file).expect("load");
        let want = format!(
            "{}\n",
            hk_engine::text::json_visible(
                &serde_json::to_string_pretty(&list_json(&inv)).expect("json")
            )
        );
        let mut got = Vec::new();
        hk_engine::repo::listing::write_list(&inv, &mut got).expect("write");
        assert!(
            got == want.as_bytes(),
            "{}: streamed output differs from list_json",
            file.display()
        );
    }
}

/// Where Ansible's behaviour is an accident (docs/ansible-inventory.md, "Refused on
/// purpose"), hk-console refuses the inventory naming file:line and why. Each fixture says
/// what Ansible does with it, and that is checked too, so the reason stays true.
#[test]
fn accidents_are_refused_loudly_and_ansible_really_does_that() {
    let dir = hk_test_support::root().join("tests/fixtures/inventories-accidents");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("accident fixtures")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "ini"))
        .collect();
    files.sort();
    assert!(files.len() >= 6, "expected the accident fixtures");
    let sb = sandbox();
    let run = |file: &Path, seed: &str| {
        let mut cmd = ansible_cmd(&ansible_bin("ansible-inventory"), sb.path());
        cmd.env("ANSIBLE_INVENTORY_UNPARSED_FAILED", "True")
            .env("PYTHONHASHSEED", seed)
            .arg("-i")
            .arg(file)
            .arg("--list");
        cmd.output().expect("run ansible-inventory")
    };
    let mut failures = Vec::new();
    for file in &files {
        let name = file
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(file).expect("read");
        let header = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("# {key}: ")))
                .unwrap_or_else(|| panic!("{name}: no `# {key}:` line"))
                .trim()
                .to_string()
        };
        let (line, kind, ours) = (header("expect-line"), header("ansible"), header("ours"));
        let a = run(file, "1");
        let stdout = String::from_utf8_lossy(&a.stdout).into_owned();
        let ansible_ok = match kind.as_str() {
            "infinity" => a.status.success() && stdout.contains("Infinity"),
            "fails" => !a.status.success(),
            "accepts" => a.status.success(),
            "random-order" => {
                let b = run(file, "2");
                let c = run(file, "3");
                a.status.success()
                    && (stdout != String::from_utf8_lossy(&b.stdout)
                        || stdout != String::from_utf8_lossy(&c.stdout))
            }
            other => panic!("{name}: unknown `# ansible: {other}`"),
        };
        if !ansible_ok {
            failures.push(format!(
                "{name}: ansible-inventory did not behave as `{kind}`: {}\n{stdout:.300}\n{}",
                a.status,
                String::from_utf8_lossy(&a.stderr)
            ));
        }
        failures.extend(our_refusal(&name, file, line, &ours));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// What is wrong with our loader's refusal of `file` (`None`: it refused, naming
/// `file:line` and saying `ours`).
fn our_refusal(
    name: &str,
    file: &Path,
    line: impl std::fmt::Display,
    ours: &str,
) -> Option<String> {
    match Inventory::load(file) {
        Ok(_) => Some(format!("{name}: our loader accepted it")),
        Err(e) => {
            let msg = e.to_string();
            let want = format!("{}:{line}: ", file.display());
            (!msg.starts_with(&want) || !msg.contains(ours))
                .then(|| format!("{name}: expected `{want}...{ours}...`, got `{msg}`"))
        }
    }
}

fn yaml_fixtures_dir() -> PathBuf {
    hk_test_support::root().join("tests/fixtures/inventories-yaml")
}

/// Each directory of inventories-yaml/ holds one inventory file named `hosts` with any
/// extension (or none): the name decides which Ansible plugin reads it.
fn yaml_cases() -> Vec<Case> {
    cases_in(&yaml_fixtures_dir())
}

fn cases_in(dir: &Path) -> Vec<Case> {
    let mut cases: Vec<Case> = std::fs::read_dir(dir)
        .expect("yaml fixtures dir")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .map(|dir| {
            let file = std::fs::read_dir(&dir)
                .expect("case dir")
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .find(|p| p.is_file() && p.file_stem().is_some_and(|s| s == "hosts"))
                .unwrap_or_else(|| panic!("{}: no `hosts` inventory file", dir.display()));
            Case {
                name: dir
                    .file_name()
                    .expect("name")
                    .to_string_lossy()
                    .into_owned(),
                ini: file,
                vault_pass: None,
            }
        })
        .collect();
    cases.sort_by(|a, b| a.name.cmp(&b.name));
    cases
}

#[test]
fn yaml_list_equals_ansible_inventory_on_every_yaml_fixture() {
    let cases = yaml_cases();
    assert!(
        cases.len() >= 10,
        "expected at least 10 YAML fixtures, found {}",
        cases.len()
    );
    let failures = check_cases(&cases);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // The corpus is read by the plugins it is meant for (not all of it by INI).
    let yaml_read = cases
        .iter()
        .filter(|c| {
            Inventory::load(&c.ini).expect("load").format()
                == hk_engine::repo::inventory::Format::Yaml
        })
        .count();
    assert!(
        yaml_read >= 10,
        "only {yaml_read} fixtures were read as YAML"
    );
}

/// `ansible-inventory --host H` for the first and the last host of every YAML fixture
/// equals what `hk-console inventory --host H` prints (`host_vars`, listed).
#[test]
fn yaml_host_vars_equal_ansible_inventory_host() {
    let sb = sandbox();
    let mut runs = Vec::new();
    for case in yaml_cases() {
        let inv = Inventory::load(&case.ini).expect("load");
        let hosts = inv.hosts();
        let picked: BTreeSet<String> = hosts
            .first()
            .into_iter()
            .chain(hosts.last())
            .cloned()
            .collect();
        for host in picked {
            let mut cmd = ansible_cmd(&ansible_bin("ansible-inventory"), sb.path());
            cmd.env("ANSIBLE_INVENTORY_UNPARSED_FAILED", "True")
                .arg("-i")
                .arg(&case.ini)
                .arg("--host")
                .arg(&host);
            let child = cmd.spawn().expect("spawn ansible-inventory");
            runs.push((case.name.clone(), case.ini.clone(), host, child));
        }
    }
    assert!(
        runs.len() >= 15,
        "expected hosts to look at, got {}",
        runs.len()
    );
    let mut failures = Vec::new();
    for (name, file, host, child) in runs {
        let out = finish(child, &format!("ansible-inventory --host {host} on {name}"));
        let mut theirs: Value = serde_json::from_str(&out).expect("JSON");
        let inv = Inventory::load(&file).expect("load");
        let mut ours = Value::Object(
            inv.host_vars(&host)
                .expect("host")
                .iter()
                .map(|(k, v)| (k.clone(), hk_engine::repo::vars::listing_value(v)))
                .collect(),
        );
        normalize(&mut ours);
        normalize(&mut theirs);
        if ours != theirs {
            failures.push(format!(
                "{name} --host {host}: ours {ours} ansible {theirs}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// YAML inventories Ansible refuses (or reads through a plugin we do not run): our loader
/// refuses each naming file:line and the reason; what Ansible does is checked too.
#[test]
fn yaml_refusals_name_file_and_line_and_ansible_agrees() {
    let dir = hk_test_support::root().join("tests/fixtures/inventories-yaml-bad");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("bad yaml fixtures")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_none_or(|e| e != "expect"))
        .collect();
    files.sort();
    assert!(files.len() >= 8, "expected the YAML refusal fixtures");
    let sb = sandbox();
    let children: Vec<Child> = files
        .iter()
        .map(|f| {
            let mut cmd = ansible_cmd(&ansible_bin("ansible-inventory"), sb.path());
            cmd.env("ANSIBLE_INVENTORY_UNPARSED_FAILED", "True")
                .arg("-i")
                .arg(f)
                .arg("--list");
            cmd.spawn().expect("spawn ansible-inventory")
        })
        .collect();
    let mut failures = Vec::new();
    for (file, child) in files.iter().zip(children) {
        let name = file
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        // A format with no comments (JSON) says what is expected in `FILE.expect`.
        let sidecar = PathBuf::from(format!("{}.expect", file.display()));
        let text =
            std::fs::read_to_string(if sidecar.is_file() { &sidecar } else { file }).expect("read");
        let header = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("# {key}: ")))
                .unwrap_or_else(|| panic!("{name}: no `# {key}:` line"))
                .trim()
                .to_string()
        };
        let (line, kind, ours) = (header("expect-line"), header("ansible"), header("ours"));
        let out = child.wait_with_output().expect("wait");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let ansible_ok = match kind.as_str() {
            "fails" => !out.status.success() && stderr.contains(ours.trim_end_matches('.')),
            "accepts" => out.status.success(),
            other => panic!("{name}: unknown `# ansible: {other}`"),
        };
        if !ansible_ok {
            failures.push(format!(
                "{name}: ansible-inventory did not behave as `{kind}` ({ours}): {}\n{stderr}",
                out.status
            ));
        }
        failures.extend(our_refusal(&name, file, line, &ours));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn dir_fixtures_dir() -> PathBuf {
    hk_test_support::root().join("tests/fixtures/inventories-dir")
}

/// `-i DIR`: every directory of inventories-dir/ is one source, read file by file (INI,
/// YAML, no extension, subdirectories) with the files Ansible skips in it (`mixed` holds one
/// of each skipped extension, each an INI file that would add a host if read).
#[test]
fn directory_sources_equal_ansible_inventory() {
    let mut cases: Vec<Case> = std::fs::read_dir(dir_fixtures_dir())
        .expect("dir fixtures")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .map(|p| Case {
            name: p.file_name().expect("name").to_string_lossy().into_owned(),
            ini: p,
            vault_pass: None,
        })
        .collect();
    cases.sort_by(|a, b| a.name.cmp(&b.name));
    assert!(cases.len() >= 3, "expected at least 3 directory fixtures");
    let failures = check_cases(&cases);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    let mixed = Inventory::load(&dir_fixtures_dir().join("mixed")).expect("mixed");
    assert_eq!(mixed.format(), hk_engine::repo::inventory::Format::Mixed);
    assert!(
        mixed
            .hosts()
            .iter()
            .all(|h| !h.starts_with("should_not_appear")),
        "{:?}",
        mixed.hosts()
    );
}

/// `-i A -i B -i C`: one inventory, the sources in order, each base's group_vars.
#[test]
fn several_sources_equal_ansible_inventory() {
    let sources = [
        dir_fixtures_dir().join("order"),
        yaml_fixtures_dir().join("priority/hosts.yml"),
        fixtures_dir().join("basic/hosts.ini"),
        yaml_fixtures_dir().join("two_groups/hosts.yml"),
    ];
    let sb = sandbox();
    let mut cmd = ansible_cmd(&ansible_bin("ansible-inventory"), sb.path());
    cmd.env("ANSIBLE_INVENTORY_UNPARSED_FAILED", "True");
    for s in &sources {
        cmd.arg("-i").arg(s);
    }
    cmd.arg("--list");
    let stdout = finish(cmd.spawn().expect("spawn"), "ansible-inventory -i x4");
    let mut theirs: Value = serde_json::from_str(&stdout).expect("JSON");
    let inv = Inventory::load_sources(&sources).expect("load");
    let mut ours = list_json(&inv);
    normalize(&mut ours);
    normalize(&mut theirs);
    assert!(ours == theirs, "{}", diff("4 sources", &ours, &theirs));
}

/// A file in an inventory directory that no plugin reads is refused naming it (Ansible
/// warns and goes on without it), and so is a directory with nothing to read.
#[test]
fn a_directory_with_a_bad_or_no_file_is_refused_naming_it() {
    let tmp = tempfile::tempdir().expect("tmp");
    std::fs::write(tmp.path().join("a.ini"), "[g]\nh1\n").expect("a");
    std::fs::write(tmp.path().join("b.yml"), "g:\n  hosts: [x]\n").expect("b");
    let err = Inventory::load(tmp.path()).expect_err("b.yml").to_string();
    assert!(
        err.starts_with(&format!(
            "{}:2: Invalid \"hosts\" entry",
            tmp.path().join("b.yml").display()
        )),
        "{err}"
    );
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    std::fs::write(empty.join("notes.md"), "[g]\nh\n").expect("md");
    let err = Inventory::load(&empty).expect_err("empty").to_string();
    assert!(
        err.starts_with(&format!(
            "{}: an inventory directory with no inventory file",
            empty.display()
        )),
        "{err}"
    );
}

/// `hosts_in` follows `ansible GROUP --list-hosts` on YAML and directory sources too.
#[test]
fn hosts_in_matches_ansible_list_hosts_on_yaml_and_directories() {
    let pairs = [
        (yaml_fixtures_dir().join("two_groups/hosts.yml"), "all"),
        (yaml_fixtures_dir().join("two_groups/hosts.yml"), "ops"),
        (yaml_fixtures_dir().join("toplevel/hosts.yml"), "all"),
        (yaml_fixtures_dir().join("toplevel/hosts.yml"), "prod"),
        (yaml_fixtures_dir().join("ranges/hosts.yml"), "all"),
        (yaml_fixtures_dir().join("nulls/hosts.yml"), "all"),
        (dir_fixtures_dir().join("mixed"), "all"),
        (dir_fixtures_dir().join("mixed"), "monitoring"),
        (dir_fixtures_dir().join("nested"), "all"),
    ];
    let sb = sandbox();
    let children: Vec<Child> = pairs
        .iter()
        .map(|(source, g)| {
            let mut cmd = ansible_cmd(&ansible_bin("ansible"), sb.path());
            cmd.arg("-i").arg(source).arg(g).arg("--list-hosts");
            cmd.spawn().expect("spawn ansible")
        })
        .collect();
    for ((source, g), child) in pairs.iter().zip(children) {
        let what = format!("ansible {g} --list-hosts on {}", source.display());
        let out = finish(child, &what);
        let theirs: Vec<String> = out
            .lines()
            .filter(|l| l.starts_with("    "))
            .map(|l| l.trim().to_string())
            .collect();
        assert!(!theirs.is_empty(), "{what}: no hosts\n{out}");
        let inv = Inventory::load(source).expect("load");
        let ours = inv.hosts_in(g).expect("group");
        if order_is_defined(&inv, g) {
            assert_eq!(ours, theirs, "{what}");
        } else {
            let (mut a, mut b) = (ours.clone(), theirs.clone());
            a.sort();
            b.sort();
            assert_eq!(a, b, "{what} (as sets)");
        }
    }
}

/// The toml plugin's format: every inventories-toml/ fixture, `--list` and the skip warnings.
#[test]
fn toml_list_equals_ansible_inventory_on_every_toml_fixture() {
    let cases = cases_in(&hk_test_support::root().join("tests/fixtures/inventories-toml"));
    assert!(cases.len() >= 3, "expected at least 3 TOML fixtures");
    let failures = check_cases(&cases);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    for c in &cases {
        assert_eq!(
            Inventory::load(&c.ini).expect("load").format(),
            hk_engine::repo::inventory::Format::Toml,
            "{}",
            c.name
        );
    }
}
