//! `hk-console runs list|show`: the change record (logic: crate::record).

use std::path::{Path, PathBuf};

use super::{CmdResult, Failure, Status};

fn runs_dir(dir: Option<&Path>) -> Result<PathBuf, Failure> {
    match dir {
        Some(d) => Ok(d.to_path_buf()),
        None => Ok(crate::journal::default_runs_dir()?),
    }
}

pub(super) fn list(dir: Option<&Path>, json: bool) -> CmdResult {
    let dir = runs_dir(dir)?;
    print!("{}", crate::record::show_list(&dir, json)?);
    Ok(Status::Clean)
}

pub(super) fn show(dir: Option<&Path>, run: &str, format: crate::record::Format) -> CmdResult {
    let dir = runs_dir(dir)?;
    print!("{}", crate::record::show(&dir, run, format)?);
    Ok(Status::Clean)
}
