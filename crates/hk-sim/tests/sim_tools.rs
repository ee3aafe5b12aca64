//! An operator's own tools against the simulated nodes (issue 17): OpenSSH's `ssh`
//! (commands, stdin, `-tt` interactive), `scp -O` (the SCP protocol), `scp` (the sftp
//! protocol), `sftp -b`, and `ansible all -m raw -a 'uname -a'`, all over one node's
//! simulated state: what one tool writes, the next one reads. Plus the sweep of every
//! unmodelled construct the issue found: each fails with exit 2 and the simulation's
//! message, none exits 0.
//! Needs openssh-client (ssh, scp, sftp, ssh-keygen) and ansible-core (HK_ANSIBLE_BIN_DIR).

use crate::demo_common;
use crate::support;

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use hk_sim::node::{Clock, NodeState};
use hk_sim::ssh::SimNode;
use support::sim_nodes::{ansible_inventory, SimNodes};

/// 2026-09-12T22:57:05Z.
const T0: u64 = 1_789_253_825_000;

struct Sim {
    dir: tempfile::TempDir,
    nodes: Vec<SimNode>,
    key: PathBuf,
    known_hosts: PathBuf,
}

impl Sim {
    async fn start(names: &[&str], first_octet: u8) -> Sim {
        let s = SimNodes::start(
            "hk-simtools-",
            names,
            |i| IpAddr::V4(Ipv4Addr::new(127, 0, 3, first_octet + i as u8)),
            |name| NodeState::new(name, Clock::fixed(T0)),
        )
        .await;
        Sim {
            dir: s.dir,
            nodes: s.nodes,
            key: s.key,
            known_hosts: s.known_hosts,
        }
    }

    /// The options every OpenSSH tool gets: strict host keys, this key only.
    fn common(&self) -> Vec<String> {
        vec![
            "-F".into(),
            "/dev/null".into(),
            "-o".into(),
            "BatchMode=yes".into(),
            "-o".into(),
            "StrictHostKeyChecking=yes".into(),
            "-o".into(),
            format!("UserKnownHostsFile={}", self.known_hosts.display()),
            "-o".into(),
            "IdentitiesOnly=yes".into(),
            "-o".into(),
            "ConnectTimeout=10".into(),
            "-i".into(),
            self.key.display().to_string(),
        ]
    }

    fn target(&self, k: usize) -> String {
        format!("ops@{}", self.nodes[k].addr().ip())
    }

    fn port(&self, k: usize) -> String {
        self.nodes[k].addr().port().to_string()
    }

    /// `ssh [extra] ops@node CMD` with `stdin` fed.
    fn ssh(&self, k: usize, extra: &[&str], cmd: &str, stdin: &[u8]) -> Output {
        let mut c = Command::new("ssh");
        c.args(self.common())
            .args(["-p", &self.port(k)])
            .args(extra)
            .arg(self.target(k));
        if !cmd.is_empty() {
            c.arg(cmd);
        }
        run_with_stdin(c, stdin)
    }
}

fn run_with_stdin(mut c: Command, stdin: &[u8]) -> Output {
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("spawn (install openssh-client)");
    let mut pipe = child.stdin.take().expect("stdin");
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&data);
    });
    let out = child.wait_with_output().expect("wait");
    let _ = writer.join();
    out
}

fn text(o: &Output) -> (String, String, Option<i32>) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        o.status.code(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssh_is_a_plausible_debian_node() {
    let sim = Sim::start(&["k3s-1"], 11).await;
    let sim = Arc::new(sim);
    let s = sim.clone();
    tokio::task::spawn_blocking(move || {
        let ok = |cmd: &str| -> String {
            let (o, e, code) = text(&s.ssh(0, &[], cmd, b""));
            assert_eq!(code, Some(0), "{cmd}: {o} {e}");
            o
        };
        assert_eq!(
            ok("uname -a"),
            "Linux k3s-1 6.1.0-28-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22) x86_64 GNU/Linux\n"
        );
        assert_eq!(ok("id"), "uid=1000(ops) gid=1000(ops) groups=1000(ops),27(sudo)\n");
        assert_eq!(ok("sudo id -u"), "0\n");
        assert_eq!(ok("pwd"), "/home/ops\n");
        assert_eq!(
            ok("echo $HOME $USER $LOGNAME $SHELL; echo $PATH"),
            "/home/ops ops ops /bin/bash\n/usr/local/bin:/usr/bin:/bin:/usr/games\n"
        );
        assert_eq!(ok("cd /tmp && pwd && cd && pwd"), "/tmp\n/home/ops\n");
        assert_eq!(ok("hostname"), "k3s-1\n");
        assert!(ok("ls /").lines().any(|l| l == "etc"));
        assert!(ok("ps aux").contains("/usr/local/bin/k3s server"));
        let df = ok("df -h /");
        assert!(df.starts_with("Filesystem      Size  Used Avail Use% Mounted on\n/dev/sda2"), "{df}");
        assert!(ok("free -m").starts_with("               total        used"));
        assert_eq!(ok("printf 'a b\\nc\\n' | wc -l"), "2\n");
        assert_eq!(ok("cat /etc/os-release | grep ^ID= | cut -d= -f2"), "debian\n");
        assert_eq!(
            ok("awk -F= '$1 == \"VERSION_CODENAME\" {print $2}' /etc/os-release"),
            "bookworm\n"
        );
        assert!(ok("ip addr").contains("inet 127.0.0.1/8 scope host lo"));
        assert!(ok("ip route").starts_with("default via "));
        assert!(ok("ss -tlnp").contains("*:6443"));
        assert_eq!(ok("findmnt -n -o SOURCE --target /var/lib/rancher"), "/dev/sda2\n");
        assert_eq!(ok("systemctl is-active k3s"), "active\n");
        assert!(ok("uptime").contains("load average"));
        assert_eq!(
            ok("printf 'b\\na\\nb\\n' | sort | uniq -c | tr -s ' ' | sed 's/^ //'"),
            "1 a\n2 b\n"
        );
        assert_eq!(ok("if [ -e /sys/block/sda ]; then echo disk; fi"), "disk\n");
        assert_eq!(ok("[ -b /dev/sda2 ] && [ -d /tmp ] && [ ! -e /nope ] && echo yes"), "yes\n");
        // stdin reaches the command, and what it wrote the next command reads.
        let (o, e, code) = text(&s.ssh(0, &[], "cat > /tmp/in.txt && wc -c < /tmp/in.txt", b"twelve bytes"));
        assert_eq!((o.as_str(), code), ("12\n", Some(0)), "{e}");
        assert_eq!(ok("cat /tmp/in.txt"), "twelve bytes");
        // The worst case: an unmodelled test no longer takes a branch and exits 0.
        let (o, e, code) = text(&s.ssh(0, &[], "if [ -t 0 ]; then echo a; else echo b; fi", b""));
        assert_eq!(code, Some(2), "{o}");
        assert_eq!(e, "hk-console simulation: `test -t 0` is not simulated\n");
        assert!(o.is_empty(), "{o}");
    })
    .await
    .expect("ssh checks");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssh_tt_gives_an_interactive_shell() {
    let sim = Arc::new(Sim::start(&["k3s-2"], 21).await);
    let s = sim.clone();
    let out = tokio::task::spawn_blocking(move || {
        s.ssh(
            0,
            &["-tt"],
            "",
            b"cd /tmp\nX=kept\nif true; then\necho \"$X in $(pwd)\"\nfi\nfalse\nexit 3\n",
        )
    })
    .await
    .expect("ssh -tt");
    let (o, e, code) = text(&out);
    assert_eq!(code, Some(3), "{o} {e}");
    assert!(o.contains("ops@k3s-2:~$ "), "{o}");
    assert!(o.contains("ops@k3s-2:/tmp$ "), "{o}");
    assert!(o.contains("> "), "a continuation prompt: {o}");
    assert!(o.contains("kept in /tmp\r\n"), "{o}");
    assert!(o.contains("logout"), "{o}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scp_both_protocols_and_sftp_reach_the_nodes_files() {
    let sim = Arc::new(Sim::start(&["k3s-3"], 31).await);
    let s = sim.clone();
    tokio::task::spawn_blocking(move || {
        let d = s.dir.path();
        let local = d.join("conf.yaml");
        std::fs::write(&local, "write-kubeconfig-mode: \"0644\"\n").expect("local");
        let scp = |legacy: bool, from: &str, to: &str| -> (String, String, Option<i32>) {
            let mut c = Command::new("scp");
            c.args(s.common()).args(["-P", &s.port(0)]);
            if legacy {
                c.arg("-O");
            }
            c.args([from, to]);
            text(&run_with_stdin(c, b""))
        };
        let remote = |p: &str| format!("{}:{p}", s.target(0));
        // Upload with the SCP protocol; `cat` over ssh shows it; sed changes it.
        let (o, e, code) = scp(true, &local.display().to_string(), &remote("/tmp/legacy.yaml"));
        assert_eq!(code, Some(0), "scp -O upload: {o} {e}");
        let (o, _, _) = text(&s.ssh(0, &[], "cat /tmp/legacy.yaml", b""));
        assert_eq!(o, "write-kubeconfig-mode: \"0644\"\n");
        // Upload with the sftp protocol into the home directory.
        let (o, e, code) = scp(false, &local.display().to_string(), &remote("/home/ops/sftp.yaml"));
        assert_eq!(code, Some(0), "scp (sftp) upload: {o} {e}");
        let (o, e, code) = text(&s.ssh(0, &[], "sed -i 's/0644/0600/' sftp.yaml && cat sftp.yaml", b""));
        assert_eq!((o.as_str(), code), ("write-kubeconfig-mode: \"0600\"\n", Some(0)), "{e}");
        // Download what the node has, both ways.
        for (legacy, name) in [(true, "back-legacy"), (false, "back-sftp")] {
            let dst = d.join(name);
            let (o, e, code) = scp(legacy, &remote("sftp.yaml"), &dst.display().to_string());
            assert_eq!(code, Some(0), "{name}: {o} {e}");
            assert_eq!(
                std::fs::read_to_string(&dst).expect("downloaded"),
                "write-kubeconfig-mode: \"0600\"\n"
            );
        }
        // A missing remote file is an error, not an empty success.
        let (_, e, code) = scp(true, &remote("/nope"), &d.join("x").display().to_string());
        assert_ne!(code, Some(0));
        assert!(e.contains("No such file or directory"), "{e}");
        // sftp -b: mkdir, put, ls, get, rename, rm: a batch over the node's tree.
        let batch = d.join("batch");
        std::fs::write(
            &batch,
            format!(
                "mkdir upl\ncd upl\nput {} a.yaml\nls -l\nrename a.yaml b.yaml\nget b.yaml {}\nget /etc/hostname {}\n",
                local.display(),
                d.join("got.yaml").display(),
                d.join("hostname").display()
            ),
        )
        .expect("batch");
        let mut c = Command::new("sftp");
        c.args(s.common())
            .args(["-P", &s.port(0), "-b"])
            .arg(&batch)
            .arg(s.target(0));
        let (o, e, code) = text(&run_with_stdin(c, b""));
        assert_eq!(code, Some(0), "sftp -b: {o} {e}");
        assert!(o.contains("a.yaml"), "{o}");
        assert_eq!(std::fs::read_to_string(d.join("hostname")).expect("got"), "k3s-3\n");
        assert_eq!(
            std::fs::read_to_string(d.join("got.yaml")).expect("got"),
            "write-kubeconfig-mode: \"0644\"\n"
        );
        let (o, _, _) = text(&s.ssh(0, &[], "ls upl", b""));
        assert_eq!(o, "b.yaml\n");
        // A user may not write into /etc; sftp says so.
        std::fs::write(&batch, format!("put {} /etc/x\n", local.display())).expect("batch");
        let mut c = Command::new("sftp");
        c.args(s.common())
            .args(["-P", &s.port(0), "-b"])
            .arg(&batch)
            .arg(s.target(0));
        let (o, e, code) = text(&run_with_stdin(c, b""));
        assert_ne!(code, Some(0), "{o} {e}");
        assert!(e.contains("Permission denied"), "{e}");
    })
    .await
    .expect("scp checks");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ansible_raw_uname_answers_on_every_host() {
    let sim = Sim::start(&["k3s-4", "k3s-5"], 41).await;
    let bin = support::ansible_bin_dir();
    let d = sim.dir.path().to_path_buf();
    std::fs::write(
        d.join("hosts.ini"),
        ansible_inventory(&sim.nodes, &sim.key, &sim.known_hosts),
    )
    .expect("inventory");
    let _ = std::fs::create_dir_all(d.join("cp"));
    let mut cmd = Command::new(bin.join("ansible"));
    cmd.current_dir(&d)
        .args(["all", "-i", "hosts.ini", "-m", "raw", "-a", "uname -a"])
        .env("ANSIBLE_HOME", d.join("ansible-home"))
        .env("ANSIBLE_LOCAL_TEMP", d.join("local-tmp"))
        .env("ANSIBLE_SSH_CONTROL_PATH_DIR", d.join("cp"))
        .env("ANSIBLE_HOST_KEY_CHECKING", "True")
        .env("ANSIBLE_NOCOLOR", "1")
        .stdin(Stdio::null());
    let out = tokio::task::block_in_place(|| cmd.output().expect("run ansible"));
    let (o, e, code) = text(&out);
    assert_eq!(code, Some(0), "{o}{e}");
    for n in ["k3s-4", "k3s-5"] {
        assert!(o.contains(&format!("{n} | CHANGED | rc=0")), "{o}");
        assert!(
            o.contains(&format!("Linux {n} 6.1.0-28-amd64 #1 SMP PREEMPT_DYNAMIC")),
            "{o}"
        );
    }
}

/// Every unmodelled path the issue lists, over real ssh: exit 2 and the message, never 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_unmodelled_construct_fails_with_exit_2() {
    let sim = Arc::new(Sim::start(&["k3s-6"], 51).await);
    let s = sim.clone();
    tokio::task::spawn_blocking(move || {
        for (cmd, what) in [
            ("if [ -t 1 ]; then echo a; else echo b; fi", "test -t 1"),
            ("[ a \\< b ] 2>/dev/null; echo $?", "test a < b"),
            ("rsync -a / /x || echo fallback", "rsync"),
            ("x=$(nosuchtool) ; echo reached", "nosuchtool"),
            ("echo `id`", "backquote command substitution (use $(...))"),
            ("echo $((1+1))", "arithmetic expansion $((...))"),
            ("while true; do :; done", "while loops and definitions"),
            ("sleep 1 &", "background jobs (`&`)"),
            ("cat <<EOF\nx\nEOF", "here-documents (<<)"),
            ("awk '{s+=$1} END {print s}' /etc/hostname", "awk program construct: the statement `s+="),
            ("sed '1,2d' /etc/hostname", "sed script construct: address ranges (a,b)"),
            ("ls -R /", "ls -R"),
            ("ps -o pid,cmd", "ps -o pid,cmd"),
            ("ss -tl", "ss without -n (service names)"),
            ("ip neigh", "ip neigh"),
            ("systemctl list-units", "systemctl verb list-units"),
            ("python3 -c 'print(1)'", "python3 -c print(1) (a simulated node never runs Python: Ansible modules cannot run here; start the demo with --userland to run them on this machine's programs, or use the `raw` module, whose command goes to the simulated shell)"),
            ("set -x; true", "set -x"),
        ] {
            let (o, e, code) = text(&s.ssh(0, &[], cmd, b""));
            assert_eq!(code, Some(2), "{cmd}: {o} {e}");
            assert!(o.is_empty(), "{cmd} went on: {o}");
            assert!(
                e.starts_with("hk-console simulation: `")
                    && e.ends_with("` is not simulated\n")
                    && e.contains(what)
                    && e.lines().count() == 1,
                "{cmd}: {e}"
            );
        }
    })
    .await
    .expect("sweep");
}

/// util-linux's default tables, /proc agreeing with the tools, and the loud paths, over
/// OpenSSH: what an operator types during an incident reads as on a real Debian node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn util_linux_tables_proc_and_loud_paths_over_openssh() {
    let sim = Arc::new(Sim::start(&["k3s-7"], 61).await);
    let s = sim.clone();
    tokio::task::spawn_blocking(move || {
        let run = |cmd: &str| text(&s.ssh(0, &[], cmd, b""));
        let ok = |cmd: &str| -> String {
            let (o, e, code) = run(cmd);
            assert_eq!(code, Some(0), "{cmd}: {o} {e}");
            o
        };
        // lsblk: util-linux's default columns, as a tree.
        assert_eq!(
            ok("lsblk"),
            "NAME   MAJ:MIN RM   SIZE RO TYPE MOUNTPOINTS\n\
             sda      8:0    0 465.8G  0 disk \n\
             ├─sda1   8:1    0   512M  0 part /boot/efi\n\
             └─sda2   8:2    0 465.3G  0 part /\n"
        );
        let f = ok("lsblk -f");
        assert!(f.starts_with("NAME   FSTYPE FSVER LABEL UUID "), "{f}");
        // The UUID lsblk -f shows for / is the one /etc/fstab mounts.
        let uuid = f
            .lines()
            .find(|l| l.trim_end().ends_with(" /"))
            .and_then(|l| l.split_whitespace().nth(3))
            .expect("root's UUID")
            .to_string();
        assert!(
            ok("cat /etc/fstab").contains(&format!("UUID={uuid} /")),
            "{uuid}"
        );
        assert_eq!(ok("lsblk -ndo PKNAME /dev/sda2"), "sda\n");
        // findmnt: the tree of every mount, TARGET SOURCE FSTYPE OPTIONS.
        let fm = ok("findmnt");
        let lines: Vec<&str> = fm.lines().collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            ["TARGET", "SOURCE", "FSTYPE", "OPTIONS"]
        );
        assert!(
            lines[1].starts_with("/ ") && lines[1].contains(" /dev/sda2 "),
            "{fm}"
        );
        assert!(lines.iter().any(|l| l.starts_with("├─/proc ")), "{fm}");
        assert!(
            lines.last().is_some_and(|l| l.starts_with("└─/boot/efi ")),
            "{fm}"
        );
        // /proc/mounts lists the same mounts findmnt draws.
        let mounts = ok("cat /proc/mounts");
        assert_eq!(mounts.lines().count(), lines.len() - 1, "{mounts}");
        for l in &lines[1..] {
            let target = l
                .trim_start_matches(['├', '└', '│', '─', ' '])
                .split_whitespace()
                .next()
                .expect("target");
            assert!(
                mounts
                    .lines()
                    .any(|m| m.split_whitespace().nth(1) == Some(target)),
                "{target} not in /proc/mounts"
            );
        }
        assert_eq!(
            ok("findmnt -n -o SOURCE --target /var/lib/rancher"),
            "/dev/sda2\n"
        );
        assert_eq!(ok("findmnt -T /var/lib/rancher -no TARGET"), "/\n");
        // df's file systems are findmnt's real ones.
        let df = ok("df -hT");
        assert!(df.contains("\n/dev/sda1      vfat "), "{df}");
        // /proc agrees with nproc, free and uptime.
        assert_eq!(ok("grep -c processor /proc/cpuinfo"), ok("nproc"));
        assert_eq!(ok("nproc"), "4\n");
        let total = ok("free | awk '$1 == \"Mem:\" {print $2}'");
        assert_eq!(
            ok("awk '$1 == \"MemTotal:\" {print $2}' /proc/meminfo"),
            total
        );
        let load = ok("cut -d' ' -f1 /proc/loadavg");
        assert!(
            ok("uptime").contains(&format!("load average: {}, ", load.trim())),
            "{load}"
        );
        let up: f64 = ok("cut -d' ' -f1 /proc/uptime")
            .trim()
            .parse()
            .expect("seconds");
        assert_eq!(up, 86_400.0);
        assert_eq!(ok("uptime -p"), "up 1 day\n");
        assert!(ok("[ -e /proc/cpuinfo ] && [ -e /sys/block/sda ] && echo yes") == "yes\n");
        // What the model knows is absent stays a true ENOENT.
        let (o, e, code) = run("cat /sys/block/sdb/size");
        assert_eq!((o.as_str(), code), ("", Some(1)), "{e}");
        assert_eq!(e, "cat: /sys/block/sdb/size: No such file or directory\n");
        assert_eq!(ok("[ -e /sys/block/sdb ] || echo absent"), "absent\n");
        // The rest of /proc and /sys is loud, whatever the command around it.
        for cmd in [
            "cat /proc/self/status",
            "grep -c eth0 /proc/net/dev",
            "cat /sys/class/net/eth0/address",
            "[ -d /sys/fs/cgroup/system.slice ] && echo yes",
            "head -1 < /proc/stat",
            "ls /proc",
            "cat /proc/pressure/memory 2>/dev/null || echo fallback",
            // Directories the model holds only some of: a listing would be mostly missing.
            "ls /usr/bin",
            "ls -la /var/lib/rancher/k3s",
            "ls /etc | wc -l",
        ] {
            let (o, e, code) = run(cmd);
            assert_eq!(code, Some(2), "{cmd}: {o} {e}");
            assert!(o.is_empty(), "{cmd} went on: {o}");
            assert!(
                e.starts_with("hk-console simulation: `") && e.ends_with("` is not simulated\n"),
                "{cmd}: {e}"
            );
        }
        // The top level is whole; what a fresh install leaves empty lists empty.
        assert_eq!(
            ok("ls /"),
            "bin\nboot\ndev\netc\nhome\nlib\nlib64\nlost+found\nmedia\nmnt\nopt\nproc\nroot\nrun\nsbin\nsrv\nsys\ntmp\nusr\nvar\n"
        );
        assert_eq!(ok("ls /mnt /srv"), "/mnt:\n\n/srv:\n");
        // No pty: `tty` says so, exit 1.
        assert_eq!(run("tty"), (String::new(), "not a tty\n".into(), Some(1)));
        assert_eq!(
            ok("systemctl --failed"),
            "  UNIT LOAD ACTIVE SUB DESCRIPTION\n0 loaded units listed.\n"
        );
        let st = ok("systemctl status k3s");
        assert!(
            st.starts_with("● k3s.service - Lightweight Kubernetes\n"),
            "{st}"
        );
        assert!(st.contains("     Active: active (running) since "), "{st}");
    })
    .await
    .expect("util-linux and /proc checks");
    // A failed unit is what `systemctl --failed` lists.
    sim.nodes[0]
        .state()
        .lock()
        .expect("state")
        .fail_unit_at("k3s", T0)
        .expect("k3s");
    let s = sim.clone();
    let (o, e, code) = tokio::task::spawn_blocking(move || {
        text(&s.ssh(0, &[], "systemctl list-units --failed --no-legend", b""))
    })
    .await
    .expect("ssh");
    assert_eq!(code, Some(0), "{e}");
    assert_eq!(
        o.split_whitespace().collect::<Vec<_>>(),
        [
            "●",
            "k3s.service",
            "loaded",
            "failed",
            "failed",
            "Lightweight",
            "Kubernetes"
        ]
    );
}

/// `ssh -tt`: a pty, so `tty` names its /dev/pts device.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tty_names_the_pty_of_ssh_tt() {
    let sim = Arc::new(Sim::start(&["k3s-8"], 71).await);
    let s = sim.clone();
    let out = tokio::task::spawn_blocking(move || s.ssh(0, &["-tt"], "tty", b""))
        .await
        .expect("ssh -tt");
    let (o, e, code) = text(&out);
    assert_eq!((o.as_str(), code), ("/dev/pts/0\r\n", Some(0)), "{e}");
}

/// The demo's nodes each say the address the demo gave them: `hostname -I`, `ip`, `ss`
/// (etcd's listeners) agree with the Kubernetes Node's InternalIP and the inventory's
/// ansible_host, with a MAC of their own and a gateway inside their own network.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_nodes_say_the_address_kubernetes_and_the_inventory_give_them() {
    use hk_effects::cluster::{client, kube_target, KubeOverrides};
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{Api, ListParams};

    let (_dir, d) = demo_common::start("healthy").await;
    let mut internal = std::collections::BTreeMap::new();
    // Server -> the VIP it carries as the kube-vip Lease's holder.
    let mut vip_on = std::collections::BTreeMap::new();
    for env in ["dev", "prod"] {
        let t = kube_target(&d.repo, env, &KubeOverrides::default()).expect("target");
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(client(&t).await.expect("client"), "kube-system");
        let holder = leases
            .get("plndr-cp-lock")
            .await
            .expect("kube-vip lease")
            .spec
            .and_then(|s| s.holder_identity)
            .expect("held");
        vip_on.insert(holder, d.plan.vips[env].to_string());
        let nodes: Api<Node> = Api::all(client(&t).await.expect("client"));
        for n in nodes
            .list(&ListParams::default())
            .await
            .expect("nodes")
            .items
        {
            let ip = n
                .status
                .and_then(|s| s.addresses)
                .unwrap_or_default()
                .into_iter()
                .find(|a| a.type_ == "InternalIP")
                .map(|a| a.address)
                .expect("InternalIP");
            internal.insert(n.metadata.name.expect("name"), ip);
        }
    }
    assert_eq!(internal.len(), 6, "{internal:?}");
    let key = d.dir.join(".ssh").join("demo_ed25519");
    let known = d.dir.join("known_hosts");
    assert_eq!(vip_on.len(), 2, "{vip_on:?}");
    let all_vips: Vec<String> = vip_on.values().cloned().collect();
    let targets: Vec<(String, String, u16, String)> = internal
        .iter()
        .map(|(name, ip)| {
            let node = d
                .nodes
                .get(name)
                .unwrap_or_else(|| panic!("no SSH node {name}"));
            let ansible_host = d
                .repo
                .resolve_var(name, "ansible_host")
                .and_then(|v| v.value().and_then(|v| v.as_str().map(String::from)))
                .expect("ansible_host");
            assert_eq!(
                &ansible_host, ip,
                "{name}: inventory and Kubernetes disagree"
            );
            (
                name.clone(),
                node.addr().ip().to_string(),
                node.addr().port(),
                ip.clone(),
            )
        })
        .collect();
    let macs = tokio::task::spawn_blocking(move || {
        let mut macs = Vec::new();
        for (name, addr, port, ip) in targets {
            let out = Command::new("ssh")
                .args(["-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes"])
                .arg("-o")
                .arg(format!("UserKnownHostsFile={}", known.display()))
                .args(["-o", "IdentitiesOnly=yes", "-o", "ConnectTimeout=10", "-i"])
                .arg(&key)
                .args(["-p", &port.to_string(), &format!("ops@{addr}")])
                .arg("hostname -I; ip -br a show dev eth0; ip r; ss -tln | grep 2379; ip link show eth0")
                .stdin(Stdio::null())
                .output()
                .expect("ssh");
            let (o, e, code) = text(&out);
            assert_eq!(code, Some(0), "{name}: {e}");
            let lines: Vec<&str> = o.lines().collect();
            // Every address of the node, its LAN one first (a VPN gateway adds its tunnel's).
            assert_eq!(
                lines[0].split_whitespace().next(),
                Some(ip.as_str()),
                "{name}: hostname -I\n{o}"
            );
            assert!(lines[0].ends_with(' '), "{name}: hostname -I\n{o}");
            assert!(lines[1].contains(&format!(" {ip}/24 ")), "{name}: ip -br a\n{o}");
            let gw = format!("{}.254", ip.rsplit_once('.').expect("dotted").0);
            assert!(lines[2].starts_with(&format!("default via {gw} dev eth0 ")), "{name}: ip r\n{o}");
            assert!(o.contains(&format!("src {ip} ")), "{name}: ip r\n{o}");
            assert!(o.contains(&format!("{ip}:2379 ")), "{name}: etcd listens on its own address\n{o}");
            assert!(!o.contains("192.0.2."), "{name}: a default address leaked\n{o}");
            // kube-vip puts the VIP on the holder's interface as a /32, and only there.
            for vip in &all_vips {
                let held = vip_on.get(&name) == Some(vip);
                assert_eq!(
                    lines[1].contains(&format!(" {vip}/32")),
                    held,
                    "{name}: VIP {vip} held={held}: ip -br a\n{o}"
                );
                assert_eq!(
                    lines[0].split_whitespace().any(|a| a == vip),
                    held,
                    "{name}: VIP {vip} held={held}: hostname -I\n{o}"
                );
            }
            let mac = o
                .lines()
                .find_map(|l| l.trim().strip_prefix("link/ether "))
                .and_then(|l| l.split_whitespace().next())
                .expect("MAC")
                .to_string();
            macs.push(mac);
        }
        macs
    })
    .await
    .expect("ssh into every node");
    let mut unique = macs.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), macs.len(), "every node its own MAC: {macs:?}");
}
