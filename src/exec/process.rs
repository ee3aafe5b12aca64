//! Local processes under supervision (ansible-playbook): streamed line by line, redacted,
//! capped, and stopped the way an operator's Ctrl-C would: SIGINT to the whole process
//! group, SIGTERM after a grace period, SIGKILL after another.
//!
//! Owns: [`run_supervised`], [`AnsibleRunner`]. Must not: decide whether a step may run
//! (the capability types in [`super`] do) or parse ansible output ([`super::ansible`]).

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
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
    #[error("{0}")]
    NotInstalled(String),
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
}

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
    let mut cmd = Command::new(&spec.program);
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
    let mut child = cmd.spawn().map_err(|source| ProcessError::Spawn {
        program: name.clone(),
        source,
    })?;
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);

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
    out.exit_code = status.code();
    out.signal = status.signal();
    out.elapsed = started.elapsed();
    Ok(out)
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
        let program = ansible::resolve_program(argv0, &self.search_dirs)
            .map_err(ProcessError::NotInstalled)?;
        let mut env: Vec<(String, String)> = vec![
            // Lines must arrive as they happen and be parseable: no colour, no buffering,
            // the default callback (the recap format parsed here).
            ("ANSIBLE_NOCOLOR".into(), "1".into()),
            ("ANSIBLE_FORCE_COLOR".into(), "0".into()),
            ("PYTHONUNBUFFERED".into(), "1".into()),
            ("ANSIBLE_STDOUT_CALLBACK".into(), "default".into()),
        ];
        env.extend(self.env.iter().cloned());
        let spec = ProcessSpec {
            program,
            args: args.to_vec(),
            cwd: cwd.map(Path::to_path_buf),
            env,
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
                "ansible-playbook --list-hosts exited with {:?}: {}",
                outcome.process.exit_code,
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
