//! Issue 28: a k3s repo laid out like neither the sample nor its variants: a YAML inventory
//! under `ansible/`, servers in `control_plane`, agents in `workers`, and none of the seed's
//! variable names. hk-console.yaml's `facts:` says where each fact is (a variable, or a
//! Jinja expression over a server's variables), and `agents:` names the worker group; the
//! real binary's `envs` then knows every fact.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hk-console"));
    c.env(
        "XDG_STATE_HOME",
        std::env::temp_dir().join("hk-console-any-layout-tests"),
    );
    c.env_remove("HK_REPO");
    c.env_remove("HK_RUNBOOKS");
    c
}

fn text_of(o: &Output) -> (String, String) {
    text(o)
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

const INVENTORY: &str = "\
all:
  vars:
    cluster_vip: 10.20.0.100
    cluster_name: lab
    first_server_ip: 10.20.0.11
    primary_group_name: lab_primary
  children:
    control_plane:
      hosts:
        cp1: { ansible_host: 10.20.0.11 }
        cp2: { ansible_host: 10.20.0.12 }
        cp3: { ansible_host: 10.20.0.13 }
    lab_primary:
      hosts:
        cp1:
    workers:
      hosts:
        w1: { ansible_host: 10.20.0.21 }
        w2: { ansible_host: 10.20.0.22 }
";

/// A repo with `config` as hk-console.yaml and the YAML inventory above.
pub fn any_layout_repo(dir: &Path, config: &str) -> PathBuf {
    let root = dir.join("homelab");
    std::fs::create_dir_all(root.join("ansible")).expect("mkdir");
    std::fs::write(root.join("ansible/inventory.yml"), INVENTORY).expect("inventory");
    std::fs::write(root.join("hk-console.yaml"), config).expect("config");
    root
}

const CONFIG: &str = "\
ansible_dir: ansible
inventory: ansible/inventory.yml
facts:
  vip: cluster_vip
  endpoint: \"{{ cluster_vip }}\"
  founder: first_server_ip
  api_port: \"{{ apiserver_port | default(6443) }}\"
  kubeconfig: \"{{ cluster_name }}.yaml\"
  primary_group: primary_group_name
environments:
  lab:
    servers: control_plane
    agents: workers
";

#[test]
fn envs_knows_every_fact_from_the_repos_own_names() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = any_layout_repo(tmp.path(), CONFIG);
    let r = root.display().to_string();
    let o = bin().args(["--repo", &r, "envs"]).output().expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(!out.contains("(unknown)"), "{out}");
    assert!(
        out.contains(
            "VIP          10.20.0.100   endpoint 10.20.0.100   founder 10.20.0.11   port 6443"
        ),
        "{out}"
    );
    assert!(out.contains("primary      lab_primary"), "{out}");
    assert!(
        out.contains(&format!(
            "kubeconfig {}",
            root.join(".cache/lab.yaml").display()
        )),
        "{out}"
    );
    assert!(
        out.contains("agents       workers (2): w1 10.20.0.21, w2 10.20.0.22"),
        "{out}"
    );
    // The JSON says where each fact came from: the variable or the expression.
    let o = bin()
        .args(["--repo", &r, "envs", "--json"])
        .output()
        .expect("run");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v[0]["endpoint"]["var"], "{{ cluster_vip }}");
    assert_eq!(v[0]["vip"]["var"], "cluster_vip");
    assert_eq!(v[0]["agents"][1]["name"], "w2");

    // An environment's own facts win over the top-level ones, key by key.
    let per_env = CONFIG.replace(
        "    agents: workers\n",
        "    agents: workers\n    facts:\n      api_port: \"{{ 7443 }}\"\n",
    );
    std::fs::write(root.join("hk-console.yaml"), per_env).expect("config");
    let o = bin().args(["--repo", &r, "envs"]).output().expect("run");
    let (out, err) = text(&o);
    assert!(out.contains("port 7443"), "{out}\n{err}");
    assert!(out.contains("VIP          10.20.0.100"), "{out}");
}

#[test]
fn without_a_mapping_the_seeds_names_are_looked_for_and_each_unknown_fact_is_named() {
    let tmp = tempfile::tempdir().expect("tmp");
    let config = "ansible_dir: ansible\ninventory: ansible/inventory.yml\nenvironments:\n  lab:\n    servers: control_plane\n";
    let root = any_layout_repo(tmp.path(), config);
    let r = root.display().to_string();
    let o = bin().args(["--repo", &r, "envs"]).output().expect("run");
    let (out, err) = text(&o);
    // The seed's names are the mapping's defaults: a repo that neither defines nor uses
    // them has no counterpart, which is no problem (exit 0); each is named, unmapped.
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let unmapped = out
        .lines()
        .find(|l| l.trim_start().starts_with("unmapped"))
        .unwrap_or_else(|| panic!("no unmapped line\n{out}"));
    for var in [
        "kube_vip_address",
        "k3s_apiserver_endpoint",
        "k3s_api_host",
        "k3s_api_port",
        "cluster_kubeconfig_name",
        "k3s_primary_group",
    ] {
        assert!(unmapped.contains(var), "{var}\n{out}");
        assert!(
            !out.contains(&format!("no server defines `{var}`")),
            "{var}\n{out}"
        );
    }

    // A seed name the repo uses but no server defines is a problem again (exit 1).
    std::fs::create_dir_all(root.join("ansible/roles/vip/templates")).expect("mkdir");
    std::fs::write(
        root.join("ansible/roles/vip/templates/vip.yaml.j2"),
        "address: {{ kube_vip_address }}\n",
    )
    .expect("template");
    let o = bin().args(["--repo", &r, "envs"]).output().expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        out.contains("problem      no server defines `kube_vip_address`"),
        "{out}"
    );
}

#[test]
fn a_mapping_that_cannot_be_read_is_refused_at_its_line_and_one_that_does_not_render_is_named() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = any_layout_repo(
        tmp.path(),
        &CONFIG.replace("vip: cluster_vip", "vip: cluster vip"),
    );
    let r = root.display().to_string();
    let o = bin().args(["--repo", &r, "envs"]).output().expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(err.contains("hk-console.yaml:4:"), "{err}");
    assert!(
        err.contains("facts.vip: `cluster vip` is neither a variable name nor a Jinja expression"),
        "{err}"
    );

    std::fs::write(
        root.join("hk-console.yaml"),
        CONFIG.replace("\"{{ cluster_vip }}\"", "\"{{ cluster_vip_typo }}\""),
    )
    .expect("config");
    let o = bin().args(["--repo", &r, "envs"]).output().expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(out.contains("endpoint (unknown)"), "{out}");
    assert!(
        out.contains("problem      `{{ cluster_vip_typo }}` cannot be rendered for cp1"),
        "{out}"
    );

    std::fs::write(
        root.join("hk-console.yaml"),
        CONFIG.replace("agents: workers", "agents: nodes"),
    )
    .expect("config");
    let o = bin().args(["--repo", &r, "envs"]).output().expect("run");
    let (out, _) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("problem      agents group `nodes` is not in the inventory"),
        "{out}"
    );
}

const AGENTS_RUNBOOK: &str = "\
id: agents-uptime
title: Uptime of every agent node
read_only: true
environments: [lab]
target:
  group: agents
steps:
  - id: uptime
    kind: ssh
    title: \"uptime on {{ host }}\"
    command: uptime
    mutates: false
";

#[test]
fn a_runbook_can_target_the_agents_and_says_so_when_there_are_none() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = any_layout_repo(tmp.path(), CONFIG);
    let books = tmp.path().join("runbooks");
    std::fs::create_dir_all(&books).expect("mkdir");
    std::fs::write(books.join("agents-uptime.yaml"), AGENTS_RUNBOOK).expect("runbook");
    let (r, b) = (root.display().to_string(), books.display().to_string());
    let o = bin()
        .args([
            "--repo",
            &r,
            "--runbooks",
            &b,
            "plan",
            "agents-uptime",
            "--env",
            "lab",
        ])
        .output()
        .expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("uptime on w1"), "{out}");
    assert!(out.contains("uptime on w2"), "{out}");
    assert!(!out.contains("uptime on cp1"), "{out}");

    std::fs::write(
        root.join("hk-console.yaml"),
        CONFIG.replace("    agents: workers\n", ""),
    )
    .expect("config");
    let o = bin()
        .args([
            "--repo",
            &r,
            "--runbooks",
            &b,
            "plan",
            "agents-uptime",
            "--env",
            "lab",
        ])
        .output()
        .expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(
        err.contains("environment `lab` has no `agents` group"),
        "{err}"
    );
}

/// What a real repo of this layout has besides its inventory: an ansible.cfg naming it, a
/// playbook whose role's template puts the VIP in the API certificate, and no hk-console.yaml
/// and no Flux tree. A second address no node has (`upstream_dns`) makes the VIP a choice
/// only the template's `--tls-san` settles.
pub fn unconfigured_repo(dir: &Path) -> PathBuf {
    let root = dir.join("homelab");
    let a = root.join("ansible");
    std::fs::create_dir_all(a.join("roles/k3s_server/templates")).expect("mkdir");
    std::fs::create_dir_all(a.join("roles/k3s_server/tasks")).expect("mkdir");
    std::fs::write(
        a.join("inventory.yml"),
        INVENTORY.replace(
            "    cluster_vip: 10.20.0.100\n",
            "    cluster_vip: 10.20.0.100\n    upstream_dns: 10.20.0.1\n",
        ),
    )
    .expect("inventory");
    std::fs::write(
        a.join("ansible.cfg"),
        "[defaults]\ninventory = inventory.yml\nhost_key_checking = True\n",
    )
    .expect("cfg");
    std::fs::write(
        a.join("site.yml"),
        "- name: servers\n  hosts: control_plane\n  become: true\n  roles:\n    - k3s_server\n",
    )
    .expect("playbook");
    std::fs::write(
        a.join("roles/k3s_server/tasks/main.yml"),
        "- name: k3s unit\n  ansible.builtin.template:\n    src: k3s.service.j2\n    dest: /etc/systemd/system/k3s.service\n    mode: \"0644\"\n",
    )
    .expect("tasks");
    std::fs::write(
        a.join("roles/k3s_server/templates/k3s.service.j2"),
        "[Service]\nExecStart=/usr/local/bin/k3s server \\\n    --tls-san {{ cluster_vip }} \\\n    --resolv-conf /etc/k3s-resolv.conf\n# nameserver {{ upstream_dns }}\n",
    )
    .expect("template");
    root
}

#[test]
fn init_on_an_unfamiliar_repo_proposes_facts_and_agents_and_the_repo_then_checks_and_plans() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = unconfigured_repo(tmp.path());
    let r = root.display().to_string();
    let o = bin().args(["--repo", &r, "init"]).output().expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    for line in [
        "# NOTE: inventory: ansible/inventory.yml as ansible/ansible.cfg:2 `inventory =` names it",
        "    servers: control_plane\n",
        "    agents: workers\n",
        "used as `--tls-san` at ansible/roles/k3s_server/templates/k3s.service.j2:3",
        "      vip: cluster_vip\n",
        "      endpoint: cluster_vip\n",
        "      founder: first_server_ip\n",
        "      primary_group: primary_group_name\n",
        "      api_port: \"{{ 6443 }}\"\n",
        "# QUESTION: environments.lab.facts.kubeconfig:",
        "no clusters/ directory: no Flux overlay",
    ] {
        assert!(out.contains(line), "{line}\n{out}");
    }
    // Nothing asked about Flux, nor `inventory:` written over what ansible.cfg says.
    assert!(!out.contains("flux_overlay:"), "{out}");
    assert!(!out.contains("\ninventory:"), "{out}");
    assert!(!out.contains("upstream_dns"), "{out}");

    // --write writes it and checks it: the Flux rules are named not applicable (no
    // clusters/), none of them fails; the seed-layout rules still report what they miss.
    let o = bin()
        .args(["--repo", &r, "init", "--write"])
        .output()
        .expect("run");
    let (out, err) = text(&o);
    assert!(root.join("hk-console.yaml").is_file(), "{err}");
    assert!(
        out.contains("lab: not applicable: overlay-resolves, overlay-equals-endpoint, overlay-equals-vip, overlay-not-node-ip, helmrelease-consumes-overlay-var, helmrelease-port-equals-api-port (no clusters/ directory"),
        "{out}\n{err}"
    );
    assert!(!out.contains("[overlay-resolves]"), "{out}");
    assert!(!out.contains("[env-facts]"), "{out}");
    let o = bin().args(["--repo", &r, "check"]).output().expect("run");
    let (check_out, err) = text(&o);
    assert_eq!(
        check_out, out,
        "check after init --write says the same\n{err}"
    );
    // The seed-layout rules this repo has no counterpart of (no playbooks/site.yml, no
    // Cilium values template, no k3s_tls_sans) were switched off by init in `contract:`,
    // with the evidence; check names them not applicable, and the rest is clean.
    for line in [
        "not applicable: site-order (no site playbook importing k3s, kube-vip and cilium: `contract.site_playbook: false` in hk-console.yaml)",
        "not applicable: cilium-consumes-endpoint (no Cilium values template: `contract.cni_values_template: false` in hk-console.yaml)",
        "not applicable: tls-sans (no k3s_tls_sans list on the servers: `contract.tls_sans: false` in hk-console.yaml)",
    ] {
        assert!(check_out.contains(line), "{line}\n{check_out}");
    }
    assert_eq!(o.status.code(), Some(0), "{check_out}\n{err}");
    let written = std::fs::read_to_string(root.join("hk-console.yaml")).expect("written");
    assert!(
        written.contains("contract:\n  # site_playbook: no playbooks/site.yml under ansible:"),
        "{written}"
    );

    // envs knows every fact from the proposal alone.
    let o = bin().args(["--repo", &r, "envs"]).output().expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(!out.contains("(unknown)"), "{out}");
    assert!(
        out.contains(
            "VIP          10.20.0.100   endpoint 10.20.0.100   founder 10.20.0.11   port 6443"
        ),
        "{out}"
    );
    assert!(out.contains("primary      lab_primary"), "{out}");
    assert!(
        out.contains("agents       workers (2): w1 10.20.0.21, w2 10.20.0.22"),
        "{out}"
    );
    assert!(
        out.contains("(from ") && out.contains("ansible/ansible.cfg:2 `inventory =`)"),
        "{out}"
    );

    // A runbook scaffolded from the repo's own playbook plans against the proposal.
    std::fs::create_dir_all(root.join("runbooks")).expect("mkdir");
    let o = bin()
        .args([
            "--repo",
            &r,
            "runbooks",
            "new",
            "--playbook",
            "site.yml",
            "--id",
            "site",
            "--out",
            &root.join("runbooks/site.yaml").display().to_string(),
        ])
        .output()
        .expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let o = bin()
        .args(["--repo", &r, "plan", "site", "--env", "lab"])
        .output()
        .expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    // One server at a time over the servers init found, with ansible.cfg's inventory.
    for (i, host) in ["cp1", "cp2", "cp3"].iter().enumerate() {
        assert!(
            out.contains(&format!(
                "$ ansible-playbook -i inventory.yml site.yml --limit {host}\n"
            )),
            "{i} {host}\n{out}"
        );
    }
    // A health gate between servers, declared by the scaffold (lab is not protected), and
    // etcd's snapshot before the first server, etcd's leadership moved off each server
    // first (its look and its move, issue 39).
    assert!(out.contains("site for lab: 22 steps, MUTATING"), "{out}");
    assert!(
        out.contains("expect: etcd-snapshot changed=cp1,cp2,cp3\n"),
        "{out}"
    );
    assert!(
        out.contains("expect: etcd-leader-away cp1 later=cp2,cp3\n"),
        "{out}"
    );
    assert!(
        out.contains("expect: health-between-hosts cp1 cp2 "),
        "{out}"
    );
    assert!(!out.contains("--limit w1"), "{out}");

    // A playbook on the agents group scaffolds a runbook on role `agents`: its hosts come
    // from whatever `agents:` names in the environment planned, one at a time.
    std::fs::write(
        root.join("ansible/workers.yml"),
        "- hosts: workers\n  tasks:\n    - ansible.builtin.ping:\n",
    )
    .expect("playbook");
    let o = bin()
        .args([
            "--repo",
            &r,
            "runbooks",
            "new",
            "--playbook",
            "workers.yml",
            "--id",
            "workers",
            "--out",
            &root.join("runbooks/workers.yaml").display().to_string(),
        ])
        .output()
        .expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let rb = std::fs::read_to_string(root.join("runbooks/workers.yaml")).expect("written");
    assert!(rb.contains("group: \"agents\""), "{rb}");
    let o = bin()
        .args(["--repo", &r, "plan", "workers", "--env", "lab"])
        .output()
        .expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    for host in ["w1", "w2"] {
        assert!(
            out.contains(&format!(
                "$ ansible-playbook -i inventory.yml workers.yml --limit {host}\n"
            )),
            "{host}\n{out}"
        );
    }
    assert!(!out.contains("--limit cp1"), "{out}");
}

#[test]
fn init_asks_which_variable_is_the_vip_when_no_template_settles_it() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = unconfigured_repo(tmp.path());
    // Without the template two variables render to an address no node has: a question,
    // and no `vip:` guessed.
    std::fs::remove_file(root.join("ansible/roles/k3s_server/templates/k3s.service.j2"))
        .expect("rm");
    let r = root.display().to_string();
    let o = bin().args(["--repo", &r, "init"]).output().expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(
        out.contains("# QUESTION: environments.lab.facts.vip: several variables could be the VIP: cluster_vip (10.20.0.100, no node's address, shared by every server, ansible/inventory.yml:3:5) | upstream_dns (10.20.0.1, no node's address, shared by every server, ansible/inventory.yml:4:5): which one?"),
        "{out}"
    );
    assert!(!out.contains("      vip:"), "{out}");
    assert!(!out.contains("      endpoint:"), "{out}");
    // The VIP, the kubeconfig name and the port (k3s's default, which the demo cannot rewrite).
    assert!(err.contains("3 question(s)"), "{err}");
    assert!(
        out.contains("# QUESTION: environments.lab.facts.api_port: no variable holds the API port; k3s's default 6443 is written, but `demo --repo` rewrites a variable"),
        "{out}"
    );
    // The proposal tells the operator what to write.
    assert!(
        out.contains("README: \"Another k3s Ansible layout\""),
        "{out}"
    );
}

const SERVERS_UPTIME: &str = "\
id: servers-uptime
title: Uptime of every server
read_only: true
environments: [lab]
target:
  group: servers
steps:
  - id: uptime
    kind: ssh
    title: \"uptime on {{ host }}\"
    command: uptime
    mutates: false
";

#[test]
fn a_repo_init_configured_is_rehearsed_by_the_demo_when_its_port_is_a_variable() {
    rehearse_init_configured(false);
}

/// The same with the inventory a directory (`inventory = inventory/` in ansible.cfg): the
/// demo's connection variables go where Ansible loads them for that source, the
/// directory's own `host_vars/`.
#[test]
fn a_repo_whose_inventory_is_a_directory_is_rehearsed_by_the_demo() {
    rehearse_init_configured(true);
}

fn rehearse_init_configured(inventory_dir: bool) {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = unconfigured_repo(tmp.path());
    let mut inv = root.join("ansible/inventory.yml");
    if inventory_dir {
        let dir = root.join("ansible/inventory");
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::rename(&inv, dir.join("hosts.yml")).expect("move");
        inv = dir.join("hosts.yml");
        let cfg = root.join("ansible/ansible.cfg");
        let text = std::fs::read_to_string(&cfg).expect("read");
        std::fs::write(
            &cfg,
            text.replace("inventory = inventory.yml", "inventory = inventory/"),
        )
        .expect("write");
    }
    let text = std::fs::read_to_string(&inv).expect("read");
    std::fs::write(
        &inv,
        text.replace(
            "    cluster_name: lab\n",
            "    cluster_name: lab\n    apiserver_port: 6443\n",
        ),
    )
    .expect("write");
    std::fs::create_dir_all(root.join("runbooks")).expect("mkdir");
    std::fs::write(root.join("runbooks/servers-uptime.yaml"), SERVERS_UPTIME).expect("rb");
    let r = root.display().to_string();
    let o = bin()
        .args(["--repo", &r, "init", "--write"])
        .output()
        .expect("run");
    let (out, err) = text_of(&o);
    let cfg = std::fs::read_to_string(root.join("hk-console.yaml")).expect("written");
    assert!(
        cfg.contains("      api_port: apiserver_port\n"),
        "{cfg}\n{out}\n{err}"
    );
    let at = if inventory_dir {
        "ansible/inventory/hosts.yml:6:5"
    } else {
        "ansible/inventory.yml:6:5"
    };
    assert!(
        cfg.contains(&format!(
            "# api_port: the API port: apiserver_port (6443, {at})"
        )),
        "{cfg}"
    );
    // The demo moves this repo onto loopback (rewriting apiserver_port and the connection
    // variables in a copy) and runs a read-only runbook over its servers.
    let o = bin()
        .args([
            "demo",
            "--repo",
            &r,
            "--headless",
            "--run",
            "servers-uptime",
        ])
        .output()
        .expect("run");
    let (out, err) = text_of(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(
        format!("{out}{err}").contains("run servers-uptime · lab · succeeded"),
        "{out}\n{err}"
    );
}

/// `CONFIG` with the seed-layout rules this repo has no counterpart of switched off.
fn config_with(contract: &str) -> String {
    format!("{CONFIG}contract:\n{contract}")
}

const KUBECONFIG_TEMPLATE: &str = "\
apiVersion: v1
kind: Config
clusters:
  - name: lab
    cluster:
      # server: https://{{ first_server_ip }}:6443 was the old way
      server: https://{{ ADDRESS }}:6443
contexts: []
";

#[test]
fn check_judges_api_addresses_by_use_in_the_repos_own_names() {
    let tmp = tempfile::tempdir().expect("tmp");
    let off = "  site_playbook: false\n  cni_values_template: false\n  tls_sans: false\n";
    let root = any_layout_repo(tmp.path(), &config_with(off));
    let r = root.display().to_string();
    let ansible = root.join("ansible");
    let kubeconfig = ansible.join("roles/kubeconfig/templates/admin.yaml.j2");
    let join = ansible.join("roles/k3s/tasks/main.yml");
    std::fs::create_dir_all(kubeconfig.parent().expect("dir")).expect("mkdir");
    std::fs::create_dir_all(join.parent().expect("dir")).expect("mkdir");
    std::fs::write(
        &join,
        "- name: join\n  ansible.builtin.command: k3s server --server https://{{ first_server_ip }}:6443\n",
    )
    .expect("write");
    let check = || {
        let o = bin().args(["--repo", &r, "check"]).output().expect("run");
        let (out, err) = text(&o);
        (o.status.code(), format!("{out}{err}"))
    };

    // A kubeconfig the repo writes dials the founder's own address: a steady-state client
    // of one node, a violation naming the variable, the node and the line; the join through
    // the same variable is a warning.
    std::fs::write(
        &kubeconfig,
        KUBECONFIG_TEMPLATE.replace("ADDRESS", "first_server_ip"),
    )
    .expect("write");
    let (code, out) = check();
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("ansible/roles/kubeconfig/templates/admin.yaml.j2:7: [ha-endpoint] lab: first_server_ip renders to 10.20.0.11, the own address of cp1: a steady-state client dials it (a kubeconfig the repo writes): it loses the API while cp1 is down"),
        "{out}"
    );
    assert!(
        out.contains("ansible/roles/k3s/tasks/main.yml:2: [ha-endpoint] warning: lab: first_server_ip renders to 10.20.0.11, the own address of cp1: only joins use it: no node can join while cp1 is down"),
        "{out}"
    );
    // The commented-out line is not a use.
    assert!(!out.contains("admin.yaml.j2:6"), "{out}");

    // Through the VIP: the kubeconfig is HA; the join warning stays.
    std::fs::write(
        &kubeconfig,
        KUBECONFIG_TEMPLATE.replace("ADDRESS", "cluster_vip"),
    )
    .expect("write");
    let (code, out) = check();
    assert_eq!(code, Some(0), "{out}");
    assert!(!out.contains("admin.yaml.j2"), "{out}");
    assert!(out.contains("parity: clean (1 warning)"), "{out}");
    // --json says the same, with the rules it did not judge and why.
    let o = bin()
        .args(["--repo", &r, "check", "--json"])
        .output()
        .expect("run");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(o.status.code(), Some(0), "{v}");
    assert_eq!(v["warnings"], 1, "{v}");
    let skipped: Vec<&str> = v["not_applicable"]
        .as_array()
        .expect("not_applicable")
        .iter()
        .filter_map(|l| l.as_str())
        .collect();
    assert_eq!(skipped.len(), 4, "{v}");
    assert!(
        skipped[0].starts_with("lab: not applicable: overlay-resolves"),
        "{v}"
    );
    assert!(
        skipped[3].starts_with("not applicable: tls-sans (no k3s_tls_sans list"),
        "{v}"
    );

    // An environment whose endpoint and VIP both name a server: the CNI's endpoint is one
    // node's, and the three-server cluster has no HA endpoint at all.
    let single = config_with(off)
        .replace("  vip: cluster_vip\n", "  vip: first_server_ip\n")
        .replace(
            "  endpoint: \"{{ cluster_vip }}\"\n",
            "  endpoint: first_server_ip\n",
        );
    std::fs::write(root.join("hk-console.yaml"), single).expect("config");
    let (code, out) = check();
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("[ha-endpoint] lab: first_server_ip (the API endpoint the CNI dials) renders to 10.20.0.11, the own address of cp1"),
        "{out}"
    );
    assert!(
        out.contains("[ha-endpoint] lab: an HA cluster (3 servers) with no HA endpoint: first_server_ip is `10.20.0.11` and first_server_ip is `10.20.0.11`"),
        "{out}"
    );

    // The k3s supervisor's load balancer on every node (127.0.0.1) is an HA endpoint: no
    // single-node finding, and it need not be derived from the VIP.
    let local = config_with(off).replace(
        "  endpoint: \"{{ cluster_vip }}\"\n",
        "  endpoint: \"{{ '127.0.0.1' }}\"\n",
    );
    std::fs::write(root.join("hk-console.yaml"), local).expect("config");
    let (code, out) = check();
    assert_eq!(code, Some(0), "{out}");
    assert!(!out.contains("endpoint-derived-from-vip"), "{out}");
    assert!(!out.contains("(the API endpoint the CNI dials)"), "{out}");
}

#[test]
fn the_contract_reads_the_repos_own_template_and_variables_where_config_says() {
    let tmp = tempfile::tempdir().expect("tmp");
    let contract = "  site_playbook: false\n  cni_values_template: roles/cni/templates/values.yaml.j2\n  tls_sans: api_sans\n";
    let root = any_layout_repo(tmp.path(), &config_with(contract));
    let r = root.display().to_string();
    let template = root.join("ansible/roles/cni/templates/values.yaml.j2");
    std::fs::create_dir_all(template.parent().expect("dir")).expect("mkdir");
    let inventory = root.join("ansible/inventory.yml");
    let with_sans = std::fs::read_to_string(&inventory).expect("read").replace(
        "    cluster_name: lab\n",
        "    cluster_name: lab\n    api_sans: [10.20.0.100, 10.20.0.11]\n",
    );
    std::fs::write(&inventory, with_sans).expect("write");
    let check = || {
        let o = bin().args(["--repo", &r, "check"]).output().expect("run");
        let (out, err) = text(&o);
        (o.status.code(), format!("{out}{err}"))
    };
    // The template consumes what `facts:` names the endpoint and the port: clean.
    std::fs::write(
        &template,
        "k8sServiceHost: \"{{ cluster_vip }}\"\nk8sServicePort: \"{{ apiserver_port | default(6443) }}\"\n",
    )
    .expect("write");
    let (code, out) = check();
    assert_eq!(code, Some(0), "{out}");
    assert!(!out.contains("cilium-consumes"), "{out}");
    assert!(!out.contains("tls-sans"), "{out}");
    // It consumes the founder's variable instead: named in the repo's own names.
    std::fs::write(
        &template,
        "k8sServiceHost: \"{{ first_server_ip }}\"\nk8sServicePort: \"{{ apiserver_port | default(6443) }}\"\n",
    )
    .expect("write");
    let (code, out) = check();
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("ansible/roles/cni/templates/values.yaml.j2:1: [cilium-consumes-endpoint] k8sServiceHost consumes first_server_ip (the founder's own IP): every cilium-agent would depend on one node; it must consume {{ cluster_vip }}"),
        "{out}"
    );
    // The SANs list it names lacks nothing; drop the VIP and it is named by its own name.
    let without_vip = std::fs::read_to_string(&inventory).expect("read").replace(
        "api_sans: [10.20.0.100, 10.20.0.11]",
        "api_sans: [10.20.0.11]",
    );
    std::fs::write(&inventory, without_vip).expect("write");
    let (_, out) = check();
    assert!(
        out.contains("[tls-sans] lab: api_sans [\"10.20.0.11\"] lacks the VIP 10.20.0.100"),
        "{out}"
    );
    // A contract key that cannot be a place is refused at its line.
    std::fs::write(
        root.join("hk-console.yaml"),
        config_with("  tls_sans: \"not a var\"\n"),
    )
    .expect("config");
    let (code, out) = check();
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains("hk-console.yaml:15:13:")
            && out.contains("contract.tls_sans: `not a var` is not a variable name"),
        "{out}"
    );
}

/// The sample repo with its Flux overlays carrying the API address in `API_VIP` instead of
/// `K3S_API_HOST`, and `names` (a YAML mapping body, or "") as hk-console.yaml's `names:`;
/// prod names its own Lease.
fn renamed_sample(dir: &Path, names: &str) -> PathBuf {
    let root = dir.join("homelab");
    hk_console::sim::demo_repo::write_sample(&root).expect("sample");
    for sub in ["clusters", "platform"] {
        let mut stack = vec![root.join(sub)];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).expect("read dir").flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    let text = std::fs::read_to_string(&p).expect("read");
                    std::fs::write(&p, text.replace("K3S_API_HOST", "API_VIP")).expect("write");
                }
            }
        }
    }
    let cfg_path = root.join("hk-console.yaml");
    let cfg = std::fs::read_to_string(&cfg_path).expect("config");
    let vault = "    vault: infra/ansible/inventory/group_vars/k3s_prod/vault.yml\n";
    assert!(cfg.contains(vault), "{cfg}");
    let cfg = cfg.replace(
        vault,
        &format!("{vault}    names: {{kube_vip_lease: prod-cp-lock}}\n"),
    );
    std::fs::write(&cfg_path, format!("{cfg}{names}")).expect("config");
    root
}

const NAMES: &str = "\
names:
  kube_vip_lease: my-cp-lock
  flux_api_host_var: API_VIP
  vpn_unit: my-tunnel.service
  vpn_interface: wg-egress
  vpn_exit_ip_url: https://ip.example.net/plain
";

/// Issue 28: the names the panes and checks look for come from hk-console.yaml `names:`
/// (the environment's over the top level's). `check` reads the overlay's `API_VIP`, and the
/// demo of the repo (its simulated kube-vip and gateways taking the same names) shows the
/// Lease and the unit the config names, never the seed's.
#[test]
fn hk_console_yaml_names_the_lease_the_vpn_unit_and_the_flux_variable() {
    let tmp = tempfile::tempdir().expect("tmp");
    // Without `names:` the seed's variable is looked for, and the overlays lack it.
    let root = renamed_sample(tmp.path(), "");
    let r = root.display().to_string();
    let o = bin().args(["--repo", &r, "check"]).output().expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        out.contains("[overlay-resolves] prod: K3S_API_HOST is not set"),
        "{out}"
    );

    std::fs::write(
        root.join("hk-console.yaml"),
        std::fs::read_to_string(root.join("hk-console.yaml")).expect("cfg") + NAMES,
    )
    .expect("config");
    let o = bin().args(["--repo", &r, "check"]).output().expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("parity: clean"), "{out}");
    assert!(!out.contains("K3S_API_HOST"), "{out}");

    let o = bin().args(["--repo", &r, "envs"]).output().expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(
        out.contains("  names        kube_vip_lease prod-cp-lock   vpn_unit my-tunnel.service   vpn_interface wg-egress   vpn_exit_ip_url https://ip.example.net/plain   flux_api_host_var API_VIP\n"),
        "{out}"
    );
    let o = bin()
        .args(["--repo", &r, "envs", "--json"])
        .output()
        .expect("run");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v[0]["name"], "dev");
    assert_eq!(v[0]["names"]["kube_vip_lease"], "my-cp-lock");
    assert_eq!(v[1]["names"]["kube_vip_lease"], "prod-cp-lock");
    assert_eq!(v[1]["names"]["flux_api_host_var"], "API_VIP");

    // The simulation holds and runs what the console looks for.
    let o = bin()
        .args(["demo", "--repo", &r, "--once"])
        .output()
        .expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    for needle in [
        "ok       lease my-cp-lock: lease my-cp-lock held by k3s-dev-1",
        "ok       lease prod-cp-lock: lease prod-cp-lock held by k3s-prod-1",
        "ok       k3s-dev-3: my-tunnel.service is active on k3s-dev-3",
        "ok       k3s-prod-3: my-tunnel.service is active on k3s-prod-3",
        "k3s-dev-3 exits through wg-egress from",
    ] {
        assert!(out.contains(needle), "{needle}:\n{out}\n{err}");
    }
    for seed in ["plndr-cp-lock", "vpn-egress-tunnel", "tun0"] {
        assert!(!out.contains(seed), "{seed}:\n{out}");
    }

    // The shipped runbooks name the same objects (env.kube_vip_lease, env.vpn_unit, ...).
    let o = bin()
        .args([
            "--repo",
            &r,
            "plan",
            "cilium-endpoint-rollout",
            "--env",
            "prod",
        ])
        .output()
        .expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("lease-held kube-system/prod-cp-lock"), "{out}");
    assert!(!out.contains("plndr-cp-lock"), "{out}");
    let o = bin()
        .args(["--repo", &r, "plan", "vpn-egress-verify", "--env", "dev"])
        .output()
        .expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    for needle in [
        "systemctl is-active my-tunnel.service",
        "--interface wg-egress https://ip.example.net/plain",
    ] {
        assert!(out.contains(needle), "{needle}:\n{out}");
    }
    for seed in ["vpn-egress-tunnel", "tun0", "ipinfo.io"] {
        assert!(!out.contains(seed), "{seed}:\n{out}");
    }
    // And run there: the simulated gateways answer the renamed unit, interface and URL.
    let o = bin()
        .args([
            "demo",
            "--repo",
            &r,
            "--headless",
            "--run",
            "vpn-egress-verify",
            "--env",
            "dev",
        ])
        .output()
        .expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(
        format!("{out}{err}").contains("run vpn-egress-verify · dev · succeeded"),
        "{out}\n{err}"
    );

    // A bad name is a config error naming the file, the key and the environment.
    let cfg = std::fs::read_to_string(root.join("hk-console.yaml")).expect("cfg");
    std::fs::write(
        root.join("hk-console.yaml"),
        cfg.replace(
            "{kube_vip_lease: prod-cp-lock}",
            "{flux_api_host_var: API-VIP}",
        ),
    )
    .expect("config");
    for args in [vec!["check"], vec!["envs"]] {
        let o = bin()
            .args(["--repo", &r])
            .args(&args)
            .output()
            .expect("run");
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {out}\n{err}");
        assert!(
            err.contains("hk-console.yaml:")
                && err.contains("environments.prod.names.flux_api_host_var (environment `prod`): `API-VIP` is not a Flux variable name"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// Gateways of one environment that name different units: `env.vpn_unit` is not known,
/// and a runbook that needs it fails to plan saying which gateway says what.
#[test]
fn gateways_that_disagree_on_a_name_fail_the_plan_saying_who_says_what() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("homelab");
    hk_console::sim::demo_repo::write_sample(&root).expect("sample");
    let inv = root.join("infra/ansible/inventory/hosts.ini");
    let text = std::fs::read_to_string(&inv).expect("read");
    std::fs::write(
        &inv,
        text.replace(
            "[vpn_egress_gateway]\nk3s-dev-3\n",
            "[vpn_egress_gateway]\nk3s-dev-3\nk3s-dev-2\n",
        ),
    )
    .expect("write");
    let hv = root.join("infra/ansible/inventory/host_vars");
    std::fs::create_dir_all(&hv).expect("mkdir");
    std::fs::write(
        hv.join("k3s-dev-2.yml"),
        "vpn_egress_gateway_service: other-tunnel.service\n",
    )
    .expect("write");
    let r = root.display().to_string();
    let o = bin()
        .args(["--repo", &r, "plan", "vpn-egress-verify", "--env", "dev"])
        .output()
        .expect("run");
    let (out, err) = text_of(&o);
    assert_ne!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(
        err.contains("`env.vpn_unit` is not known for environment `dev`: the gateways disagree: k3s-dev-2 say `other-tunnel.service`; k3s-dev-3 say `vpn-egress-tunnel.service`"),
        "{out}\n{err}"
    );
    // A runbook that does not name the unit still plans.
    let o = bin()
        .args(["--repo", &r, "plan", "node-health", "--env", "dev"])
        .output()
        .expect("run");
    let (out, err) = text_of(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
}
