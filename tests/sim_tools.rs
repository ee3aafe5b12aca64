//! An operator's own tools against the simulated nodes (issue 17): OpenSSH's `ssh`
//! (commands, stdin, `-tt` interactive), `scp -O` (the SCP protocol), `scp` (the sftp
//! protocol), `sftp -b`, and `ansible all -m raw -a 'uname -a'`, all over one node's
//! simulated state: what one tool writes, the next one reads. Plus the sweep of every
//! unmodelled construct the issue found: each fails with exit 2 and the simulation's
//! message, none exits 0.
//! Needs openssh-client (ssh, scp, sftp, ssh-keygen) and ansible-core (HK_ANSIBLE_BIN_DIR).

mod support;

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use hk_console::sim::node::{Clock, NodeState};
use hk_console::sim::ssh::SimNode;
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
            ("python3 -c 'print(1)'", "python3 -c print(1) (a simulated node never runs Python: Ansible modules cannot run here; use the `raw` module, whose command goes to the simulated shell)"),
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
