//! One login on a simulated node: [`NodeSession`] runs command lines against a node's
//! state (the SSH server's exec requests and interactive sessions), the shell's `System`
//! over it, and the node's own utilities (`systemctl`, `journalctl`, `curl`, `cat`, `grep`,
//! `head`/`tail`, `uptime`, `date`; the everyday rest are `coreutils`'), each answering
//! from and acting on that state only.
//!
//! Data flows one way: `node` is the state, `coreutils` and this module read and change
//! it under its one lock (`NodeSession::with_state`); the state imports neither.
//! Must not: touch the real host (no process, no file, no network); a command it does not
//! know is exit 2 "hk-console simulation: `X` is not simulated".
//!
//! One file (over 800 lines): the session and the utilities that only it calls.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use regex::Regex;

use super::coreutils::{self, Cx};
use super::fs::{normalize, parent, uid_of, FileKind, FsError, Stat, NOT_SIMULATED};
use super::node::*;
use super::shell::{run_in, Ending, Output, ShellState, System};
use hk_engine::time::utc_fields;

// ---------------------------------------------------------------------------------------
// One command's run
// ---------------------------------------------------------------------------------------

/// Runs command lines against a node's state, as the SSH server does for an exec request
/// (or, line by line, for an interactive session).
pub struct NodeSession {
    state: Arc<Mutex<NodeState>>,
    user: String,
    cancel: Arc<AtomicBool>,
    cwd: String,
    /// Under `sudo`.
    root: bool,
    /// The login shell's variables, kept across the lines of an interactive session.
    shell: Option<ShellState>,
    /// The session's pseudo-terminal (`/dev/pts/N`), None without one (`tty`: "not a tty").
    tty: Option<String>,
}

impl NodeSession {
    pub fn new(state: Arc<Mutex<NodeState>>, user: &str, cancel: Arc<AtomicBool>) -> Self {
        let home = home_of(user);
        if let Ok(mut s) = state.lock() {
            let now = s.now_ms();
            s.fs.ensure_home(user, now);
            if user != "root" {
                s.login_user = user.to_string();
            }
        }
        NodeSession {
            state,
            user: user.to_string(),
            cancel,
            cwd: home,
            root: false,
            shell: None,
            tty: None,
        }
    }

    /// The session runs on this pseudo-terminal (the client asked for a pty).
    pub fn with_tty(mut self, tty: Option<String>) -> Self {
        self.tty = tty;
        self
    }

    /// Runs one command line (as the login shell would): its output, and how it ended.
    pub fn run(&mut self, command: &str) -> (Output, Ending) {
        self.run_with_input(command, &[])
    }

    /// Runs one command line with what the client sent on the channel as its stdin.
    pub fn run_with_input(&mut self, command: &str, stdin: &[u8]) -> (Output, Ending) {
        if let Ok(mut s) = self.state.lock() {
            if s.commands.len() >= 1000 {
                s.commands.remove(0);
            }
            s.commands.push(command.to_string());
        }
        let mut out = Output::default();
        let mut st = match self.shell.take() {
            Some(st) => st,
            None => ShellState::login(self),
        };
        let ending = run_in(self, &mut st, command, stdin, &mut out);
        self.shell = Some(st);
        (out, ending)
    }

    /// Runs one line of an interactive session: variables, `cd` and `$?` carry over to
    /// the next line. The bool is true once the line ran `exit`.
    pub fn run_line(&mut self, line: &str) -> (Output, Ending, bool) {
        let (out, ending) = self.run(line);
        let exited = self.shell.as_ref().is_some_and(|s| s.exited);
        (out, ending, exited)
    }

    /// The interactive prompt: `user@host:~$ ` (`#` for root), as Debian's bash shows it.
    pub fn prompt(&self) -> String {
        let host = self
            .state
            .lock()
            .map(|s| s.hostname.clone())
            .unwrap_or_default();
        let home = home_of(&self.user);
        let dir = if self.cwd == home {
            "~".to_string()
        } else if let Some(rest) = self.cwd.strip_prefix(&format!("{home}/")) {
            format!("~/{rest}")
        } else {
            self.cwd.clone()
        };
        let sign = if self.user == "root" { '#' } else { '$' };
        format!("{}@{host}:{dir}{sign} ", self.user)
    }

    /// The uid commands run as now.
    fn effective_uid(&self) -> u32 {
        if self.root {
            0
        } else {
            uid_of(&self.user)
        }
    }

    fn with_state<T>(&self, f: impl FnOnce(&mut NodeState) -> T) -> Option<T> {
        self.state.lock().ok().map(|mut g| f(&mut g))
    }

    /// `sleep N`: simulated commands take real time only here; a signal ends it.
    fn sleep(&self, args: &[String]) -> Output {
        let Some(secs) = args
            .first()
            .and_then(|a| a.trim_end_matches('s').parse::<f64>().ok())
        else {
            return Output::fail(1, "sleep: invalid time interval\n");
        };
        let deadline = Instant::now() + Duration::from_secs_f64(secs.clamp(0.0, 86_400.0));
        while Instant::now() < deadline {
            if self.cancel.load(Ordering::SeqCst) {
                return Output::fail(137, "");
            }
            std::thread::sleep(Duration::from_millis(20).min(deadline - Instant::now()));
        }
        Output::ok("")
    }
}

/// A login's home directory.
pub fn home_of(user: &str) -> String {
    if user == "root" {
        "/root".into()
    } else {
        format!("/home/{user}")
    }
}

impl System for NodeSession {
    fn exec(&mut self, argv: &[String], stdin: &[u8]) -> Option<Output> {
        let name = argv.first()?;
        let base = [
            "/usr/local/bin/",
            "/usr/bin/",
            "/bin/",
            "/usr/sbin/",
            "/sbin/",
        ]
        .iter()
        .find_map(|p| name.strip_prefix(p))
        .unwrap_or(name);
        let args = &argv[1..];
        if base == "sleep" {
            return Some(self.sleep(args));
        }
        if base == "tty" {
            return Some(match (args, &self.tty) {
                ([], Some(t)) => Output::ok(format!("{t}\n")),
                ([], None) => Output::fail(1, "not a tty\n"),
                ([s], Some(_)) if s == "-s" || s == "--silent" || s == "--quiet" => Output::ok(""),
                ([s], None) if s == "-s" || s == "--silent" || s == "--quiet" => {
                    Output::fail(1, "")
                }
                _ => Output::unsimulated(&argv.join(" ")),
            });
        }
        if base.starts_with("python") {
            let mut o = Output::unsimulated(&format!(
                "{} (a simulated node never runs Python: Ansible modules cannot run here; start \
                 the demo with --userland to run them on this machine's programs, or use the \
                 `raw` module, whose command goes to the simulated shell)",
                argv.join(" ")
            ));
            // Given no script, an interpreter reads it from stdin (Ansible's pipelining):
            // the client must be let finish sending it.
            o.reads_stdin = args.iter().all(|a| a.starts_with('-'));
            return Some(o);
        }
        let user = if self.root {
            "root".to_string()
        } else {
            self.user.clone()
        };
        let uid = self.effective_uid();
        let cwd = self.cwd.clone();
        if base == "curl" {
            // Decided under the node's lock; a real etcd member asked outside it.
            return self
                .with_state(|s| {
                    let cx = Cx {
                        user: &user,
                        uid,
                        cwd: &cwd,
                    };
                    curl(s, &cx, args)
                })
                .map(Curl::run)
                .map(loud_on_unmodelled_paths);
        }
        self.with_state(|s| {
            let cx = Cx {
                user: &user,
                uid,
                cwd: &cwd,
            };
            utility(s, &cx, base, args, stdin)
        })
        .flatten()
        .map(loud_on_unmodelled_paths)
    }

    fn read_file(&mut self, path: &str) -> Result<String, FsError> {
        let p = normalize(&self.cwd, path);
        let uid = self.effective_uid();
        self.with_state(|s| s.read_path(&p, uid))
            .unwrap_or(Err(FsError::StateUnavailable))
            .map(|d| String::from_utf8_lossy(&d).into_owned())
    }

    fn write_file(&mut self, path: &str, data: &[u8], append: bool) -> Result<(), FsError> {
        let p = normalize(&self.cwd, path);
        let uid = self.effective_uid();
        self.with_state(|s| {
            let now = s.now_ms();
            if !p.starts_with("/proc/") && !p.starts_with("/sys/") && !s.is_virtual(&p) {
                // dash: a missing directory is "Directory nonexistent".
                if s.stat(parent(&p)).is_none() {
                    return Err(FsError::DirectoryNonexistent);
                }
            }
            s.write_path(&p, data, append, uid, now)
        })
        .unwrap_or(Err(FsError::StateUnavailable))
    }

    fn home(&self) -> String {
        home_of(&self.user)
    }

    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::SeqCst)
    }

    fn stat(&mut self, path: &str) -> Option<Stat> {
        let p = normalize(&self.cwd, path);
        self.with_state(|s| s.stat(&p)).flatten()
    }

    fn unmodelled(&mut self, path: &str) -> bool {
        let p = normalize(&self.cwd, path);
        self.with_state(|s| s.unmodelled(&p)).unwrap_or(false)
    }

    fn list_dir(&mut self, path: &str) -> Result<Vec<String>, FsError> {
        let p = normalize(&self.cwd, path);
        let uid = self.effective_uid();
        self.with_state(|s| s.list_path(&p, uid))
            .unwrap_or(Err(FsError::StateUnavailable))
    }

    fn cwd(&self) -> String {
        self.cwd.clone()
    }

    fn chdir(&mut self, path: &str) -> Result<(), FsError> {
        let p = normalize(&self.cwd, path);
        match self.with_state(|s| s.stat(&p)).flatten() {
            Some(st) if st.kind == FileKind::Dir => {
                self.cwd = p;
                Ok(())
            }
            Some(_) => Err(FsError::NotADirectory),
            None => Err(FsError::NotFound),
        }
    }

    fn login_env(&self) -> Vec<(String, String)> {
        let home = home_of(&self.user);
        let path = if self.user == "root" {
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        } else {
            "/usr/local/bin:/usr/bin:/bin:/usr/games"
        };
        vec![
            ("HOME".into(), home),
            ("USER".into(), self.user.clone()),
            ("LOGNAME".into(), self.user.clone()),
            ("SHELL".into(), "/bin/bash".into()),
            ("PATH".into(), path.into()),
            ("PWD".into(), self.cwd.clone()),
            ("LANG".into(), "C.UTF-8".into()),
        ]
    }

    fn set_root(&mut self, root: bool) -> bool {
        std::mem::replace(&mut self.root, root)
    }

    fn which(&self, name: &str) -> Option<String> {
        if name == "sleep" {
            return Some("/usr/bin/sleep".into());
        }
        if name == "tty" {
            return Some("/usr/bin/tty".into());
        }
        coreutils::which(name).map(String::from)
    }

    fn uid(&self) -> u32 {
        self.effective_uid()
    }
}

/// A command that met a path the model does not know printed [`NOT_SIMULATED`] after its
/// own words; it ends as every unmodelled construct does (exit 2, the script stopped, no
/// output), whatever status it chose, and even when another operand succeeded.
fn loud_on_unmodelled_paths(o: Output) -> Output {
    if o.unsimulated {
        return o;
    }
    let err = String::from_utf8_lossy(&o.stderr);
    let Some(line) = err.lines().find(|l| l.contains(NOT_SIMULATED)) else {
        return o;
    };
    let what = line
        .split(NOT_SIMULATED)
        .next()
        .unwrap_or(line)
        .trim_end_matches([':', ' ']);
    // `cat: /proc/x` names the command and the path: `cat /proc/x` is not simulated.
    // What it printed is dropped: a count or a match over a file it could not read
    // (`grep -c x /proc/net/dev` says 0) would be a wrong answer.
    Output::unsimulated(&what.replacen(": ", " ", 1))
}

/// The node's utilities; None = no such command here.
fn utility(
    s: &mut NodeState,
    cx: &Cx,
    name: &str,
    args: &[String],
    stdin: &[u8],
) -> Option<Output> {
    let user = cx.user;
    Some(match name {
        "systemctl" => systemctl(s, args),
        "journalctl" => journalctl(s, args),
        "curl" => curl(s, cx, args).run(),
        "cat" => cat(s, cx, args, stdin),
        "grep" => grep(s, cx, args, stdin),
        "head" | "tail" => head_tail(s, cx, name == "head", args, stdin),
        "basename" => match args {
            [p] => Output::ok(format!("{}\n", basename(p))),
            [p, suffix] => {
                let b = basename(p);
                let b = b
                    .strip_suffix(suffix.as_str())
                    .filter(|x| !x.is_empty())
                    .unwrap_or(&b);
                Output::ok(format!("{b}\n"))
            }
            _ => Output::fail(1, "basename: missing operand\n"),
        },
        "hostname" => match args.first().map(String::as_str) {
            None | Some("-s" | "--short" | "-f" | "--fqdn") => {
                Output::ok(format!("{}\n", s.hostname))
            }
            Some("-I" | "--all-ip-addresses") => {
                let mut addrs = vec![s.lan_addr.to_string()];
                addrs.extend(s.vip_held.map(|v| v.to_string()));
                addrs.extend(s.tunnel().map(|t| t.tunnel_addr.to_string()));
                Output::ok(format!("{} \n", addrs.join(" ")))
            }
            Some(a) => unsupported(name, args, &format!("option {a}")),
        },
        "whoami" => Output::ok(format!("{user}\n")),
        "uptime" => uptime(s, args),
        "date" => date(s, args),
        _ => return coreutils::run(s, cx, name, args, stdin),
    })
}

/// A node's unit manager, called by name from outside the emulated shell: what a real
/// userland's `systemctl`/`journalctl` shims ask the simulation ([`super::userland`]), so
/// a playbook's `systemctl restart k3s` acts on the same units the console's probes read.
/// Only these two tools; anything else is `None`.
pub fn unit_tool(s: &mut NodeState, name: &str, args: &[String]) -> Option<Output> {
    match name {
        "systemctl" if args.first().is_some_and(|a| a == "reboot") => {
            Some(power(s, "reboot", &args[1..]))
        }
        "systemctl" => Some(systemctl(s, args)),
        "journalctl" => Some(journalctl(s, args)),
        "shutdown" | "reboot" | "poweroff" | "halt" => Some(power(s, name, args)),
        _ => None,
    }
}

/// `shutdown -r [TIME] [MESSAGE]`, `reboot`, `systemctl reboot`: a reboot asked for at
/// TIME (`now`, `+M` minutes, `0`), carried out by the node's time keeper
/// ([`NodeState::reboot_at_ms`]). Powering off is not modelled: refused, named.
fn power(s: &mut NodeState, name: &str, args: &[String]) -> Output {
    let now = s.now_ms();
    let mut reboot = name == "reboot";
    let mut delay_ms = 0;
    let mut cancel = false;
    let mut seen_time = false;
    for a in args {
        match a.as_str() {
            "-r" | "--reboot" => reboot = true,
            "-c" => cancel = true,
            "-h" | "-P" | "--poweroff" | "-H" | "--halt" => reboot = false,
            "-f" | "--force" | "--no-wall" | "-q" => {}
            "now" if !seen_time => seen_time = true,
            t if !seen_time && t.strip_prefix('+').unwrap_or(t).parse::<u64>().is_ok() => {
                seen_time = true;
                let m: u64 = t.strip_prefix('+').unwrap_or(t).parse().unwrap_or(0);
                delay_ms = m * 60_000;
            }
            t if t.starts_with('-') => return unsupported(name, args, &format!("option {t}")),
            // The wall message.
            _ => seen_time = true,
        }
    }
    if cancel {
        s.reboot_at_ms = None;
        return Output::ok("");
    }
    if !reboot {
        return Output::unsimulated(&format!(
            "{name} without a reboot (powering a simulated node off)"
        ));
    }
    let at = now + delay_ms;
    s.reboot_at_ms = Some(at);
    s.log(now, "", "systemd-logind", "System is rebooting.");
    Output::ok(if delay_ms > 0 {
        format!(
            "Reboot scheduled for {}, use 'shutdown -c' to cancel.\n",
            format_short_iso(at)
        )
    } else {
        String::new()
    })
}

/// An option or operand form the utility does not model: exit 2, named.
fn unsupported(name: &str, args: &[String], what: &str) -> Output {
    let _ = args;
    Output::unsimulated(&format!("{name} {what}"))
}

fn basename(p: &str) -> String {
    let t = p.trim_end_matches('/');
    if t.is_empty() {
        return "/".into();
    }
    t.rsplit('/').next().unwrap_or(t).to_string()
}

// ---- systemctl ----

/// A systemctl command line sorted: flags, `-p` properties, positional words.
#[derive(Debug, Default)]
struct SystemctlArgs {
    flags: Vec<String>,
    props: Vec<String>,
    pos: Vec<String>,
}

/// Options systemctl accepts anywhere; Err names the one not supported.
fn systemctl_args(args: &[String]) -> Result<SystemctlArgs, String> {
    let mut flags = Vec::new();
    let mut props = Vec::new();
    let mut pos = Vec::new();
    let mut k = 0;
    while let Some(a) = args.get(k) {
        match a.as_str() {
            "-p" | "--property" => {
                let v = args.get(k + 1).ok_or("option -p needs a value")?;
                props.extend(v.split(',').map(String::from));
                k += 1;
            }
            "--value" | "--quiet" | "-q" | "--no-pager" | "--plain" | "--no-legend" | "--full"
            | "-l" | "--system" | "--now" | "--no-block" | "--no-ask-password" | "--failed" => {
                flags.push(a.clone())
            }
            "--state=failed" => flags.push("--failed".into()),
            a if a.starts_with("--property=") => {
                props.extend(a["--property=".len()..].split(',').map(String::from))
            }
            a if a.starts_with("-p") && a.len() > 2 => {
                props.extend(a[2..].split(',').map(String::from))
            }
            a if a.starts_with('-') => return Err(format!("option {a}")),
            _ => pos.push(a.clone()),
        }
        k += 1;
    }
    Ok(SystemctlArgs { flags, props, pos })
}

fn systemctl(s: &mut NodeState, args: &[String]) -> Output {
    let SystemctlArgs { flags, props, pos } = match systemctl_args(args) {
        Ok(x) => x,
        Err(what) => return unsupported("systemctl", args, &what),
    };
    let quiet = flags.iter().any(|f| f == "-q" || f == "--quiet");
    let failed_only = flags.iter().any(|f| f == "--failed");
    let Some((verb, units)) = pos.split_first() else {
        if failed_only {
            return systemctl_failed(s, &flags);
        }
        return unsupported("systemctl", args, "listing units");
    };
    if verb == "list-units" && units.is_empty() && failed_only {
        return systemctl_failed(s, &flags);
    }
    if failed_only {
        return unsupported("systemctl", args, &format!("--failed with {verb}"));
    }
    let now = s.now_ms();
    match verb.as_str() {
        "is-active" | "is-failed" => {
            let mut out = String::new();
            let mut any = false;
            for u in units {
                let st = s.units.get(&unit_name(u)).map(|x| x.state);
                let text = st.map(UnitState::as_str).unwrap_or("inactive");
                out.push_str(text);
                out.push('\n');
                any |= if verb == "is-active" {
                    st == Some(UnitState::Active)
                } else {
                    st == Some(UnitState::Failed)
                };
            }
            let status = match (any, verb.as_str()) {
                (true, _) => 0,
                (false, "is-failed") => 1,
                (false, _) if units.iter().all(|u| !s.units.contains_key(&unit_name(u))) => 4,
                _ => 3,
            };
            Output {
                stdout: if quiet { Vec::new() } else { out.into_bytes() },
                stderr: Vec::new(),
                status,
                ..Output::default()
            }
        }
        "is-enabled" => {
            let known = units.iter().all(|u| s.units.contains_key(&unit_name(u)));
            if known {
                Output::ok(if quiet {
                    String::new()
                } else {
                    "enabled\n".repeat(units.len())
                })
            } else {
                Output::fail(
                    1,
                    "Failed to get unit file state: No such file or directory\n",
                )
            }
        }
        "is-system-running" => {
            let st = s.system_state();
            Output {
                stdout: if quiet {
                    Vec::new()
                } else {
                    format!("{st}\n").into_bytes()
                },
                stderr: Vec::new(),
                status: i32::from(st != "running"),
                ..Output::default()
            }
        }
        "show" => systemctl_show(s, &flags, &props, units),
        "status" => systemctl_status(s, units),
        "start" | "stop" | "restart" | "try-restart" | "reload-or-restart" => {
            if units.is_empty() {
                return Output::fail(1, "Too few arguments.\n");
            }
            for u in units {
                let r = match verb.as_str() {
                    "start" => s.start_unit_at(u, now),
                    "stop" => s.stop_unit_at(u, now),
                    _ => s.restart_unit_at(u, now),
                };
                if let Err(e) = r {
                    return Output::fail(5, format!("Failed to {verb} {}: {e}\n", unit_name(u)));
                }
            }
            Output::ok("")
        }
        "daemon-reload" => Output::ok(""),
        "set-property" => {
            let Some((u, assigns)) = units.split_first() else {
                return Output::fail(1, "Too few arguments.\n");
            };
            let name = unit_name(u);
            let Some(unit) = s.units.get_mut(&name) else {
                return Output::fail(
                    1,
                    format!("Failed to set unit properties on {name}: Unit {name} not found.\n"),
                );
            };
            for a in assigns {
                match a.split_once('=') {
                    Some(("IOWeight", v)) => match v.parse::<u64>() {
                        Ok(w) if (1..=10_000).contains(&w) => unit.io_weight = Some(w),
                        _ => {
                            return Output::fail(
                                1,
                                format!("Failed to parse IOWeight value: {v}\n"),
                            )
                        }
                    },
                    _ => return unsupported("systemctl", args, &format!("property {a}")),
                }
            }
            Output::ok("")
        }
        _ => unsupported("systemctl", args, &format!("verb {verb}")),
    }
}

fn prop_value(s: &NodeState, unit: &str, prop: &str) -> Option<String> {
    let u = s.units.get(unit);
    Some(match prop {
        "IOWeight" => u
            .and_then(|u| u.io_weight)
            .map(|w| w.to_string())
            .unwrap_or_else(|| "[not set]".into()),
        "ActiveState" => u.map(|u| u.state.as_str()).unwrap_or("inactive").into(),
        "SubState" => u.map(|u| u.state.sub_state()).unwrap_or("dead").into(),
        "LoadState" => if u.is_some() { "loaded" } else { "not-found" }.into(),
        // Every unit the simulation has is enabled at boot (k3s, kube-vip, the tunnel).
        "UnitFileState" => if u.is_some() { "enabled" } else { "" }.into(),
        "NRestarts" => u.map(|u| u.restarts).unwrap_or(0).to_string(),
        "MainPID" => u
            .filter(|u| u.state == UnitState::Active)
            .map(|u| u.main_pid)
            .unwrap_or(0)
            .to_string(),
        "Id" | "Names" => unit.to_string(),
        "Description" => u
            .map(|u| u.description.clone())
            .unwrap_or_else(|| unit.to_string()),
        "ActiveEnterTimestamp" => u
            .filter(|u| u.state == UnitState::Active)
            .map(|u| {
                let (y, mo, d, h, mi, sec, _) = utc_fields(u.active_since_ms);
                format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{sec:02} UTC")
            })
            .unwrap_or_default(),
        _ => return None,
    })
}

/// What `systemctl show UNIT` prints without `-p`: every property the simulation models
/// (systemd prints some 250; Ansible's systemd module reads these).
const SHOWN_PROPERTIES: [&str; 11] = [
    "Id",
    "Names",
    "Description",
    "LoadState",
    "ActiveState",
    "SubState",
    "UnitFileState",
    "MainPID",
    "NRestarts",
    "IOWeight",
    "ActiveEnterTimestamp",
];

fn systemctl_show(s: &NodeState, flags: &[String], props: &[String], units: &[String]) -> Output {
    if props.is_empty() && units.is_empty() {
        return unsupported("systemctl", &[], "show of the manager itself");
    }
    let all: Vec<String> = SHOWN_PROPERTIES.iter().map(|p| p.to_string()).collect();
    let props = if props.is_empty() { &all[..] } else { props };
    let value_only = flags.iter().any(|f| f == "--value");
    let mut out = String::new();
    let targets: Vec<String> = if units.is_empty() {
        vec![String::new()]
    } else {
        units.iter().map(|u| unit_name(u)).collect()
    };
    for (k, u) in targets.iter().enumerate() {
        if k > 0 && !value_only {
            out.push('\n');
        }
        for p in props {
            // systemd prints nothing for a property it does not know.
            if let Some(v) = prop_value(s, u, p) {
                if value_only {
                    out.push_str(&format!("{v}\n"));
                } else {
                    out.push_str(&format!("{p}={v}\n"));
                }
            }
        }
    }
    Output::ok(out)
}

/// `systemctl --failed` (`list-units --failed`): the failed units as systemd 252 lists
/// them without a terminal, the legend unless `--no-legend`.
fn systemctl_failed(s: &NodeState, flags: &[String]) -> Output {
    let legend = !flags.iter().any(|f| f == "--no-legend");
    let failed: Vec<(&String, &Unit)> = s
        .units
        .iter()
        .filter(|(_, u)| u.state == UnitState::Failed)
        .collect();
    let mut rows = vec![[
        "UNIT".to_string(),
        "LOAD".into(),
        "ACTIVE".into(),
        "SUB".into(),
        "DESCRIPTION".into(),
    ]];
    for (name, u) in &failed {
        rows.push([
            (*name).clone(),
            "loaded".into(),
            u.state.as_str().into(),
            u.state.sub_state().into(),
            u.description.clone(),
        ]);
    }
    let mut w = [0usize; 4];
    for r in &rows {
        for (k, c) in r.iter().take(4).enumerate() {
            w[k] = w[k].max(c.chars().count());
        }
    }
    let mut out = String::new();
    for (k, r) in rows.iter().enumerate() {
        if k == 0 && !legend {
            continue;
        }
        let mark = if k == 0 { ' ' } else { '●' };
        out.push_str(&format!(
            "{mark} {:<w0$} {:<w1$} {:<w2$} {:<w3$} {}\n",
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            w0 = w[0],
            w1 = w[1],
            w2 = w[2],
            w3 = w[3]
        ));
    }
    if legend {
        if !failed.is_empty() {
            out.push_str(
                "\nLOAD   = Reflects whether the unit definition was properly loaded.\n\
                 ACTIVE = The high-level unit activation state, i.e. generalization of SUB.\n\
                 SUB    = The low-level unit activation state, values depend on unit type.\n",
            );
        }
        out.push_str(&format!("{} loaded units listed.\n", failed.len()));
    }
    Output::ok(out)
}

fn systemctl_status(s: &NodeState, units: &[String]) -> Output {
    if units.is_empty() {
        return unsupported("systemctl", &[], "status without a unit (the whole system)");
    }
    let now = s.now_ms();
    let mut out = String::new();
    let mut status = 0;
    for (k, u) in units.iter().enumerate() {
        let name = unit_name(u);
        let Some(unit) = s.units.get(&name) else {
            return Output::fail(4, format!("Unit {name} could not be found.\n"));
        };
        if k > 0 {
            out.push('\n');
        }
        let dot = match unit.state {
            UnitState::Active | UnitState::Activating => '●',
            UnitState::Failed => '×',
            UnitState::Inactive => '○',
        };
        let slice = name.ends_with(".slice");
        // Debian's packages ship theirs under /lib; k3s' installer and the playbooks write
        // theirs to /etc.
        let (path, preset) = if slice {
            (format!("/lib/systemd/system/{name}"), "static")
        } else if name == "ssh.service" {
            (
                format!("/lib/systemd/system/{name}"),
                "enabled; preset: enabled",
            )
        } else {
            (
                format!("/etc/systemd/system/{name}"),
                "enabled; preset: enabled",
            )
        };
        out.push_str(&format!("{dot} {name} - {}\n", unit.description));
        out.push_str(&format!("     Loaded: loaded ({path}; {preset})\n"));
        let sub = match (unit.state, slice) {
            (UnitState::Active, true) => String::new(),
            (UnitState::Failed, _) => " (Result: exit-code)".into(),
            (st, _) => format!(" ({})", st.sub_state()),
        };
        let since = match unit.state {
            UnitState::Active | UnitState::Activating | UnitState::Failed => format!(
                " since {}; {}",
                systemd_timestamp(unit.active_since_ms),
                systemd_ago(now.saturating_sub(unit.active_since_ms))
            ),
            UnitState::Inactive => String::new(),
        };
        out.push_str(&format!(
            "     Active: {}{sub}{since}\n",
            unit.state.as_str()
        ));
        if unit.state == UnitState::Active && !slice {
            let comm = match name.as_str() {
                "k3s.service" => "k3s-server".to_string(),
                "ssh.service" => "sshd".to_string(),
                n => n.trim_end_matches(".service").chars().take(15).collect(),
            };
            out.push_str(&format!("   Main PID: {} ({comm})\n", unit.main_pid));
        }
        if unit.state != UnitState::Active {
            status = 3;
        }
        // Its last ten journal lines, as status shows them.
        let lines: Vec<String> = s
            .journal
            .iter()
            .filter(|e| e.unit == name)
            .map(|e| {
                format!(
                    "{} {} {}: {}",
                    format_short(e.at_ms),
                    s.hostname,
                    e.ident,
                    e.message
                )
            })
            .collect();
        if !lines.is_empty() {
            out.push('\n');
            for l in &lines[lines.len().saturating_sub(10)..] {
                out.push_str(l);
                out.push('\n');
            }
        }
    }
    Output {
        stdout: out.into_bytes(),
        stderr: Vec::new(),
        status,
        ..Output::default()
    }
}

/// systemd's absolute timestamp: `Fri 2026-09-11 22:57:05 UTC`.
fn systemd_timestamp(ms: u64) -> String {
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    let (y, mo, d, h, mi, sec, _) = utc_fields(ms);
    let wd = WEEKDAYS[(ms / 86_400_000) as usize % 7];
    format!("{wd} {y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{sec:02} UTC")
}

/// systemd's relative time (`format_timestamp_relative`): `2 days ago`, `1 day 3h ago`,
/// `24h ago`, `1h 5min ago`, `7min ago`, `2min 3s ago`, `40s ago`.
fn systemd_ago(ms: u64) -> String {
    let s = ms / 1000;
    let (min, hour, day, week) = (60, 3600, 86_400, 604_800);
    if s >= week {
        format!("{} weeks {} days ago", s / week, s % week / day)
    } else if s >= 2 * day {
        format!("{} days ago", s / day)
    } else if s >= 25 * hour {
        format!("1 day {}h ago", (s - day) / hour)
    } else if s >= 6 * hour {
        format!("{}h ago", s / hour)
    } else if s >= hour {
        format!("{}h {}min ago", s / hour, s % hour / min)
    } else if s >= 5 * min {
        format!("{}min ago", s / min)
    } else if s >= min {
        format!("{}min {}s ago", s / min, s % min)
    } else if s > 0 {
        format!("{s}s ago")
    } else {
        "now".into()
    }
}

// ---- journalctl ----

fn journalctl(s: &NodeState, args: &[String]) -> Output {
    let now = s.now_ms();
    let mut units = Vec::new();
    let mut format = "short".to_string();
    let mut lines: Option<usize> = None;
    let mut since = None;
    let mut until = None;
    let mut quiet = false;
    let mut reverse = false;
    let mut no_hostname = false;
    let mut k = 0;
    // Split `--opt=value` and attached short values into (option, value).
    while let Some(a) = args.get(k) {
        let (opt, inline) = match a.split_once('=') {
            Some((o, v)) if o.starts_with("--") => (o.to_string(), Some(v.to_string())),
            _ if a.len() > 2
                && a.starts_with('-')
                && !a.starts_with("--")
                && "unoSU".contains(&a[1..2]) =>
            {
                (a[..2].to_string(), Some(a[2..].to_string()))
            }
            _ => (a.clone(), None),
        };
        let takes_value = matches!(
            opt.as_str(),
            "-u" | "--unit"
                | "-o"
                | "--output"
                | "-n"
                | "--lines"
                | "-S"
                | "--since"
                | "-U"
                | "--until"
        );
        let value = if takes_value {
            match inline {
                Some(v) => Some(v),
                None => {
                    k += 1;
                    match args.get(k) {
                        Some(v) => Some(v.clone()),
                        None => {
                            return Output::fail(
                                1,
                                format!("journalctl: option '{opt}' requires an argument\n"),
                            )
                        }
                    }
                }
            }
        } else {
            None
        };
        let v = value.unwrap_or_default();
        match opt.as_str() {
            "-u" | "--unit" => units.push(unit_name(&v)),
            "-o" | "--output" => format = v,
            "-n" | "--lines" => match v.parse::<usize>() {
                Ok(n) => lines = Some(n),
                Err(_) => return Output::fail(1, format!("Failed to parse lines '{v}'\n")),
            },
            "-S" | "--since" | "-U" | "--until" => {
                let Some(t) = parse_time_spec(&v, now) else {
                    return Output::fail(1, format!("Failed to parse timestamp: {v}\n"));
                };
                if opt.contains('S') || opt == "--since" {
                    since = Some(t);
                } else {
                    until = Some(t);
                }
            }
            "-b" | "--boot" => since = Some(since.unwrap_or(0).max(s.boot_ms)),
            "-q" | "--quiet" => quiet = true,
            "-r" | "--reverse" => reverse = true,
            "--no-hostname" => no_hostname = true,
            "--no-pager" | "-a" | "--all" | "--utc" | "-l" | "--full" | "-x" | "--catalog" => {}
            _ => return unsupported("journalctl", args, &format!("option {a}")),
        }
        k += 1;
    }
    let mut picked: Vec<&JournalEntry> = s
        .journal
        .iter()
        .filter(|e| units.is_empty() || units.contains(&e.unit))
        .filter(|e| since.is_none_or(|t| e.at_ms >= t))
        .filter(|e| until.is_none_or(|t| e.at_ms <= t))
        .collect();
    if let Some(n) = lines {
        let skip = picked.len().saturating_sub(n);
        picked.drain(..skip);
    }
    if reverse {
        picked.reverse();
    }
    let host = if no_hostname {
        String::new()
    } else {
        format!("{} ", s.hostname)
    };
    let mut out = String::new();
    for e in &picked {
        let line = match format.as_str() {
            "short-iso" => format!(
                "{} {host}{}: {}",
                format_short_iso(e.at_ms),
                e.ident,
                e.message
            ),
            "short-iso-precise" => format!(
                "{} {host}{}: {}",
                format_short_iso_precise(e.at_ms),
                e.ident,
                e.message
            ),
            "short" => format!("{} {host}{}: {}", format_short(e.at_ms), e.ident, e.message),
            "cat" => e.message.clone(),
            other => return unsupported("journalctl", args, &format!("output format {other}")),
        };
        out.push_str(&line);
        out.push('\n');
    }
    if picked.is_empty() && !quiet && format != "cat" {
        out.push_str("-- No entries --\n");
    }
    Output::ok(out)
}

// ---- curl ----

/// How long a `curl` given no `--max-time` waits for a real member, at most.
const CURL_NO_MAX_TIME: Duration = Duration::from_secs(300);

/// What `curl` does: answered from the model, or asked of the server's real etcd member
/// (`demo --apiserver`), which is done outside the node's lock: a member without quorum
/// may take the whole `--max-time`.
enum Curl {
    Done(Output),
    Forward(Forward),
}

impl Curl {
    fn run(self) -> Output {
        match self {
            Curl::Done(o) => o,
            Curl::Forward(f) => f.run(),
        }
    }
}

/// One call to a real etcd member on behalf of the server's `curl`.
struct Forward {
    url: String,
    method: &'static str,
    body: Option<String>,
    max_time: Duration,
    /// The port the command dialled on 127.0.0.1, for curl's words.
    port: u16,
    silent: bool,
    show_error: bool,
    /// For the metrics: the simulated text, whose leadership lines the member's replace.
    metrics: Option<String>,
}

/// The leadership lines etcd's metrics carry, read from the real member.
const LEADERSHIP: [&str; 3] = [
    "etcd_server_is_leader",
    "etcd_server_has_leader",
    "etcd_server_leader_changes_seen_total",
];

impl Forward {
    fn run(self) -> Output {
        let t0 = Instant::now();
        let said = super::apiserver::http_call(
            &self.url,
            self.method,
            self.body.as_deref(),
            self.max_time,
        );
        let ms = t0.elapsed().as_millis();
        let error = |code: i32, msg: String| {
            let text = if !self.silent || self.show_error {
                format!("curl: ({code}) {msg}\n")
            } else {
                String::new()
            };
            Output::fail(code, text)
        };
        use super::apiserver::HttpFail;
        match said {
            Ok((_, body)) => match &self.metrics {
                None => Output::ok(body),
                Some(sim) => Output::ok(with_leadership_of(sim, &body)),
            },
            Err(HttpFail::Refused) => error(
                7,
                format!(
                    "Failed to connect to 127.0.0.1 port {} after {ms} ms: Couldn't connect to server",
                    self.port
                ),
            ),
            Err(HttpFail::TimedOut) => error(
                28,
                format!("Operation timed out after {ms} milliseconds with 0 bytes received"),
            ),
            Err(HttpFail::Other(why)) => error(56, format!("Recv failure: {why}")),
        }
    }
}

/// The simulated metrics `sim` with each leadership line ([`LEADERSHIP`]) as the real
/// member's `real` metrics say it.
fn with_leadership_of(sim: &str, real: &str) -> String {
    let value = |name: &str| {
        real.lines().find_map(|l| {
            l.strip_prefix(name)
                .and_then(|r| r.strip_prefix(' '))
                .map(str::trim)
        })
    };
    let mut out = String::with_capacity(sim.len());
    for line in sim.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        match (LEADERSHIP.contains(&name), value(name)) {
            (true, Some(v)) => out.push_str(&format!("{name} {v}")),
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

fn curl(s: &mut NodeState, cx: &Cx, args: &[String]) -> Curl {
    let mut forward = None;
    let out = curl_model(s, cx, args, &mut forward);
    match forward {
        Some(f) => Curl::Forward(f),
        None => Curl::Done(out),
    }
}

/// `curl` as the model answers it; where the server's real etcd member answers instead,
/// `forward` is set (and the output is nothing).
fn curl_model(
    s: &mut NodeState,
    cx: &Cx,
    args: &[String],
    forward: &mut Option<Forward>,
) -> Output {
    let mut fail = false;
    let mut silent = false;
    let mut show_error = false;
    let mut interface = None;
    let mut url = None;
    let mut method = None;
    let mut data = None;
    let mut max_time = None;
    // --cacert, --cert, --key
    let mut tls: [Option<String>; 3] = [None, None, None];
    let mut k = 0;
    while let Some(a) = args.get(k) {
        match a.as_str() {
            "--interface" | "--max-time" | "-m" | "--connect-timeout" | "--retry" | "-X"
            | "--request" | "-d" | "--data" | "--cacert" | "--cert" | "--key" => {
                let Some(v) = args.get(k + 1) else {
                    return Output::fail(2, format!("curl: option {a}: requires parameter\n"));
                };
                match a.as_str() {
                    "--interface" => interface = Some(v.clone()),
                    "-X" | "--request" => method = Some(v.clone()),
                    "-d" | "--data" => data = Some(v.clone()),
                    "--cacert" => tls[0] = Some(v.clone()),
                    "--cert" => tls[1] = Some(v.clone()),
                    "--key" => tls[2] = Some(v.clone()),
                    "--max-time" | "-m" => {
                        let Some(t) = v.parse::<f64>().ok().filter(|t| *t > 0.0) else {
                            return Output::fail(
                                2,
                                format!(
                                    "curl: option {a}: expected a proper numerical parameter\n"
                                ),
                            );
                        };
                        max_time = Some(Duration::from_secs_f64(t.min(86_400.0)));
                    }
                    _ => {}
                }
                k += 1;
            }
            "--fail" => fail = true,
            "--silent" => silent = true,
            "--show-error" => show_error = true,
            "--location" | "--ipv4" | "--no-progress-meter" => {}
            a if a.starts_with("--") => return unsupported("curl", args, &format!("option {a}")),
            a if a.starts_with('-') && a.len() > 1 => {
                for c in a[1..].chars() {
                    match c {
                        'f' => fail = true,
                        's' => silent = true,
                        'S' => show_error = true,
                        'L' | '4' => {}
                        _ => return unsupported("curl", args, &format!("option -{c}")),
                    }
                }
            }
            _ => url = Some(a.clone()),
        }
        k += 1;
    }
    let _ = fail;
    let error = |code: i32, msg: String| {
        let text = if !silent || show_error {
            format!("curl: ({code}) {msg}\n")
        } else {
            String::new()
        };
        Output::fail(code, text)
    };
    let Some(url) = url else {
        return Output::fail(2, "curl: no URL specified\n");
    };
    let host = url
        .split_once("://")
        .map(|(_, r)| r)
        .unwrap_or(&url)
        .split(['/', ':'])
        .next()
        .unwrap_or_default()
        .to_string();
    let exit = match interface.as_deref() {
        None => Some(s.direct_exit_ip),
        Some(i) if i == s.default_interface => Some(s.direct_exit_ip),
        Some(i) => match s.tunnel_up() {
            Some(v) if v.interface == i => Some(v.exit_ip),
            _ => None,
        },
    };
    let Some(ip) = exit else {
        return error(45, "bind failed with errno 19: No such device".into());
    };
    if !s.online {
        return error(6, format!("Could not resolve host: {host}"));
    }
    let url_norm = url.trim_end_matches('/');
    // etcd's client API (its JSON gateway) on the server's loopback: TLS with client
    // certificates, served while k3s runs.
    if let Some(path) = url_norm.strip_prefix("https://127.0.0.1:2379") {
        let up = matches!(s.units.get("k3s.service"), Some(u) if u.state == UnitState::Active)
            && s.etcd_up;
        if !(up && s.etcd.is_some()) {
            return error(
                7,
                "Failed to connect to 127.0.0.1 port 2379 after 0 ms: Couldn't connect to server"
                    .into(),
            );
        };
        let readable = |p: &str| s.read_path(&normalize(cx.cwd, p), cx.uid).is_ok();
        match &tls {
            [None, ..] => {
                return error(
                    60,
                    "SSL certificate problem: unable to get local issuer certificate".into(),
                )
            }
            [Some(ca), ..] if !readable(ca) => {
                return error(77, format!("error setting certificate file: {ca}"))
            }
            [_, None, _] | [_, _, None] => {
                // etcd asks every client for a certificate (k3s: client-cert-auth).
                return error(
                    56,
                    "OpenSSL SSL_read: OpenSSL/3.0.17: error:0A00045C:SSL routines::tlsv13 alert certificate required, errno 0".into(),
                );
            }
            [_, Some(cert), _] if !readable(cert) => {
                return error(
                    58,
                    format!("could not load PEM client certificate from {cert}, OpenSSL error error:8000000D:system library::Permission denied, (no key found, wrong pass phrase, or wrong file format?)"),
                )
            }
            [_, _, Some(key)] if !readable(key) => {
                return error(
                    58,
                    format!("unable to set private key file: '{key}' type PEM"),
                )
            }
            _ => {}
        }
        if method
            .as_deref()
            .unwrap_or(if data.is_some() { "POST" } else { "GET" })
            != "POST"
        {
            // The gateway serves its v3 API on POST only.
            return Output::ok(r#"{"code":5,"message":"Not Found"}"#);
        }
        if path == "/v3/maintenance/transfer-leadership" && s.etcd_real.is_none() {
            let body = data.clone().unwrap_or_default();
            return match s.etcd.as_mut() {
                Some(member) => Output::ok(member.transfer(&body)),
                None => Output::ok(r#"{"code":5,"message":"Not Found"}"#),
            };
        }
        if let Some(real) = &s.etcd_real {
            *forward = Some(Forward {
                url: format!("{}{path}", real.trim_end_matches('/')),
                method: "POST",
                body: Some(data.clone().unwrap_or_default()),
                max_time: max_time.unwrap_or(CURL_NO_MAX_TIME),
                port: 2379,
                silent,
                show_error,
                metrics: None,
            });
            return Output::ok("");
        }
        let answer = s
            .etcd
            .as_ref()
            .and_then(|member| member.answer(path, s.etcd_db_size()));
        return match answer {
            Some(body) => Output::ok(body),
            None => Output::ok(r#"{"code":5,"message":"Not Found"}"#),
        };
    }
    // k3s's etcd metrics listener on the server's loopback: served while k3s runs.
    if url_norm == "http://127.0.0.1:2381/metrics" {
        return match s.units.get("k3s.service") {
            Some(u) if u.state == UnitState::Active && s.etcd_up => {
                if let Some(real) = &s.etcd_real {
                    *forward = Some(Forward {
                        url: format!("{}/metrics", real.trim_end_matches('/')),
                        method: "GET",
                        body: None,
                        max_time: max_time.unwrap_or(CURL_NO_MAX_TIME),
                        port: 2381,
                        silent,
                        show_error,
                        metrics: Some(s.etcd_metrics()),
                    });
                    return Output::ok("");
                }
                Output::ok(s.etcd_metrics())
            }
            _ => error(
                7,
                "Failed to connect to 127.0.0.1 port 2381 after 0 ms: Connection refused".into(),
            ),
        };
    }
    if !s
        .exit_ip_urls
        .iter()
        .any(|u| u.trim_end_matches('/') == url_norm)
    {
        return error(
            6,
            format!("Could not resolve host: {host} (sim: only the exit-IP services answer)"),
        );
    }
    // ipinfo.io/ip answers the bare address, no newline.
    Output::ok(ip.to_string())
}

// ---- files and text ----

fn cat(s: &NodeState, cx: &Cx, args: &[String], stdin: &[u8]) -> Output {
    if args.is_empty() || args == ["-"] {
        return Output::ok(stdin.to_vec());
    }
    let mut out = Output::default();
    for p in args {
        if p.starts_with('-') && p != "-" {
            return unsupported("cat", args, &format!("option {p}"));
        }
        match s.read_path(&normalize(cx.cwd, p), cx.uid) {
            Ok(t) => out.stdout.extend_from_slice(&t),
            Err(e) => {
                out.stderr
                    .extend_from_slice(format!("cat: {p}: {e}\n").as_bytes());
                out.status = 1;
            }
        }
    }
    out
}

fn grep(s: &NodeState, cx: &Cx, args: &[String], stdin: &[u8]) -> Output {
    let (mut quiet, mut extended, mut fixed, mut icase, mut invert, mut count) =
        (false, false, false, false, false, false);
    let mut pattern = None;
    let mut files = Vec::new();
    let mut k = 0;
    while let Some(a) = args.get(k) {
        if a == "-e" {
            pattern = args.get(k + 1).cloned();
            k += 2;
            continue;
        }
        if a.starts_with('-') && a.len() > 1 && pattern.is_none() && files.is_empty() {
            for c in a[1..].chars() {
                match c {
                    'q' | 's' => quiet |= c == 'q',
                    'E' => extended = true,
                    'F' => fixed = true,
                    'i' => icase = true,
                    'v' => invert = true,
                    'c' => count = true,
                    _ => return unsupported("grep", args, &format!("option -{c}")),
                }
            }
        } else if pattern.is_none() {
            pattern = Some(a.clone());
        } else {
            files.push(a.clone());
        }
        k += 1;
    }
    let Some(pattern) = pattern else {
        return Output::fail(2, "Usage: grep [OPTION]... PATTERNS [FILE]...\n");
    };
    let body = if fixed {
        regex::escape(&pattern)
    } else if extended {
        pattern.clone()
    } else {
        coreutils::bre_to_regex(&pattern)
    };
    let re = match Regex::new(&format!("{}{body}", if icase { "(?i)" } else { "" })) {
        Ok(r) => r,
        Err(e) => return Output::fail(2, format!("grep: invalid pattern {pattern:?}: {e}\n")),
    };
    let mut inputs = Vec::new();
    let mut out = Output::default();
    if files.is_empty() {
        inputs.push(String::from_utf8_lossy(stdin).to_string());
    }
    for f in &files {
        match s.read_path(&normalize(cx.cwd, f), cx.uid) {
            Ok(t) => inputs.push(String::from_utf8_lossy(&t).into_owned()),
            Err(e) => {
                out.stderr
                    .extend_from_slice(format!("grep: {f}: {e}\n").as_bytes());
                out.status = 2;
            }
        }
    }
    let mut hits = 0;
    for text in inputs {
        for line in text.lines() {
            if re.is_match(line) != invert {
                hits += 1;
                if !quiet && !count {
                    out.stdout.extend_from_slice(line.as_bytes());
                    out.stdout.push(b'\n');
                }
            }
        }
    }
    if count && !quiet {
        out.stdout.extend_from_slice(format!("{hits}\n").as_bytes());
    }
    // GNU grep: 2 on an error (unless -q found a match), else 0 on a match, 1 on none.
    out.status = if out.status == 2 && !(quiet && hits > 0) {
        2
    } else if hits > 0 {
        0
    } else {
        1
    };
    out
}

fn head_tail(s: &NodeState, cx: &Cx, head: bool, args: &[String], stdin: &[u8]) -> Output {
    let name = if head { "head" } else { "tail" };
    let mut n = 10usize;
    let mut files = Vec::new();
    let mut k = 0;
    while let Some(a) = args.get(k) {
        if a == "-n" {
            match args.get(k + 1).and_then(|v| v.parse().ok()) {
                Some(v) => n = v,
                None => return Output::fail(1, format!("{name}: invalid number of lines\n")),
            }
            k += 1;
        } else if let Some(v) = a
            .strip_prefix("-n")
            .or_else(|| a.strip_prefix('-'))
            .filter(|v| !v.is_empty())
        {
            match v.parse() {
                Ok(v) => n = v,
                Err(_) => return unsupported(name, args, &format!("option {a}")),
            }
        } else {
            files.push(a.clone());
        }
        k += 1;
    }
    let text = if files.is_empty() {
        String::from_utf8_lossy(stdin).to_string()
    } else {
        let mut t = String::new();
        for f in &files {
            match s.read_path(&normalize(cx.cwd, f), cx.uid) {
                Ok(x) => t.push_str(&String::from_utf8_lossy(&x)),
                Err(e) => {
                    return Output::fail(1, format!("{name}: cannot open '{f}' for reading: {e}\n"))
                }
            }
        }
        t
    };
    let lines: Vec<&str> = text.lines().collect();
    let picked = if head {
        &lines[..n.min(lines.len())]
    } else {
        &lines[lines.len().saturating_sub(n)..]
    };
    let mut out = picked.join("\n");
    if !picked.is_empty() {
        out.push('\n');
    }
    Output::ok(out)
}

fn uptime(s: &NodeState, args: &[String]) -> Output {
    let now = s.now_ms();
    let up_min = now.saturating_sub(s.boot_ms) / 60_000;
    let (d, h, m) = (up_min / 1440, up_min % 1440 / 60, up_min % 60);
    match args.first().map(String::as_str) {
        None => {
            let (_, _, _, hh, mm, ss, _) = utc_fields(now);
            let days = match d {
                0 => String::new(),
                1 => "1 day, ".into(),
                n => format!("{n} days, "),
            };
            let load = s.load_average();
            // procps: `H:MM` once there is an hour, else `N min`.
            let clock = if h > 0 {
                format!("{h:2}:{m:02}")
            } else {
                format!("{m} min")
            };
            Output::ok(format!(
                " {hh:02}:{mm:02}:{ss:02} up {days}{clock},  0 users,  load average: {load:.2}, {load:.2}, {load:.2}\n"
            ))
        }
        Some("-p" | "--pretty") => Output::ok(format!("{}\n", pretty_uptime(up_min))),
        Some("-s" | "--since") => {
            let (y, mo, dd, hh, mm, ss, _) = utc_fields(s.boot_ms);
            Output::ok(format!("{y:04}-{mo:02}-{dd:02} {hh:02}:{mm:02}:{ss:02}\n"))
        }
        Some(a) => unsupported("uptime", args, &format!("option {a}")),
    }
}

/// procps' `uptime -p`: `up 1 day, 2 minutes`; only the non-zero units (weeks, days,
/// hours, minutes), each singular at 1; `up 0 minutes` right after boot.
fn pretty_uptime(up_min: u64) -> String {
    let units = [
        (up_min / 10_080, "week"),
        (up_min % 10_080 / 1440, "day"),
        (up_min % 1440 / 60, "hour"),
        (up_min % 60, "minute"),
    ];
    let parts: Vec<String> = units
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, u)| format!("{n} {u}{}", if *n == 1 { "" } else { "s" }))
        .collect();
    if parts.is_empty() {
        "up 0 minutes".into()
    } else {
        format!("up {}", parts.join(", "))
    }
}

/// `date [-u] [+FORMAT]` with %Y %m %d %H %M %S %s %F %T %z %Z %%.
fn date(s: &NodeState, args: &[String]) -> Output {
    let now = s.now_ms();
    let mut fmt = "%a %b %e %H:%M:%S %Z %Y".to_string();
    for a in args {
        match a.as_str() {
            "-u" | "--utc" => {}
            f if f.starts_with('+') => fmt = f[1..].to_string(),
            other => return unsupported("date", args, &format!("option {other}")),
        }
    }
    let (y, mo, d, h, mi, sec, _) = utc_fields(now);
    let days = (now / 86_400_000) as usize;
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    let mut out = String::new();
    let mut cs = fmt.chars();
    while let Some(c) = cs.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match cs.next() {
            Some('Y') => out.push_str(&format!("{y:04}")),
            Some('m') => out.push_str(&format!("{mo:02}")),
            Some('d') => out.push_str(&format!("{d:02}")),
            Some('e') => out.push_str(&format!("{d:2}")),
            Some('H') => out.push_str(&format!("{h:02}")),
            Some('M') => out.push_str(&format!("{mi:02}")),
            Some('S') => out.push_str(&format!("{sec:02}")),
            Some('s') => out.push_str(&(now / 1000).to_string()),
            Some('F') => out.push_str(&format!("{y:04}-{mo:02}-{d:02}")),
            Some('T') => out.push_str(&format!("{h:02}:{mi:02}:{sec:02}")),
            Some('z') => out.push_str("+0000"),
            Some('Z') => out.push_str("UTC"),
            Some('a') => out.push_str(WEEKDAYS[days % 7]),
            Some('b') => out.push_str(MONTHS.get(mo as usize - 1).copied().unwrap_or("???")),
            Some('%') => out.push('%'),
            Some(o) => return unsupported("date", args, &format!("format %{o}")),
            None => out.push('%'),
        }
    }
    out.push('\n');
    Output::ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hk_engine::checks::live::parse_journal;
    use hk_engine::checks::live::parse_journal_time;
    use std::net::Ipv4Addr;

    // 2026-09-12T22:57:05Z
    const T0: u64 = 1_789_253_825_000;

    fn gateway() -> NodeState {
        NodeState::new("gw-1", Clock::fixed(T0)).with_vpn(
            VpnTunnel {
                unit: "vpn-egress-tunnel".into(),
                interface: "tun0".into(),
                exit_ip: "203.0.113.50".parse().expect("ip"),
                server: "192.0.2.112:1198".parse().expect("addr"),
                tunnel_addr: Ipv4Addr::new(10, 72, 192, 7),
                netmask: Ipv4Addr::new(255, 255, 192, 0),
            },
            T0 - 3_600_000,
        )
    }

    fn run(state: &Arc<Mutex<NodeState>>, cmd: &str) -> (String, String, i32) {
        let mut s = NodeSession::new(state.clone(), "root", Arc::new(AtomicBool::new(false)));
        let (o, _) = s.run(cmd);
        (
            String::from_utf8_lossy(&o.stdout).into(),
            String::from_utf8_lossy(&o.stderr).into(),
            o.status,
        )
    }

    #[test]
    fn a_running_clock_compresses_time() {
        let c = Clock::running(T0, 600.0);
        std::thread::sleep(Duration::from_millis(50));
        // 50 ms real = 30 s simulated (at least; a loaded machine sleeps longer).
        assert!(c.now_ms() >= T0 + 30_000, "{}", c.now_ms() - T0);
        assert_eq!(c.real_duration(120_000), Duration::from_millis(200));
        assert_eq!(Clock::fixed(T0).now_ms(), T0);
        assert_eq!(Clock::fixed(T0).real_duration(1000), Duration::ZERO);
    }

    #[test]
    fn time_formats_round_trip_through_the_live_parser() {
        assert_eq!(format_short_iso(T0), "2026-09-12T22:57:05+00:00");
        assert_eq!(
            parse_journal_time(&format_short_iso(T0)).map(|t| t.0),
            Some(T0)
        );
        assert_eq!(format_short(T0), "Sep 12 22:57:05");
        assert_eq!(
            parse_journal_time(&format_short_iso_precise(T0 + 123)).map(|t| t.0),
            Some(T0 + 123)
        );
        assert_eq!(parse_time_spec("-30min", T0), Some(T0 - 1_800_000));
        assert_eq!(parse_time_spec("2 hours ago", T0), Some(T0 - 7_200_000));
        assert_eq!(parse_time_spec("1h 30min ago", T0), Some(T0 - 5_400_000));
        assert_eq!(
            parse_time_spec("2026-09-12 22:00:00", T0),
            Some(T0 - 57 * 60_000 - 5000)
        );
        assert_eq!(parse_time_spec("@1789253825", T0), Some(T0));
        assert_eq!(parse_time_spec("2026-09-12T22:57:05+00:00", T0), Some(T0));
        assert_eq!(parse_time_spec("soon", T0), None);
    }

    #[test]
    fn vpn_journal_is_what_the_live_rules_parse() {
        let st = Arc::new(Mutex::new(gateway()));
        {
            let mut g = st.lock().expect("lock");
            g.restart_unit_at(VPN_UNIT, T0 - 240_000).expect("restart");
            g.restart_unit_at(VPN_UNIT, T0 - 120_000).expect("restart");
        }
        let (out, _, code) = run(
            &st,
            "journalctl -u vpn-egress-tunnel.service --since '-30min' -o short-iso --no-pager",
        );
        assert_eq!(code, 0);
        let lines: Vec<String> = out.lines().map(String::from).collect();
        assert!(
            lines[0].starts_with("2026-09-12T22:53:05+00:00 gw-1 systemd[1]: Stopping"),
            "{out}"
        );
        let facts = parse_journal(&lines);
        let server = facts.server.expect("server");
        assert_eq!(server.ip.to_string(), "192.0.2.112");
        assert_eq!(server.port, 1198);
        let addr = facts.tunnel_addr.expect("tunnel address");
        assert_eq!(addr.address.to_string(), "10.72.192.7");
        assert_eq!(addr.mask, "255.255.192.0");
        // The initial connect is outside the window: two restarts, two connects.
        assert_eq!(facts.connects.len(), 2, "{out}");
        assert_eq!(facts.stops.len(), 2);
        assert_eq!(st.lock().expect("lock").units[VPN_UNIT].restarts, 2);
        // No unit filter match: journald's marker.
        assert_eq!(
            run(&st, "journalctl -u nope -o short-iso").0,
            "-- No entries --\n"
        );
        assert_eq!(
            run(&st, "journalctl -u vpn-egress-tunnel -n 1 -o cat").0,
            "Initialization Sequence Completed\n"
        );
    }

    #[test]
    fn systemctl_reads_and_changes_state() {
        let st = Arc::new(Mutex::new(gateway()));
        assert_eq!(
            run(&st, "systemctl is-active vpn-egress-tunnel.service"),
            ("active\n".into(), String::new(), 0)
        );
        assert_eq!(
            run(&st, "systemctl show -p IOWeight k3s.service").0,
            "IOWeight=[not set]\n"
        );
        assert_eq!(
            run(&st, "systemctl set-property k3s.service IOWeight=10000").2,
            0
        );
        assert_eq!(
            run(&st, "systemctl show -p IOWeight --value k3s.service").0,
            "10000\n"
        );
        assert_eq!(run(&st, "systemctl stop vpn-egress-tunnel").2, 0);
        assert_eq!(
            run(&st, "systemctl is-active vpn-egress-tunnel.service"),
            ("inactive\n".into(), String::new(), 3)
        );
        let (_, e, code) = run(&st, "curl -fsS --interface tun0 https://ipinfo.io/ip");
        assert_eq!(code, 45);
        assert!(e.contains("No such device"), "{e}");
        assert_eq!(run(&st, "systemctl start vpn-egress-tunnel").2, 0);
        assert_eq!(
            run(&st, "curl -fsS --interface tun0 https://ipinfo.io/ip").0,
            "203.0.113.50"
        );
        assert_eq!(run(&st, "curl -fsS https://ipinfo.io/ip").0, "198.51.100.7");
        let (_, e, code) = run(&st, "systemctl restart nope");
        assert_eq!(code, 5);
        assert_eq!(
            e,
            "Failed to restart nope.service: Unit nope.service not found.\n"
        );
        assert_eq!(run(&st, "systemctl is-system-running").0, "running\n");
        st.lock()
            .expect("lock")
            .fail_unit_at("k3s", T0)
            .expect("fail");
        assert_eq!(
            run(&st, "systemctl is-system-running"),
            ("degraded\n".into(), String::new(), 1)
        );
    }

    #[test]
    fn sysfs_reads_and_writes_follow_the_kernel() {
        let st = Arc::new(Mutex::new(gateway()));
        assert_eq!(
            run(&st, "cat /sys/block/sda/queue/scheduler").0,
            "[mq-deadline] kyber bfq none\n"
        );
        assert_eq!(run(&st, "echo bfq > /sys/block/sda/queue/scheduler").2, 0);
        assert_eq!(
            run(&st, "cat /sys/block/sda/queue/scheduler").0,
            "mq-deadline kyber [bfq] none\n"
        );
        let (_, e, code) = run(&st, "echo cfq > /sys/block/sda/queue/scheduler");
        assert_eq!(code, 1);
        assert!(e.contains("Invalid argument"), "{e}");
        assert_eq!(run(&st, "echo 32 > /sys/block/sda/queue/nr_requests").2, 0);
        assert_eq!(st.lock().expect("lock").disks["sda"].nr_requests, 32);
        assert_eq!(run(&st, "echo x > /etc/hostname").2, 2);
        assert_eq!(run(&st, "cat /sys/block/sdz/queue/scheduler").2, 1);
        assert_eq!(
            run(&st, "grep -q '\\[bfq\\]' /sys/block/sda/queue/scheduler").2,
            0
        );
        assert_eq!(
            run(&st, "grep -q '\\[kyber\\]' /sys/block/sda/queue/scheduler").2,
            1
        );
        assert_eq!(
            run(&st, "findmnt -no SOURCE --target /var/lib/rancher/k3s").0,
            "/dev/sda2\n"
        );
        assert_eq!(run(&st, "lsblk -ndo PKNAME /dev/sda2").0, "sda\n");
        assert_eq!(run(&st, "lsblk -ndo PKNAME /dev/sda").0, "\n");
    }

    #[test]
    fn unknown_commands_are_not_simulated_exit_2_and_python_says_why() {
        let st = Arc::new(Mutex::new(gateway()));
        let (_, e, code) = run(&st, "rsync -a /tmp/x /tmp/y");
        assert_eq!(
            (e.as_str(), code),
            ("hk-console simulation: `rsync` is not simulated\n", 2)
        );
        let (_, e, code) = run(
            &st,
            "/usr/bin/python3 /root/.ansible/tmp/AnsiballZ_command.py",
        );
        assert_eq!(code, 2);
        assert!(e.contains("raw"), "{e}");
        assert_eq!(run(&st, "systemctl list-units").2, 2);
        assert!(st
            .lock()
            .expect("lock")
            .commands
            .contains(&"rsync -a /tmp/x /tmp/y".to_string()));
        // What the tree holds, the tools see: rm of a missing file with -f is quiet.
        assert_eq!(run(&st, "rm -rf /tmp/x").2, 0);
        let (o, _, code) = run(
            &st,
            "echo hi > /tmp/x && cat /tmp/x && rm /tmp/x && ls /tmp",
        );
        assert_eq!((o.as_str(), code), ("hi\n", 0));
    }

    #[test]
    fn proc_and_sys_are_modelled_or_loud_never_a_false_enoent() {
        let st = Arc::new(Mutex::new(gateway()));
        let (o, _, code) = run(&st, "grep -c processor /proc/cpuinfo");
        assert_eq!((o.as_str(), code), ("4\n", 0));
        let (o, _, _) = run(&st, "cat /proc/loadavg");
        let (up, _, _) = run(&st, "uptime");
        let first = o.split_whitespace().next().expect("load");
        assert!(
            up.contains(&format!("load average: {first}, ")),
            "{o} / {up}"
        );
        let (o, _, code) = run(&st, "head -1 /proc/meminfo");
        assert_eq!((o.as_str(), code), ("MemTotal:       16288032 kB\n", 0));
        for cmd in [
            "cat /proc/self/status",
            "cat /proc/sys/vm/swappiness",
            "cat /sys/class/net/eth0/address",
            "cat /sys/block/sda/queue/read_ahead_kb",
            "grep -c x /proc/net/dev",
            "[ -e /proc/sys/kernel/hostname ] && echo yes",
            "test -d /sys/fs/cgroup/system.slice || echo no",
            "wc -l < /proc/partitions",
            "ls /proc",
            "echo 1 > /proc/sys/vm/drop_caches",
            "cat /etc/hostname /proc/vmstat",
        ] {
            let (o, e, code) = run(&st, cmd);
            assert_eq!(code, 2, "{cmd}: {o} {e}");
            assert!(o.is_empty(), "{cmd} printed a partial answer: {o}");
            assert!(e.contains("is not simulated"), "{cmd}: {e}");
        }
        // The model knows every disk: another is truly absent, as the kernel says.
        let (o, e, code) = run(&st, "cat /sys/block/sdb/size");
        assert_eq!((o.as_str(), code), ("", 1), "{e}");
        assert_eq!(e, "cat: /sys/block/sdb/size: No such file or directory\n");
        assert_eq!(
            run(&st, "[ -e /sys/block/sdb ] || echo absent").0,
            "absent\n"
        );
        assert_eq!(run(&st, "[ -e /sys/block/sda ] && echo there").0, "there\n");
        assert_eq!(run(&st, "cat /sys/block/sda/size").0, "976773168\n");
        assert_eq!(run(&st, "ls /sys/block").0, "sda\n");
    }

    #[test]
    fn uptime_pretty_tty_and_failed_units_read_like_the_real_tools() {
        assert_eq!(pretty_uptime(1442), "up 1 day, 2 minutes");
        assert_eq!(pretty_uptime(0), "up 0 minutes");
        assert_eq!(pretty_uptime(61), "up 1 hour, 1 minute");
        assert_eq!(
            pretty_uptime(10_080 * 2 + 1440 * 3 + 120),
            "up 2 weeks, 3 days, 2 hours"
        );
        let st = Arc::new(Mutex::new(gateway()));
        assert_eq!(
            run(&st, "uptime -p"),
            ("up 1 day\n".into(), String::new(), 0)
        );
        assert_eq!(run(&st, "tty"), (String::new(), "not a tty\n".into(), 1));
        let mut s = NodeSession::new(st.clone(), "ops", Arc::new(AtomicBool::new(false)))
            .with_tty(Some("/dev/pts/0".into()));
        let (o, _) = s.run("tty");
        assert_eq!((o.stdout.as_slice(), o.status), (&b"/dev/pts/0\n"[..], 0));
        assert_eq!(
            run(&st, "systemctl --failed"),
            (
                "  UNIT LOAD ACTIVE SUB DESCRIPTION\n0 loaded units listed.\n".into(),
                String::new(),
                0
            )
        );
        st.lock()
            .expect("lock")
            .fail_unit_at("vpn-egress-tunnel", T0)
            .expect("unit");
        let (o, _, code) = run(&st, "systemctl list-units --failed");
        assert_eq!(code, 0);
        let first: Vec<&str> = o.lines().nth(1).expect("row").split_whitespace().collect();
        assert_eq!(
            first[..5],
            [
                "●",
                "vpn-egress-tunnel.service",
                "loaded",
                "failed",
                "failed"
            ]
        );
        assert!(o.ends_with("1 loaded units listed.\n"), "{o}");
        assert_eq!(
            run(&st, "systemctl --failed --no-legend").0.lines().count(),
            1
        );
        assert_eq!(run(&st, "systemctl status").2, 2);
    }

    #[test]
    fn the_node_says_the_lan_address_it_was_given() {
        let mut n = gateway();
        n.set_lan(Ipv4Addr::new(10, 1, 2, 3), 24, Ipv4Addr::new(10, 1, 2, 254));
        let st = Arc::new(Mutex::new(n));
        assert_eq!(run(&st, "hostname -I").0, "10.1.2.3 10.72.192.7 \n");
        assert!(run(&st, "ip -br a").0.contains(" 10.1.2.3/24 "));
        let r = run(&st, "ip r").0;
        assert!(r.starts_with("default via 10.1.2.254 dev eth0 "), "{r}");
        assert!(
            r.contains("10.1.2.0/24 dev eth0 proto kernel scope link src 10.1.2.3"),
            "{r}"
        );
        assert!(run(&st, "ss -tln").0.contains("10.1.2.3:2379"));
    }
}
