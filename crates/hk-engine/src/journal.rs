//! The append-only, fsync'd JSONL record of a run, and its replay.
//!
//! Owns: the journal file format, where journals live (`$XDG_STATE_HOME/hk-console/runs/`,
//! else `$HOME/.local/state/hk-console/runs/`; always a parameter so tests use a temp dir),
//! appending (each line written and `sync_data`'d before the caller gets the effects to
//! dispatch), replay through the pure machine, resuming a run after a crash, and listing runs.
//! Every line is masked with the run's [`Redactor`] as it is written (the vaulted values and
//! the vault password, wherever they sit: the plan in the header, a gate's note, typed text):
//! the record is read by people and copied into change logs.
//! Must not: decide anything about a run. Every decision is `runbook::machine`'s; this module
//! only stores the events that machine accepted and feeds them back to it.
//!
//! Format: line 1 is a [`Header`] (format version, run id, runbook, env, mode, operator,
//! start time, the full plan). Every further line is a [`Record`]: a sequence number from 1,
//! and the [`Event`] (time and input). Each line ends with `\n`; a last line without one is a
//! torn write from a crash: it is ignored and reported, never acted on (the append that wrote
//! it had not returned, so no effect followed it).
//!
//! Why one file over 800 lines: the format, the fsync'd append, the torn-line salvage and the
//! replay must agree byte for byte on one line format; kept together so a change to one is seen
//! beside the others.

use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::redact::Redactor;
use crate::runbook::machine::{
    Effect, Event, Input, MachineError, Mode, Run, RunOutcome, Timestamp,
};
use crate::runbook::plan::Plan;

/// The journal format this build writes and the newest it reads. Format 2: each step's
/// `step-started` (and each resume probe's `probe-started`) is recorded before its work
/// leaves the console, so a start missing from the journal means the work never went out.
/// Format 1 recorded the start after the work began; such journals still replay, where a
/// missing start proves nothing.
pub const FORMAT_VERSION: u32 = 2;

/// Proof that the record letting one piece of work begin is on disk: the `step-started`
/// of step `n`'s attempt (or the `probe-started` of a resume probe, which runs as step
/// `n`'s attempt 1), written and `fdatasync`'d. Only [`Journal::record_start`] and
/// [`Journal::record_probe_start`] make one, after their append returned; its fields are
/// private, so no other code can. Every executor request carries one, and the spawn of a
/// mutating process, a mutating step's SSH command and a Kubernetes write each take it as
/// an argument: work is reachable only from a durable record, and an append that failed
/// made no proof, so nothing can start behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartRecorded {
    journal: PathBuf,
    seq: u64,
    n: usize,
    attempt: u32,
}

impl StartRecorded {
    /// The step whose work this record lets begin.
    pub fn n(&self) -> usize {
        self.n
    }
    /// The attempt of that step.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }
    /// The record's sequence number in its journal.
    pub fn seq(&self) -> u64 {
        self.seq
    }
    /// The journal it is in.
    pub fn journal(&self) -> &Path {
        &self.journal
    }
    /// Whether this is the start record of step `n`'s `attempt`.
    pub fn covers(&self, n: usize, attempt: u32) -> bool {
        self.n == n && self.attempt == attempt
    }
}

/// The first line of every journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub format: u32,
    pub run_id: String,
    pub runbook: String,
    pub env: String,
    pub mode: Mode,
    pub operator: String,
    pub started_at: Timestamp,
    pub plan: Plan,
}

impl Header {
    /// A header for a new run of `plan`; the run id is made from the time, runbook and env so
    /// journal file names sort by start time.
    pub fn new(plan: Plan, mode: Mode, operator: &str, started_at: Timestamp) -> Self {
        Header {
            format: FORMAT_VERSION,
            run_id: run_id_for(started_at, &plan.runbook, &plan.env),
            runbook: plan.runbook.clone(),
            env: plan.env.clone(),
            mode,
            operator: operator.to_string(),
            started_at,
            plan,
        }
    }
}

/// One event line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    pub seq: u64,
    pub at: Timestamp,
    pub input: Input,
}

impl Record {
    pub fn event(&self) -> Event {
        Event::new(self.at, self.input.clone())
    }
}

#[derive(Debug, Error)]
pub enum JournalError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}:{col}: {what}", path.display())]
    Corrupt {
        path: PathBuf,
        line: usize,
        col: usize,
        what: String,
    },
    #[error("{}:{line}: the run state machine refused this journaled event: {source}", path.display())]
    Rejected {
        path: PathBuf,
        line: usize,
        #[source]
        source: MachineError,
    },
    #[error("{}: journal format {found}, but this hk-console reads up to format {FORMAT_VERSION}; use a newer hk-console", path.display())]
    NewerFormat { path: PathBuf, found: u32 },
    #[error("{}: another hk-console has this run open (its journal is locked); stop that one first", path.display())]
    Locked { path: PathBuf },
    #[error("{}: a run journal already exists there", path.display())]
    Exists { path: PathBuf },
    #[error(
        "run id {id:?} cannot name a journal file: use letters, digits, '-', '_' and '.' only"
    )]
    InvalidRunId { id: String },
    #[error("no place for run journals: neither XDG_STATE_HOME (absolute) nor HOME is set")]
    NoStateDir,
    #[error("{}: an earlier append failed, so this journal takes no more events (stop and resume the run)", path.display())]
    Poisoned { path: PathBuf },
    /// A damaged journal asked to resume: refused, with where and why.
    #[error("{}: cannot resume: {damage}; {}", path.display(), Damage::NOT_RESUMABLE)]
    Damaged { path: PathBuf, damage: Box<Damage> },
    /// The machine refused the event; nothing was journaled and the run is unchanged.
    #[error(transparent)]
    Machine(#[from] MachineError),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> JournalError + '_ {
    move |source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Something replay tolerated but the operator should know about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JournalWarning {
    /// The last line had no newline: a write cut short by a crash. It was ignored.
    TornTail {
        path: PathBuf,
        line: usize,
        bytes: usize,
        /// Whether the torn bytes were cut off the file (when resuming to append).
        truncated: bool,
    },
    /// Steps that were running or verifying at the end of the journal: the process died
    /// under them, so they are shown (and, on resume, journaled) as interrupted.
    Interrupted { path: PathBuf, steps: Vec<usize> },
}

impl std::fmt::Display for JournalWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JournalWarning::TornTail {
                path,
                line,
                bytes,
                truncated,
            } => {
                write!(
                    f,
                    "{}:{line}: torn last line ({bytes} bytes without a newline) ignored: the \
                     process stopped mid-write, so that event was never acted on",
                    path.display()
                )?;
                if *truncated {
                    write!(f, "; cut it off before appending")?;
                }
                Ok(())
            }
            JournalWarning::Interrupted { path, steps } => {
                let list: Vec<String> = steps.iter().map(|n| n.to_string()).collect();
                write!(
                    f,
                    "{}: step(s) {} were in flight when the run stopped; they are interrupted \
                     and run again only on a retry",
                    path.display(),
                    list.join(", ")
                )
            }
        }
    }
}

/// A journal read back.
#[derive(Debug, Clone)]
pub struct Replayed {
    pub path: PathBuf,
    pub header: Header,
    pub records: Vec<Record>,
    /// The rebuilt run; steps in flight at the end are `Interrupted`.
    pub run: Run,
    pub warnings: Vec<JournalWarning>,
}

/// The current time as a journal timestamp. The one clock read of a run happens out here.
pub use crate::time::now;

/// The operator's login name for the journal header: `$LOGNAME`, else `$USER`, else the
/// password database's name for this process's user (a cron job or `env -i` has neither
/// variable), else "unknown" (a run is never refused for want of a name; the header says
/// it was unknown).
pub fn operator_login() -> String {
    ["LOGNAME", "USER"]
        .iter()
        .filter_map(|k| std::env::var(k).ok())
        .find(|v| !v.trim().is_empty())
        .or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map(|u| u.name)
                .filter(|n| !n.trim().is_empty())
        })
        .unwrap_or_else(|| "unknown".to_string())
}

/// hk-console's state directory: the journals' parent, where the log is written.
pub fn state_dir() -> Result<PathBuf, JournalError> {
    let runs = default_runs_dir()?;
    Ok(runs
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| runs.clone()))
}

/// Journals and logs quote hosts, commands and their output: they are the operator's
/// alone. `dir` (and any parent made for it) is created 0700, and an existing `dir` is
/// narrowed to 0700. A `dir` that is a symlink is refused ([`SYMLINK_DIR_REFUSED`]): it is
/// never written through nor its target chmod'ed. The mode is set on the directory opened
/// without following a link (O_NOFOLLOW), so a link swapped in after the check is refused
/// too, not chmod'ed through.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    refuse_symlinked_dir(dir)?;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_DIRECTORY)
        .open(dir)
        .map_err(|e| symlink_refusal(e, SYMLINK_DIR_REFUSED))?;
    opened.set_permissions(fs::Permissions::from_mode(0o700))
}

/// What a runs directory (or a journal's directory) that is a symlink is refused with.
pub const SYMLINK_DIR_REFUSED: &str =
    "a symlink, not a runs directory: refused (never written through or chmod'ed; name the directory itself)";

/// What a journal (or its output log) that is a symlink is refused with.
pub const SYMLINK_JOURNAL_REFUSED: &str = "a symlink, not a journal: refused";

/// Err when `dir` itself (its last component) is a symlink; a missing `dir` is no error.
fn refuse_symlinked_dir(dir: &Path) -> std::io::Result<()> {
    match fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_symlink() => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            SYMLINK_DIR_REFUSED,
        )),
        _ => Ok(()),
    }
}

/// An open that met a symlink at the last component (O_NOFOLLOW's ELOOP), said as `what`.
fn symlink_refusal(e: std::io::Error, what: &str) -> std::io::Error {
    if e.raw_os_error() == Some(nix::libc::ELOOP) {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, what)
    } else {
        e
    }
}

/// The whole of the file at `path`, opened without following a symlink (a journal that is
/// a link to another file is refused, never read). The open is O_NONBLOCK too, so a FIFO
/// swapped in after a type check cannot block the read on its open; anything but a
/// regular file is refused once open.
fn read_no_follow(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| symlink_refusal(e, SYMLINK_JOURNAL_REFUSED))?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file: not read as a journal",
        ));
    }
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// `path` opened for appending, created 0600 (an existing file is narrowed to 0600) in a
/// private directory ([`create_private_dir`]). A `path` that is a symlink is refused
/// (O_NOFOLLOW: [`SYMLINK_JOURNAL_REFUSED`]), never appended to through it.
pub fn open_private_append(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        create_private_dir(dir)?;
    }
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| symlink_refusal(e, SYMLINK_JOURNAL_REFUSED))?;
    file.set_permissions(fs::Permissions::from_mode(0o600))?;
    Ok(file)
}

/// A run id that sorts by start time: `20260907T101500123Z-etcd-io-priority-prod`.
pub fn run_id_for(at: Timestamp, runbook: &str, env: &str) -> String {
    let stamp: String = at
        .to_string()
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == 'T' || *c == 'Z')
        .collect();
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    format!("{stamp}-{}-{}", clean(runbook), clean(env))
}

/// Where run journals live given the two environment variables. A relative
/// `XDG_STATE_HOME` is ignored, as the XDG spec says.
pub fn runs_dir_from(xdg_state_home: Option<&OsStr>, home: Option<&OsStr>) -> Option<PathBuf> {
    if let Some(x) = xdg_state_home.filter(|x| !x.is_empty()) {
        let p = PathBuf::from(x);
        if p.is_absolute() {
            return Some(p.join("hk-console").join("runs"));
        }
    }
    let home = home.filter(|h| !h.is_empty())?;
    Some(
        PathBuf::from(home)
            .join(".local")
            .join("state")
            .join("hk-console")
            .join("runs"),
    )
}

/// Where run journals live for this process.
pub fn default_runs_dir() -> Result<PathBuf, JournalError> {
    let xdg = std::env::var_os("XDG_STATE_HOME");
    let home = std::env::var_os("HOME");
    runs_dir_from(xdg.as_deref(), home.as_deref()).ok_or(JournalError::NoStateDir)
}

/// The journal file of run `run_id` in `dir`.
pub fn journal_path(dir: &Path, run_id: &str) -> PathBuf {
    dir.join(format!("{run_id}.jsonl"))
}

/// An open journal, appending.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
    /// Length of the file up to the last complete line: where a failed append is cut back to.
    len: u64,
    next_seq: u64,
    poisoned: bool,
    /// The run's output log, opened on the first output line.
    output: Option<File>,
    /// Masks every secret in every line before it is written (mask only: a journal line
    /// is never a diff line to withhold).
    redactor: Redactor,
}

/// `value` as one JSON line with every string in it masked by `redactor`. Masked as values,
/// not as text: a secret's JSON-escaped form and the line's structure never matter.
fn masked_line<T: Serialize>(value: &T, redactor: &Redactor) -> serde_json::Result<Vec<u8>> {
    if redactor.is_empty() {
        return serde_json::to_vec(value);
    }
    let mut v = serde_json::to_value(value)?;
    let mut stack = vec![&mut v];
    while let Some(v) = stack.pop() {
        match v {
            serde_json::Value::String(s) => {
                let masked = redactor.redact(s);
                if masked != *s {
                    *s = masked;
                }
            }
            serde_json::Value::Array(items) => stack.extend(items.iter_mut()),
            serde_json::Value::Object(map) => stack.extend(map.values_mut()),
            _ => {}
        }
    }
    serde_json::to_vec(&v)
}

/// Hold the journal exclusively while this process has the run open: two consoles
/// appending to one run would interleave events no replay can trust.
fn lock(file: &File, path: &Path) -> Result<(), JournalError> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(std::fs::TryLockError::WouldBlock) => Err(JournalError::Locked {
            path: path.to_path_buf(),
        }),
        Err(std::fs::TryLockError::Error(e)) => Err(io_err(path)(e)),
    }
}

/// Suffix of the output log that sits beside a journal: `<run>.output.jsonl`.
pub const OUTPUT_SUFFIX: &str = ".output.jsonl";

/// Suffix of the event trail that sits beside a journal: `<run>.trail.jsonl`
/// (`observe::timeline::TrailWriter` writes it; never read as a journal).
pub const TRAIL_SUFFIX: &str = ".trail.jsonl";

/// Whether a file named `name` in a runs directory is a run's journal by its name: a
/// `.jsonl` that is not one of the files kept beside a journal (its output log, its
/// event trail).
pub fn is_journal_name(name: &str) -> bool {
    name.ends_with(".jsonl") && !name.ends_with(OUTPUT_SUFFIX) && !name.ends_with(TRAIL_SUFFIX)
}

/// The output log of the journal at `journal`.
pub fn output_path(journal: &Path) -> PathBuf {
    let name = journal
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    journal.with_file_name(format!("{name}{OUTPUT_SUFFIX}"))
}

/// Where the etcd snapshot an attempt of a run saves sits: beside its journal,
/// `<run>.etcd-<host>.<attempt>.db` (`host`: the member it was read from).
pub fn snapshot_path(journal: &Path, host: &str, attempt: u32) -> PathBuf {
    let name = journal
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    journal.with_file_name(format!("{name}.etcd-{host}.{attempt}.db"))
}

/// One line of a step's output, as kept in the output log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputRecord {
    pub n: usize,
    pub attempt: u32,
    pub at: Timestamp,
    pub line: String,
}

/// Read a run's output log. Output is evidence, not state: a torn last line (the process
/// died mid-write) is dropped, and a file that does not exist is an empty log.
pub fn read_output(journal: &Path) -> Result<Vec<OutputRecord>, JournalError> {
    let path = output_path(journal);
    // Never through a link: an output log that is a symlink is refused, not read.
    let text = match read_no_follow(&path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map_err(|e| io_err(&path)(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(&path)(e)),
    };
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    complete
        .lines()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| JournalError::Io {
                path: path.clone(),
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("line {}: {e}", i + 1),
                ),
            })
        })
        .collect()
}

impl Journal {
    /// Start the journal of a new run in `dir` (created if missing). Refuses to overwrite.
    pub fn create(dir: &Path, header: &Header) -> Result<Journal, JournalError> {
        Journal::create_masked(dir, header, &Redactor::none())
    }

    /// [`Journal::create`], every line (the header's plan first) masked with `redactor`.
    pub fn create_masked(
        dir: &Path,
        header: &Header,
        redactor: &Redactor,
    ) -> Result<Journal, JournalError> {
        let redactor = redactor.without_withholding();
        let id = &header.run_id;
        let id_ok = !id.is_empty()
            && !id.starts_with('.')
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !id_ok {
            return Err(JournalError::InvalidRunId { id: id.clone() });
        }
        // A plan the machine refuses would leave a journal no replay can read.
        Run::with_mode(header.plan.clone(), header.mode)?;
        create_private_dir(dir).map_err(io_err(dir))?;
        let path = journal_path(dir, id);
        let mut file = match OpenOptions::new()
            .append(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(JournalError::Exists { path })
            }
            Err(e) => return Err(io_err(&path)(e)),
        };
        lock(&file, &path)?;
        let mut line = masked_line(header, &redactor).map_err(|e| JournalError::Io {
            path: path.clone(),
            source: e.into(),
        })?;
        line.push(b'\n');
        let durable = file
            .write_all(&line)
            .and_then(|()| file.sync_all())
            .map_err(io_err(&path))
            .and_then(|()| sync_dir(dir));
        if let Err(e) = durable {
            // A header that is not on disk began no run: the file goes, so nothing lists
            // or offers a run that never started (nothing ran behind it).
            drop(file);
            if let Err(rm) = fs::remove_file(&path) {
                return Err(JournalError::Io {
                    path: path.clone(),
                    source: std::io::Error::new(
                        rm.kind(),
                        format!("{e}; and this journal, whose header is not on disk, could not be removed: {rm}"),
                    ),
                });
            }
            // Best effort: the entry is gone from the directory either way once it syncs.
            let _ = sync_dir(dir);
            return Err(e);
        }
        Ok(Journal {
            len: line.len() as u64,
            path,
            file,
            next_seq: 1,
            poisoned: false,
            output: None,
            redactor,
        })
    }

    /// Start a new run of `plan`: its journal in `dir` (header written and synced) and the
    /// run, not yet started (journal an [`Input::Start`] through [`Journal::record`]).
    pub fn begin(
        dir: &Path,
        plan: Plan,
        mode: Mode,
        operator: &str,
        at: Timestamp,
    ) -> Result<(Journal, Run), JournalError> {
        Journal::begin_masked(dir, plan, mode, operator, at, &Redactor::none())
    }

    /// [`Journal::begin`] with every line masked by `redactor` (the session's: the repo's
    /// vaulted values and vault password). The run keeps the plan as it is; only the record
    /// holds masks.
    pub fn begin_masked(
        dir: &Path,
        plan: Plan,
        mode: Mode,
        operator: &str,
        at: Timestamp,
        redactor: &Redactor,
    ) -> Result<(Journal, Run), JournalError> {
        let run = Run::with_mode(plan.clone(), mode)?;
        let journal =
            Journal::create_masked(dir, &Header::new(plan, mode, operator, at), redactor)?;
        Ok((journal, run))
    }

    /// Mask every line appended from now on with `redactor` (a resumed run's session sets
    /// the one it was built with).
    pub fn mask_with(&mut self, redactor: &Redactor) {
        self.redactor = redactor.without_withholding();
    }

    /// Reopen an existing journal to continue its run after the process stopped. Cuts off a
    /// torn last line (reported in the warnings), then journals [`Input::Resumed`] at `at`:
    /// in-flight steps become interrupted and open gates are asked again. Returns the
    /// journal, the replay (its `run` already includes the resume) and the resume's effects.
    pub fn resume(
        path: &Path,
        at: Timestamp,
    ) -> Result<(Journal, Replayed, Vec<Effect>), JournalError> {
        // Lock before reading: another process's append in progress would otherwise look
        // like a torn tail and be cut off.
        let file = OpenOptions::new()
            .append(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| symlink_refusal(e, SYMLINK_JOURNAL_REFUSED))
            .map_err(io_err(path))?;
        lock(&file, path)?;
        let raw = match read_journal(path) {
            Ok(raw) => raw,
            Err(e @ (JournalError::Corrupt { .. } | JournalError::Rejected { .. })) => {
                let damage = Damage {
                    line: damage_line(&e),
                    what: e.to_string(),
                    copy: keep_damaged_copy(path),
                };
                return Err(JournalError::Damaged {
                    path: path.to_path_buf(),
                    damage: Box::new(damage),
                });
            }
            Err(e) => return Err(e),
        };
        let mut warnings = Vec::new();
        if let Some(torn) = raw.torn {
            file.set_len(raw.valid_len).map_err(io_err(path))?;
            file.sync_all().map_err(io_err(path))?;
            warnings.push(JournalWarning::TornTail {
                path: path.to_path_buf(),
                line: torn.line,
                bytes: torn.bytes,
                truncated: true,
            });
        }
        let interrupted = raw.run.in_flight();
        if !interrupted.is_empty() {
            warnings.push(JournalWarning::Interrupted {
                path: path.to_path_buf(),
                steps: interrupted,
            });
        }
        let mut journal = Journal {
            path: path.to_path_buf(),
            file,
            len: raw.valid_len,
            next_seq: raw.records.last().map_or(1, |r| r.seq + 1),
            poisoned: false,
            output: None,
            redactor: Redactor::none(),
        };
        let mut run = raw.run;
        let mut records = raw.records;
        let event = Event::new(at, Input::Resumed);
        let effects = journal.record(&mut run, event.clone())?;
        records.push(Record {
            seq: journal.next_seq - 1,
            at,
            input: event.input,
        });
        Ok((
            journal,
            Replayed {
                path: path.to_path_buf(),
                header: raw.header,
                records,
                run,
                warnings,
            },
            effects,
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Keep one line of a step's output in the run's output log (`<run>.output.jsonl`).
    /// Lines are written as they come and synced before the next journal record.
    pub fn append_output(
        &mut self,
        n: usize,
        attempt: u32,
        at: Timestamp,
        line: &str,
    ) -> Result<(), JournalError> {
        let path = output_path(&self.path);
        if self.output.is_none() {
            let file = open_private_append(&path).map_err(io_err(&path))?;
            self.output = Some(file);
        }
        let record = OutputRecord {
            n,
            attempt,
            at,
            line: line.to_string(),
        };
        // The executors mask output already; this is the same mask, for any other writer.
        let mut bytes = masked_line(&record, &self.redactor).map_err(|e| JournalError::Io {
            path: path.clone(),
            source: e.into(),
        })?;
        bytes.push(b'\n');
        match self.output.as_mut() {
            Some(out) => out.write_all(&bytes).map_err(io_err(&path)),
            None => Ok(()),
        }
    }

    /// The sequence number the next appended event gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Append one event and fsync it. Returns its sequence number once it is on disk. Prefer
    /// [`Journal::record`], which also checks the event against the run first.
    pub fn append(&mut self, event: &Event) -> Result<u64, JournalError> {
        if self.poisoned {
            return Err(JournalError::Poisoned {
                path: self.path.clone(),
            });
        }
        // Output goes to disk before the outcome that ends its step, so what the journal says
        // happened is never ahead of the evidence.
        if let Some(out) = self.output.as_mut() {
            out.sync_data().map_err(io_err(&output_path(&self.path)))?;
        }
        let seq = self.next_seq;
        let record = Record {
            seq,
            at: event.at,
            input: event.input.clone(),
        };
        let mut line = masked_line(&record, &self.redactor).map_err(|e| JournalError::Io {
            path: self.path.clone(),
            source: e.into(),
        })?;
        line.push(b'\n');
        let written = self
            .file
            .write_all(&line)
            .and_then(|()| self.file.sync_data());
        if let Err(e) = written {
            // Cut a partial line back off so the file stays a sequence of whole lines; if even
            // that fails, refuse further appends rather than write after garbage.
            let cut = self
                .file
                .set_len(self.len)
                .and_then(|()| self.file.sync_data());
            if cut.is_err() {
                self.poisoned = true;
            }
            return Err(io_err(&self.path)(e));
        }
        self.len += line.len() as u64;
        self.next_seq += 1;
        Ok(seq)
    }

    /// Journal before effect: check `event` against `run` (a refused event is not journaled
    /// and leaves `run` unchanged), append and fsync it, and only then apply it to `run` and
    /// hand back the effects to dispatch.
    pub fn record(&mut self, run: &mut Run, event: Event) -> Result<Vec<Effect>, JournalError> {
        self.record_seq(run, event).map(|(effects, _)| effects)
    }

    fn record_seq(
        &mut self,
        run: &mut Run,
        event: Event,
    ) -> Result<(Vec<Effect>, u64), JournalError> {
        let mut next = run.clone();
        let effects = next.step(&event)?;
        let seq = self.append(&event)?;
        *run = next;
        Ok((effects, seq))
    }

    /// Record that step `n`'s `attempt` is handed to its executor, and return the proof
    /// the executor needs to start it. The proof exists only once the line is on disk.
    pub fn record_start(
        &mut self,
        run: &mut Run,
        at: Timestamp,
        n: usize,
        attempt: u32,
    ) -> Result<(Vec<Effect>, StartRecorded), JournalError> {
        let (effects, seq) =
            self.record_seq(run, Event::new(at, Input::StepStarted { n, attempt }))?;
        Ok((
            effects,
            StartRecorded {
                journal: self.path.clone(),
                seq,
                n,
                attempt,
            },
        ))
    }

    /// Record that step `n`'s resume probe (step `probe`) is handed out, and return the
    /// proof its executor needs (for `probe`'s attempt 1, how a probe runs).
    pub fn record_probe_start(
        &mut self,
        run: &mut Run,
        at: Timestamp,
        n: usize,
        probe: usize,
    ) -> Result<StartRecorded, JournalError> {
        let (_, seq) = self.record_seq(run, Event::new(at, Input::ProbeStarted { n, probe }))?;
        Ok(StartRecorded {
            journal: self.path.clone(),
            seq,
            n: probe,
            attempt: 1,
        })
    }
}

#[cfg(unix)]
fn sync_dir(dir: &Path) -> Result<(), JournalError> {
    // A new file's directory entry is only durable once the directory is synced.
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> Result<(), JournalError> {
    Ok(())
}

struct Torn {
    line: usize,
    bytes: usize,
}

struct RawJournal {
    header: Header,
    records: Vec<Record>,
    /// The run after every record, without treating in-flight steps as interrupted.
    run: Run,
    torn: Option<Torn>,
    valid_len: u64,
}

fn read_journal(path: &Path) -> Result<RawJournal, JournalError> {
    let (raw, damage) = read_journal_lines(path)?;
    match damage {
        Some(err) => Err(err),
        None => Ok(raw),
    }
}

/// Read a journal line by line, stopping at the first damaged line after the header: the
/// run as the lines before it leave it, and the error the damaged line gives. A damaged
/// header (nothing to rebuild from), a newer format or an IO failure is an error outright.
fn read_journal_lines(path: &Path) -> Result<(RawJournal, Option<JournalError>), JournalError> {
    let bytes = read_no_follow(path).map_err(io_err(path))?;
    let corrupt = |line: usize, col: usize, what: String| JournalError::Corrupt {
        path: path.to_path_buf(),
        line,
        col,
        what,
    };
    let valid_len = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let (complete, tail) = bytes.split_at(valid_len);
    let lines: Vec<&[u8]> = if complete.is_empty() {
        Vec::new()
    } else {
        complete[..complete.len() - 1]
            .split(|&b| b == b'\n')
            .collect()
    };
    let torn = (!tail.is_empty()).then(|| Torn {
        line: lines.len() + 1,
        bytes: tail.len(),
    });

    let Some(first) = lines.first() else {
        return Err(corrupt(
            1,
            1,
            "no complete header line: the run's journal was never fully created".into(),
        ));
    };
    let header: Header = serde_json::from_slice(first)
        .map_err(|e| corrupt(1, e.column(), format!("invalid journal header: {e}")))?;
    if header.format > FORMAT_VERSION {
        return Err(JournalError::NewerFormat {
            path: path.to_path_buf(),
            found: header.format,
        });
    }
    let mut run = Run::with_mode(header.plan.clone(), header.mode).map_err(|source| {
        JournalError::Rejected {
            path: path.to_path_buf(),
            line: 1,
            source,
        }
    })?;
    if header.format < 2 {
        run.set_starts_recorded_after();
    }
    let mut records = Vec::with_capacity(lines.len().saturating_sub(1));
    let mut damage = None;
    for (idx, raw) in lines.iter().enumerate().skip(1) {
        let line = idx + 1;
        let record: Record = match serde_json::from_slice(raw) {
            Ok(r) => r,
            Err(e) => {
                damage = Some(corrupt(
                    line,
                    e.column(),
                    format!("invalid journal record: {e}"),
                ));
                break;
            }
        };
        let want = records.len() as u64 + 1;
        if record.seq != want {
            damage = Some(corrupt(
                line,
                1,
                format!(
                    "sequence number {} where {want} was expected: a line is missing or repeated",
                    record.seq
                ),
            ));
            break;
        }
        // A refused event leaves the run as it was (the machine checks before it moves).
        if let Err(source) = run.step_recorded(&record.event()) {
            damage = Some(JournalError::Rejected {
                path: path.to_path_buf(),
                line,
                source,
            });
            break;
        }
        records.push(record);
    }
    Ok((
        RawJournal {
            header,
            records,
            run,
            torn,
            valid_len: valid_len as u64,
        },
        damage,
    ))
}

/// Where a journal stops being readable: the line, why, and the copy kept of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// 1-based line of the first damaged line; every line before it was replayed.
    pub line: usize,
    /// What is wrong there (the error naming file:line).
    pub what: String,
    /// The copy of the journal as it was found, kept beside it.
    pub copy: Result<PathBuf, DamagedCopyError>,
}

/// Why no copy of a damaged journal could be kept beside it.
#[derive(Debug, Clone, Error)]
pub enum DamagedCopyError {
    /// Reading the journal or writing the copy failed (the path named).
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        // Shared so that a `Damage` (which replays and lists clone) keeps the cause.
        #[source]
        source: std::sync::Arc<std::io::Error>,
    },
    #[error("{name}: 100 damaged copies already kept beside it")]
    TooMany { name: String },
}

impl DamagedCopyError {
    fn io(path: &Path, source: std::io::Error) -> DamagedCopyError {
        DamagedCopyError::Io {
            path: path.to_path_buf(),
            source: std::sync::Arc::new(source),
        }
    }
}

// An io::Error has no equality; two failures are the same when they say the same.
impl PartialEq for DamagedCopyError {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for DamagedCopyError {}

impl Damage {
    /// Why a damaged run is never resumed (shown wherever resume is refused).
    pub const NOT_RESUMABLE: &'static str = "a damaged journal is never resumed: what happened after the damaged line is unknown, so resuming could repeat or skip a step on a host; start a new run instead";
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "damaged at line {}: {}", self.line, self.what)?;
        match &self.copy {
            Ok(copy) => write!(f, " (copy kept at {})", copy.display()),
            Err(e) => write!(f, " (no copy could be kept: {e})"),
        }
    }
}

/// Keep a copy of a damaged journal beside it (`<run>.jsonl.damaged`, then `.damaged.2`, ...)
/// before anything else touches it. A copy with the same bytes already there is reused, so
/// listing the runs again does not pile copies up.
pub fn keep_damaged_copy(path: &Path) -> Result<PathBuf, DamagedCopyError> {
    // Never through a symlink: a journal that is a link (to /etc/shadow, say) is not
    // copied, so its target's bytes never land in the runs directory.
    let bytes = read_no_follow(path).map_err(|e| DamagedCopyError::io(path, e))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    for n in 1..=100u32 {
        let suffix = if n == 1 {
            ".damaged".to_string()
        } else {
            format!(".damaged.{n}")
        };
        let copy = path.with_file_name(format!("{name}{suffix}"));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&copy)
        {
            Ok(mut f) => {
                f.write_all(&bytes)
                    .and_then(|()| f.sync_all())
                    .map_err(|e| DamagedCopyError::io(&copy, e))?;
                if let Some(dir) = path.parent() {
                    let _ = sync_dir(dir);
                }
                return Ok(copy);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                if read_no_follow(&copy).is_ok_and(|old| old == bytes) {
                    return Ok(copy);
                }
            }
            Err(e) => return Err(DamagedCopyError::io(&copy, e)),
        }
    }
    Err(DamagedCopyError::TooMany { name })
}

fn damage_line(err: &JournalError) -> usize {
    match err {
        JournalError::Corrupt { line, .. } | JournalError::Rejected { line, .. } => *line,
        _ => 1,
    }
}

/// A journal read as far as it can be: every line up to the first damaged one replayed
/// (steps in flight there shown interrupted), and the damage, if any, described (a copy of
/// the file is kept beside it first). A damaged header, a newer format or an IO failure is
/// still an error: there is no run to show. A damaged run opens read-only, never resumes.
pub fn salvage(path: &Path) -> Result<(Replayed, Option<Damage>), JournalError> {
    let (raw, damage) = match read_journal_lines(path) {
        Ok(read) => read,
        Err(e @ JournalError::Corrupt { .. }) => {
            // Nothing to rebuild from, but the file is still kept as it was found.
            let _ = keep_damaged_copy(path);
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    let damage = damage.map(|err| Damage {
        line: damage_line(&err),
        what: err.to_string(),
        copy: keep_damaged_copy(path),
    });
    let replayed = finish_replay(path, raw)?;
    Ok((replayed, damage))
}

/// Read a journal and rebuild its run through the pure machine, without changing the file.
/// A torn last line is ignored and reported; steps still in flight at the end are shown as
/// interrupted (the process that ran them is gone). A bad line anywhere else is an error
/// naming file:line.
pub fn replay(path: &Path) -> Result<Replayed, JournalError> {
    finish_replay(path, read_journal(path)?)
}

/// The run as replay shows it: the torn tail reported, steps in flight interrupted.
fn finish_replay(path: &Path, raw: RawJournal) -> Result<Replayed, JournalError> {
    let mut warnings = Vec::new();
    if let Some(torn) = &raw.torn {
        warnings.push(JournalWarning::TornTail {
            path: path.to_path_buf(),
            line: torn.line,
            bytes: torn.bytes,
            truncated: false,
        });
    }
    let mut run = raw.run;
    let interrupted = run.in_flight();
    if !interrupted.is_empty() {
        let at = raw.records.last().map_or(raw.header.started_at, |r| r.at);
        // The same transition a resume journals; applied here only in memory.
        run.step(&Event::new(at, Input::Resumed))
            .map_err(|source| JournalError::Rejected {
                path: path.to_path_buf(),
                line: raw.records.len() + 1,
                source,
            })?;
        warnings.push(JournalWarning::Interrupted {
            path: path.to_path_buf(),
            steps: interrupted,
        });
    }
    Ok(Replayed {
        path: path.to_path_buf(),
        header: raw.header,
        records: raw.records,
        run,
        warnings,
    })
}

/// One run, for the home screen's list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSummary {
    pub run_id: String,
    pub runbook: String,
    pub env: String,
    pub mode: Mode,
    pub operator: String,
    pub started: Timestamp,
    pub outcome: RunOutcome,
    pub path: PathBuf,
    /// Replay warnings (torn tail, interrupted steps), as text.
    pub warnings: Vec<String>,
    /// Where the journal is damaged, if it is: the run shows what the lines before it say,
    /// opens read-only and is never resumed.
    pub damage: Option<Damage>,
    /// Why a run its journal leaves in progress is listed `interrupted`: no console holds
    /// it any more.
    pub why: Option<String>,
}

/// Whether a process holds the journal at `path` open for its run (the lock
/// [`Journal::create`] and [`Journal::resume`] take, released by the kernel when that
/// process ends, however it ends). `None`: it could not be told.
fn held_by_a_console(path: &Path) -> Option<bool> {
    let file = File::open(path).ok()?;
    match file.try_lock_shared() {
        Ok(()) => Some(false),
        Err(std::fs::TryLockError::WouldBlock) => Some(true),
        Err(std::fs::TryLockError::Error(_)) => None,
    }
}

/// Every run journal in a directory.
#[derive(Debug, Default)]
pub struct RunList {
    /// Newest first.
    pub runs: Vec<RunSummary>,
    /// Journals that could not be read, with why. Listed, never hidden or deleted.
    pub unreadable: Vec<JournalError>,
}

/// List the runs journaled in `dir`, newest first. A missing directory holds no runs (the
/// caller refuses a missing directory the operator named). A `dir` that is a symlink is
/// refused ([`SYMLINK_DIR_REFUSED`]): listing writes damaged copies into it. A journal
/// that is a symlink is listed as refused ([`SYMLINK_JOURNAL_REFUSED`]), never read or
/// copied.
pub fn list_runs(dir: &Path) -> Result<RunList, JournalError> {
    refuse_symlinked_dir(dir).map_err(io_err(dir))?;
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(RunList::default()),
        Err(e) => return Err(io_err(dir)(e)),
    };
    let mut list = RunList::default();
    // (the run taken over, why): a run whose lock another run took over is no longer in
    // progress, whether or not its console still lives.
    let mut took_over: Vec<(String, String)> = Vec::new();
    for entry in entries {
        let path = entry.map_err(io_err(dir))?.path();
        if !path
            .file_name()
            .is_some_and(|f| is_journal_name(&f.to_string_lossy()))
        {
            continue;
        }
        // Looked at, not opened: opening a FIFO blocks until a writer comes. Anything but a
        // regular file (a FIFO, a socket, a directory, a symlink: not followed) is listed as
        // unreadable, never hidden.
        match fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() => {}
            Ok(m) if m.file_type().is_symlink() => {
                list.unreadable.push(JournalError::Io {
                    path,
                    source: std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        SYMLINK_JOURNAL_REFUSED,
                    ),
                });
                continue;
            }
            Ok(m) => {
                let what = if m.is_dir() {
                    "a directory"
                } else {
                    "a FIFO, socket or device"
                };
                list.unreadable.push(JournalError::Io {
                    path,
                    source: std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        format!("not a regular file ({what}); not read as a journal"),
                    ),
                });
                continue;
            }
            Err(e) => {
                list.unreadable.push(io_err(&path)(e));
                continue;
            }
        }
        // Salvaged, never hidden: a damaged run is listed with what its intact lines say.
        match salvage(&path) {
            Ok((r, damage)) => {
                for rec in &r.records {
                    if let Input::RunLock {
                        note:
                            crate::runbook::machine::RunLockNote::TookOver {
                                from_run: Some(from),
                                by,
                                reason,
                                ..
                            },
                    } = &rec.input
                    {
                        took_over.push((
                            from.clone(),
                            format!(
                                "its run lock was taken over by {by} (run {}): {reason}",
                                r.header.run_id
                            ),
                        ));
                    }
                }
                let mut outcome = r.run.outcome();
                let mut why = None;
                // A run is in progress only while a console holds it: one killed (its
                // terminal closed, SIGKILL, a crash) left it interrupted, resumable.
                if outcome == RunOutcome::InProgress && held_by_a_console(&path) == Some(false) {
                    outcome = RunOutcome::Interrupted;
                    why = Some(match &damage {
                        // A damaged journal is never resumed: nothing offers it.
                        Some(d) => format!(
                            "no console holds this run any more, and its journal is damaged \
                             at line {}: it is never resumed (what happened after that line is \
                             unknown); open it to read it, and start a new run",
                            d.line
                        ),
                        None => "no console holds this run any more (the one that ran it is \
                                 gone); open it to resume"
                            .to_string(),
                    });
                }
                list.runs.push(RunSummary {
                    run_id: r.header.run_id.clone(),
                    runbook: r.header.runbook.clone(),
                    env: r.header.env.clone(),
                    mode: r.header.mode,
                    operator: r.header.operator.clone(),
                    started: r.header.started_at,
                    outcome,
                    warnings: r.warnings.iter().map(|w| w.to_string()).collect(),
                    damage,
                    why,
                    path,
                })
            }
            Err(e) => list.unreadable.push(e),
        }
    }
    for (from, why) in took_over {
        for run in list
            .runs
            .iter_mut()
            .filter(|r| r.run_id == from && r.outcome == RunOutcome::InProgress)
        {
            run.outcome = RunOutcome::Interrupted;
            run.why = Some(why.clone());
        }
    }
    list.runs.sort_by(|a, b| {
        b.started
            .cmp(&a.started)
            .then_with(|| b.run_id.cmp(&a.run_id))
    });
    Ok(list)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::runbook::plan::{Gate, PlannedStep, StepKind};

    fn one_gate_plan() -> Plan {
        Plan {
            runbook: "t".into(),
            env: "dev".into(),
            mutates: false,
            steps: vec![PlannedStep {
                n: 1,
                id: "present".into(),
                kind: StepKind::Gate,
                host: None,
                mutates: false,
                gate: Some(Gate::OperatorPresent),
                command: None,
                expect: None,
                title: String::new(),
                cwd: None,
                source: None,
                blast_radius: None,
                declared_read_only: None,
            }],
        }
    }

    /// A vaulted value in the plan (a step's title) and in a gate's note never reaches the
    /// journal's bytes: every line holds the mask where it was, and the journal replays.
    #[test]
    fn secrets_in_the_plan_and_a_gate_note_are_masked_in_the_file() {
        use crate::runbook::machine::GateAnswer;
        const SECRET: &str = "s3cr3t-vaulted";
        let dir = tempfile::tempdir().expect("tmp");
        let mut plan = one_gate_plan();
        plan.steps[0].title = format!("Approve with {SECRET} pasted");
        let r = Redactor::new([SECRET]).withholding_diffs("no password".into());
        let (mut journal, mut run) =
            Journal::begin_masked(dir.path(), plan, Mode::Operate, "op", Timestamp(1), &r)
                .expect("begin");
        journal
            .record(&mut run, Event::new(Timestamp(2), Input::Start))
            .expect("start");
        journal
            .record(
                &mut run,
                Event::new(
                    Timestamp(3),
                    Input::GateAnswered {
                        n: 1,
                        answer: GateAnswer::Approved {
                            by: "op".into(),
                            note: Some(format!("-{SECRET} in a note")),
                        },
                    },
                ),
            )
            .expect("answer");
        // The run itself keeps the plan as planned; only the record is masked.
        assert!(run.plan().steps[0].title.contains(SECRET));
        let text = std::fs::read_to_string(journal.path()).expect("read");
        assert!(!text.contains(SECRET), "{text}");
        assert!(
            text.contains(&format!("Approve with {} pasted", crate::redact::MASK)),
            "{text}"
        );
        // A note is never a diff line: masked, not withheld.
        assert!(
            text.contains(&format!("-{} in a note", crate::redact::MASK)),
            "{text}"
        );
        let path = journal.path().to_path_buf();
        drop(journal);
        let replayed = replay(&path).expect("replays");
        assert_eq!(replayed.records.len(), 2);
    }

    /// A disk that refuses every write (/dev/full): the event is not acknowledged, no effect
    /// comes back, the run does not move, and the journal refuses to write after the failure
    /// it could not cut back.
    #[test]
    fn a_failed_append_returns_no_effects_and_poisons_the_journal() {
        let path = PathBuf::from("/dev/full");
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("/dev/full exists on Linux");
        let mut journal = Journal {
            path,
            file,
            len: 0,
            next_seq: 1,
            poisoned: false,
            output: None,
            redactor: Redactor::none(),
        };
        let mut run = Run::new(one_gate_plan()).expect("plan");
        let before = run.clone();
        let err = journal
            .record(&mut run, Event::new(Timestamp(1), Input::Start))
            .expect_err("the disk is full");
        assert!(matches!(err, JournalError::Io { .. }), "{err}");
        assert_eq!(
            run, before,
            "the run must not move past an event that is not on disk"
        );
        assert_eq!(journal.next_seq(), 1);
        // /dev/full cannot be truncated either, so the journal takes no more events.
        let err = journal
            .append(&Event::new(Timestamp(2), Input::Start))
            .expect_err("poisoned");
        assert!(matches!(err, JournalError::Poisoned { .. }), "{err}");
    }

    /// One mutating ansible step, no gate: its work goes out at the start.
    fn one_apply_plan() -> Plan {
        let mut plan = one_gate_plan();
        plan.mutates = true;
        let s = &mut plan.steps[0];
        s.id = "apply".into();
        s.kind = StepKind::Ansible;
        s.mutates = true;
        s.gate = None;
        s.command = Some(vec!["ansible-playbook".into(), "site.yml".into()]);
        plan
    }

    /// The proof a step's executor needs comes only from the start record's append: on a
    /// full disk there is none, and the run has not moved.
    #[test]
    fn a_start_proof_exists_only_once_its_record_is_on_disk() {
        let dir = tempfile::tempdir().expect("tmp");
        let (mut journal, mut run) = Journal::begin_masked(
            dir.path(),
            one_apply_plan(),
            Mode::Operate,
            "op",
            Timestamp(1),
            &Redactor::none(),
        )
        .expect("begin");
        let fx = journal
            .record(&mut run, Event::new(Timestamp(2), Input::Start))
            .expect("start");
        let Some(Effect::Execute(x)) = fx.first() else {
            panic!("{fx:?}");
        };
        let (_, start) = journal
            .record_start(&mut run, Timestamp(3), x.n(), x.attempt())
            .expect("recorded");
        assert!(start.covers(1, 1) && !start.covers(1, 2) && !start.covers(2, 1));
        assert_eq!(start.seq(), 2);
        assert_eq!(start.journal(), journal.path());
        let text = std::fs::read_to_string(journal.path()).expect("read");
        assert!(
            text.lines()
                .last()
                .is_some_and(|l| l.contains(r#""type":"step-started""#)),
            "{text}"
        );

        // On a disk that takes nothing: no proof, and the step has not started.
        let mut run = Run::new(one_apply_plan()).expect("plan");
        run.step(&Event::new(Timestamp(2), Input::Start))
            .expect("start");
        let before = run.clone();
        let mut full = Journal {
            path: PathBuf::from("/dev/full"),
            file: OpenOptions::new()
                .append(true)
                .open("/dev/full")
                .expect("/dev/full"),
            len: 0,
            next_seq: 2,
            poisoned: false,
            output: None,
            redactor: Redactor::none(),
        };
        let err = full
            .record_start(&mut run, Timestamp(3), 1, 1)
            .expect_err("the disk is full");
        assert!(matches!(err, JournalError::Io { .. }), "{err}");
        assert_eq!(run, before);
    }

    /// Format 2: a journal that ends with a step's work handed out but no start recorded
    /// (the start's sync failed, or the console died before it) says the work never went
    /// out: replayed and resumed, the step is interrupted *unstarted*, needing no probe.
    /// The same lines under format 1 prove nothing (the start came after the work).
    #[test]
    fn a_missing_start_means_never_started_only_in_format_2() {
        use crate::runbook::machine::StepState;
        for format in [2, 1] {
            let dir = tempfile::tempdir().expect("tmp");
            let mut header = Header::new(one_apply_plan(), Mode::Operate, "op", Timestamp(1));
            header.format = format;
            let path = journal_path(dir.path(), &header.run_id);
            let mut lines = serde_json::to_string(&header).expect("header");
            lines.push('\n');
            let start = Record {
                seq: 1,
                at: Timestamp(2),
                input: Input::Start,
            };
            lines.push_str(&serde_json::to_string(&start).expect("record"));
            lines.push('\n');
            std::fs::write(&path, lines).expect("write");
            let (_, replayed, _) = Journal::resume(&path, Timestamp(3)).expect("resume");
            let rec = replayed.run.step_record(1).expect("step 1");
            assert!(
                matches!(rec.state, StepState::Interrupted { .. }),
                "{:?}",
                rec.state
            );
            assert_eq!(rec.never_started, format == 2, "format {format}");
            if format == 2 {
                assert!(
                    rec.interrupted_why
                        .as_deref()
                        .is_some_and(|w| w.contains("never went out")),
                    "{:?}",
                    rec.interrupted_why
                );
            }
        }
    }

    /// A damaged journal of a run no console holds is listed interrupted, but never as
    /// something to open and resume (it is never resumed).
    #[test]
    fn a_damaged_run_is_never_offered_for_resume() {
        let dir = tempfile::tempdir().expect("tmp");
        let header = Header::new(one_gate_plan(), Mode::Operate, "op", Timestamp(1));
        let path = journal_path(dir.path(), &header.run_id);
        let start = Record {
            seq: 1,
            at: Timestamp(2),
            input: Input::Start,
        };
        let text = format!(
            "{}\n{}\nnot a record\n",
            serde_json::to_string(&header).expect("header"),
            serde_json::to_string(&start).expect("start")
        );
        std::fs::write(&path, text).expect("write");
        let list = list_runs(dir.path()).expect("listed");
        let run = list.runs.first().expect("the damaged run is listed");
        assert!(run.damage.is_some());
        let why = run.why.as_deref().unwrap_or_default();
        assert!(!why.contains("to resume"), "{why}");
        assert!(why.contains("never resumed"), "{why}");
    }

    /// An exit code for a step whose start is not in the journal is damage, not history
    /// (in every format: none journaled one without its start): the journal is refused
    /// at that line, never listed `done`.
    #[test]
    fn an_outcome_without_a_start_is_damage() {
        for format in [2, 1] {
            let dir = tempfile::tempdir().expect("tmp");
            let mut header = Header::new(one_apply_plan(), Mode::Operate, "op", Timestamp(1));
            header.format = format;
            let path = journal_path(dir.path(), &header.run_id);
            let records = [
                Input::Start,
                Input::StepFinished {
                    n: 1,
                    attempt: 1,
                    exit_code: Some(0),
                    error: None,
                },
            ];
            let mut text = serde_json::to_string(&header).expect("header");
            text.push('\n');
            for (i, input) in records.into_iter().enumerate() {
                let r = Record {
                    seq: i as u64 + 1,
                    at: Timestamp(2 + i as u64),
                    input,
                };
                text.push_str(&serde_json::to_string(&r).expect("record"));
                text.push('\n');
            }
            std::fs::write(&path, text).expect("write");
            let (_, damage) = salvage(&path).expect("salvaged");
            let damage = damage.expect("damaged");
            assert_eq!(damage.line, 3, "format {format}: {damage:?}");
            assert!(
                damage.what.contains("without a step-started"),
                "{}",
                damage.what
            );
        }
        // "Could not be started" (no exit code, an error) is the one finish allowed.
        let mut run = Run::new(one_apply_plan()).expect("plan");
        run.step(&Event::new(Timestamp(2), Input::Start))
            .expect("start");
        run.step(&Event::new(
            Timestamp(3),
            Input::StepFinished {
                n: 1,
                attempt: 1,
                exit_code: None,
                error: Some("the run lock was lost; the step was not started".into()),
            },
        ))
        .expect("a refusal before the start is history");
        assert!(run.step_record(1).is_some_and(|r| r.never_started));
    }
}
