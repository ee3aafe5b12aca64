//! Six public k3s + Ansible repositories no one here wrote (tests/fixtures/public-repos),
//! each after its README's first steps, through the real binary: `init --write` writes a
//! mapping and exits 0; `envs` names the servers, the agents and the VIP the repo has;
//! `check` on the repo as it is reports only what is true of it; a single server's address
//! planted where the repo configures its agents' join, its CNI or a kubeconfig is a
//! violation naming the file and line, and on a one-server cluster the server's own
//! address is its endpoint, no finding.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use hk_test_support::fs::copy_dir;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hk-console"));
    c.env_remove("HK_REPO").env("NO_COLOR", "1");
    c
}

fn out(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/public-repos")
        .join(name)
}

/// The fixture copied into `tmp` with its README's first steps done (SETUP.sh).
fn set_up(tmp: &Path, name: &str) -> PathBuf {
    let root = tmp.join(name);
    copy_dir(&fixture(name), &root);
    let o = Command::new("sh")
        .arg("SETUP.sh")
        .current_dir(&root)
        .output()
        .expect("sh");
    assert!(o.status.success(), "{name}: SETUP.sh failed\n{}", out(&o));
    root
}

fn run(root: &Path, args: &[&str]) -> Output {
    bin()
        .arg("--repo")
        .arg(root)
        .args(args)
        .output()
        .expect("run hk-console")
}

/// `init --write` (exit 0, the file written), then `envs --json`'s first environment.
fn init(root: &Path) -> serde_json::Value {
    let o = run(root, &["init", "--write"]);
    assert_eq!(o.status.code(), Some(0), "init --write\n{}", out(&o));
    assert!(root.join("hk-console.yaml").is_file());
    let o = run(root, &["envs", "--json"]);
    assert_eq!(o.status.code(), Some(0), "envs\n{}", out(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("envs --json");
    v[0].clone()
}

fn names(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|h| h["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// `check`'s finding lines (`file:line: [rule] ...` and `[rule] ...`), and its exit code.
fn check(root: &Path) -> (Option<i32>, Vec<String>, String) {
    let o = run(root, &["check"]);
    let text = out(&o);
    let findings = text
        .lines()
        .filter(|l| l.contains("] ") && l.contains('['))
        .map(str::to_string)
        .collect();
    (o.status.code(), findings, text)
}

fn replace_in(root: &Path, file: &str, from: &str, to: &str) {
    let p = root.join(file);
    let text = std::fs::read_to_string(&p).expect(file);
    assert!(text.contains(from), "{file} has no `{from}`");
    std::fs::write(&p, text.replacen(from, to, 1)).expect("write");
}

/// The violations `check` names at `at` (`file:line`).
fn violations_at(findings: &[String], at: &str) -> Vec<String> {
    findings
        .iter()
        .filter(|f| f.starts_with(&format!("{at}: [ha-endpoint] ")) && !f.contains("warning:"))
        .filter(|f| !f.contains("cannot tell:"))
        .cloned()
        .collect()
}

/// A one-server repo: its server's own address is the agents' endpoint (no finding); with
/// more servers the same address is a single-node dependency at that file and line.
struct OneServer<'a> {
    name: &'a str,
    inventory: &'a str,
    /// The inventory's server lines, and the same with two more servers.
    servers_from: &'a str,
    servers_to: &'a str,
    /// Where the agents' endpoint is written, what it says, and its line.
    agent_file: &'a str,
    agent_from: &'a str,
    agent_line: usize,
    server_address: &'a str,
}

fn one_server_then_three(case: OneServer) {
    let OneServer {
        name,
        inventory,
        servers_from,
        servers_to,
        agent_file,
        agent_from,
        agent_line,
        server_address,
    } = case;
    let tmp = tempfile::tempdir().expect("tmp");
    let root = set_up(tmp.path(), name);
    let env = init(&root);
    assert_eq!(names(&env["servers"]).len(), 1, "{name}: {env}");
    assert!(!names(&env["agents"]).is_empty(), "{name}: agents {env}");
    let (code, findings, text) = check(&root);
    assert_eq!(code, Some(0), "{name}: the repo as it is\n{text}");
    assert!(findings.is_empty(), "{name}: {findings:#?}");

    // The server's own address written into the agents' unit: on one server, its endpoint.
    replace_in(&root, agent_file, agent_from, server_address);
    let (code, findings, text) = check(&root);
    assert_eq!(code, Some(0), "{name}: one server's own address\n{text}");
    assert!(findings.is_empty(), "{name}: {findings:#?}");

    // Two more servers: the same address is now one node the agents depend on.
    replace_in(&root, inventory, servers_from, servers_to);
    let (code, findings, text) = check(&root);
    // Not clean (exit 1, or 2 where the HA facts are also unmapped: cannot tell).
    assert!(matches!(code, Some(1 | 2)), "{name}: three servers\n{text}");
    let at = format!("{agent_file}:{agent_line}");
    let hits = violations_at(&findings, &at);
    assert_eq!(
        hits.len(),
        1,
        "{name}: expected one violation at {at}\n{text}"
    );
    assert!(hits[0].contains(server_address), "{}", hits[0]);
}

#[test]
fn canhbk_one_server_then_three() {
    one_server_then_three(OneServer {
        name: "canhbk--k3s-ansible",
        inventory: "inventory.yml",
        servers_from: "        192.16.35.11:\n",
        servers_to: "        192.16.35.11:\n        192.16.35.14:\n        192.16.35.15:\n",
        agent_file: "roles/k3s_agent/templates/k3s-agent.service.j2",
        agent_from: "{{ api_endpoint }}",
        agent_line: 29,
        server_address: "192.16.35.11",
    });
}

#[test]
fn elemental_lf_one_server_then_three() {
    one_server_then_three(OneServer {
        name: "elemental-lf--k3s-ansible",
        inventory: "inventory/my-cluster/hosts.ini",
        servers_from: "[server]\n192.168.1.26\n",
        servers_to: "[server]\n192.168.1.26\n192.168.1.27\n192.168.1.28\n",
        agent_file: "roles/k3s/agent/templates/k3s-agent.service.j2",
        agent_from: "{{ apiserver_endpoint }}",
        agent_line: 39,
        server_address: "192.168.1.26",
    });
}

/// The techno-tim lineage: three servers, kube-vip's VIP in `apiserver_endpoint` (used by
/// the agents' `--server` and the CNI), agents in their own group.
fn vip_repo(name: &str, prefix: &str, agents_group: &str) {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = set_up(tmp.path(), name);
    let env = init(&root);
    assert_eq!(names(&env["servers"]).len(), 3, "{name}: {env}");
    assert_eq!(env["agents_group"], agents_group, "{name}: {env}");
    assert_eq!(names(&env["agents"]).len(), 2, "{name}: {env}");
    assert_eq!(env["vip"]["value"], "192.168.30.222", "{name}: {env}");
    assert_eq!(env["vip"]["var"], "apiserver_endpoint", "{name}: {env}");

    // As it is: the servers join the first server (k3s's own HA bootstrap), a warning;
    // nothing else.
    let (code, findings, text) = check(&root);
    assert_eq!(code, Some(0), "{name}\n{text}");
    assert_eq!(findings.len(), 1, "{name}: {findings:#?}");
    assert!(
        findings[0].starts_with(&format!("{prefix}k3s_server/defaults/main.yml:"))
            && findings[0].contains("warning:")
            && findings[0].contains("only joins use it"),
        "{name}: {findings:#?}"
    );

    // One server's address where the agents join, and where the CNI dials the API.
    let agent = format!("{prefix}k3s_agent/templates/k3s.service.j2");
    replace_in(
        &root,
        &agent,
        "{{ apiserver_endpoint | ansible.utils.ipwrap }}",
        "192.168.30.38",
    );
    let cni = format!("{prefix}k3s_server_post/templates/calico.crs.j2");
    replace_in(
        &root,
        &cni,
        "KUBERNETES_SERVICE_HOST: '{{ apiserver_endpoint }}'",
        "KUBERNETES_SERVICE_HOST: '192.168.30.38'",
    );
    let (code, findings, text) = check(&root);
    assert_eq!(code, Some(1), "{name}\n{text}");
    for (at, what) in [
        (format!("{agent}:12"), "the agents dial it"),
        (format!("{cni}:39"), "steady-state client"),
    ] {
        let hits = violations_at(&findings, &at);
        assert_eq!(
            hits.len(),
            1,
            "{name}: expected one violation at {at}\n{text}"
        );
        assert!(
            hits[0].contains("192.168.30.38") && hits[0].contains(what),
            "{}",
            hits[0]
        );
    }
}

#[test]
fn kriegalex_vip_agents_and_planted_addresses() {
    vip_repo(
        "kriegalex--k3s-ansible",
        "roles/k3s_cluster/",
        "k3s_workers",
    );
}

#[test]
fn myles_coleman_vip_agents_and_planted_addresses() {
    vip_repo("myles-coleman--k3s-ansible", "roles/", "node");
}

/// Terraform-generated inventory under ansible/: three servers, two agents, and agents
/// that join the first server by its gathered address: a true single-node dependency.
#[test]
fn jensens_agents_dial_the_first_server() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = set_up(tmp.path(), "jensens--k3s-ansible");
    let env = init(&root);
    assert_eq!(names(&env["servers"]).len(), 3, "{env}");
    assert_eq!(names(&env["agents"]).len(), 2, "{env}");
    let (code, findings, text) = check(&root);
    // No VIP or endpoint variable: cannot tell overall (exit 2), never a guess.
    assert_eq!(code, Some(2), "{text}");
    let at = "ansible/roles/k3s/agent/templates/k3s.service.j2:10";
    let hits = violations_at(&findings, at);
    assert_eq!(hits.len(), 1, "{text}");
    assert!(hits[0].contains("first host of a group"), "{}", hits[0]);
    assert!(
        findings.iter().any(|f| f.contains("cannot tell:")
            && f.contains("map the variables its clients dial")),
        "{findings:#?}"
    );
}

/// gilesknap's one control plane is named by a variable (`control_plane: node01` in
/// group_vars/all.yml) that its k3s role compares with `inventory_hostname`; no group holds
/// it alone. init refused ("no environment found"). Now the server is that host (`servers:
/// node01`, with the file:line of the comparison), the agents are the rest of the group the
/// k3s role's play runs on (`all_nodes` without node01), it is its own primary, `envs` names
/// them all, and `check` on the repo as it is finds nothing false.
#[test]
fn gilesknap_one_server_named_by_a_variable() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = set_up(tmp.path(), "gilesknap--tpi-k3s-ansible");
    let env = init(&root);
    let mapping = std::fs::read_to_string(root.join("hk-console.yaml")).expect("mapping");
    for line in [
        "    servers: node01\n",
        "    agents: all_nodes\n",
        "roles/k3s/tasks/main.yml:16: the repo's role takes it as the server",
    ] {
        assert!(mapping.contains(line), "{line}\n{mapping}");
    }
    assert_eq!(names(&env["servers"]), ["node01"], "{env}");
    assert_eq!(
        names(&env["agents"]),
        ["node02", "node03", "node04", "ws03", "nuc2"],
        "{env}"
    );
    assert_eq!(env["primary_group"]["value"], "node01", "{env}");
    let (code, findings, text) = check(&root);
    assert_eq!(code, Some(0), "{text}");
    assert!(findings.is_empty(), "{findings:#?}");
}

/// The primary group (whose first host the other servers join) where no variable names
/// it: found by the repo's own `groups[EXPR][0]`, the expression written as the fact, and
/// `envs` renders it to the servers' group, as Ansible would for these hosts.
#[test]
fn init_finds_the_first_servers_group_by_its_use() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for (name, expr, group) in [
        (
            "myles-coleman--k3s-ansible",
            "group_name_master | default('master')",
            "master",
        ),
        (
            "kriegalex--k3s-ansible",
            "group_name_master | default('k3s_servers')",
            "k3s_servers",
        ),
        ("elemental-lf--k3s-ansible", "'server'", "server"),
        ("canhbk--k3s-ansible", "'server'", "server"),
    ] {
        let root = set_up(tmp.path(), name);
        let env = init(&root);
        let mapping = std::fs::read_to_string(root.join("hk-console.yaml")).expect("mapping");
        assert!(
            mapping.contains(&format!("primary_group: \"{{{{ {expr} }}}}\"")),
            "{name}:\n{mapping}"
        );
        assert!(
            mapping.contains(&format!(
                "the repo takes its first server as groups[{expr}][0] at "
            )),
            "{name}:\n{mapping}"
        );
        assert!(
            !mapping.contains("facts.primary_group: no variable names a group of servers"),
            "{name}: still asked\n{mapping}"
        );
        assert_eq!(env["primary_group"]["value"], group, "{name}: {env}");
    }
}

/// The built-in runbooks are written for the sample's `prod` and `dev`: on a repo whose
/// environments are its own, `runbooks list` does not offer them as its runbooks; it names
/// them apart, and `--json` says `applies: false`.
#[test]
fn runbooks_list_does_not_offer_the_samples_runbooks_to_another_repo() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = set_up(tmp.path(), "myles-coleman--k3s-ansible");
    init(&root);
    let o = run(&root, &["runbooks", "list"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    let (offered, apart) = text
        .split_once("not for this repo (its environments: master): ")
        .unwrap_or_else(|| panic!("{text}"));
    assert!(!offered.contains("etcd-io-priority"), "{text}");
    assert!(apart.contains("etcd-io-priority (prod)"), "{text}");
    let o = run(&root, &["runbooks", "list", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let rows = v.as_array().expect("rows");
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|r| r["applies"] == false), "{v}");
}

/// `tool args` (ansible-playbook, ansible-inventory of the test setup: `HK_ANSIBLE_BIN_DIR`,
/// PATH, /opt/hk-venv/bin) in `cwd`, as the repo's operator runs it there: a HOME inside the
/// repo, no colour, none of this process's ANSIBLE_CONFIG, ANSIBLE_INVENTORY or
/// ANSIBLE_VAULT_PASSWORD_FILE.
fn ansible(root: &Path, tool: &str, cwd: &Path, args: &[&str]) -> Output {
    let dirs = hk_console::exec::ansible::search_dirs();
    let bin = hk_console::exec::ansible::find_binary(tool, &dirs).unwrap_or_else(|| {
        panic!(
            "{tool} not found: {}",
            hk_console::exec::ansible::INSTALL_HINT
        )
    });
    let home = root.join(".hk-test-home");
    std::fs::create_dir_all(&home).expect("home");
    Command::new(bin)
        .args(args)
        .current_dir(cwd)
        .env("HOME", &home)
        .env("ANSIBLE_LOCAL_TEMP", home.join("tmp"))
        .env("ANSIBLE_NOCOLOR", "1")
        .env_remove("ANSIBLE_CONFIG")
        .env_remove("ANSIBLE_INVENTORY")
        .env_remove("ANSIBLE_VAULT_PASSWORD_FILE")
        .output()
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// `runbooks new --playbook PLAYBOOK --out OUT` on the repo (OUT relative to it): exit 0.
fn scaffold(root: &Path, playbook: &str, out_file: &str) {
    let o = run(
        root,
        &["runbooks", "new", "--playbook", playbook, "--out", out_file],
    );
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
}

/// `inventory --host HOST --resolved --playbook PLAYBOOK` as JSON: the host's variables
/// in that playbook's play. Exit 1 is allowed: a repo's value that needs gathered facts
/// is named on stderr and left unrendered.
fn play_view(root: &Path, host: &str, playbook: &str) -> serde_json::Value {
    let o = run(
        root,
        &[
            "inventory",
            "--host",
            host,
            "--resolved",
            "--playbook",
            playbook,
        ],
    );
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", out(&o));
    serde_json::from_slice(&o.stdout).expect("json")
}

/// The hosts the real ansible-playbook lists for one plan step's `--list-hosts` command,
/// every play's together (a play that names none of them lists none).
fn ansible_lists(root: &Path, step: &serde_json::Value) -> Vec<String> {
    let argv: Vec<&str> = step["command"]
        .as_array()
        .expect("command")
        .iter()
        .map(|a| a.as_str().expect("arg"))
        .collect();
    assert_eq!(argv[0], "ansible-playbook", "{step}");
    let cwd = root.join(step["cwd"].as_str().unwrap_or("."));
    let o = ansible(root, "ansible-playbook", &cwd, &argv[1..]);
    assert!(o.status.success(), "{argv:?}\n{}", out(&o));
    let plays = hk_console::exec::ansible::parse_list_hosts(
        &String::from_utf8_lossy(&o.stdout),
        &String::from_utf8_lossy(&o.stderr),
    )
    .unwrap_or_else(|e| panic!("{argv:?}: {e}\n{}", out(&o)));
    let mut hosts: Vec<String> = plays.into_iter().flat_map(|p| p.hosts).collect();
    hosts.dedup();
    hosts
}

/// `runbooks new` on each repo's own rolling playbook (a reboot or an upgrade whose
/// `hosts:` is the whole cluster, or a play on the servers then one on the agents), as an
/// operator types it from another directory with `--out runbooks/...` (relative to the
/// repo, the folder made): the runbook takes the servers one at a time, then the agents one
/// at a time; it validates; and where the repo can be planned, the plan's mutating steps
/// are each server, then each agent, once, and for each the real ansible-playbook's
/// `--list-hosts` with the plan's own command lists exactly that host.
#[test]
fn scaffolds_of_rolling_playbooks_take_the_servers_one_at_a_time_then_the_agents() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for (name, playbook, target, planned) in [
        (
            "kriegalex--k3s-ansible",
            "playbooks/reboot.yml",
            "k3s_cluster",
            true,
        ),
        (
            "myles-coleman--k3s-ansible",
            "reboot.yml",
            "k3s_cluster",
            true,
        ),
        // Two plays, `server` (serial 1) then `agent`: before, the runbook targeted the
        // servers only and the agents' play matched no host of any step.
        (
            "canhbk--k3s-ansible",
            "playbooks/upgrade.yml",
            "k3s_cluster",
            false,
        ),
        (
            "canhbk--k3s-ansible",
            "playbooks/reboot.yml",
            "k3s_cluster",
            false,
        ),
    ] {
        let root = tmp
            .path()
            .join(format!("{name}-{}", playbook.replace('/', "-")));
        copy_dir(&fixture(name), &root);
        let o = Command::new("sh")
            .arg("SETUP.sh")
            .current_dir(&root)
            .output()
            .expect("sh");
        assert!(o.status.success(), "{name}: SETUP.sh\n{}", out(&o));
        let env = init(&root);
        let env_name = env["name"].as_str().expect("env name").to_string();
        let servers = names(&env["servers"]);
        let agents = names(&env["agents"]);
        assert!(!servers.is_empty() && !agents.is_empty(), "{name}: {env}");

        let o = bin()
            .current_dir(tmp.path())
            .arg("--repo")
            .arg(&root)
            .args(["runbooks", "new", "--playbook", playbook, "--id", "rolling"])
            .args(["--out", "runbooks/rolling.yaml"])
            .output()
            .expect("runbooks new");
        assert_eq!(o.status.code(), Some(0), "{name}: {}", out(&o));
        let file = root.join("runbooks/rolling.yaml");
        let text = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{name}: {} not written: {e}", file.display()));
        for line in [
            &format!("  group: \"{target}\"") as &str,
            "  serial: 1",
            "  order: servers_first",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{name}: no `{line}`\n{text}"
            );
        }
        assert!(!text.contains("scope: once"), "{name}:\n{text}");
        let o = run(
            &root,
            &["runbooks", "validate", file.to_str().expect("utf8")],
        );
        assert_eq!(o.status.code(), Some(0), "{name}: {text}\n{}", out(&o));
        if !planned {
            continue;
        }
        let o = run(&root, &["plan", "rolling", "--env", &env_name, "--json"]);
        assert_eq!(o.status.code(), Some(0), "{name}: {text}\n{}", out(&o));
        let plan: serde_json::Value = serde_json::from_slice(&o.stdout).expect("plan json");
        let steps = plan["steps"].as_array().expect("steps");
        let mutated: Vec<&str> = steps
            .iter()
            .filter(|s| s["mutates"] == true)
            .map(|s| s["host"].as_str().expect("a per-host step"))
            .collect();
        let want: Vec<&str> = servers.iter().chain(&agents).map(String::as_str).collect();
        assert_eq!(mutated, want, "{name}: servers one at a time, then agents");
        let listed: Vec<&serde_json::Value> =
            steps.iter().filter(|s| s["kind"] == "list-hosts").collect();
        assert_eq!(listed.len(), want.len(), "{name}: {plan}");
        for step in listed {
            let host = step["host"].as_str().expect("host");
            assert_eq!(step["expect"]["hosts"], serde_json::json!([host]), "{step}");
            assert_eq!(
                ansible_lists(&root, step),
                vec![host.to_string()],
                "{name}: {step}"
            );
        }
    }
}

/// A playbook whose first plays run on the controller (kriegalex's base_storage.yml:
/// `hosts: ansible_local`, whose one host is `localhost` with `ansible_connection: local`)
/// and whose last runs on the servers. The scaffold targeted `ansible_local`, one host at
/// a time, so the servers' play never ran. Now the controller's plays are a step of their
/// own, once, `--limit ansible_local`, first as in the playbook; then the servers one at a
/// time. The real ansible-playbook lists, for each list-hosts step of the plan, exactly
/// the hosts the plan expects. On myles-coleman's site.yml, whose localhost is Ansible's
/// implicit one (no `--limit` selects it), the scaffold says its two plays there do not run.
#[test]
fn scaffolds_give_the_controllers_plays_steps_of_their_own() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = set_up(tmp.path(), "kriegalex--k3s-ansible");
    init(&root);
    scaffold(&root, "playbooks/base_storage.yml", "runbooks/bs.yaml");
    let text = std::fs::read_to_string(root.join("runbooks/bs.yaml")).expect("written");
    assert!(
        text.contains("  group: \"servers\"\n  # One node"),
        "{text}"
    );
    let o = run(
        &root,
        &["plan", "base-storage", "--env", "k3s_cluster", "--json"],
    );
    assert_eq!(o.status.code(), Some(0), "{text}\n{}", out(&o));
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).expect("plan json");
    let steps = plan["steps"].as_array().expect("steps");
    let order: Vec<String> = steps
        .iter()
        .filter(|s| s["mutates"] == true)
        .map(|s| {
            format!(
                "{} {}",
                s["id"].as_str().unwrap_or(""),
                s["host"].as_str().unwrap_or("-")
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            "apply-controller.check -",
            "apply-controller -",
            // etcd's leadership moved off each server first (issue 39).
            "etcd-leader.move k3s-server1",
            "apply.check k3s-server1",
            "apply k3s-server1",
            "etcd-leader.move k3s-server2",
            "apply.check k3s-server2",
            "apply k3s-server2",
            "etcd-leader.move k3s-server3",
            "apply.check k3s-server3",
            "apply k3s-server3",
        ],
        "{plan}"
    );
    // etcd's snapshot once, before the first server's first step, over the servers this
    // repo's inventory names (issue 39).
    let snaps: Vec<&serde_json::Value> = steps
        .iter()
        .filter(|s| s["kind"] == "etcd-snapshot")
        .collect();
    assert_eq!(snaps.len(), 1, "{plan}");
    assert_eq!(
        snaps[0]["expect"]["condition"],
        "etcd-snapshot changed=k3s-server1,k3s-server2,k3s-server3",
        "{plan}"
    );
    assert_eq!(snaps[0]["mutates"], false);
    let first_server = steps
        .iter()
        .position(|s| s["host"] == "k3s-server1" && s["kind"] != "list-hosts")
        .expect("a step on k3s-server1");
    let snap_at = steps
        .iter()
        .position(|s| s["kind"] == "etcd-snapshot")
        .expect("the snapshot");
    assert!(snap_at < first_server, "{plan}");
    for step in steps.iter().filter(|s| s["kind"] == "list-hosts") {
        let want: Vec<String> =
            serde_json::from_value(step["expect"]["hosts"].clone()).expect("hosts");
        assert_eq!(ansible_lists(&root, step), want, "{step}");
    }
    assert_eq!(
        steps
            .iter()
            .find(|s| s["id"] == "list-hosts-controller")
            .map(|s| &s["expect"]["hosts"]),
        Some(&serde_json::json!(["localhost"])),
        "{plan}"
    );

    let root = set_up(tmp.path(), "myles-coleman--k3s-ansible");
    init(&root);
    let o = run(&root, &["runbooks", "new", "--playbook", "site.yml"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        text.contains("# QUESTION: the plays on localhost (site.yml:58, site.yml:73) do not run in this runbook"),
        "{text}"
    );
    assert!(!text.contains("controller\n    kind"), "{text}");
}

/// kriegalex's ansible.cfg names `vault_password_file = .vault_pass`, which its README has
/// the operator create. Without it the real ansible-playbook stops before any play (even a
/// `--list-hosts`); `check` says so at the ansible.cfg line (it said "parity: clean"), and
/// the plan of a runbook on the repo's playbook is blocked with the same reason.
#[test]
fn a_missing_vault_password_file_is_named_as_ansible_playbook_meets_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = set_up(tmp.path(), "kriegalex--k3s-ansible");
    init(&root);
    let (code, findings, _) = check(&root);
    assert_eq!(code, Some(0), "{findings:#?}");
    std::fs::remove_file(root.join(".vault_pass")).expect("rm .vault_pass");

    let o = ansible(
        &root,
        "ansible-playbook",
        &root,
        &["playbooks/reboot.yml", "--list-hosts"],
    );
    assert!(!o.status.success(), "{}", out(&o));
    assert!(
        out(&o).contains("The vault password file") && out(&o).contains("was not found"),
        "{}",
        out(&o)
    );

    let (code, findings, text) = check(&root);
    assert_eq!(code, Some(1), "{text}");
    let named: Vec<&String> = findings
        .iter()
        .filter(|f| f.starts_with("ansible.cfg:4: [vault-locked] ") && f.contains(".vault_pass"))
        .collect();
    assert_eq!(named.len(), 1, "{text}");
    assert!(
        named[0].contains("ansible-playbook stops before any play"),
        "{text}"
    );

    scaffold(&root, "playbooks/reboot.yml", "runbooks/r.yaml");
    let o = run(&root, &["plan", "reboot", "--env", "k3s_cluster"]);
    assert_ne!(o.status.code(), Some(0), "{}", out(&o));
    assert!(
        out(&o).contains("[vault-locked]") && out(&o).contains(".vault_pass"),
        "{}",
        out(&o)
    );
}

/// The overview (`hk-console` with no command and no terminal) ends with a next step that
/// can be taken on this repo: it said `plan etcd-io-priority --env prod` on every repo,
/// which refuses where there is no `prod`. With no runbook for the repo's environments it
/// says how to scaffold one; once one is in the repo's runbooks/, it names that runbook's
/// plan, and that command plans (exit 0).
#[test]
fn the_overviews_next_step_can_be_taken_on_the_repo() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = set_up(tmp.path(), "kriegalex--k3s-ansible");
    init(&root);
    let next = |root: &Path| {
        let o = run(root, &[]);
        let text = out(&o);
        text.lines()
            .find(|l| l.starts_with("Next: "))
            .unwrap_or_else(|| panic!("no Next line:\n{text}"))
            .to_string()
    };
    let line = next(&root);
    assert!(
        line.starts_with("Next: hk-console runbooks new --playbook PLAYBOOK --out runbooks/"),
        "{line}"
    );
    scaffold(&root, "playbooks/reboot.yml", "runbooks/reboot.yaml");
    let line = next(&root);
    assert!(
        line.starts_with("Next: hk-console plan reboot --env k3s_cluster "),
        "{line}"
    );
    let o = run(&root, &["plan", "reboot", "--env", "k3s_cluster"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
}

/// A public repo whose environment happens to be called `prod` (myles-coleman's `master`,
/// renamed in its hk-console.yaml): the built-in runbooks name `prod`, but run the sample's
/// playbooks, its Flux tree and its VPN gateways, none of which this repo has. `runbooks
/// list` offered them and `check` reported six `[missing-playbook]` violations of files that
/// were never this repo's. Now none is offered, `--all` and `--json` say why for each, and
/// `check` has no blocker of theirs.
#[test]
fn built_in_runbooks_are_not_offered_where_the_repo_lacks_what_they_run() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = set_up(tmp.path(), "myles-coleman--k3s-ansible");
    init(&root);
    replace_in(&root, "hk-console.yaml", "\n  master:\n", "\n  prod:\n");
    let o = run(&root, &["runbooks", "list"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    let (offered, apart) = text
        .split_once("not offered here: ")
        .unwrap_or_else(|| panic!("{text}"));
    assert!(offered.trim().is_empty(), "offered:\n{offered}");
    for why in [
        "etcd-io-priority (built in, and this repo has no playbooks/etcd-io-priority.yml in its top directory)",
        "cilium-endpoint-rollout (built in, it reconciles helmrelease/cilium through Flux, and prod has no Flux overlay (clusters/prod is not in this repo))",
        "vpn-egress-verify (built in, for the vpn_gateways group, and prod has none)",
    ] {
        assert!(apart.contains(why), "{why}\n{text}");
    }
    let o = run(&root, &["runbooks", "list", "--all"]);
    let all = out(&o);
    assert!(
        all.lines().any(|l| l.starts_with("etcd-io-priority ")
            && l.contains(
                "[not offered here: built in, and this repo has no playbooks/etcd-io-priority.yml"
            )),
        "{all}"
    );
    let o = run(&root, &["runbooks", "list", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    for r in v.as_array().expect("rows") {
        assert_eq!(r["applies"], false, "{r}");
        assert!(
            r["not_offered"]
                .as_str()
                .is_some_and(|w| w.starts_with("built in")),
            "{r}"
        );
    }
    let (code, findings, text) = check(&root);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        !findings.iter().any(|f| f.contains("[missing-playbook]")),
        "{findings:#?}"
    );
}

/// The `group_vars/` and `host_vars/` beside a playbook are that playbook's variables too
/// (ansible-playbook loads `playbooks/group_vars/` for `playbooks/reboot.yml`), at
/// ansible-core's precedence: each level of the playbook's right after the inventory's
/// (group_vars/all, then every group's, then host_vars). hk-console's view of a host in a
/// playbook's play (`inventory --host H --resolved --playbook P`) had none of them. Planted
/// on kriegalex (whose inventory keeps its own group_vars beside `inventory/hosts.yml`) and
/// compared, host by host, with the real `ansible-inventory --playbook-dir playbooks`.
#[test]
fn a_playbooks_own_group_vars_are_its_plays_variables_as_ansible_reads_them() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = set_up(tmp.path(), "kriegalex--k3s-ansible");
    init(&root);
    let write = |rel: &str, text: &str| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    };
    // The inventory's own levels, then the playbook's: all < all (play) < groups < groups
    // (play, a lower group's beating the inventory's higher one) < host_vars < (play).
    write(
        "inventory/group_vars/k3s_servers.yml",
        "hk_t_group: inventory-servers\nhk_t_low: inventory-servers\n",
    );
    write(
        "inventory/group_vars/all/hk_t.yml",
        "hk_t_all: inventory-all\nhk_t_group: inventory-all\n",
    );
    write(
        "playbooks/group_vars/all.yml",
        "hk_t_all: playbook-all\nhk_t_group: playbook-all\n",
    );
    write(
        "playbooks/group_vars/k3s_cluster.yml",
        "hk_t_low: playbook-cluster\n",
    );
    write(
        "playbooks/host_vars/k3s-worker1.yml",
        "hk_t_host: playbook-host\n",
    );
    let keys = ["hk_t_all", "hk_t_group", "hk_t_low", "hk_t_host"];
    for host in ["k3s-server1", "k3s-worker1"] {
        let o = ansible(
            &root,
            "ansible-inventory",
            &root,
            &["--playbook-dir", "playbooks", "--host", host],
        );
        assert!(o.status.success(), "{}", out(&o));
        let theirs: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        let ours = play_view(&root, host, "playbooks/reboot.yml");
        for k in keys {
            assert_eq!(
                ours["vars"][k]["value"], theirs[k],
                "{host} {k}: ours {} / ansible-inventory {}",
                ours["vars"][k], theirs[k]
            );
        }
    }
    // And what each value is, so the comparison is not of two absences.
    let ours = play_view(&root, "k3s-server1", "playbooks/reboot.yml");
    assert_eq!(ours["vars"]["hk_t_all"]["value"], "playbook-all");
    assert_eq!(ours["vars"]["hk_t_group"]["value"], "inventory-servers");
    assert_eq!(ours["vars"]["hk_t_low"]["value"], "playbook-cluster");
    assert_eq!(
        ours["vars"]["hk_t_low"]["layer"],
        "playbook group_vars/k3s_cluster"
    );
    // A vaulted file beside the playbook is named, never silently left out.
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("inventory/infra/ansible/inventory/group_vars/vpn_egress_gateway/vault.yml"),
        root.join("playbooks/host_vars/k3s-server1.yml"),
    )
    .expect("vault");
    let o = run(
        &root,
        &[
            "inventory",
            "--host",
            "k3s-server1",
            "--resolved",
            "--playbook",
            "playbooks/reboot.yml",
        ],
    );
    assert!(
        out(&o).contains("playbooks/host_vars/k3s-server1.yml: vaulted, not read"),
        "{}",
        out(&o)
    );
}
