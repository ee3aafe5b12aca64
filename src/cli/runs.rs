//! `hk-console runs list|show`: the change record (logic: crate::record).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::{CmdResult, Failure, Status};

/// The runs directory asked for: `--dir` must name an existing directory (a typo must not
/// read as "no runs"), else the default one (which may not exist yet: no runs).
fn runs_dir(dir: Option<&Path>) -> Result<PathBuf, Failure> {
    match dir {
        Some(d) => match std::fs::symlink_metadata(d) {
            Ok(m) if m.is_dir() => Ok(d.to_path_buf()),
            Ok(m) if m.file_type().is_symlink() => Err(Failure::msg(format!(
                "--dir {}: a symlink, not a runs directory: refused (name the directory itself)",
                d.display()
            ))),
            Ok(_) => Err(Failure::msg(format!(
                "--dir {}: not a directory",
                d.display()
            ))),
            Err(e) => Err(Failure::msg(format!("--dir {}: {e}", d.display()))),
        },
        None => Ok(crate::journal::default_runs_dir()?),
    }
}

/// What a runs command prints, to stdout: a closed pipe ends quietly (as `outln!`), any
/// other failure to write (a full disk, `> /dev/full`) is exit 2 saying so, never a panic.
/// The text is the record's rendering, in which every journal value is written out
/// visibly already (crate::record).
fn write_out(text: &str) -> CmdResult {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(Status::Clean),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => Err(Failure::msg(format!("cannot write to stdout: {e}"))),
    }
}

pub(super) fn list(dir: Option<&Path>, json: bool) -> CmdResult {
    let dir = runs_dir(dir)?;
    write_out(&crate::record::show_list(&dir, json)?)
}

pub(super) fn show(dir: Option<&Path>, run: &str, format: crate::record::Format) -> CmdResult {
    let dir = runs_dir(dir)?;
    write_out(&crate::record::show(&dir, run, format)?)
}
