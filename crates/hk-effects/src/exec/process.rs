//! Local processes under supervision (ansible-playbook): streamed line by line, redacted,
//! capped, and stopped the way an operator's Ctrl-C would: SIGINT to the whole process
//! group, SIGTERM after a grace period, SIGKILL after another.
//!
//! Owns: [`run_supervised`], [`AnsibleRunner`], and the guarantee that no child outlives
//! the console: every child runs in its own process group and is listed in a process-wide
//! registry ([`stop_all`] runs the ladder on every listed group when the console loses its
//! terminal, is told to stop, or panics); on Linux it is started through util-linux
//! `setpriv --pdeathsig KILL` (a parent-death signal without `unsafe` `pre_exec`), and a
//! lifeline watcher (`sh`, in a group of its own, reading a pipe only the console holds)
//! kills the whole group when that pipe closes, so even a SIGKILLed console takes the
//! group with it. Ansible's ssh ControlPersist masters daemonise out of the group, so their
//! sockets go in a directory per run that the supervisor (or the watcher) closes with
//! `ssh -O exit`. [`ChildId`] (pid + kernel start time) names a child in the journal, and
//! [`liveness`] tells later whether that very process still runs.
//! Must not: decide whether a step may run (the capability types in [`super`] do) or parse
//! ansible output ([`super::ansible`]).
//!
//! One file (over 800 lines): the stop ladder, the registry and the lifeline watcher are
//! one guarantee (no child outlives the console) and are reviewed together.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::ansible::{self, HostRecap};
use super::redact::Redactor;

/// Which stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    Stdout,
    Stderr,
}

/// One redacted line of output, as the run view and the journal get it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OutputLine {
    pub stream: Stream,
    pub text: String,
}

/// Errors starting or supervising a process.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error(transparent)]
    NotInstalled(#[from] ansible::NotInstalled),
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("waiting for {program}: {source}")]
    Wait {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("empty command")]
    EmptyArgv,
    #[error(
        "setpriv (util-linux) was not found in /usr/bin, /bin or PATH: on Linux every child is \
         started through `setpriv --pdeathsig KILL` so it cannot outlive the console; install \
         util-linux"
    )]
    NoSetpriv,
    #[error("cannot start the lifeline watcher of {program} (/bin/sh): {source}")]
    Lifeline {
        program: String,
        #[source]
        source: std::io::Error,
    },
}

/// Timing and limits of supervision.
#[derive(Debug, Clone)]
pub struct SupervisorConfig {
    /// After SIGINT, how long before SIGTERM.
    pub int_grace: Duration,
    /// After SIGTERM, how long before SIGKILL.
    pub term_grace: Duration,
    /// Stop the process (same ladder) after this long.
    pub timeout: Option<Duration>,
    /// Lines kept per stream in the outcome (the sink still sees every line).
    pub max_lines: usize,
}

impl Default for SupervisorConfig {
    fn default() -> Self {
        SupervisorConfig {
            int_grace: Duration::from_secs(10),
            term_grace: Duration::from_secs(5),
            timeout: None,
            max_lines: 20_000,
        }
    }
}

/// A signal the supervisor sent, and when (since start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentSignal {
    pub signal: Signal,
    pub after: Duration,
}

/// How a supervised process ended.
#[derive(Debug, Clone)]
pub struct ProcessOutcome {
    /// Exit code if it exited; None if a signal ended it.
    pub exit_code: Option<i32>,
    /// The signal that ended it, if any.
    pub signal: Option<i32>,
    pub stdout: Vec<String>,
    pub stderr: Vec<String>,
    /// Lines were dropped from `stdout`/`stderr` past `max_lines`.
    pub truncated: bool,
    pub cancelled: bool,
    pub timed_out: bool,
    /// The stop ladder as carried out (empty when it ended by itself).
    pub signals_sent: Vec<SentSignal>,
    pub elapsed: Duration,
}

impl ProcessOutcome {
    pub fn success(&self) -> bool {
        self.exit_code == Some(0)
    }
}

/// What to run: program, arguments, working directory, extra environment.
#[derive(Debug, Clone, Default)]
pub struct ProcessSpec {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub cwd: Option<PathBuf>,
    pub env: Vec<(String, String)>,
    /// Told the child's [`ChildId`] as soon as it is spawned (the journal records it).
    pub spawned: Option<mpsc::UnboundedSender<ChildId>>,
    /// Where this child's ssh ControlPersist masters keep their sockets: closed (`ssh -O
    /// exit`) and removed once the group is gone, whichever way it went.
    pub control_dir: Option<PathBuf>,
}

/// One process, named so that a later look cannot mistake another for it: its pid and the
/// kernel's start time of that pid (`/proc/PID/stat` field 22, clock ticks since boot).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChildId {
    pub pid: u32,
    pub start_time: u64,
    /// What was started (the program's path), for the journal and the resume view.
    pub program: String,
    /// The value of [`MARKER_VAR`] in its environment, which every descendant inherits:
    /// ansible's workers call setsid() and leave the process group, and orphans are
    /// re-parented, but the marker still finds them.
    #[serde(default)]
    pub marker: String,
}

/// The environment variable that marks a supervised child and all it starts.
pub const MARKER_VAR: &str = "HK_CONSOLE_CHILD";

/// Every running (non-zombie) process whose environment holds `MARKER_VAR=marker`.
pub fn marked(marker: &str) -> Vec<u32> {
    if marker.is_empty() {
        return Vec::new();
    }
    let want = format!("{MARKER_VAR}={marker}");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == want.as_bytes()))
                && proc_stat(*pid).is_some_and(|(state, _, _)| state != 'Z')
        })
        .collect()
}

/// A fresh marker for one child.
fn new_marker() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "{}-{}-{}",
        std::process::id(),
        start_time(std::process::id()).unwrap_or(0),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Whether a journaled process still runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    /// The same process (pid and start time) runs.
    Alive,
    /// No such process, a zombie, or the pid now belongs to another process.
    Gone(String),
    /// This system cannot say (no /proc).
    Unknown(String),
}

/// `/proc/PID/stat` of a process: its state letter, process group and start time.
fn proc_stat(pid: u32) -> Option<(char, i32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces or parentheses itself: the
    // fields that follow start after the last `)`.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state), f[2] field 5 (pgrp), f[19] field 22 (starttime).
    let state = f.first()?.chars().next()?;
    let pgrp = f.get(2)?.parse().ok()?;
    let start = f.get(19)?.parse().ok()?;
    Some((state, pgrp, start))
}

/// The kernel start time of `pid`, if it runs.
pub fn start_time(pid: u32) -> Option<u64> {
    proc_stat(pid).map(|(_, _, t)| t)
}

/// Whether `child` (that very process, not a later one with its pid) still runs.
pub fn liveness(child: &ChildId) -> Liveness {
    if !Path::new("/proc/self/stat").exists() {
        return Liveness::Unknown("no /proc on this system to look the process up in".into());
    }
    match proc_stat(child.pid) {
        None => Liveness::Gone(format!("no process {} any more", child.pid)),
        Some((_, _, t)) if t != child.start_time => Liveness::Gone(format!(
            "pid {} now belongs to another process (started at tick {t}, not {})",
            child.pid, child.start_time
        )),
        Some(('Z', _, _)) => Liveness::Gone(format!("process {} has exited", child.pid)),
        Some(_) => Liveness::Alive,
    }
}

/// Whether any process of group `pgid` other than a zombie is left.
fn group_alive(pgid: i32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        // No /proc: ask the kernel (a zombie leader counts as alive here).
        return killpg(Pid::from_raw(pgid), None).is_ok();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(proc_stat)
        .any(|(state, pgrp, _)| pgrp == pgid && state != 'Z')
}

/// A supervised group the console is responsible for.
#[derive(Debug, Clone)]
struct LiveGroup {
    child: ChildId,
    control_dir: Option<PathBuf>,
}

/// Every group started by [`run_supervised`] and not yet gone. A plain mutex, not an async
/// one: a panic hook and a signal path must be able to reach it without a runtime.
static LIVE: Mutex<Vec<LiveGroup>> = Mutex::new(Vec::new());

fn live() -> std::sync::MutexGuard<'static, Vec<LiveGroup>> {
    // Plain pushes and removes: a poisoned lock is still consistent.
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// The children still running under this console.
pub fn live_children() -> Vec<ChildId> {
    live().iter().map(|g| g.child.clone()).collect()
}

/// What stopping one child came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopReport {
    pub child: ChildId,
    /// The rungs of the ladder sent, in order.
    pub signals: Vec<Signal>,
    /// Whether the group was gone at the end (false: still there after SIGKILL).
    pub ended: bool,
}

impl StopReport {
    /// `pid 123 (ansible-playbook): SIGINT, SIGTERM: ended`.
    pub fn describe(&self) -> String {
        let sigs: Vec<&str> = self.signals.iter().map(|s| s.as_str()).collect();
        let name = Path::new(&self.child.program)
            .file_name()
            .map_or(self.child.program.clone(), |f| {
                f.to_string_lossy().into_owned()
            });
        format!(
            "pid {} ({name}): {}: {}",
            self.child.pid,
            if sigs.is_empty() {
                "already gone, nothing sent".to_string()
            } else {
                format!("sent {}", sigs.join(", "))
            },
            if self.ended {
                "ended"
            } else {
                "STILL RUNNING after SIGKILL"
            }
        )
    }
}

/// The stop ladder on groups this console may not be the parent of (a synchronous walk:
/// usable from a panic hook, a signal path or a plain thread): SIGINT to every group, up to
/// `int_grace` for them to go, SIGTERM, up to `term_grace`, SIGKILL, up to one second more.
/// A group leader's start time is checked before each signal, so a pid reused since is
/// never signalled.
pub fn stop_groups(
    children: &[ChildId],
    int_grace: Duration,
    term_grace: Duration,
) -> Vec<StopReport> {
    let mut reports: Vec<StopReport> = children
        .iter()
        .map(|c| StopReport {
            child: c.clone(),
            signals: Vec::new(),
            ended: false,
        })
        .collect();
    let gone = |r: &StopReport| -> bool {
        // The leader may be a zombie its parent has not reaped: the group, and whatever
        // carries the child's marker (workers that left the group), is what counts.
        let pgid = i32::try_from(r.child.pid).unwrap_or(i32::MAX);
        let tree_gone = marked(&r.child.marker).is_empty();
        match liveness(&r.child) {
            Liveness::Alive => false,
            Liveness::Gone(_) => !group_alive(pgid) && tree_gone,
            Liveness::Unknown(_) => killpg(Pid::from_raw(pgid), None).is_err() && tree_gone,
        }
    };
    for (sig, grace) in [
        (Signal::SIGINT, int_grace),
        (Signal::SIGTERM, term_grace),
        (Signal::SIGKILL, Duration::from_secs(1)),
    ] {
        for r in reports.iter_mut() {
            if r.ended {
                continue;
            }
            if gone(r) {
                r.ended = true;
                continue;
            }
            if let Ok(pgid) = i32::try_from(r.child.pid) {
                if liveness(&r.child) == Liveness::Alive || group_alive(pgid) {
                    let _ = killpg(Pid::from_raw(pgid), sig);
                }
                // SIGINT goes to the group only, as a terminal's Ctrl-C would (ansible
                // stops its workers itself); the harder rungs reach every marked process.
                if sig != Signal::SIGINT {
                    signal_marked(&r.child.marker, sig);
                }
                r.signals.push(sig);
            }
        }
        let until = Instant::now() + grace;
        loop {
            let mut all = true;
            for r in reports.iter_mut().filter(|r| !r.ended) {
                if gone(r) {
                    r.ended = true;
                } else {
                    all = false;
                }
            }
            if all || Instant::now() >= until {
                break;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        if reports.iter().all(|r| r.ended) {
            break;
        }
    }
    reports
}

/// Stop every child this console still supervises (the ladder of [`stop_groups`]) and
/// close their ssh masters. For the paths where the console itself is going away: a lost
/// terminal, SIGHUP/SIGTERM, a panic.
pub fn stop_all(int_grace: Duration, term_grace: Duration) -> Vec<StopReport> {
    let groups: Vec<LiveGroup> = live().clone();
    if groups.is_empty() {
        return Vec::new();
    }
    let children: Vec<ChildId> = groups.iter().map(|g| g.child.clone()).collect();
    let reports = stop_groups(&children, int_grace, term_grace);
    for g in &groups {
        if let Some(dir) = &g.control_dir {
            close_masters_blocking(dir);
        }
    }
    reports
}

/// Close every ssh ControlPersist master whose socket is in `dir`, then remove `dir`.
fn close_masters_blocking(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.filter_map(Result::ok) {
            let _ = std::process::Command::new("ssh")
                .arg("-o")
                .arg(format!("ControlPath={}", e.path().display()))
                .args(["-O", "exit", "hk-console-control-master"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// A fresh directory for one run's ssh control sockets (short: a socket path has ~100
/// bytes), private to this user.
pub fn new_control_dir() -> std::io::Result<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let dir = std::env::temp_dir().join(format!(
        "hk-cp-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(&dir)?;
    Ok(dir)
}

use std::os::unix::fs::DirBuilderExt;

/// util-linux `setpriv`, which sets the parent-death signal and execs the child in place
/// (same pid), so the console needs no `unsafe` `pre_exec` for it.
fn setpriv() -> Option<PathBuf> {
    let fixed = ["/usr/bin/setpriv", "/bin/setpriv"].map(PathBuf::from);
    let on_path = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("setpriv"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    fixed.into_iter().chain(on_path).find(|p| p.is_file())
}

/// The lifeline watcher's script: `$1` the group, `$2` the control socket dir (or empty),
/// `$3` the marker (`HK_CONSOLE_CHILD=...`) every process of the child carries.
/// A line on stdin means the console finished with the group itself; end of file means the
/// console is gone (its end of the pipe closed however it died): kill the group, close the
/// masters. It ignores the terminal's signals so a hangup cannot take it first.
const LIFELINE: &str = "trap '' HUP INT TERM QUIT; \
if read -r _; then exit 0; fi; \
kill -KILL -- -\"$1\" 2>/dev/null; \
for i in 1 2; do for f in $(grep -lzxF -- \"$3\" /proc/[0-9]*/environ 2>/dev/null); do \
p=${f#/proc/}; kill -KILL \"${p%/environ}\" 2>/dev/null; done; done; \
if [ -n \"$2\" ]; then \
for s in \"$2\"/*; do [ -S \"$s\" ] && ssh -o ControlPath=\"$s\" -O exit hk-console-control-master >/dev/null 2>&1; done; \
rm -rf -- \"$2\"; fi";

/// Runs `spec` in its own process group, streaming redacted lines to `sink`, until it
/// ends, `cancel` fires or the timeout passes (then the stop ladder).
pub async fn run_supervised(
    spec: &ProcessSpec,
    redactor: &Redactor,
    sink: Option<&mpsc::UnboundedSender<OutputLine>>,
    cancel: &CancellationToken,
    cfg: &SupervisorConfig,
) -> Result<ProcessOutcome, ProcessError> {
    let started = Instant::now();
    let name = spec.program.display().to_string();
    // On Linux the child is exec'd through setpriv with a parent-death signal: if the
    // console dies without running the ladder (SIGKILL), the kernel kills the child.
    let mut cmd = if cfg!(target_os = "linux") {
        let sp = setpriv().ok_or(ProcessError::NoSetpriv)?;
        let mut c = Command::new(sp);
        c.args(["--pdeathsig", "KILL", "--"]).arg(&spec.program);
        c
    } else {
        Command::new(&spec.program)
    };
    cmd.args(&spec.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, so the ladder reaches ansible's forks and ssh children too, as a
        // terminal's Ctrl-C would.
        .process_group(0)
        .kill_on_drop(true);
    if let Some(d) = &spec.cwd {
        cmd.current_dir(d);
    }
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    let marker = new_marker();
    cmd.env(MARKER_VAR, &marker);
    let mut child = cmd.spawn().map_err(|source| ProcessError::Spawn {
        program: name.clone(),
        source,
    })?;
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    let id = child.id().map(|pid| ChildId {
        pid,
        start_time: start_time(pid).unwrap_or(0),
        program: name.clone(),
        marker: marker.clone(),
    });
    let mut lifeline = None;
    if let Some(id) = &id {
        live().push(LiveGroup {
            child: id.clone(),
            control_dir: spec.control_dir.clone(),
        });
        if let Some(tx) = &spec.spawned {
            let _ = tx.send(id.clone());
        }
        match spawn_lifeline(id.pid, spec.control_dir.as_deref(), &marker) {
            Ok(l) => lifeline = Some(l),
            Err(source) => {
                // Without its lifeline the child could outlive the console: not started.
                let _ = child.start_kill();
                let _ = child.wait().await;
                forget(id.pid);
                return Err(ProcessError::Lifeline {
                    program: name,
                    source,
                });
            }
        }
    }

    let (tx, mut rx) = mpsc::unbounded_channel::<OutputLine>();
    let mut readers = Vec::new();
    if let Some(out) = child.stdout.take() {
        readers.push(tokio::spawn(pump(out, Stream::Stdout, tx.clone())));
    }
    if let Some(err) = child.stderr.take() {
        readers.push(tokio::spawn(pump(err, Stream::Stderr, tx.clone())));
    }
    drop(tx);

    let mut out = ProcessOutcome {
        exit_code: None,
        signal: None,
        stdout: Vec::new(),
        stderr: Vec::new(),
        truncated: false,
        cancelled: false,
        timed_out: false,
        signals_sent: Vec::new(),
        elapsed: Duration::ZERO,
    };
    let accept = |line: OutputLine, out: &mut ProcessOutcome| {
        let line = OutputLine {
            stream: line.stream,
            text: redactor.redact(&line.text),
        };
        if let Some(s) = sink {
            let _ = s.send(line.clone());
        }
        let v = match line.stream {
            Stream::Stdout => &mut out.stdout,
            Stream::Stderr => &mut out.stderr,
        };
        if v.len() < cfg.max_lines {
            v.push(line.text);
        } else {
            out.truncated = true;
        }
    };

    let deadline = cfg.timeout.map(|t| tokio::time::Instant::now() + t);
    let mut lines_open = true;
    // Phase 1: run until it exits, or cancel/timeout starts the ladder.
    let status = loop {
        tokio::select! {
            st = child.wait() => break Some(st.map_err(|source| ProcessError::Wait { program: name.clone(), source })?),
            l = rx.recv(), if lines_open => match l {
                Some(l) => accept(l, &mut out),
                None => lines_open = false,
            },
            _ = cancel.cancelled() => { out.cancelled = true; break None; }
            _ = sleep_until_opt(deadline) => { out.timed_out = true; break None; }
        }
    };
    let status = match status {
        Some(s) => s,
        None => {
            // Phase 2: the ladder. Each rung waits for the exit while still draining lines.
            let rungs = [
                (Signal::SIGINT, Some(cfg.int_grace)),
                (Signal::SIGTERM, Some(cfg.term_grace)),
                (Signal::SIGKILL, None),
            ];
            let mut final_status = None;
            for (sig, grace) in rungs {
                if let Some(pg) = pgid {
                    // ESRCH: the group is gone already; the wait below returns at once.
                    let _ = killpg(pg, sig);
                }
                if sig != Signal::SIGINT {
                    signal_marked(&marker, sig);
                }
                out.signals_sent.push(SentSignal {
                    signal: sig,
                    after: started.elapsed(),
                });
                let until = grace.map(|g| tokio::time::Instant::now() + g);
                let st = loop {
                    tokio::select! {
                        st = child.wait() => break Some(st.map_err(|source| ProcessError::Wait { program: name.clone(), source })?),
                        l = rx.recv(), if lines_open => match l {
                            Some(l) => accept(l, &mut out),
                            None => lines_open = false,
                        },
                        _ = sleep_until_opt(until) => break None,
                    }
                };
                if st.is_some() {
                    final_status = st;
                    break;
                }
            }
            match final_status {
                Some(s) => s,
                None => child.wait().await.map_err(|source| ProcessError::Wait {
                    program: name.clone(),
                    source,
                })?,
            }
        }
    };
    // The leader is gone; whatever it left in the group (workers, ssh) goes with it, or
    // the pipes could stay open forever.
    if let Some(pg) = pgid {
        let _ = killpg(pg, Signal::SIGKILL);
    }
    // Ansible's workers leave the group (setsid); they carry the marker.
    signal_marked(&marker, Signal::SIGKILL);
    // Drain what is left, bounded: a grandchild that escaped the group could hold a pipe.
    let drain_until = tokio::time::Instant::now() + Duration::from_secs(2);
    while lines_open {
        tokio::select! {
            l = rx.recv() => match l {
                Some(l) => accept(l, &mut out),
                None => lines_open = false,
            },
            _ = tokio::time::sleep_until(drain_until) => break,
        }
    }
    for r in readers {
        r.abort();
    }
    // The group is gone: stand the watcher down, then close what ssh left running.
    if let Some(mut l) = lifeline {
        if let Some(mut stdin) = l.stdin.take() {
            let _ = stdin.write_all(b"done\n").await;
        }
        let _ = tokio::time::timeout(Duration::from_secs(2), l.wait()).await;
    }
    if let Some(id) = &id {
        forget(id.pid);
    }
    if let Some(dir) = spec.control_dir.clone() {
        let _ = tokio::task::spawn_blocking(move || close_masters_blocking(&dir)).await;
    }
    out.exit_code = status.code();
    out.signal = status.signal();
    out.elapsed = started.elapsed();
    Ok(out)
}

/// Send `sig` to every process carrying `marker`.
fn signal_marked(marker: &str, sig: Signal) {
    for pid in marked(marker) {
        if let Ok(p) = i32::try_from(pid) {
            let _ = nix::sys::signal::kill(Pid::from_raw(p), sig);
        }
    }
}

/// Drop `pid` from the registry of live groups.
fn forget(pid: u32) {
    live().retain(|g| g.child.pid != pid);
}

/// The watcher that takes group `pgid` down if the console dies without doing it.
fn spawn_lifeline(
    pgid: u32,
    control_dir: Option<&Path>,
    marker: &str,
) -> std::io::Result<tokio::process::Child> {
    Command::new("/bin/sh")
        .arg("-c")
        .arg(LIFELINE)
        .arg("hk-console-lifeline")
        .arg(pgid.to_string())
        .arg(
            control_dir
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
        )
        .arg(format!("{MARKER_VAR}={marker}"))
        .env_remove(MARKER_VAR)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Its own group: the ladder's signals to the child's group and the terminal's to
        // the console's never reach it.
        .process_group(0)
        .spawn()
}

async fn sleep_until_opt(t: Option<tokio::time::Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

async fn pump<R: AsyncRead + Unpin>(r: R, stream: Stream, tx: mpsc::UnboundedSender<OutputLine>) {
    let mut reader = BufReader::new(r);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let text = String::from_utf8_lossy(&buf)
                    .trim_end_matches(['\n', '\r'])
                    .to_string();
                if tx.send(OutputLine { stream, text }).is_err() {
                    break;
                }
            }
        }
    }
}

/// Runs ansible-playbook argv the way the runbook says, from the repo's ansible dir.
#[derive(Debug, Clone)]
pub struct AnsibleRunner {
    /// Where `ansible-playbook` is looked for (see [`ansible::search_dirs`]).
    pub search_dirs: Vec<PathBuf>,
    /// Extra environment (the test harness points Ansible at its temp dirs here).
    pub env: Vec<(String, String)>,
    pub supervisor: SupervisorConfig,
    /// Told each ansible-playbook's [`ChildId`] when it starts.
    pub spawned: Option<mpsc::UnboundedSender<ChildId>>,
}

/// The outcome of an ansible-playbook run.
#[derive(Debug, Clone)]
pub struct AnsibleOutcome {
    pub process: ProcessOutcome,
    /// PLAY RECAP per host (empty when no recap was printed).
    pub recap: BTreeMap<String, HostRecap>,
}

impl AnsibleOutcome {
    /// Exit 0 and no host failed or unreachable.
    pub fn success(&self) -> bool {
        self.process.success() && self.recap.values().all(HostRecap::succeeded)
    }
}

impl AnsibleRunner {
    /// Looks for ansible-playbook in the default places, with the default ladder.
    pub fn from_env() -> Self {
        AnsibleRunner {
            search_dirs: ansible::search_dirs(),
            env: Vec::new(),
            supervisor: SupervisorConfig::default(),
            spawned: None,
        }
    }

    /// Runs `argv` (`argv[0]` is `ansible-playbook` or a path to it) in `cwd`.
    pub async fn run(
        &self,
        argv: &[String],
        cwd: Option<&Path>,
        redactor: &Redactor,
        sink: Option<&mpsc::UnboundedSender<OutputLine>>,
        cancel: &CancellationToken,
    ) -> Result<AnsibleOutcome, ProcessError> {
        let (argv0, args) = argv.split_first().ok_or(ProcessError::EmptyArgv)?;
        let program = ansible::resolve_program(argv0, &self.search_dirs)?;
        let launch = ansible::launch_for_async(program, self.search_dirs.clone()).await;
        let args: Vec<String> = launch.prefix.iter().chain(args).cloned().collect();
        let program = launch.program;
        let mut env: Vec<(String, String)> = vec![
            // Lines must arrive as they happen and be parseable: no colour, no buffering,
            // the default callback (the recap format parsed here).
            ("ANSIBLE_NOCOLOR".into(), "1".into()),
            ("ANSIBLE_FORCE_COLOR".into(), "0".into()),
            ("PYTHONUNBUFFERED".into(), "1".into()),
            ("ANSIBLE_STDOUT_CALLBACK".into(), "default".into()),
        ];
        // ssh ControlPersist masters daemonise out of the process group; their sockets go
        // in a directory of this run's so they can be closed when it ends, however it ends.
        let control_dir = new_control_dir().map_err(|source| ProcessError::Spawn {
            program: "a directory for ssh control sockets".into(),
            source,
        })?;
        env.push((
            "ANSIBLE_SSH_CONTROL_PATH_DIR".into(),
            control_dir.display().to_string(),
        ));
        env.push((
            "ANSIBLE_SSH_CONTROL_PATH".into(),
            "%(directory)s/%%C".into(),
        ));
        env.extend(self.env.iter().cloned());
        let spec = ProcessSpec {
            program,
            args,
            cwd: cwd.map(Path::to_path_buf),
            env,
            spawned: self.spawned.clone(),
            control_dir: Some(control_dir),
        };
        let process = run_supervised(&spec, redactor, sink, cancel, &self.supervisor).await?;
        let recap = ansible::parse_recap(process.stdout.iter().map(String::as_str));
        Ok(AnsibleOutcome { process, recap })
    }

    /// Runs the `--list-hosts` variant of `argv` and judges it against `expected`.
    pub async fn list_hosts(
        &self,
        argv: &[String],
        cwd: Option<&Path>,
        expected: &[String],
        cancel: &CancellationToken,
    ) -> Result<(ansible::ListHostsVerdict, AnsibleOutcome), ProcessError> {
        let argv = ansible::list_hosts_argv(argv);
        let outcome = self
            .run(&argv, cwd, &Redactor::none(), None, cancel)
            .await?;
        let verdict = judge_list_hosts(&outcome, expected);
        Ok((verdict, outcome))
    }
}

/// The list-hosts gate over a finished `--list-hosts` run: a failed run, output that does
/// not parse cleanly, or a different host set all block.
pub fn judge_list_hosts(
    outcome: &AnsibleOutcome,
    expected: &[String],
) -> ansible::ListHostsVerdict {
    if !outcome.process.success() {
        return ansible::ListHostsVerdict::Block {
            reason: format!(
                "ansible-playbook --list-hosts exited with {}: {}",
                outcome.process.exit_code.map_or(
                    "no exit code (killed by a signal?)".to_string(),
                    |c| format!("exit code {c}")
                ),
                outcome.process.stderr.join(" | ")
            ),
        };
    }
    let parsed = ansible::parse_list_hosts(
        &outcome.process.stdout.join("\n"),
        &outcome.process.stderr.join("\n"),
    );
    ansible::list_hosts_gate(expected, &parsed)
}
