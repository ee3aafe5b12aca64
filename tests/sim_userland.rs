//! A simulated node's real userland (issue 37): the node's commands run the machine's own
//! programs in a bubblewrap sandbox per node, so real Ansible modules run on it, while its
//! units stay the simulation's. Tried with OpenSSH's `ssh` and the real `ansible-playbook`.

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::process::{Command, Stdio};

use hk_console::sim::node::{Clock, NodeState};
use hk_console::sim::userland::{self, Unavailable};

use crate::support;
use support::sim_nodes::{ansible_inventory, SimNodes};

const T0: u64 = 1_788_000_000_000;

async fn nodes(names: &[&str]) -> SimNodes {
    let sandbox = userland::find_sandbox()
        .await
        .expect("the test command installs bubblewrap; user namespaces are allowed here");
    SimNodes::start_with(
        "hk-userland-",
        names,
        |i| IpAddr::V4(Ipv4Addr::new(127, 0, 9, 11 + i as u8)),
        |name| NodeState::new(name, Clock::fixed(T0)),
        Some(sandbox),
    )
    .await
}

fn ssh(s: &SimNodes, node: usize, command: &str) -> std::process::Output {
    let n = &s.nodes[node];
    Command::new("ssh")
        .args([
            "-F",
            "/dev/null",
            "-o",
            "BatchMode=yes",
            "-o",
            "IdentitiesOnly=yes",
        ])
        .arg("-o")
        .arg(format!("UserKnownHostsFile={}", s.known_hosts.display()))
        .arg("-i")
        .arg(&s.key)
        .arg("-p")
        .arg(n.addr().port().to_string())
        .arg(format!("ops@{}", n.addr().ip()))
        .arg(command)
        .stdin(Stdio::null())
        .output()
        .expect("ssh")
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Each node is its own machine: its hostname, its own writable /etc and /root kept across
/// logins, the host's system read-only, nothing of the operator's files visible; the units
/// answer from the simulation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_is_its_own_machine_and_cannot_touch_the_host() {
    let s = nodes(&["ul-a", "ul-b"]).await;
    let here = std::env::current_dir().expect("cwd");
    let o = tokio::task::block_in_place(|| {
        ssh(
            &s,
            0,
            &format!(
                "hostname; id -u; echo one > /etc/hk-mark; cat /etc/hostname; \
                 touch /usr/hk-x 2>&1 || true; ls {} 2>&1 || true; \
                 python3 -c 'import socket; print(\"py\", socket.gethostname())'",
                here.display()
            ),
        )
    });
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines[0], "ul-a", "{t}");
    assert_eq!(lines[1], "0", "{t}");
    assert_eq!(lines[2], "ul-a", "{t}");
    assert!(t.contains("Read-only file system"), "{t}");
    assert!(
        t.contains("No such file or directory"),
        "the repo is visible in a node: {t}"
    );
    assert!(t.contains("py ul-a"), "{t}");
    // Kept in the node's own root, not on the host, not on the other node.
    let root_a = s.dir.path().join("nodes/ul-a");
    assert_eq!(
        std::fs::read_to_string(root_a.join("etc/hk-mark")).expect("mark"),
        "one\n"
    );
    assert!(!Path::new("/etc/hk-mark").exists());
    assert!(!Path::new("/usr/hk-x").exists());
    let o = tokio::task::block_in_place(|| ssh(&s, 1, "cat /etc/hk-mark; hostname"));
    let t = text(&o);
    assert!(t.contains("No such file"), "{t}");
    assert!(t.contains("ul-b"), "{t}");
    // The next login on ul-a still has it.
    let o = tokio::task::block_in_place(|| ssh(&s, 0, "cat /etc/hk-mark"));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "one\n");
    // Where the simulation writes the node's kernel files, the node can plant nothing.
    let o = tokio::task::block_in_place(|| {
        ssh(
            &s,
            0,
            "ln -s /root /run/hk-sim/kernel/.boot_id.9 2>&1; touch /run/hk-sim/x 2>&1",
        )
    });
    let t = text(&o);
    assert_eq!(t.matches("Read-only file system").count(), 2, "{t}");
    // systemctl is the simulation's: a restart there is a restart the console sees.
    let o = tokio::task::block_in_place(|| {
        ssh(
            &s,
            0,
            "sudo -n systemctl restart k3s && systemctl is-active k3s",
        )
    });
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert_eq!(t.trim(), "active");
    let st = s.nodes[0].state();
    let st = st.lock().expect("lock");
    assert_eq!(st.units["k3s.service"].restarts, 1, "{t}");
    assert!(st.commands.iter().any(|c| c == "systemctl restart k3s"));
}

/// The real Ansible modules run on the simulated nodes: facts, command, file, template,
/// lineinfile, copy, stat, wait_for, assert, systemd (the simulation's unit); in check mode
/// nothing is written and the diff is Ansible's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ansible_modules_run_on_nodes_with_a_real_userland() {
    let s = nodes(&["ul-s1", "ul-s2"]).await;
    let d = s.dir.path();
    std::fs::write(
        d.join("hosts.ini"),
        ansible_inventory(&s.nodes, &s.key, &s.known_hosts),
    )
    .expect("inventory");
    std::fs::write(
        d.join("config.yaml.j2"),
        "# {{ ansible_managed | default('managed') }}\nnode-name: {{ inventory_hostname }}\n\
         tls-san:\n  - {{ ansible_facts.hostname }}\n",
    )
    .expect("template");
    std::fs::write(
        d.join("site.yml"),
        r#"---
- name: A server's config, with real modules
  hosts: sim
  gather_facts: true
  become: true
  tasks:
    - name: The facts are the node's
      ansible.builtin.assert:
        that:
          - ansible_facts.hostname == inventory_hostname
          - ansible_facts.user_id == 'root'
    - name: uname
      ansible.builtin.command: uname -n
      register: un
      changed_when: false
      check_mode: false
    - name: Its own name
      ansible.builtin.assert:
        that: un.stdout == inventory_hostname
    - name: Config directory
      ansible.builtin.file:
        path: /etc/rancher/k3s
        state: directory
        mode: "0755"
    - name: Config
      ansible.builtin.template:
        src: config.yaml.j2
        dest: /etc/rancher/k3s/config.yaml
        mode: "0600"
    - name: The unit's environment
      ansible.builtin.lineinfile:
        path: /etc/default/k3s
        regexp: "^K3S_NODE_NAME="
        line: "K3S_NODE_NAME={{ inventory_hostname }}"
        create: true
        mode: "0644"
    - name: Read back
      ansible.builtin.stat:
        path: /etc/rancher/k3s/config.yaml
      register: st
    - name: Written
      ansible.builtin.assert:
        that: st.stat.exists and st.stat.mode == '0600'
      when: not ansible_check_mode
    - name: Its SSH port answers
      ansible.builtin.wait_for:
        host: "{{ ansible_host }}"
        port: "{{ ansible_port }}"
        timeout: 5
    - name: Restart k3s
      ansible.builtin.systemd:
        name: k3s
        state: restarted
- name: One node only
  hosts: ul-s2
  gather_facts: false
  tasks:
    - name: A file on ul-s2
      ansible.builtin.copy:
        content: "only here\n"
        dest: /root/only-here
"#,
    )
    .expect("playbook");
    let _ = std::fs::create_dir_all(d.join("cp"));
    let run = |extra: &[&str]| {
        let mut cmd = Command::new(support::ansible_bin_dir().join("ansible-playbook"));
        cmd.current_dir(d)
            .args(["-i", "hosts.ini", "site.yml"])
            .args(extra)
            .env("ANSIBLE_HOME", d.join("ansible-home"))
            .env("ANSIBLE_LOCAL_TEMP", d.join("local-tmp"))
            .env("ANSIBLE_SSH_CONTROL_PATH_DIR", d.join("cp"))
            .env("ANSIBLE_HOST_KEY_CHECKING", "True")
            .env("ANSIBLE_RETRY_FILES_ENABLED", "False")
            .env("ANSIBLE_NOCOLOR", "1")
            .stdin(Stdio::null());
        let out = tokio::task::block_in_place(|| cmd.output().expect("ansible-playbook"));
        let t = text(&out);
        (out.status.code(), t)
    };
    let config = |n: &str| d.join("nodes").join(n).join("etc/rancher/k3s/config.yaml");

    // Check mode: Ansible's own diff, nothing written, no unit restarted.
    let (code, t) = run(&["--check", "--diff"]);
    assert_eq!(code, Some(0), "{t}");
    assert!(t.contains("+node-name: ul-s1"), "{t}");
    assert!(
        !config("ul-s1").exists(),
        "check mode wrote the config: {t}"
    );
    for n in &s.nodes {
        assert_eq!(
            n.state().lock().expect("lock").units["k3s.service"].restarts,
            0,
            "{t}"
        );
    }

    // Apply: written in each node's own root, the unit restarted in the simulation.
    let (code, t) = run(&[]);
    assert_eq!(code, Some(0), "{t}");
    for (i, n) in ["ul-s1", "ul-s2"].iter().enumerate() {
        let c = std::fs::read_to_string(config(n)).expect("config written");
        assert!(c.contains(&format!("node-name: {n}\n")), "{c}");
        assert!(c.contains(&format!("  - {n}\n")), "{c}");
        let env = d.join("nodes").join(n).join("etc/default/k3s");
        let env = std::fs::read_to_string(env).expect("environment file");
        assert_eq!(env, format!("K3S_NODE_NAME={n}\n"));
        assert_eq!(
            s.nodes[i].state().lock().expect("lock").units["k3s.service"].restarts,
            1,
            "{t}"
        );
    }
    assert!(d.join("nodes/ul-s2/root/only-here").exists(), "{t}");
    assert!(!d.join("nodes/ul-s1/root/only-here").exists(), "{t}");
    assert!(
        !Path::new("/etc/rancher/k3s/config.yaml").exists(),
        "written on the host"
    );
    let recap = t.split("PLAY RECAP").nth(1).expect("recap");
    assert!(
        recap.contains("ul-s1") && recap.contains("failed=0"),
        "{recap}"
    );
}

/// Where no sandbox can be made, the reason and the fix; never a command run on the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_sandbox_is_a_named_refusal() {
    let empty = tempfile::tempdir().expect("tempdir");
    let e = userland::find_sandbox_in(&empty.path().display().to_string())
        .await
        .expect_err("no bwrap there");
    assert!(matches!(e, Unavailable::NoBwrap { .. }), "{e}");
    assert!(e.to_string().contains("apt-get install bubblewrap"), "{e}");
    // A bwrap that cannot make a user namespace (what bwrap prints where they are off).
    let fake = empty.path().join("bwrap");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n",
    )
    .expect("fake");
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("mode");
    let e = userland::find_sandbox_in(&empty.path().display().to_string())
        .await
        .expect_err("no namespaces");
    assert!(matches!(e, Unavailable::NoNamespaces { .. }), "{e}");
    assert!(
        e.to_string().contains("non-privileged user namespaces"),
        "{e}"
    );
}

/// A public repo's own rolling playbook, unedited (canhbk--k3s-ansible's reboot.yml, its
/// agents' play: gather_facts, `ansible.builtin.reboot`, serial 1): Gathering Facts on each
/// node, the real reboot module finding `shutdown` where it looks on a Debian host, each
/// node going down (SSH refused, k3s stopped) and back with a new boot id, one node at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_repos_reboot_playbook_reboots_one_node_at_a_time() {
    let s = nodes(&["ag-1", "ag-2", "sv-1"]).await;
    let d = s.dir.path();
    let repo = d.join("repo");
    crate::demo_common::copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/public-repos/canhbk--k3s-ansible"),
        &repo,
    );
    let inv = ansible_inventory(&s.nodes, &s.key, &s.known_hosts)
        .replacen("[sim]\n", "[all_nodes]\n", 1)
        .replace("[sim:vars]", "[all_nodes:vars]")
        + "\n[agent]\nag-1\nag-2\n\n[server]\nsv-1\n";
    std::fs::write(repo.join("hosts.ini"), inv).expect("inventory");
    let boot_ids: Vec<String> = s
        .nodes
        .iter()
        .map(|n| n.state().lock().expect("lock").boot_id())
        .collect();
    let _ = std::fs::create_dir_all(d.join("cp"));
    let mut cmd = Command::new(support::ansible_bin_dir().join("ansible-playbook"));
    cmd.current_dir(&repo)
        .args([
            "-i",
            "hosts.ini",
            "playbooks/reboot.yml",
            "--limit",
            "agent",
        ])
        .env("ANSIBLE_HOME", d.join("ansible-home"))
        .env("ANSIBLE_LOCAL_TEMP", d.join("local-tmp"))
        .env("ANSIBLE_SSH_CONTROL_PATH_DIR", d.join("cp"))
        .env("ANSIBLE_RETRY_FILES_ENABLED", "False")
        .env("ANSIBLE_NOCOLOR", "1")
        .stdin(Stdio::null());
    let started = std::time::Instant::now();
    let out = tokio::task::block_in_place(|| cmd.output().expect("ansible-playbook"));
    let t = text(&out);
    eprintln!("{t}");
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(120),
        "{t}"
    );
    // One node at a time: ag-1's reboot done before ag-2's facts are gathered.
    let at = |needle: &str| t.find(needle).unwrap_or_else(|| panic!("{needle}: {t}"));
    let facts_2 = t
        .match_indices("TASK [Gathering Facts]")
        .nth(1)
        .map(|(i, _)| i)
        .expect("a second batch");
    assert!(at("changed: [ag-1]") < facts_2, "{t}");
    assert!(at("changed: [ag-2]") > facts_2, "{t}");
    for (i, n) in s.nodes.iter().enumerate() {
        let st = n.state();
        let st = st.lock().expect("lock");
        let rebooted = n.name().starts_with("ag-");
        assert_eq!(st.boots, u32::from(rebooted), "{}: {t}", n.name());
        assert_eq!(st.boot_id() != boot_ids[i], rebooted, "{}", n.name());
        assert!(!st.down, "{}", n.name());
        // k3s went down with the node and came back with it.
        let k3s = &st.units["k3s.service"];
        assert_eq!(k3s.state.as_str(), "active", "{}", n.name());
        if rebooted {
            assert!(
                st.journal.iter().any(|e| e.message == "Rebooting."),
                "{}",
                n.name()
            );
        }
    }
}

fn demo(args: &[&str], path: Option<&str>) -> std::process::Output {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hk-console"));
    cmd.arg("demo")
        .args(args)
        .env("XDG_STATE_HOME", tmp.path().join("state"))
        .env("XDG_CONFIG_HOME", tmp.path().join("config"))
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    if let Some(p) = path {
        cmd.env("PATH", p);
    }
    cmd.output().expect("hk-console demo")
}

/// `demo --userland`: a runbook's SSH steps and its check-mode preview run in the nodes'
/// real userland; each server's etcd client certificate is a real file of its own root.
/// (The panes read through it: the unprivileged test below.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_with_a_real_userland_reads_etcd_for_real_and_runs_a_runbook() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("demo");
    let dir_s = dir.display().to_string();
    let o = tokio::task::block_in_place(|| {
        demo(
            &[
                "--userland",
                "--headless",
                "--run",
                "node-health",
                "--env",
                "dev",
                "--dir",
                &dir_s,
            ],
            None,
        )
    });
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("run node-health · dev · succeeded"), "{t}");
    assert!(
        t.contains("each node runs this machine's own programs"),
        "{t}"
    );
    // The servers' etcd client certificates are real files in their own roots.
    let key = dir.join("nodes/k3s-dev-1/var/lib/rancher/k3s/server/tls/etcd/client.key");
    let pem = std::fs::read_to_string(&key).expect("client.key");
    assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"), "{pem}");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&key).expect("meta").permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
}

/// No bubblewrap: `demo --userland` does not start, names the program and how to get it,
/// and exits 2 before it starts anything.
#[test]
fn the_demo_without_a_sandbox_says_why_and_starts_nothing() {
    let o = demo(&["--userland", "--once"], Some("/nonexistent"));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("needs bubblewrap (`bwrap`)"), "{t}");
    assert!(t.contains("apt-get install bubblewrap"), "{t}");
    assert!(!t.contains("SIMULATED homelab"), "{t}");
}

/// The sandbox needs no privilege: as an ordinary user (the suite drops root to `nobody`
/// for this test when it runs as root), `demo --userland` makes every node's root, and the
/// console's probes run there: each server's etcd read by its own real `curl` with the
/// certificates in its k3s data dir (which belong to that user), from the member's TLS
/// listener on its address. The VPN exit is read by real `curl` too, which has no tunnel
/// interface in a sandbox on the host's network: curl's own error, never a pass.
#[test]
fn the_sandbox_works_for_an_unprivileged_user() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let home = tmp.path();
    let root = nix::unistd::Uid::effective().is_root();
    let mut cmd = if root {
        std::os::unix::fs::chown(home, Some(65534), Some(65534)).expect("chown");
        std::fs::set_permissions(home, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("mode");
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(env!("CARGO_BIN_EXE_hk-console"));
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_hk-console"))
    };
    let dir = home.join("demo");
    let o = cmd
        .args(["demo", "--userland", "--once", "--dir"])
        .arg(&dir)
        .env("HOME", home)
        .env("XDG_STATE_HOME", home.join("state"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("hk-console");
    let t = text(&o);
    // Read through the sandboxes as that user: etcd's members answered its real curl. (One
    // environment is enough to prove it; under a loaded machine a look can run past its
    // budget, which `--once` reports as such.)
    assert!(
        ["dev", "prod"]
            .iter()
            .any(|env| t.contains(&format!("k3s-{env}-1 leads (3 of 3 members seen)"))),
        "{t}"
    );
    assert!(t.contains("quorum reads answer"), "{t}");
    assert!(t.contains("curl exited 6"), "{t}");
    assert_ne!(o.status.code(), Some(0), "the VPN exit is not seen: {t}");
    let key = dir.join("nodes/k3s-prod-2/var/lib/rancher/k3s/server/tls/etcd/client.key");
    let meta = std::fs::metadata(&key).unwrap_or_else(|e| panic!("{e}: {t}"));
    let uid = std::os::unix::fs::MetadataExt::uid(&meta);
    assert_eq!(
        uid,
        if root {
            65534
        } else {
            nix::unistd::Uid::effective().as_raw()
        }
    );
    let tls = key.parent().expect("dir");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(tls).expect("meta").permissions(),
    );
    assert_eq!(mode & 0o777, 0o700, "k3s keeps its tls dir to itself");
}

/// The cost of the sandbox, measured (docs/perf.md, "Simulated nodes with a real userland"):
/// one playbook of real modules (facts, file, template, lineinfile, stat, command) on three
/// sandboxed simulated nodes against the same playbook on three loopback OpenSSH sshd nodes
/// running the host's own Python, in the same run, alternated, twice each (the best of each). A sandbox
/// start per command is the only difference the playbook sees; it must stay a small factor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement for docs/perf.md (four playbook runs on six nodes): cargo test --test sim -- --ignored --nocapture a_playbook_on_sandboxed_nodes"]
async fn a_playbook_on_sandboxed_nodes_against_openssh_nodes() {
    let sim = nodes(&["pf-1", "pf-2", "pf-3"]).await;
    let real = tokio::task::block_in_place(support::Cluster::start);
    let d = sim.dir.path();
    std::fs::write(
        d.join("config.yaml.j2"),
        "node-name: {{ inventory_hostname }}\nfacts-host: {{ ansible_facts.hostname }}\n",
    )
    .expect("template");
    let play = d.join("perf.yml");
    std::fs::write(
        &play,
        r#"---
- name: Real modules
  hosts: all
  gather_facts: true
  tasks:
    - name: Work dir
      ansible.builtin.file:
        path: "{{ work }}"
        state: directory
        mode: "0700"
    - name: Config
      ansible.builtin.template:
        src: config.yaml.j2
        dest: "{{ work }}/config.yaml"
        mode: "0600"
    - name: Environment
      ansible.builtin.lineinfile:
        path: "{{ work }}/env"
        regexp: "^NODE="
        line: "NODE={{ inventory_hostname }}"
        create: true
        mode: "0600"
    - name: Read back
      ansible.builtin.stat:
        path: "{{ work }}/config.yaml"
    - name: uname
      ansible.builtin.command: uname -n
      changed_when: false
"#,
    )
    .expect("playbook");
    let sim_inv = d.join("sim.ini");
    std::fs::write(
        &sim_inv,
        ansible_inventory(&sim.nodes, &sim.key, &sim.known_hosts)
            + "ansible_python_interpreter=/usr/bin/python3\nwork=/root/perf\n",
    )
    .expect("inventory");
    let real_inv = real.write_inventory();
    let real_work = real.dir.path().join("work");
    std::fs::write(
        &real_inv,
        std::fs::read_to_string(&real_inv).expect("inventory")
            + &format!(
                "work={}/{{{{ inventory_hostname }}}}\n",
                real_work.display()
            ),
    )
    .expect("inventory");
    let run = |inv: &Path, env: &[(String, String)]| {
        let mut cmd = Command::new(support::ansible_bin_dir().join("ansible-playbook"));
        cmd.current_dir(d)
            .arg("-i")
            .arg(inv)
            .arg(&play)
            .env("ANSIBLE_PIPELINING", "True")
            .env("ANSIBLE_RETRY_FILES_ENABLED", "False")
            .env("ANSIBLE_NOCOLOR", "1")
            .stdin(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let started = std::time::Instant::now();
        let out = tokio::task::block_in_place(|| cmd.output().expect("ansible-playbook"));
        let took = started.elapsed();
        let t = text(&out);
        assert_eq!(out.status.code(), Some(0), "{t}");
        assert!(t.contains("failed=0"), "{t}");
        took
    };
    let sim_env: Vec<(String, String)> = vec![
        (
            "ANSIBLE_HOME".into(),
            d.join("ansible-home").display().to_string(),
        ),
        (
            "ANSIBLE_LOCAL_TEMP".into(),
            d.join("local-tmp").display().to_string(),
        ),
        (
            "ANSIBLE_SSH_CONTROL_PATH_DIR".into(),
            d.join("cp").display().to_string(),
        ),
    ];
    let _ = std::fs::create_dir_all(d.join("cp"));
    let real_env = real.ansible_env();
    let (mut s, mut r) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        s.push(run(&sim_inv, &sim_env));
        r.push(run(&real_inv, &real_env));
    }
    s.sort();
    r.sort();
    let ratio = s[0].as_secs_f64() / r[0].as_secs_f64();
    eprintln!(
        "userland perf: sandboxed sim nodes {s:?} (best {:?}), OpenSSH nodes {r:?} (best {:?}), ratio {ratio:.2}",
        s[0], r[0]
    );
    // Written on each sandboxed node's own root, not on the host.
    assert!(d.join("nodes/pf-2/root/perf/config.yaml").exists());
    assert!(ratio < 4.0, "the sandbox costs {ratio:.2}x an OpenSSH node");
}

/// A node's root is written by its own commands: reopened, a link one of them planted where
/// the simulation writes (its shims' directory) is refused by name, never followed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_planted_in_a_node_root_is_never_followed() {
    let sandbox = userland::find_sandbox().await.expect("sandbox");
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("node");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&outside).expect("outside");
    std::fs::create_dir_all(root.join("usr/local")).expect("root");
    std::os::unix::fs::symlink(&outside, root.join("usr/local/sbin")).expect("link");
    let state = std::sync::Arc::new(std::sync::Mutex::new(NodeState::new(
        "ln-1",
        Clock::fixed(T0),
    )));
    let e = userland::Userland::create(
        sandbox,
        &root,
        "ln-1",
        IpAddr::V4(Ipv4Addr::new(127, 0, 9, 40)),
        state,
    )
    .await
    .err()
    .expect("refused");
    assert!(
        e.to_string()
            .contains("is a symbolic link in the node's root"),
        "{e}"
    );
    assert_eq!(std::fs::read_dir(&outside).expect("outside").count(), 0);
}

/// `--userland` with `--apiserver`: each server's real etcd member is what its real curl
/// asks (the demo's host_vars point the console's probe at the member itself), so the
/// etcd pane is etcd's own answer end to end.
#[test]
fn with_real_etcd_members_a_userland_server_reads_its_own_member() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("demo");
    let bin = support::apiserver::bin_dir();
    let o = demo(
        &[
            "--userland",
            "--apiserver",
            &bin.display().to_string(),
            "--once",
            "--dir",
            &dir.display().to_string(),
        ],
        None,
    );
    let t = text(&o);
    let vars = std::fs::read_to_string(dir.join("infra/ansible/inventory/host_vars/k3s-dev-1.yml"))
        .expect("host_vars");
    let url = vars
        .lines()
        .find_map(|l| l.strip_prefix("etcd_client_url: "))
        .unwrap_or_else(|| panic!("{vars}"));
    assert!(url.starts_with("http://127.0.10.1:"), "{vars}");
    assert!(t.contains("leads (3 of 3 members seen)"), "{t}");
    assert!(t.contains("quorum reads answer"), "{t}");
}

/// Commands that start together on one node while its IO pressure changes each bind the
/// kernel view their start saw. The view was one file renamed over at each command's
/// start: a command starting beside another had its file replaced mid-setup and bwrap
/// failed ("Unable to find /newroot/proc/pressure/io (deleted) in mount table"), which the
/// etcd pre-flight read as a member whose alarms could not be read (CI, 2026-12-07). Here
/// each command is built and started while the one before is still setting up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_started_together_each_read_their_own_kernel_view() {
    let sandbox = userland::find_sandbox()
        .await
        .expect("the test command installs bubblewrap");
    let tmp = tempfile::tempdir().expect("tempdir");
    let state = std::sync::Arc::new(std::sync::Mutex::new(NodeState::new(
        "busy-1",
        Clock::fixed(T0),
    )));
    let u = userland::Userland::create(
        sandbox,
        &tmp.path().join("busy-1"),
        "busy-1",
        IpAddr::V4(Ipv4Addr::new(127, 0, 9, 31)),
        state.clone(),
    )
    .await
    .expect("a node's userland");
    // Beside them, commands are built without end (each build writes the view its start
    // would see), the pressure changing each time: the view's files change under the
    // commands setting up, as a busy node's do.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let (u, state, stop) = (u.clone(), state.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u32;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                state.lock().expect("lock").io_pressure.some_avg10 = f64::from(i % 97);
                drop(u.command(&u.shell_command("true")));
                i += 1;
            }
        })
    };
    let mut children = Vec::new();
    for _ in 0..60 {
        let mut c = u.command(&u.shell_command("cat /proc/pressure/io"));
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        children.push(c.spawn().expect("bwrap"));
    }
    for (i, c) in children.into_iter().enumerate() {
        let o = c.wait_with_output().await.expect("output");
        let t = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(o.status.code(), Some(0), "command {i}: {t}");
        assert!(t.starts_with("some avg10="), "command {i}: {t}");
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    churn.join().expect("churn");
}
