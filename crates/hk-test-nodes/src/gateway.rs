//! VPN gateways for crates/hk-effects/tests/vpn_ssh.rs: the harness's real sshd nodes, with STAND-INS for the
//! gateway's own tools.
//!
//! A test machine has no systemd, no OpenVPN tunnel and no internet (and must send nothing
//! beyond 127.0.0.0/8), so `systemctl`, `curl` and `journalctl` on the nodes are small shell
//! scripts placed first on the PATH of every sshd session (`SetEnv PATH=... HOME=...` in the
//! node's sshd_config; HOME is an empty dir so no rc file of the machine's user is read). Each records its argv (one line, words separated by 0x1f) and prints what
//! the test wrote into the node's state directory. Everything else is real: OpenSSH's sshd,
//! the login shell that parses the quoted command line, hk-console's SSH pool, the parsing
//! and the judging. [`assert_stand_ins_first`] proves, before a look, that the sessions find
//! the stand-ins and not the machine's real tools.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use hk_effects::exec::ssh::ExecOptions;

use super::Cluster;

/// The word separator in the recorded argv lines (no argument of ours contains it).
const SEP: char = '\u{1f}';

/// Appends this tool's argv to `calls` as ONE write (the four commands of a look run at
/// once; separate writes could interleave).
fn record(tool: &str, state: &Path) -> String {
    format!(
        "#!/bin/sh\n\
         # STAND-IN for {tool} on a test VPN gateway (crates/hk-test-nodes/src/gateway.rs): records its\n\
         # argv and answers from files the test writes. Not the real tool.\n\
         st='{state}'\n\
         line='{tool}'\n\
         for a in \"$@\"; do line=\"$line$(printf '\\037')$a\"; done\n\
         printf '%s\\n' \"$line\" >> \"$st/calls\"\n",
        state = state.display()
    )
}

/// Prints `$st/NAME.out`, `$st/NAME.err` to stderr, exits `$st/NAME.rc`.
fn answer(name_expr: &str) -> String {
    format!(
        "n={name_expr}\n\
         cat \"$st/$n.out\"\n\
         cat \"$st/$n.err\" >&2\n\
         exit \"$(cat \"$st/$n.rc\")\"\n"
    )
}

/// One node's stand-in tools and the files that steer them.
pub struct GatewayTools {
    /// The harness's node name (node1..3).
    pub node: String,
    pub bin: PathBuf,
    pub state: PathBuf,
}

impl GatewayTools {
    fn write(&self, name: &str, out: &str, err: &str, rc: i32) {
        std::fs::write(self.state.join(format!("{name}.out")), out).expect("stand-in out");
        std::fs::write(self.state.join(format!("{name}.err")), err).expect("stand-in err");
        std::fs::write(self.state.join(format!("{name}.rc")), rc.to_string()).expect("rc");
    }

    /// What `systemctl is-active` prints (exit 0 for `active`, 3 otherwise, as systemd does).
    pub fn set_active(&self, state: &str) {
        self.write(
            "is-active",
            &format!("{state}\n"),
            "",
            if state == "active" { 0 } else { 3 },
        );
    }

    /// What `curl` prints through the tunnel interface (`--interface` given).
    pub fn set_tunnel_exit(&self, body: &str) {
        self.write("curl-tunnel", &format!("{body}\n"), "", 0);
    }

    /// `curl` through the tunnel interface failing as curl does (exit code, stderr).
    pub fn fail_tunnel_exit(&self, rc: i32, stderr: &str) {
        self.write("curl-tunnel", "", &format!("{stderr}\n"), rc);
    }

    /// What `curl` prints without `--interface` (the home ISP's address).
    pub fn set_direct_exit(&self, body: &str) {
        self.write("curl-direct", &format!("{body}\n"), "", 0);
    }

    /// The unit's journal as `journalctl -o short-iso` prints it.
    pub fn set_journal(&self, lines: &[String]) {
        let mut text = lines.join("\n");
        if lines.is_empty() {
            text.push_str("-- No entries --");
        }
        text.push('\n');
        self.write("journal", &text, "", 0);
    }

    /// `journalctl` failing (exit code, stderr).
    pub fn fail_journal(&self, rc: i32, stderr: &str) {
        self.write("journal", "", &format!("{stderr}\n"), rc);
    }

    /// Every argv the stand-ins received, in arrival order.
    pub fn calls(&self) -> Vec<Vec<String>> {
        std::fs::read_to_string(self.state.join("calls"))
            .unwrap_or_default()
            .lines()
            .map(|l| l.split(SEP).map(str::to_string).collect())
            .collect()
    }

    pub fn clear_calls(&self) {
        let _ = std::fs::remove_file(self.state.join("calls"));
    }
}

fn script(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write stand-in");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// Puts the stand-ins on every node of `cluster` (sshd restarted with `SetEnv PATH`), each
/// answering "healthy" until the test says otherwise: active, tunnel exit 158.173.241.20,
/// direct exit 203.0.113.7, an empty journal.
pub fn install(cluster: &mut Cluster) -> Vec<GatewayTools> {
    let mut tools = Vec::new();
    for node in &mut cluster.nodes {
        let bin = node.dir.join("gw-bin");
        let state = node.dir.join("gw-state");
        std::fs::create_dir_all(&bin).expect("stand-in bin");
        std::fs::create_dir_all(&state).expect("stand-in state");
        script(
            &bin.join("systemctl"),
            &(record("systemctl", &state) + &answer("is-active")),
        );
        script(
            &bin.join("journalctl"),
            &(record("journalctl", &state) + &answer("journal")),
        );
        // Through the tunnel when `--interface` is among the arguments.
        script(
            &bin.join("curl"),
            &(record("curl", &state)
                + "mode=direct\nfor a in \"$@\"; do [ \"$a\" = --interface ] && mode=tunnel; done\n"
                + &answer("curl-$mode")),
        );
        // HOME too: the login shell then reads no rc file of this machine's user (one that
        // rewrites PATH, or takes seconds as a pyenv init does, would decide what runs and
        // how long a look takes).
        let home = node.dir.join("gw-home");
        std::fs::create_dir_all(&home).expect("stand-in home");
        let config = node.dir.join("sshd_config");
        // sshd takes the first SetEnv line: the node's own (its HOME) gives way to this one.
        let mut text: String = std::fs::read_to_string(&config)
            .expect("node sshd_config")
            .lines()
            .filter(|l| !l.starts_with("SetEnv "))
            .map(|l| format!("{l}\n"))
            .collect();
        text.push_str(&format!(
            "SetEnv PATH={}:/usr/bin:/bin HOME={}\n",
            bin.display(),
            home.display()
        ));
        std::fs::write(&config, text).expect("sshd_config");
        node.restart();
        let t = GatewayTools {
            node: node.name.clone(),
            bin,
            state,
        };
        t.set_active("active");
        t.set_tunnel_exit("158.173.241.20");
        t.set_direct_exit("203.0.113.7");
        t.set_journal(&[]);
        tools.push(t);
    }
    tools
}

/// Over a separate connection, checks that every node's sessions resolve `systemctl`,
/// `curl` and `journalctl` to the stand-ins (so a look can never run the real curl and
/// send traffic off the machine). Panics otherwise.
pub async fn assert_stand_ins_first(cluster: &Cluster, tools: &[GatewayTools]) {
    let pool = cluster.pool();
    for t in tools {
        let out = pool
            .exec(
                &t.node,
                "command -v systemctl curl journalctl",
                &ExecOptions::default(),
            )
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", t.node));
        let found: Vec<&str> = out.stdout.lines().collect();
        let want: Vec<String> = ["systemctl", "curl", "journalctl"]
            .iter()
            .map(|n| t.bin.join(n).display().to_string())
            .collect();
        assert_eq!(
            found, want,
            "{}: the session does not find the stand-ins first (stderr: {})",
            t.node, out.stderr
        );
    }
    pool.close_all().await;
}

/// `journalctl -o short-iso`'s time field for `ms` since the epoch, in UTC
/// (`2026-09-12T22:57:05+0000`).
pub fn short_iso(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Hinnant's civil_from_days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}+0000",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
