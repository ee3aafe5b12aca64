//! `hk-console ssh trust HOST` against a real OpenSSH sshd: the fingerprint is shown, the
//! key is appended only after `yes`, never over a changed key. HOME is a temp dir so the
//! developer's ~/.ssh is never touched.
use crate::support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use support::{keygen, Cluster};

struct Lab {
    cluster: Cluster,
    repo: PathBuf,
    home: PathBuf,
}

fn lab() -> Lab {
    let cluster = Cluster::start_n(1);
    let root = cluster.dir.path().join("repo");
    let inv = root.join("infra/ansible/inventory");
    std::fs::create_dir_all(&inv).expect("mkdir");
    std::fs::write(
        root.join("hk-console.yaml"),
        "environments:\n  lab: { servers: nodes }\n",
    )
    .expect("config");
    let n = &cluster.nodes[0];
    std::fs::write(
        inv.join("hosts.ini"),
        format!(
            "[nodes]\n{} ansible_host={} ansible_port={} ansible_user=root ansible_ssh_private_key_file={}\n",
            n.name,
            n.addr,
            n.port,
            cluster.client_key.display()
        ),
    )
    .expect("inventory");
    let home = cluster.dir.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).expect("home");
    Lab {
        repo: root,
        home,
        cluster,
    }
}

impl Lab {
    fn trust(&self, answer: &str) -> Output {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hk-console"))
            .args([
                "--repo",
                self.repo.to_str().expect("utf8"),
                "ssh",
                "trust",
                "node1",
            ])
            .env("HOME", &self.home)
            .env("XDG_STATE_HOME", self.home.join("state"))
            .env_remove("SSH_AUTH_SOCK")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(answer.as_bytes())
            .expect("answer");
        child.wait_with_output().expect("wait")
    }

    fn known_hosts(&self) -> String {
        std::fs::read_to_string(self.home.join(".ssh/known_hosts")).unwrap_or_default()
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn trust_appends_only_after_yes_and_never_over_a_changed_key() {
    let lab = lab();
    let node = &lab.cluster.nodes[0];
    let fingerprint = node.host_key_fingerprint();

    // Anything but `yes` writes nothing.
    let out = lab.trust("y\n");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(&fingerprint),
        "fingerprint shown: {}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("NOT trusted"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(lab.known_hosts(), "");

    // `yes` appends exactly the node's key, for its address and port.
    let out = lab.trust("yes\n");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let kh = lab.known_hosts();
    let expected = node.known_hosts_line();
    assert!(
        kh.lines().any(|l| l.trim() == expected.trim()),
        "{kh}\nexpected {expected}"
    );

    // Asking again writes nothing more.
    let out = lab.trust("yes\n");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("already trusted"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(lab.known_hosts(), kh);

    // A different key recorded for the host: refused, whatever the operator types.
    let other = lab.cluster.dir.path().join("other_key");
    keygen(&other, "");
    let pubkey = std::fs::read_to_string(other.with_extension("pub")).expect("pub");
    let mut f = pubkey.split_whitespace();
    let line = format!(
        "[{}]:{} {} {}\n",
        node.addr,
        node.port,
        f.next().expect("t"),
        f.next().expect("k")
    );
    std::fs::write(lab.home.join(".ssh/known_hosts"), &line).expect("write");
    let out = lab.trust("yes\n");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(
        err.contains("HOST KEY CHANGED") && err.contains(&fingerprint),
        "{err}"
    );
    assert_eq!(
        lab.known_hosts(),
        line,
        "nothing appended over a changed key"
    );
}

#[test]
fn an_unknown_host_is_an_error_naming_it() {
    let lab = lab();
    let out = Command::new(env!("CARGO_BIN_EXE_hk-console"))
        .args([
            "--repo",
            lab.repo.to_str().expect("utf8"),
            "ssh",
            "trust",
            "node9",
        ])
        .env("HOME", &lab.home)
        .env("XDG_STATE_HOME", lab.home.join("state"))
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("no host `node9`")
            && err.contains(Path::new("hosts.ini").to_str().expect("utf8")),
        "{err}"
    );
}
