//! `init`: propose hk-console.yaml for a repo that has none, or write it and check it.

use super::{check::print_check, Cli, CmdResult, Failure, Status};
use crate::repo::Repo;

/// `hk-console init`: print the proposal, or write it and run `check` on the result (exit 0
/// once written: the verdict is check's).
pub(super) fn init_cmd(cli: &Cli, write: bool) -> CmdResult {
    let root = match cli.repo.as_deref() {
        Some(p) => p.to_path_buf(),
        None => std::env::current_dir()
            .map_err(|e| Failure::msg(format!("init: cannot read the current directory: {e}")))?,
    };
    let proposal = crate::repo::init::propose(&root)?;
    if !write {
        outln!("{}", proposal.text.trim_end());
        if !proposal.questions.is_empty() {
            eprintln!(
                "init: {} question(s) in the proposal (# QUESTION:); answer them before relying on it",
                proposal.questions.len()
            );
        }
        return Ok(Status::Clean);
    }
    let path = write_proposal(&root, &proposal.text)?;
    eprintln!("init: wrote {}; running check on it", path.display());
    if !proposal.questions.is_empty() {
        eprintln!(
            "init: {} question(s) left in it (# QUESTION:); answer them before relying on it",
            proposal.questions.len()
        );
    }
    let repo = Repo::load(&root)?;
    let runbooks = crate::context::load_runbooks(cli.runbooks.as_deref())?;
    // init's work is the file, and it is written: exit 0. What the repo's contract says is
    // check's verdict, printed here and given by `hk-console check`'s own exit code.
    let verdict = print_check(&repo, None, &runbooks)?;
    if verdict != Status::Clean {
        eprintln!(
            "init: the file is written; check's verdict above is not clean (`hk-console check` exits {})",
            verdict as i32
        );
    }
    Ok(Status::Clean)
}

/// Writes `text` as `root`'s hk-console.yaml; never over a file that appeared since the
/// proposal was made (create_new).
pub(super) fn write_proposal(
    root: &std::path::Path,
    text: &str,
) -> Result<std::path::PathBuf, Failure> {
    let path = root.join(crate::repo::config::CONFIG_FILE);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| Failure::msg(format!("{}: cannot create: {e}", path.display())))?;
    std::io::Write::write_all(&mut f, text.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| Failure::msg(format!("{}: cannot write: {e}", path.display())))?;
    Ok(path)
}
