//! About hk-console itself: `completions`, `man` and `paths`.

use std::io::Write as _;
use std::path::PathBuf;

use clap::CommandFactory;

use super::{print_json, Cli, CmdResult, Failure, Status};

/// Generated text to stdout as is (a completion script may hold tabs that the terminal-safe
/// printing would write out); a closed pipe ends quietly, like `outln!`.
fn write_raw(bytes: &[u8]) -> CmdResult {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(Status::Clean),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(Status::Clean),
        Err(e) => Err(Failure::msg(format!("cannot write to stdout: {e}"))),
    }
}

/// `hk-console completions SHELL`: generated from the same definitions that parse the flags.
pub(super) fn completions(shell: clap_complete::Shell) -> CmdResult {
    let mut cmd = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "hk-console", &mut script);
    write_raw(&script)
}

/// `hk-console man`: the manual page in roff, with a SUBCOMMANDS section naming each; with
/// `--dir`, every page (one per subcommand too) written there.
pub(super) fn man(dir: Option<&std::path::Path>) -> CmdResult {
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir)
            .map_err(|e| Failure::msg(format!("{}: cannot create: {e}", dir.display())))?;
        clap_mangen::generate_to(Cli::command(), dir)
            .map_err(|e| Failure::msg(format!("{}: cannot write the pages: {e}", dir.display())))?;
        outln!("man pages written to {}", dir.display());
        return Ok(Status::Clean);
    }
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut page)?;
    write_raw(&page)
}

/// One place hk-console reads or writes.
#[derive(Debug, serde::Serialize)]
struct Place {
    what: &'static str,
    /// `None` when it cannot be known here (HOME unset).
    path: Option<PathBuf>,
    exists: bool,
    about: &'static str,
}

fn place(what: &'static str, path: Option<PathBuf>, about: &'static str) -> Place {
    let exists = path.as_deref().is_some_and(std::path::Path::exists);
    Place {
        what,
        path,
        exists,
        about,
    }
}

/// `hk-console paths`: where the config, themes, state, log and journals are, and whether
/// each exists. A place that cannot be known (neither XDG variable nor HOME set) is said,
/// and the exit is 2: the operator cannot act on a guess.
pub(super) fn paths(json: bool) -> CmdResult {
    let themes = crate::ui::theme::user_theme_dir();
    let places = [
        place(
            "config",
            crate::ui::config::config_path(),
            "the console's settings: theme, keys (docs/config.md)",
        ),
        place("themes", themes, "your colour themes, one YAML file each"),
        place(
            "state",
            crate::journal::state_dir().ok(),
            "hk-console's own state (0700)",
        ),
        place(
            "logs",
            super::log_path().ok(),
            "the log (HK_LOG sets the filter; 0600)",
        ),
        place(
            "journals",
            crate::journal::default_runs_dir().ok(),
            "one journal per run, and its output log (0600)",
        ),
    ];
    if json {
        print_json(&places)?;
    } else {
        for p in &places {
            let shown = match &p.path {
                Some(path) if p.exists => path.display().to_string(),
                Some(path) => format!("{} (not there yet)", path.display()),
                None => "(unknown: neither XDG_CONFIG_HOME/XDG_STATE_HOME nor HOME is set)".into(),
            };
            outln!("{:<9} {shown}", p.what);
            outln!("          {}", p.about);
        }
    }
    Ok(if places.iter().all(|p| p.path.is_some()) {
        Status::Clean
    } else {
        Status::CouldNotRun
    })
}
