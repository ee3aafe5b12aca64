//! The composition root: the commands and flags, exit codes, error printing, logging, the
//! one async runtime and the repo each command loads once. `main.rs` only calls [`main`].
//! Each command family lives in its own file: [`inventory`] (`inventory`, `envs`),
//! [`runbooks`], [`plan`], [`check`] (and the overview), [`init`], [`ssh`], [`console`]
//! (the interactive console, `run`, `observe`), [`observe`] (`observe --once`), [`demo`],
//! and [`meta`] (`completions`, `man`, `paths`).
//!
//! Exit codes, for every command: 0 clean; 1 what was checked has violations; 2 could not
//! run (bad input, a missing file), with a message naming the file and line.
//! Must not: hold logic the TUI will need too; commands call into `repo`, `runbook`,
//! `checks` and print.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::context::plan_runbook;
use crate::repo::Repo;
use crate::ui::StartScreen;
use demo::DemoMode;

/// Exit statuses shared by every command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Clean = 0,
    Violations = 1,
    CouldNotRun = 2,
    /// A headless run ended by a signal (journaled abandoned): 128 + the signal's number,
    /// as a shell reports a process the signal killed.
    Hangup = 129,
    Interrupted = 130,
    Terminated = 143,
}

impl From<Status> for ExitCode {
    fn from(s: Status) -> Self {
        ExitCode::from(s as u8)
    }
}

/// An error the operator can act on: printed with its chain of causes, exit 2. Any error
/// type converts with `?` and keeps its sources; [`Failure::msg`] is what a command says
/// itself. Not an `Error` itself, so that the blanket conversion does not overlap `From<T>
/// for T`.
///
/// It carries the error and nothing else: no backtrace. A refusal is an answer, not a crash,
/// and its message never prints one; an eyre report captured and symbolized one whenever
/// `RUST_BACKTRACE` was set (0.6 s of CPU on every refusal of a debug build). Panics keep
/// theirs (color-eyre's panic hook).
pub struct Failure(Box<dyn std::error::Error + Send + Sync + 'static>);

/// What a command says itself, as an error without a source.
#[derive(Debug)]
struct Said(String);

impl std::fmt::Display for Said {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Said {}

impl Failure {
    pub fn msg(message: impl Into<String>) -> Failure {
        Failure(Box::new(Said(message.into())))
    }

    /// The message, then each cause the message does not already quote, one per line.
    pub fn render(&self) -> String {
        let mut out = self.0.to_string();
        let mut said = out.clone();
        let mut cause = self.0.source();
        while let Some(e) = cause {
            let c = e.to_string();
            if !said.contains(&c) {
                out.push_str("\n  caused by: ");
                out.push_str(&c);
            }
            said.push_str(&c);
            cause = e.source();
        }
        out
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure(Box::new(e))
    }
}

impl std::fmt::Debug for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render())
    }
}

type CmdResult = Result<Status, Failure>;

/// Print a line to stdout. A closed pipe (`hk-console plan ... | head`) ends the process
/// quietly, as a Unix tool killed by SIGPIPE would, instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        // Repo values, host output and journal text are in the line: no control character
        // of theirs reaches the terminal (line breaks are kept; see crate::text).
        let line = format!($($arg)*);
        if let Err(e) = writeln!(out, "{}", crate::text::visible_lines(&line)) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                std::process::exit(0);
            }
            eprintln!("error: cannot write to stdout: {e}");
            std::process::exit(Status::CouldNotRun as i32);
        }
    }};
}

/// Print a line to stderr with the control characters of the data in it written out
/// visibly (an error message quotes group names, paths and values from the repo).
macro_rules! errln {
    ($($arg:tt)*) => {{
        let line = format!($($arg)*);
        eprintln!("{}", crate::text::visible_lines(&line));
    }};
}

// After the macros: textual scope makes `outln!`/`errln!` visible in each command's file.
mod check;
mod console;
mod demo;
mod init;
mod inventory;
mod meta;
mod observe;
mod plan;
mod runbooks;
mod runs;
mod ssh;

#[derive(Debug, Parser)]
#[command(
    name = "hk-console",
    version,
    about = "The operator's console for a home-network HA k3s platform",
    long_about = "Turns the infra repo's runbooks into guided plans, checks the parity contract, \
                  and reads the Ansible inventory exactly as Ansible does.\n\n\
                  With no command: an overview of the repo (environments, parity check, runbooks)."
)]
pub struct Cli {
    /// The infra repo's top directory (the one holding hk-console.yaml).
    /// Default: the bundled sample `inventory/`.
    #[arg(long, env = "HK_REPO", global = true, value_name = "DIR")]
    pub repo: Option<PathBuf>,
    /// A directory of runbooks that add to or override, by id, the built-in ones and the
    /// infra repo's own `runbooks/` (which overrides the built-in ones).
    #[arg(long, env = "HK_RUNBOOKS", global = true, value_name = "DIR")]
    pub runbooks: Option<PathBuf>,
    /// Console colour theme: default, light, high-contrast, or a file name in
    /// $XDG_CONFIG_HOME/hk-console/themes/ (NO_COLOR is honoured).
    #[arg(long, env = "HK_THEME", global = true, value_name = "NAME")]
    pub theme: Option<String>,
    /// Rehearse in the console: plans, gates and the journal work, but no executor runs
    /// anything (no SSH, no ansible-playbook, no probe).
    #[arg(long, global = true)]
    pub dry_run: bool,
    /// The kubeconfig to use instead of the inventory's, for the commands that reach a
    /// cluster (the console, `run`, `observe`), as kubectl reads it. One file is one
    /// cluster: it applies to the one environment the command is about (`--env`), or to the
    /// repo's only one. Else from KUBECONFIG (`:`-separated, the first file wins).
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use, in whichever kubeconfig is used.
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// Start mutating runs WITHOUT the cluster's run lock (kube-system/hk-console-run-lock):
    /// for a cluster that cannot be reached to take it. Journaled in every run, and shown
    /// on every frame. For the console, `run` and `demo`; refused elsewhere.
    #[arg(long, global = true)]
    pub no_cluster_lock: bool,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Read the Ansible inventory exactly as Ansible does.
    Inventory {
        /// An inventory source instead of the repo's: an INI, YAML or JSON file, or a
        /// directory of them (read as Ansible reads it); repeat `-i` for several, as with
        /// ansible-inventory.
        #[arg(
            short = 'i',
            long = "inventory",
            value_name = "SOURCE",
            conflicts_with = "repo"
        )]
        inventory: Vec<PathBuf>,
        /// Print every group and host as JSON, like `ansible-inventory --list`.
        #[arg(long, conflicts_with = "host")]
        list: bool,
        /// Print one host's variables, like `ansible-inventory --host`.
        #[arg(long, value_name = "HOST")]
        host: Option<String>,
        /// Render Jinja in the values (what cannot be rendered is reported, never guessed).
        #[arg(long)]
        resolved: bool,
        /// With --host H --resolved: H's variables as the play of this playbook sees them
        /// (role defaults and vars included), each with its layer and file:line.
        #[arg(long, value_name = "PLAYBOOK", requires_all = ["host", "resolved"])]
        playbook: Option<PathBuf>,
    },
    /// Each environment as the inventory defines it: servers, VIP, endpoint, founder.
    Envs {
        #[arg(long)]
        json: bool,
    },
    /// List or validate runbooks.
    Runbooks {
        #[command(subcommand)]
        command: RunbooksCommand,
    },
    /// The expanded, ordered plan of a runbook for one environment. Runs nothing.
    Plan {
        /// Runbook id (see `hk-console runbooks list`).
        runbook: String,
        #[arg(long, value_name = "ENV")]
        env: String,
        /// The one host, for runbooks that run on a single host (reprovision-node, ...).
        #[arg(long, value_name = "HOST")]
        host: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// SSH host keys.
    Ssh {
        #[command(subcommand)]
        command: SshCommand,
    },
    /// Open the console on a runbook's plan for one environment, ready to start.
    Run {
        /// Runbook id (see `hk-console runbooks list`).
        runbook: String,
        #[arg(long, value_name = "ENV")]
        env: String,
        /// The one host, for runbooks that run on a single host.
        #[arg(long, value_name = "HOST")]
        host: Option<String>,
    },
    /// The console in observe mode: read-only, for incidents. Nothing can change.
    /// With --once: one look at every kube pane of each environment (VIP lease, agent env
    /// and rollout, nodes), printed; exit 1 on a critical verdict, else 2 if something could
    /// not be looked at, else 0.
    Observe {
        /// One snapshot, printed, instead of the console.
        #[arg(long)]
        once: bool,
        /// Print the snapshot as JSON (with --once).
        #[arg(long, requires = "once")]
        json: bool,
        /// Only this environment (with --once); in the console, the environment
        /// --kubeconfig (or KUBECONFIG) points at. With --once, a cluster that is not this
        /// environment's (none of its servers is a node there) fails with exit 2.
        #[arg(long, value_name = "ENV")]
        env: Option<String>,
    },
    /// The simulated homelab: dev and prod (three nodes each), a kube API server per
    /// environment and an SSH node per host, all on loopback, reached by the console's
    /// real clients. Nothing leaves this machine. With --repo DIR: a copy of that repo
    /// (its environments, hosts, groups and variables) moved onto loopback instead.
    Demo {
        /// The scenario (see --list).
        #[arg(long, value_name = "NAME", default_value = "healthy")]
        scenario: String,
        /// List the scenarios and stop.
        #[arg(long)]
        list: bool,
        /// One look at every pane of the simulation, printed like `observe --once`, then stop.
        #[arg(long)]
        once: bool,
        /// Print that look (with --once) or the run's summary (with --headless) as JSON.
        #[arg(long)]
        json: bool,
        /// No console: drive the runbook --run names through the simulation, a simulated
        /// operator answering every gate, and print the journal's summary. Exit 0 when the
        /// run succeeded, 1 when it halted or was aborted, 2 when the journal could not be
        /// written, 128 + N when signal N (HUP, INT, TERM) ended it (journaled abandoned).
        #[arg(long, requires = "run", conflicts_with = "once")]
        headless: bool,
        /// The runbook a headless run drives (see `hk-console runbooks list`).
        #[arg(long, value_name = "RUNBOOK", requires = "headless")]
        run: Option<String>,
        /// The environment of a headless run (needed when the runbook has several).
        #[arg(long, value_name = "ENV", requires = "headless")]
        env: Option<String>,
        /// The one host, for runbooks that run on a single host.
        #[arg(long, value_name = "HOST", requires = "headless")]
        host: Option<String>,
        /// A headless run that has not ended after this many seconds is cancelled and
        /// aborted (journaled).
        #[arg(
            long,
            value_name = "SECONDS",
            default_value_t = 1800,
            requires = "headless"
        )]
        timeout: u64,
        /// Write the demo repo here and keep it (default: a fresh directory removed on exit).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Run a REAL etcd and kube-apiserver per environment from DIR (which holds `etcd`
        /// and `kube-apiserver`, e.g. target/apiserver-bin) instead of the built-in API
        /// server; the simulated controllers write to them, so kubectl and k9s see the real
        /// server. Container logs, exec, attach and port-forward fail there (the real server
        /// asks a kubelet; the simulation runs none).
        #[arg(long, value_name = "DIR", conflicts_with = "list")]
        apiserver: Option<PathBuf>,
        /// Each simulated node runs this machine's own programs (sh, coreutils, python3,
        /// scp, sftp-server) in a bubblewrap sandbox of its own, so the playbooks' real
        /// Ansible modules run on it; its units, reboots and etcd stay the simulation's.
        /// Not yet modelled there: the VPN tunnel (the exit probe fails, red) and the block
        /// devices (/sys/block). Needs `bwrap` and user namespaces: without them the demo
        /// does not start, and says why (docs/userland.md).
        #[arg(long, conflicts_with = "list")]
        userland: bool,
    },
    /// Propose hk-console.yaml for a repo that has none, from its inventory and Flux tree,
    /// every choice commented with its evidence (file:line) and every ambiguity asked as a
    /// QUESTION. The repo: --repo, else HK_REPO, else the current directory.
    Init {
        /// Write the proposal to DIR/hk-console.yaml (never over an existing one), then run
        /// `check` on it.
        #[arg(long)]
        write: bool,
    },
    /// The static parity contract (L0): Flux overlays vs inventory vs templates.
    Check {
        /// Only this environment.
        #[arg(long, value_name = "ENV")]
        env: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// A shell completion script on stdout, e.g. `hk-console completions bash >
    /// ~/.local/share/bash-completion/completions/hk-console`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// The manual page (roff) on stdout, e.g. `hk-console man | man -l -`.
    Man {
        /// Write every page instead (hk-console.1 and one per subcommand, hk-console-plan.1,
        /// ...) into DIR, e.g. ~/.local/share/man/man1.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Where hk-console reads and writes: config, themes, state, logs, journals (like
    /// `k9s info`).
    Paths {
        #[arg(long)]
        json: bool,
    },
    /// The change record of past runs, from their journals (damaged ones marked, never
    /// hidden).
    Runs {
        #[command(subcommand)]
        command: RunsCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// Every run: id, runbook, environment, operator, start, final state.
    List {
        #[arg(long)]
        json: bool,
        /// The journals' directory (default: the state directory `hk-console paths` names).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// One run's record: steps in order, each gate with who answered it, when and the
    /// note, previews, the last output lines, the final state. `--format md` is for a
    /// change log.
    Show {
        /// The run id (as `runs list` prints it).
        run: String,
        /// text, md or json.
        #[arg(long, default_value = "text")]
        format: crate::record::Format,
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum SshCommand {
    /// Show HOST's host key fingerprint and append it to known_hosts only after you type
    /// `yes`. A host whose recorded key CHANGED is refused: remove the old entry by hand.
    Trust {
        /// The inventory host.
        host: String,
        /// The known_hosts file to append to (default: ~/.ssh/known_hosts).
        #[arg(long, value_name = "FILE")]
        known_hosts: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum RunbooksCommand {
    /// Every runbook offered on this repo: id, read-only or mutating, environments, title;
    /// those not offered (written for other environments, or built in with playbooks the
    /// repo lacks) are named apart.
    List {
        #[arg(long)]
        json: bool,
        /// Every runbook, those not offered here too, each with why.
        #[arg(long)]
        all: bool,
    },
    /// Validate runbook files (default: every built-in runbook, the repo's runbooks/ and
    /// --runbooks DIR).
    Validate {
        /// Files or directories of runbooks.
        paths: Vec<PathBuf>,
    },
    /// Scaffold a guided runbook from a playbook: its plays' hosts as the target, one node
    /// at a time where a play says `serial: 1` or runs on servers, a list-hosts step and a
    /// previewed ansible step per playbook, and `# QUESTION:` where you must decide.
    New {
        /// The playbook, relative to the repo's Ansible directory.
        #[arg(long, value_name = "PLAYBOOK")]
        playbook: String,
        /// The runbook id (default: from the playbook's file name).
        #[arg(long)]
        id: Option<String>,
        /// Write it here, relative to the repo's top directory (its folders made; refused if the file exists), instead of to stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
}

pub fn main() -> ExitCode {
    if let Err(e) = color_eyre::install() {
        eprintln!("warning: error reporting not installed: {e}");
    }
    let _log = init_logging();
    let cli = Cli::parse();
    // The one runtime: the commands that reach a cluster, a host or the simulation run their
    // async parts on it, and the console's live sources and the demo's simulation live on it
    // for as long as the command runs.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("hk-console")
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            errln!("error: cannot start the async runtime: {e}");
            return Status::CouldNotRun.into();
        }
    };
    let result = run(&cli, &runtime);
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    match result {
        Ok(status) => status.into(),
        Err(failure) => {
            errln!("error: {}", failure.render());
            Status::CouldNotRun.into()
        }
    }
}

/// Logs go to a file under the XDG state dir, never to the terminal. `HK_LOG` sets the
/// filter (default `info`).
/// The file is the operator's alone (0600 under a 0700 directory): it quotes hosts,
/// commands and their output.
fn init_logging() -> Option<PathBuf> {
    let path = log_path().ok()?;
    let file = crate::journal::open_private_append(&path).ok()?;
    let filter = tracing_subscriber::EnvFilter::try_from_env("HK_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::sync::Mutex::new(file))
        .try_init()
        .ok()?;
    Some(path)
}

/// Where the log file is: beside the journals' directory, in hk-console's state directory.
pub fn log_path() -> Result<PathBuf, crate::journal::JournalError> {
    Ok(crate::journal::state_dir()?.join("hk-console.log"))
}

/// The repo the commands work on: --repo, else HK_REPO, else the bundled sample.
pub fn repo_root(flag: Option<&Path>) -> Result<PathBuf, Failure> {
    if let Some(p) = flag {
        return Ok(p.to_path_buf());
    }
    let bundled = crate::repo::bundled_sample_dir();
    if bundled.is_dir() {
        return Ok(bundled);
    }
    Err(Failure::msg(
        "no infra repo: pass --repo DIR or set HK_REPO (the bundled sample is not next to this binary)",
    ))
}

/// The runbooks of this invocation: built-in, then the infra repo's `runbooks/`, then
/// `--runbooks DIR` (context::load_runbooks_of), each layer replacing ids of the one below.
fn runbooks_of(cli: &Cli) -> Result<crate::runbook::embedded::RunbookSet, Failure> {
    let root = repo_root(cli.repo.as_deref()).ok();
    Ok(crate::context::load_runbooks_of(
        root.as_deref(),
        cli.runbooks.as_deref(),
    )?)
}

fn load_repo(cli: &Cli) -> Result<Repo, Failure> {
    let root = repo_root(cli.repo.as_deref())?;
    let repo = Repo::load(&root)?;
    // What the inventory read differently from its bytes (non-UTF-8 read as `?`, as
    // Ansible does) is said by every command that reads it, not only by `inventory`: the
    // value a plan or the console uses is not the one in the file. The log keeps it too.
    for w in repo.inventory.warnings() {
        tracing::warn!(warning = %w, "inventory");
        errln!("warning: {w}");
    }
    Ok(repo)
}

fn print_json(v: &impl serde::Serialize) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(v)?;
    // serde_json escapes C0 only; DEL, C1 and the bidi controls are escaped here, the JSON
    // way, so the text stays the same JSON.
    let text = crate::text::json_visible(&text);
    outln!("{text}");
    Ok(())
}

fn run(cli: &Cli, rt: &tokio::runtime::Runtime) -> CmdResult {
    if let Some(why) = dry_run_refusal(cli)
        .or_else(|| kube_flags_refusal(cli))
        .or_else(|| no_lock_refusal(cli))
    {
        return Err(Failure::msg(why));
    }
    match &cli.command {
        // No command on a terminal opens the console; piped, the overview. With no infra
        // repo named, there is no cluster to reach: the console opens on the simulated
        // homelab instead of the bundled sample's documentation addresses.
        None if console::possible() && cli.repo.is_none() => demo::demo_cmd(
            cli,
            rt,
            "healthy",
            DemoMode::Console,
            false,
            None,
            Default::default(),
        ),
        None if console::possible() => console::console(cli, rt, StartScreen::Home, false, None),
        None => check::overview(cli),
        Some(Command::Run { runbook, env, host }) => {
            // Plan first so a bad runbook, env or host fails here with exit 2, not in the UI.
            let repo = load_repo(cli)?;
            let runbooks = runbooks_of(cli)?;
            plan_runbook(&repo, &runbooks, runbook, env, host.as_deref())?;
            let start = StartScreen::Run {
                runbook: runbook.clone(),
                env: env.clone(),
                host: host.clone(),
            };
            console::console_on(
                cli,
                rt,
                repo,
                start,
                false,
                Some(env),
                console::Extras::default(),
            )
        }
        Some(Command::Observe {
            once: true,
            json,
            env,
        }) => observe::once(cli, rt, *json, env.as_deref()),
        Some(Command::Observe {
            once: false, env, ..
        }) => console::console(cli, rt, StartScreen::Home, true, env.as_deref()),
        Some(Command::Demo { list: true, .. }) => {
            for name in crate::sim::scenario::names() {
                let s = crate::sim::scenario::load(&name)?;
                outln!("{name:<20} {}", s.description.trim());
            }
            Ok(Status::Clean)
        }
        Some(Command::Demo {
            scenario,
            json,
            dir,
            headless: true,
            run: Some(runbook),
            env,
            host,
            timeout,
            apiserver,
            userland,
            ..
        }) => {
            let req = crate::sim::headless::HeadlessRun {
                runbook: runbook.clone(),
                env: env.clone(),
                host: host.clone(),
                deadline: std::time::Duration::from_secs(*timeout),
            };
            demo::demo_cmd(
                cli,
                rt,
                scenario,
                DemoMode::Headless(req),
                *json,
                dir.as_deref(),
                demo::SimParts {
                    apiserver: apiserver.as_deref(),
                    options: crate::sim::demo::Options {
                        userland: *userland,
                    },
                },
            )
        }
        Some(Command::Demo {
            scenario,
            once,
            json,
            dir,
            apiserver,
            userland,
            ..
        }) => {
            if *json && !*once {
                return Err(Failure::msg("demo: --json goes with --once or --headless"));
            }
            let mode = if *once {
                DemoMode::Once
            } else {
                DemoMode::Console
            };
            demo::demo_cmd(
                cli,
                rt,
                scenario,
                mode,
                *json,
                dir.as_deref(),
                demo::SimParts {
                    apiserver: apiserver.as_deref(),
                    options: crate::sim::demo::Options {
                        userland: *userland,
                    },
                },
            )
        }
        Some(Command::Inventory {
            inventory,
            host,
            playbook: Some(playbook),
            ..
        }) => inventory::play_vars_cmd(cli, inventory, host.as_deref(), playbook),
        Some(Command::Inventory {
            inventory,
            list,
            host,
            resolved,
            playbook: None,
        }) => inventory::inventory_cmd(cli, inventory, *list, host.as_deref(), *resolved),
        Some(Command::Envs { json }) => inventory::envs_cmd(cli, *json),
        Some(Command::Runbooks { command }) => match command {
            RunbooksCommand::List { json, all } => runbooks::list(cli, *json, *all),
            RunbooksCommand::Validate { paths } => runbooks::validate(cli, paths),
            RunbooksCommand::New { playbook, id, out } => {
                runbooks::new(cli, playbook, id.as_deref(), out.as_deref())
            }
        },
        Some(Command::Plan {
            runbook,
            env,
            host,
            json,
        }) => plan::plan_cmd(cli, runbook, env, host.as_deref(), *json),
        Some(Command::Check { env, json }) => check::check_cmd(cli, env.as_deref(), *json),
        Some(Command::Init { write }) => init::init_cmd(cli, *write),
        Some(Command::Ssh {
            command: SshCommand::Trust { host, known_hosts },
        }) => ssh::ssh_trust(cli, rt, host, known_hosts.as_deref()),
        Some(Command::Completions { shell }) => meta::completions(*shell),
        Some(Command::Man { dir }) => meta::man(dir.as_deref()),
        Some(Command::Paths { json }) => meta::paths(*json),
        Some(Command::Runs { command }) => match command {
            RunsCommand::List { json, dir } => runs::list(dir.as_deref(), *json),
            RunsCommand::Show { run, format, dir } => runs::show(dir.as_deref(), run, *format),
        },
    }
}

/// The operator's `--kubeconfig`/KUBECONFIG and `--context` for a command about `envs`
/// (the environments it reaches) of `repo`, or `env` when it names one. A kubeconfig is one
/// cluster, so it applies to one environment: with several and none named, `--kubeconfig`
/// is refused; KUBECONFIG (set in the shell for other work) is too unless `lenient`, which
/// leaves the inventory's kubeconfigs in use and returns why, for the console to say.
fn kube_overrides(
    cli: &Cli,
    repo: &Repo,
    env: Option<&str>,
    lenient: bool,
) -> Result<(crate::cluster::KubeOverrides, Option<String>), Failure> {
    use crate::cluster::KubeOverrides;
    let ov = KubeOverrides::from_args(cli.kubeconfig.clone(), cli.context.clone());
    if let Some(e) = env {
        return Ok((ov.for_env(e), None));
    }
    let names = repo.environment_names();
    if let [only] = names.as_slice() {
        return Ok((ov.for_env(only), None));
    }
    if !ov.names_kubeconfig() {
        return Ok((ov, None));
    }
    let from = if ov.kubeconfig.is_some() {
        "--kubeconfig"
    } else {
        "KUBECONFIG"
    };
    let why = format!(
        "{from} names one cluster, but {} environments are selected ({}): pick one with --env",
        names.len(),
        names.join(", ")
    );
    if lenient && ov.kubeconfig.is_none() {
        let ov = KubeOverrides {
            kubeconfig_env: None,
            ..ov
        };
        return Ok((
            ov,
            Some(format!("{why}; the inventory's kubeconfigs are used")),
        ));
    }
    Err(Failure::msg(why))
}

/// `--kubeconfig`/`--context` choose the cluster of a command that reaches one; anywhere
/// else they would do nothing, so they are refused instead of ignored.
fn kube_flags_refusal(cli: &Cli) -> Option<String> {
    let flag = match (&cli.kubeconfig, &cli.context) {
        (Some(_), _) => "--kubeconfig",
        (None, Some(_)) => "--context",
        (None, None) => return None,
    };
    let what = match &cli.command {
        Some(Command::Run { .. } | Command::Observe { .. }) => return None,
        None if console::possible() && cli.repo.is_some() => return None,
        None if console::possible() => {
            "with no --repo the console opens on the demo, whose clusters are its own simulated ones"
        }
        None => "the overview reaches no cluster",
        Some(Command::Demo { .. }) => "the demo's clusters are its own simulated ones",
        Some(_) => "this command reaches no cluster",
    };
    Some(format!("{flag} cannot apply: {what}; drop {flag}"))
}

/// `--dry-run` promises that nothing runs. The console honours it (no executor is built);
/// commands that only read the repo run nothing anyway. The modes below exist to reach hosts
/// or drive executors, so they refuse the flag instead of ignoring it.
fn dry_run_refusal(cli: &Cli) -> Option<String> {
    if !cli.dry_run {
        return None;
    }
    let what = match &cli.command {
        Some(Command::Demo { headless: true, .. }) => {
            "demo --headless drives the real executors (ansible, SSH) against the simulation; for a rehearsal that runs nothing use `hk-console --dry-run run RUNBOOK` (or `demo` without --headless)"
        }
        Some(Command::Demo { once: true, .. }) => {
            "demo --once looks at every pane over SSH and the kube API"
        }
        Some(Command::Observe { once: true, .. }) => {
            "observe --once looks at every pane over SSH and the kube API"
        }
        Some(Command::Ssh { .. }) => "ssh trust connects to the host to read its key",
        _ => return None,
    };
    Some(format!(
        "--dry-run cannot be honoured here: {what}; drop --dry-run"
    ))
}

/// `--no-cluster-lock` changes how mutating runs start: the console, `run` and `demo` start
/// them. Anywhere else it would do nothing, so it is refused instead of ignored.
fn no_lock_refusal(cli: &Cli) -> Option<String> {
    if !cli.no_cluster_lock {
        return None;
    }
    let what = match &cli.command {
        None | Some(Command::Run { .. }) | Some(Command::Demo { once: false, .. }) => return None,
        Some(Command::Observe { .. }) => "observe mode never takes the run lock".to_string(),
        Some(Command::Demo { once: true, .. }) => "demo --once starts no run".to_string(),
        Some(_) => "this command starts no run (the console, `run` and `demo` do)".to_string(),
    };
    Some(format!(
        "--no-cluster-lock cannot apply: {what}; drop --no-cluster-lock"
    ))
}

#[cfg(test)]
mod tests {
    use super::Failure;

    #[derive(Debug, thiserror::Error)]
    enum Outer {
        #[error("cannot load the repo")]
        Load(#[source] Inner),
        #[error("cannot load the repo: {0}")]
        Quoting(#[source] Inner),
    }

    #[derive(Debug, thiserror::Error)]
    #[error("hosts.ini:3: bad range")]
    struct Inner;

    #[test]
    fn the_chain_is_printed_once() {
        let f = Failure::from(Outer::Load(Inner));
        assert_eq!(
            f.render(),
            "cannot load the repo\n  caused by: hosts.ini:3: bad range"
        );
        // A message that already quotes its cause does not repeat it.
        let f = Failure::from(Outer::Quoting(Inner));
        assert_eq!(f.render(), "cannot load the repo: hosts.ini:3: bad range");
        assert_eq!(Failure::msg("plain").render(), "plain");
    }
}
