//! The commands and flags, exit codes and error printing. `main.rs` only calls [`main`].
//!
//! Exit codes, for every command: 0 clean; 1 what was checked has violations; 2 could not
//! run (bad input, a missing file), with a message naming the file and line.
//! Must not: hold logic the TUI will need too; commands call into `repo`, `runbook`,
//! `checks` and print.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::checks::parity;
use crate::context::{load_runbooks, plan_runbook, read_runbook_dir};
use crate::repo::config::Config;
use crate::repo::env::Environment;
use crate::repo::inventory::Inventory;
use crate::repo::listing;
use crate::repo::resolve::{Resolved, Resolver};
use crate::repo::Repo;
use crate::runbook::embedded;
use crate::runbook::plan::{Gate, GateSource, Plan};
use crate::runbook::validate::validate_text;

/// Exit statuses shared by every command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Clean = 0,
    Violations = 1,
    CouldNotRun = 2,
}

impl From<Status> for ExitCode {
    fn from(s: Status) -> Self {
        ExitCode::from(s as u8)
    }
}

/// An error the operator can act on: printed as is, exit 2.
#[derive(Debug)]
pub struct Failure(pub String);

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure(e.to_string())
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
    /// A directory of runbooks that add to or override the built-in ones, by id.
    #[arg(long, env = "HK_RUNBOOKS", global = true, value_name = "DIR")]
    pub runbooks: Option<PathBuf>,
    // wip-tui (interactive console): the --theme flag.
    /// Console colour theme: default, light, high-contrast, or a file name in
    /// $XDG_CONFIG_HOME/hk-console/themes/ (NO_COLOR is honoured).
    #[arg(long, env = "HK_THEME", global = true, value_name = "NAME")]
    pub theme: Option<String>,
    /// Rehearse in the console: plans, gates and the journal work, but no executor runs
    /// anything (no SSH, no ansible-playbook, no probe).
    #[arg(long, global = true)]
    pub dry_run: bool,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Read the Ansible inventory exactly as Ansible does.
    Inventory {
        /// An INI inventory file (instead of the repo's).
        #[arg(
            short = 'i',
            long = "inventory",
            value_name = "FILE",
            conflicts_with = "repo"
        )]
        inventory: Option<PathBuf>,
        /// Print every group and host as JSON, like `ansible-inventory --list`.
        #[arg(long, conflicts_with = "host")]
        list: bool,
        /// Print one host's variables, like `ansible-inventory --host`.
        #[arg(long, value_name = "HOST")]
        host: Option<String>,
        /// Render Jinja in the values (what cannot be rendered is reported, never guessed).
        #[arg(long)]
        resolved: bool,
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
    // wip-tui (interactive console): `run` and `observe`.
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
        /// Only this environment (with --once).
        #[arg(long, value_name = "ENV", requires = "once")]
        env: Option<String>,
        /// The kubeconfig to use instead of the inventory's (one file is one cluster: give
        /// --env too when the repo has several environments). Also read from KUBECONFIG.
        #[arg(long, value_name = "FILE", requires = "once")]
        kubeconfig: Option<PathBuf>,
        /// The kubeconfig context to use.
        #[arg(long, value_name = "NAME", requires = "once")]
        context: Option<String>,
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
        /// run succeeded, 1 when it halted or was aborted.
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
    /// Every runbook: id, read-only or mutating, environments, title.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Validate runbook files (default: every built-in runbook and --runbooks DIR).
    Validate {
        /// Files or directories of runbooks.
        paths: Vec<PathBuf>,
    },
}

pub fn main() -> ExitCode {
    if let Err(e) = color_eyre::install() {
        eprintln!("warning: error reporting not installed: {e}");
    }
    let _log = init_logging();
    let cli = Cli::parse();
    match run(cli) {
        Ok(status) => status.into(),
        Err(Failure(message)) => {
            let _ = writeln!(
                std::io::stderr(),
                "error: {}",
                crate::text::visible_lines(&message)
            );
            Status::CouldNotRun.into()
        }
    }
}

/// Logs go to a file under the XDG state dir, never to the terminal. `HK_LOG` sets the
/// filter (default `info`).
fn init_logging() -> Option<PathBuf> {
    let dir = crate::journal::default_runs_dir()
        .ok()?
        .parent()?
        .to_path_buf();
    std::fs::create_dir_all(&dir).ok()?;
    let path = dir.join("hk-console.log");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .ok()?;
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

/// The repo the commands work on: --repo, else HK_REPO, else the bundled sample.
pub fn repo_root(flag: Option<&Path>) -> Result<PathBuf, Failure> {
    if let Some(p) = flag {
        return Ok(p.to_path_buf());
    }
    let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory");
    if bundled.is_dir() {
        return Ok(bundled);
    }
    Err(Failure(
        "no infra repo: pass --repo DIR or set HK_REPO (the bundled sample is not next to this binary)".into(),
    ))
}

fn load_repo(cli: &Cli) -> Result<Repo, Failure> {
    let root = repo_root(cli.repo.as_deref())?;
    Ok(Repo::load(&root)?)
}

fn print_json(v: &impl serde::Serialize) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(v)?;
    // serde_json escapes C0 only; DEL, C1 and the bidi controls are escaped here, the JSON
    // way, so the text stays the same JSON.
    let text = crate::text::json_visible(&text);
    outln!("{text}");
    Ok(())
}

fn fact(v: Option<&str>) -> &str {
    v.unwrap_or("(unknown)")
}

fn print_env(repo: &Repo, env: &Environment) {
    let hosts: Vec<String> = env
        .servers
        .iter()
        .map(|h| format!("{} {}", h.name, h.address))
        .collect();
    outln!("{}", env.name);
    outln!(
        "  servers      {} ({}): {}",
        env.servers_group,
        env.servers.len(),
        hosts.join(", ")
    );
    outln!(
        "  VIP          {}   endpoint {}   founder {}   port {}",
        fact(env.vip.get()),
        fact(env.endpoint.get()),
        fact(env.founder.get()),
        fact(env.api_port.get())
    );
    outln!(
        "  primary      {}   kubeconfig {}",
        fact(env.primary_group.get()),
        env.kubeconfig_name
            .get()
            .map(|k| repo.root.join(".cache").join(k).display().to_string())
            .unwrap_or_else(|| "(unknown)".into())
    );
    if let Some(group) = &env.vpn_gateways_group {
        let gws: Vec<&str> = env.vpn_gateways.iter().map(|h| h.name.as_str()).collect();
        outln!(
            "  vpn gateways {group}: {}",
            if gws.is_empty() {
                "(none)".to_string()
            } else {
                gws.join(", ")
            }
        );
    }
    outln!("  flux overlay {}", env.flux_overlay.display());
    if env.operator_present {
        outln!("  operator     must be present before anything mutates");
    }
    if env.protected {
        outln!("  protected    every mutating step is previewed and approved (gate policy)");
    }
    for p in &env.problems {
        outln!("  problem      {p}");
    }
}

fn run(cli: Cli) -> CmdResult {
    if let Some(why) = dry_run_refusal(&cli) {
        return Err(Failure(why));
    }
    match &cli.command {
        // wip-tui: no command on a terminal opens the console; piped, the overview.
        // With no infra repo named, there is no cluster to reach: the console opens on the
        // simulated homelab instead of the bundled sample's documentation addresses.
        None if console_possible() && cli.repo.is_none() => {
            demo_cmd(&cli, "healthy", DemoMode::Console, false, None)
        }
        None if console_possible() => console(&cli, crate::ui::StartScreen::Home, false),
        None => overview(&cli),
        Some(Command::Run { runbook, env, host }) => {
            // Plan first so a bad runbook, env or host fails here with exit 2, not in the UI.
            let repo = load_repo(&cli)?;
            let runbooks = load_runbooks(cli.runbooks.as_deref())?;
            plan_runbook(&repo, &runbooks, runbook, env, host.as_deref())?;
            let start = crate::ui::StartScreen::Run {
                runbook: runbook.clone(),
                env: env.clone(),
                host: host.clone(),
            };
            console(&cli, start, false)
        }
        Some(Command::Observe {
            once: true,
            json,
            env,
            kubeconfig,
            context,
        }) => observe_once(
            &cli,
            *json,
            env.as_deref(),
            kubeconfig.clone(),
            context.clone(),
        ),
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
            ..
        }) => {
            let req = crate::sim::headless::HeadlessRun {
                runbook: runbook.clone(),
                env: env.clone(),
                host: host.clone(),
                deadline: std::time::Duration::from_secs(*timeout),
            };
            demo_cmd(
                &cli,
                scenario,
                DemoMode::Headless(req),
                *json,
                dir.as_deref(),
            )
        }
        Some(Command::Demo {
            scenario,
            once,
            json,
            dir,
            ..
        }) => {
            if *json && !*once {
                return Err(Failure(
                    "demo: --json goes with --once or --headless".into(),
                ));
            }
            let mode = if *once {
                DemoMode::Once
            } else {
                DemoMode::Console
            };
            demo_cmd(&cli, scenario, mode, *json, dir.as_deref())
        }
        Some(Command::Observe { once: false, .. }) => {
            console(&cli, crate::ui::StartScreen::Home, true)
        }
        Some(Command::Inventory {
            inventory,
            list,
            host,
            resolved,
        }) => inventory_cmd(
            &cli,
            inventory.as_deref(),
            *list,
            host.as_deref(),
            *resolved,
        ),
        Some(Command::Envs { json }) => envs_cmd(&cli, *json),
        Some(Command::Runbooks { command }) => match command {
            RunbooksCommand::List { json } => runbooks_list(&cli, *json),
            RunbooksCommand::Validate { paths } => runbooks_validate(&cli, paths),
        },
        Some(Command::Plan {
            runbook,
            env,
            host,
            json,
        }) => plan_cmd(&cli, runbook, env, host.as_deref(), *json),
        Some(Command::Check { env, json }) => check_cmd(&cli, env.as_deref(), *json),
        Some(Command::Init { write }) => init_cmd(&cli, *write),
        Some(Command::Ssh {
            command: SshCommand::Trust { host, known_hosts },
        }) => ssh_trust(&cli, host, known_hosts.as_deref()),
    }
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

fn inventory_cmd(
    cli: &Cli,
    file: Option<&Path>,
    list: bool,
    host: Option<&str>,
    resolved: bool,
) -> CmdResult {
    if !list && host.is_none() {
        return Err(Failure("say what to print: --list, or --host HOST".into()));
    }
    let inventory = match file {
        Some(f) => Inventory::load(f)?,
        None => {
            let root = repo_root(cli.repo.as_deref())?;
            let config = Config::load(&root)?;
            Inventory::load(&root.join(&config.inventory))?
        }
    };
    for f in inventory.vaulted_files() {
        errln!(
            "note: {}: vaulted, not read (its variables are not shown)",
            f.display()
        );
    }
    let mut unrenderable: Vec<String> = Vec::new();
    let mut output = match host {
        Some(h) => {
            let vars = inventory.host_vars(h).ok_or_else(|| {
                Failure(format!("no host `{h}` in {}", inventory.path().display()))
            })?;
            serde_json::Value::Object(
                vars.iter()
                    .map(|(k, v)| (k.clone(), crate::repo::vars::listing_value(v)))
                    .collect(),
            )
        }
        None => listing::list_json(&inventory),
    };
    if resolved {
        let resolver = Resolver::new();
        let groups = std::sync::Arc::new(crate::repo::all_groups(&inventory));
        let mut render_host = |name: &str, vars: &mut serde_json::Value| {
            let Some(raw) = crate::repo::raw_vars(&inventory, name) else {
                return;
            };
            let mut ctx = crate::repo::host_context_with(&inventory, groups.clone(), name);
            ctx.inventory_hostname = name.to_string();
            for (var, r) in resolver.resolve_all(&ctx, &raw) {
                match r {
                    Resolved::Value(v) => {
                        if let Some(slot) = vars.get_mut(&var) {
                            *slot = v;
                        }
                    }
                    Resolved::Unrenderable { reason } => {
                        unrenderable.push(format!("{name}: {var}: cannot render: {reason}"))
                    }
                }
            }
        };
        match host {
            Some(h) => render_host(h, &mut output),
            None => {
                if let Some(hostvars) = output
                    .get_mut("_meta")
                    .and_then(|m| m.get_mut("hostvars"))
                    .and_then(|h| h.as_object_mut())
                {
                    for (name, vars) in hostvars.iter_mut() {
                        render_host(name, vars);
                    }
                }
            }
        }
    }
    print_json(&output)?;
    for u in &unrenderable {
        errln!("warning: {u} (left unrendered)");
    }
    Ok(if unrenderable.is_empty() {
        Status::Clean
    } else {
        Status::Violations
    })
}

fn envs_cmd(cli: &Cli, json: bool) -> CmdResult {
    let repo = load_repo(cli)?;
    if json {
        print_json(&repo.environments)?;
    } else {
        for env in &repo.environments {
            print_env(&repo, env);
        }
    }
    Ok(
        if repo.environments.iter().any(|e| !e.problems.is_empty()) {
            Status::Violations
        } else {
            Status::Clean
        },
    )
}

fn runbooks_list(cli: &Cli, json: bool) -> CmdResult {
    let set = load_runbooks(cli.runbooks.as_deref())?;
    if json {
        let rows: Vec<serde_json::Value> = set
            .iter()
            .map(|l| {
                serde_json::json!({
                    "id": l.runbook.id,
                    "title": l.runbook.title,
                    "environments": l.runbook.environments,
                    "mutates": l.runbook.mutates(),
                    "source": l.runbook.source,
                })
            })
            .collect();
        print_json(&rows)?;
        return Ok(Status::Clean);
    }
    for l in set.iter() {
        let rb = &l.runbook;
        outln!(
            "{:<26} {:<9} {:<10} {}",
            rb.id,
            if rb.mutates() {
                "mutating"
            } else {
                "read-only"
            },
            rb.environments.join(","),
            rb.title
        );
    }
    Ok(Status::Clean)
}

fn runbooks_validate(cli: &Cli, paths: &[PathBuf]) -> CmdResult {
    let mut files: Vec<(String, String)> = Vec::new();
    if paths.is_empty() {
        files.extend(
            embedded::embedded()
                .iter()
                .map(|(name, text)| (format!("runbooks/{name}"), text.to_string())),
        );
        if let Some(dir) = &cli.runbooks {
            files.extend(read_runbook_dir(dir)?);
        }
    }
    for p in paths {
        if p.is_dir() {
            files.extend(read_runbook_dir(p)?);
        } else {
            let text = crate::repo::read::read_to_string(p)
                .map_err(|e| Failure(format!("{}: cannot read: {e}", p.display())))?;
            files.push((p.display().to_string(), text));
        }
    }
    let mut errors = 0;
    for (name, text) in &files {
        for w in crate::runbook::validate::raw_shell_splices(name, text) {
            errln!("warning: {w}");
        }
        if let Err(diags) = validate_text(name, text) {
            errors += diags.len();
            for d in diags {
                errln!("{d}");
            }
        }
    }
    if errors > 0 {
        errln!("{errors} error(s) in {} file(s) checked", files.len());
        return Ok(Status::CouldNotRun);
    }
    outln!("ok: {} runbook file(s) valid", files.len());
    Ok(Status::Clean)
}

fn gate_text(g: &Gate) -> String {
    match g {
        Gate::OperatorPresent => "operator-present".into(),
        Gate::TypedConfirm { phrase } => format!("typed-confirm (type `{phrase}`)"),
        Gate::Authorise { flag } => format!("authorise {flag}"),
        Gate::ConfirmHosts { expected } => {
            format!(
                "confirm-hosts: exactly {} ({})",
                expected.len(),
                expected.join(", ")
            )
        }
        Gate::ApproveDiff => "approve-diff".into(),
        Gate::ConfirmDone => "confirm-done".into(),
    }
}

fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn print_plan(plan: &Plan) {
    outln!(
        "{} for {}: {} steps, {}",
        plan.runbook,
        plan.env,
        plan.steps.len(),
        if plan.mutates {
            "MUTATING"
        } else {
            "read-only"
        }
    );
    for s in &plan.steps {
        outln!(
            "{:>3}. [{}] {:<14} {}{}",
            s.n,
            if s.mutates { "M" } else { " " },
            s.kind.as_str(),
            s.host
                .as_deref()
                .map(|h| format!("{h}: "))
                .unwrap_or_default(),
            s.title
        );
        if let Some(cmd) = &s.command {
            outln!("       $ {}", shell_words(cmd));
        }
        if let Some(g) = &s.gate {
            let from = match s.source {
                Some(GateSource::Policy) => " (from the gate policy)",
                _ => "",
            };
            outln!("       gate: {}{from}", gate_text(g));
        }
        if let Some(b) = &s.blast_radius {
            outln!("       blast radius: {}", b.summary);
        }
        if let Some(e) = &s.expect {
            if let Some(t) = &e.tcp {
                outln!("       expect: {t} accepts TCP");
            }
            if let Some(c) = &e.condition {
                outln!("       expect: {c}");
            }
        }
    }
    outln!("[M] = mutates. Nothing was run: this is a plan.");
}

fn plan_cmd(cli: &Cli, runbook: &str, env: &str, host: Option<&str>, json: bool) -> CmdResult {
    let repo = load_repo(cli)?;
    let set = load_runbooks(cli.runbooks.as_deref())?;
    let plan = plan_runbook(&repo, &set, runbook, env, host)?;
    if json {
        print_json(&plan)?;
    } else {
        print_plan(&plan);
    }
    Ok(Status::Clean)
}

fn overview(cli: &Cli) -> CmdResult {
    let repo = load_repo(cli)?;
    outln!("hk-console: infra repo {}", repo.root.display());
    if repo.root == Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory") {
        outln!("(the bundled sample; point --repo or HK_REPO at your infra repo)");
    }
    outln!("\n== Environments");
    for env in &repo.environments {
        print_env(&repo, env);
    }
    outln!("\n== Parity check (static, L0)");
    let status = print_check(&repo, None)?;
    outln!("\n== Runbooks");
    runbooks_list(cli, false)?;
    outln!("\nNext: hk-console plan etcd-io-priority --env prod    (a plan runs nothing)");
    Ok(status)
}

// wip-tui (interactive console): begin.
fn console_possible() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

/// The interactive console. Observe mode is built with read-only capabilities only.
fn console(cli: &Cli, start: crate::ui::StartScreen, observe: bool) -> CmdResult {
    let repo = load_repo(cli)?;
    console_on(cli, repo, start, observe, ConsoleExtras::default())
}

/// What the demo changes about the console; the default changes nothing.
#[derive(Default)]
struct ConsoleExtras {
    /// Shown first (the demo's SIMULATED banner).
    notices: Vec<String>,
    /// The executors' SSH trust and stuck threshold; the live panes use the same.
    exec: crate::ui::executors::ExecSetup,
    /// Where `:fault` goes.
    faults: Option<std::sync::Arc<dyn crate::ui::FaultSink>>,
    /// Run journals here instead of the operator's journal directory.
    runs_dir: Option<PathBuf>,
}

/// The console on `repo`.
fn console_on(
    cli: &Cli,
    repo: Repo,
    start: crate::ui::StartScreen,
    observe: bool,
    extras: ConsoleExtras,
) -> CmdResult {
    let ConsoleExtras {
        notices: extra,
        exec,
        faults,
        runs_dir,
    } = extras;
    let runbooks = load_runbooks(cli.runbooks.as_deref())?;
    let environments = repo
        .environments
        .iter()
        .map(crate::ui::EnvSummary::from)
        .collect();
    // The real executors (ansible-playbook, SSH, TCP probe); observe mode gets the read-only
    // ones only. Kinds without an executor (kube-wait, flux-reconcile) are refused by the UI.
    // A dry run has no executor at all: plans, gates and the journal, nothing touched.
    // The bundled sample's addresses are documentation values, not the operator's hosts:
    // on it the console rehearses, and says so.
    let on_sample = repo.root == Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory");
    let (capabilities, notices) = if cli.dry_run || on_sample {
        use crate::ui::{Capabilities, MutatingExecutors, ReadOnlyExecutors};
        let caps = if observe {
            Capabilities::Observe {
                read_only: ReadOnlyExecutors::default(),
            }
        } else {
            Capabilities::Operate {
                read_only: ReadOnlyExecutors::default(),
                mutating: MutatingExecutors::default(),
            }
        };
        let why = if on_sample && !cli.dry_run {
            "the bundled sample repo: rehearsal only, no executor runs (point --repo or HK_REPO at your infra repo to run for real)"
        } else {
            "dry run: no executor runs anything (no SSH, no ansible-playbook, no probe)"
        };
        (caps, vec![why.to_string()])
    } else {
        let clusters = crate::ui::executors::Clusters::for_repo(
            &repo,
            &crate::cluster::KubeOverrides::default(),
        );
        crate::ui::executors::capabilities_with(
            &repo,
            observe,
            std::sync::Arc::new(clusters),
            &exec,
        )
    };
    // Live panes: kube watchers per environment and the VPN look over SSH, on their own
    // runtime for as long as the console runs. Not on the bundled sample (documentation
    // addresses) nor in a dry run (nothing is dialled).
    let live_runtime = if cli.dry_run || on_sample {
        None
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("hk-live")
            .enable_all()
            .build()
            .ok()
    };
    let live_cancel = tokio_util::sync::CancellationToken::new();
    let mut notices = notices;
    let observations = live_runtime.as_ref().map(|rt| {
        let (rx, why, watched) =
            spawn_live_sources(&repo, exec.ssh.clone(), exec.stuck_after, rt, &live_cancel);
        if watched == 0 && !repo.environments.is_empty() {
            // No cluster of this repo is set up here: say so first, and where the panes
            // can be seen; the reasons per environment follow.
            notices.insert(
                0,
                "no cluster of this repo is set up on this machine (`hk-console demo` shows \
                 every pane and runbook on a simulated homelab)"
                    .into(),
            );
        }
        notices.extend(why);
        rx
    });
    let notices = extra.into_iter().chain(notices).collect();
    let opts = crate::ui::UiOptions {
        environments,
        runbooks,
        plans: std::sync::Arc::new(crate::ui::RepoPlans { repo }),
        runs_dir: runs_dir.or_else(|| crate::journal::default_runs_dir().ok()),
        start,
        theme: cli.theme.clone(),
        capabilities,
        observations,
        notices,
        faults,
    };
    let result = crate::ui::run(opts);
    live_cancel.cancel();
    if let Some(rt) = live_runtime {
        rt.shutdown_timeout(std::time::Duration::from_secs(1));
    }
    Ok(match result? {
        crate::ui::ExitStatus::Clean => Status::Clean,
        crate::ui::ExitStatus::RunNotSucceeded => Status::Violations,
    })
}
// wip-tui (interactive console): end.

// observe --once: begin.
/// `observe --once`: one look at each selected environment's kube panes, printed.
fn observe_once(
    cli: &Cli,
    json: bool,
    env: Option<&str>,
    kubeconfig: Option<PathBuf>,
    context: Option<String>,
) -> CmdResult {
    use crate::cluster::KubeOverrides;

    let repo = load_repo(cli)?;
    if repo.root == Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory") {
        return Err(Failure(
            "observe --once: the bundled sample repo's addresses are documentation values, not \
             your clusters; point --repo or HK_REPO at your infra repo"
                .into(),
        ));
    }
    if cli.dry_run {
        return Err(Failure(
            "observe --once reads the clusters and probes their VIPs; a dry run cannot look".into(),
        ));
    }
    let names: Vec<String> = match env {
        Some(e) => {
            if repo.environment(e).is_none() {
                return Err(Failure(format!(
                    "no environment `{e}` in hk-console.yaml (known: {})",
                    repo.environment_names().join(", ")
                )));
            }
            vec![e.to_string()]
        }
        None => repo
            .environment_names()
            .into_iter()
            .map(str::to_string)
            .collect(),
    };
    let overrides = KubeOverrides::from_args(kubeconfig, context);
    if overrides.names_kubeconfig() && names.len() > 1 {
        let from = if overrides.kubeconfig.is_some() {
            "--kubeconfig"
        } else {
            "KUBECONFIG"
        };
        return Err(Failure(format!(
            "{from} names one cluster, but {} environments are selected ({}): pick one with --env",
            names.len(),
            names.join(", ")
        )));
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure(format!("cannot start the async runtime: {e}")))?;
    let gateways =
        crate::observe::vpn::Gateways::for_repo(&repo, crate::context::ssh_options(&repo));
    let (snapshot, targets, problems) =
        runtime.block_on(observe_snapshot(&repo, &names, &overrides, &gateways));

    if json {
        print_json(&snapshot)?;
    } else {
        outln!("{}", render_snapshot(&snapshot, &targets).trim_end());
    }
    for p in &problems {
        errln!("error: {p}");
    }
    let code = match snapshot.exit_code() {
        0 if !problems.is_empty() => 2,
        c => c,
    };
    Ok(match code {
        0 => Status::Clean,
        1 => Status::Violations,
        _ => Status::CouldNotRun,
    })
}

/// Start the live sources of every environment on `rt`: a kube watcher per environment
/// whose kubeconfig exists, and the VPN and etcd pollers over SSH. What cannot start is returned as
/// a notice (the pane then says "no data yet"), never a failure of the console; with how
/// many environments are watched.
fn spawn_live_sources(
    repo: &Repo,
    ssh: Option<crate::exec::SshOptions>,
    stuck_after: Option<std::time::Duration>,
    rt: &tokio::runtime::Runtime,
    cancel: &tokio_util::sync::CancellationToken,
) -> (
    tokio::sync::mpsc::Receiver<crate::observe::feed::Update>,
    Vec<String>,
    usize,
) {
    use crate::cluster;
    let (tx, rx) = tokio::sync::mpsc::channel(256);
    let mut notices = Vec::new();
    let names: Vec<String> = repo
        .environment_names()
        .into_iter()
        .map(str::to_string)
        .collect();
    // An environment is watched live only when its cluster is set up on this machine (its
    // kubeconfig exists): a repo checked out elsewhere is never dialled by surprise, and its
    // VPN gateways are polled only alongside its cluster.
    let mut live_envs = Vec::new();
    for name in &names {
        let started = (|| -> Result<(), String> {
            let topo = cluster::env_topology(repo, name).map_err(|e| e.to_string())?;
            let mut settings = cluster::watch_settings(repo, name).map_err(|e| e.to_string())?;
            if let Some(d) = stuck_after {
                settings.stuck_after = d;
            }
            let target = cluster::kube_target(repo, name, &cluster::KubeOverrides::default())
                .map_err(|e| e.to_string())?;
            let client = rt
                .block_on(cluster::client(&target))
                .map_err(|e| e.to_string())?;
            let _guard = rt.enter();
            cluster::watch::spawn_env_watch(
                client,
                topo,
                settings,
                tx.clone(),
                cancel.child_token(),
            );
            Ok(())
        })();
        match started {
            Ok(()) => live_envs.push(name.clone()),
            Err(e) => notices.push(format!(
                "live panes of {name} (and its VPN gateways) not watched: {e}"
            )),
        }
    }
    let watched = live_envs.len();
    if live_envs.is_empty() {
        return (rx, notices, 0);
    }
    let ssh = ssh.unwrap_or_else(|| crate::context::ssh_options(repo));
    match Repo::load(&repo.root) {
        Ok(copy) => {
            let gateways =
                std::sync::Arc::new(crate::observe::vpn::Gateways::for_repo(&copy, ssh.clone()));
            let etcd = std::sync::Arc::new(crate::observe::etcd::EtcdProbe::for_repo(&copy, ssh));
            let copy = std::sync::Arc::new(copy);
            let _guard = rt.enter();
            // The etcd members of the watched environments, over SSH like the VPN look.
            crate::observe::etcd::spawn_etcd_poll(
                copy.clone(),
                live_envs.clone(),
                etcd,
                std::time::Duration::from_secs(15),
                tx.clone(),
                |pane, at| crate::observe::feed::Update {
                    env: pane.env.clone(),
                    at,
                    feed: crate::observe::feed::Feed::Etcd(pane),
                },
                cancel.child_token(),
            );
            crate::observe::vpn::spawn_vpn_poll(
                copy,
                live_envs,
                gateways,
                std::time::Duration::from_secs(15),
                tx,
                cancel.child_token(),
            );
        }
        Err(e) => notices.push(format!("VPN egress and etcd panes: {e}")),
    }
    (rx, notices, watched)
}

/// A directory removed when dropped (the demo's repo, unless --dir keeps it).
struct DemoDir {
    path: PathBuf,
    keep: bool,
}

impl Drop for DemoDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// What `hk-console demo` does once the simulation runs.
enum DemoMode {
    /// The console on the demo repo.
    Console,
    /// One look at every pane, printed.
    Once,
    /// One runbook driven by a simulated operator, its journal summarised.
    Headless(crate::sim::headless::HeadlessRun),
}

/// `hk-console demo`: start the simulation on its own runtime, then one look at every pane,
/// a headless run, or the console on the demo repo with the real executors.
fn demo_cmd(
    cli: &Cli,
    scenario: &str,
    mode: DemoMode,
    json: bool,
    dir: Option<&Path>,
) -> CmdResult {
    let dir = match dir {
        Some(d) => {
            if d.exists()
                && std::fs::read_dir(d)
                    .map(|mut r| r.next().is_some())
                    .unwrap_or(true)
            {
                return Err(Failure(format!(
                    "demo: {} is not an empty directory; the demo writes a whole repo there",
                    d.display()
                )));
            }
            DemoDir {
                path: d.to_path_buf(),
                keep: true,
            }
        }
        None => {
            let base = crate::journal::default_runs_dir()
                .ok()
                .and_then(|r| r.parent().map(Path::to_path_buf))
                .unwrap_or_else(std::env::temp_dir);
            let path = base.join(format!("demo-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            DemoDir { path, keep: false }
        }
    };
    std::fs::create_dir_all(&dir.path)
        .map_err(|e| Failure(format!("demo: cannot create {}: {e}", dir.path.display())))?;
    // The simulation runs on its own runtime for as long as this function holds it; the
    // console builds another one for itself.
    let sim_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("hk-sim")
        .enable_all()
        .build()
        .map_err(|e| Failure(format!("cannot start the async runtime: {e}")))?;
    let demo = sim_runtime
        .block_on(crate::sim::demo::start_from(
            scenario,
            &dir.path,
            cli.repo.as_deref(),
        ))
        .map_err(|e| Failure(e.to_string()))?;
    if let DemoMode::Headless(req) = &mode {
        let runbooks = load_runbooks(cli.runbooks.as_deref())?;
        let runs_dir = demo.dir.join("runs");
        let report = sim_runtime
            .block_on(crate::sim::headless::drive(
                &demo,
                runbooks,
                req,
                &runs_dir,
                |line| errln!("{line}"),
            ))
            .map_err(|e| Failure(e.to_string()))?;
        if json {
            print_json(&report)?;
        } else {
            outln!("{}", demo.banner());
            outln!("{}", report.render().trim_end());
            if !dir.keep {
                outln!("(the journal goes with the demo's directory; keep both with --dir)");
            }
        }
        drop(demo);
        sim_runtime.shutdown_timeout(std::time::Duration::from_secs(2));
        return Ok(if report.succeeded {
            Status::Clean
        } else {
            Status::Violations
        });
    }
    if let DemoMode::Once = mode {
        let names: Vec<String> = demo
            .repo
            .environment_names()
            .into_iter()
            .map(str::to_string)
            .collect();
        let gateways = crate::observe::vpn::Gateways::for_repo_with(
            &demo.repo,
            demo.ssh_options(),
            &crate::exec::settings::SshConfig::empty(),
            &crate::exec::settings::SshDefaults::from_env(),
        );
        let (snapshot, targets, problems) = sim_runtime.block_on(observe_snapshot(
            &demo.repo,
            &names,
            &crate::cluster::KubeOverrides::default(),
            &gateways,
        ));
        if json {
            print_json(&snapshot)?;
        } else {
            outln!("{}", demo.banner());
            outln!("{}", render_snapshot(&snapshot, &targets).trim_end());
        }
        for p in &problems {
            errln!("error: {p}");
        }
        return Ok(match (snapshot.exit_code(), problems.is_empty()) {
            (0, true) => Status::Clean,
            (1, _) => Status::Violations,
            _ => Status::CouldNotRun,
        });
    }
    let repo = Repo::load(&demo.dir)?;
    let banner = demo.banner();
    let status = console_on(
        cli,
        repo,
        crate::ui::StartScreen::Home,
        false,
        ConsoleExtras {
            notices: vec![banner],
            exec: demo.exec_setup(),
            faults: Some(std::sync::Arc::new(demo.fault_injector())),
            runs_dir: Some(demo.dir.join("runs")),
        },
    );
    drop(demo);
    sim_runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    status
}

/// One look at every pane of `names`: the kube panes of each environment (one LIST per
/// source, concurrently) and every VPN gateway over SSH, judged. Returns the snapshot, the
/// kubeconfig each environment was read with (for the text form) and the environments
/// that could not be looked at, with why.
pub(crate) async fn observe_snapshot(
    repo: &Repo,
    names: &[String],
    overrides: &crate::cluster::KubeOverrides,
    gateways: &crate::observe::vpn::Gateways,
) -> (
    crate::checks::live::Snapshot,
    Vec<(String, String)>,
    Vec<String>,
) {
    use crate::cluster::{self, once};
    // What each environment needs before anything is asked of a cluster.
    let mut problems: Vec<String> = Vec::new();
    let mut jobs = Vec::new();
    for name in names {
        let topo = cluster::env_topology(repo, name);
        let settings = cluster::watch_settings(repo, name);
        match (topo, settings) {
            (Ok(topo), Ok(settings)) => {
                let target = cluster::kube_target(repo, name, overrides);
                jobs.push((topo, settings, target));
            }
            (Err(e), _) | (_, Err(e)) => problems.push(e.to_string()),
        }
    }
    let looks = jobs.into_iter().map(|(topo, settings, target)| async move {
        match target {
            Ok(target) => {
                let shown = target.to_string();
                match cluster::client(&target).await {
                    Ok(c) => (shown, once::look_once(&c, &topo, &settings).await),
                    Err(e) => (
                        shown,
                        once::could_not_look(&topo, &settings, &e.to_string()).await,
                    ),
                }
            }
            Err(e) => (
                "no kubeconfig".to_string(),
                once::could_not_look(&topo, &settings, &e.to_string()).await,
            ),
        }
    });
    let (looks, vpn) = futures::join!(
        futures::future::join_all(looks),
        crate::observe::vpn::look(repo, names, gateways)
    );
    let mut snapshot = crate::checks::live::Snapshot::default();
    let mut targets = Vec::new();
    for (target, panes) in looks {
        targets.push((panes.vip.env.clone(), target));
        panes.add_to(&mut snapshot);
    }
    snapshot.vpn = vpn.gateways;
    snapshot.vpn_across = vpn.across;
    (snapshot, targets, problems)
}

/// The human form of a snapshot: per environment, each pane's facts and its verdicts with
/// their severity, then a one-line tally.
fn render_snapshot(s: &crate::checks::live::Snapshot, targets: &[(String, String)]) -> String {
    use crate::checks::live::{Rule, Severity, TcpProbe, Verdict};
    use std::fmt::Write as _;

    fn verdicts(out: &mut String, vs: &[Verdict]) {
        for v in vs {
            let _ = writeln!(
                out,
                "    {:<9}{}: {}",
                v.severity.to_string(),
                v.subject,
                v.message
            );
        }
    }
    /// `  N what` when the pane looked, nothing when it could not.
    fn counted(vs: &[Verdict], n: usize, what: &str) -> String {
        if vs.iter().any(|v| v.rule == Rule::CouldNotLook) {
            String::new()
        } else {
            format!("  {n} {what}")
        }
    }
    let mut out = String::new();
    let mut envs: Vec<&str> = Vec::new();
    for e in s
        .vip_lease
        .iter()
        .map(|p| p.env.as_str())
        .chain(s.agent_env.iter().map(|p| p.env.as_str()))
        .chain(s.nodes.iter().map(|p| p.env.as_str()))
        .chain(s.vpn.iter().map(|p| p.env.as_str()))
    {
        if !envs.contains(&e) {
            envs.push(e);
        }
    }
    for env in envs {
        let target = targets
            .iter()
            .find(|(e, _)| e == env)
            .map(|(_, t)| format!("  (kubeconfig {t})"))
            .unwrap_or_default();
        let _ = writeln!(out, "{env}{target}");
        for p in s.vip_lease.iter().filter(|p| p.env == env) {
            let holder = match (&p.holder, &p.holder_node) {
                (Some(h), Some(n)) if h != n => format!("holder {h} (node {n})"),
                (Some(h), _) => format!("holder {h}"),
                (None, _) => "no holder".to_string(),
            };
            let probe = match &p.probe {
                Some(TcpProbe::Connected { latency_ms }) => format!("answers in {latency_ms} ms"),
                Some(TcpProbe::Failed { error }) => format!("does not answer ({error})"),
                None => "not probed".to_string(),
            };
            let _ = writeln!(
                out,
                "  VIP lease  {}:{}  {holder}; VIP {probe}",
                p.vip, p.port
            );
            verdicts(&mut out, &p.verdicts);
        }
        for p in s.agent_env.iter().filter(|p| p.env == env) {
            let _ = writeln!(
                out,
                "  Agent env{}",
                counted(&p.verdicts, p.agents.len(), "cilium-agent pod(s)")
            );
            verdicts(&mut out, &p.verdicts);
        }
        for p in s.rollout.iter().filter(|p| p.env == env) {
            let _ = writeln!(out, "  Rollout");
            verdicts(&mut out, &p.verdicts);
        }
        for p in s.vpn.iter().filter(|p| p.env == env) {
            let _ = writeln!(out, "  VPN egress {}", p.host);
            verdicts(&mut out, &p.verdicts);
        }
        for p in s.nodes.iter().filter(|p| p.env == env) {
            let _ = writeln!(
                out,
                "  Nodes{}",
                counted(&p.verdicts, p.nodes.len(), "node(s)")
            );
            verdicts(&mut out, &p.verdicts);
        }
    }
    if !s.vpn_across.is_empty() {
        let _ = writeln!(out, "Across environments");
        verdicts(&mut out, &s.vpn_across);
    }
    let all = s.verdicts();
    let count = |sev: Severity| {
        all.iter()
            .filter(|v| v.severity == sev && v.rule != Rule::CouldNotLook)
            .count()
    };
    let could_not = all.iter().filter(|v| v.rule == Rule::CouldNotLook).count();
    let _ = writeln!(
        out,
        "\n{} critical, {} warn, {} unknown, {} could not look, {} ok",
        count(Severity::Critical),
        count(Severity::Warn),
        count(Severity::Unknown),
        could_not,
        count(Severity::Ok)
    );
    out
}
// observe --once: end.

fn check_cmd(cli: &Cli, env: Option<&str>, json: bool) -> CmdResult {
    let repo = load_repo(cli)?;
    if json {
        let (input, findings) = check_input_findings(&repo, env)?;
        print_json(&parity::to_json_report(&input, &findings))?;
        return Ok(check_status(&findings));
    }
    print_check(&repo, env)
}

/// `hk-console init`: print the proposal, or write it and run `check` on the result.
fn init_cmd(cli: &Cli, write: bool) -> CmdResult {
    let root = match cli.repo.as_deref() {
        Some(p) => p.to_path_buf(),
        None => std::env::current_dir()
            .map_err(|e| Failure(format!("init: cannot read the current directory: {e}")))?,
    };
    let proposal = crate::repo::init::propose(&root).map_err(|e| Failure(e.to_string()))?;
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
    let path = root.join(crate::repo::config::CONFIG_FILE);
    // create_new: never over a file that appeared since the proposal was made.
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| Failure(format!("{}: cannot create: {e}", path.display())))?;
    std::io::Write::write_all(&mut f, proposal.text.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| Failure(format!("{}: cannot write: {e}", path.display())))?;
    eprintln!("init: wrote {}; running check on it", path.display());
    if !proposal.questions.is_empty() {
        eprintln!(
            "init: {} question(s) left in it (# QUESTION:); answer them before relying on it",
            proposal.questions.len()
        );
    }
    let repo = Repo::load(&root)?;
    print_check(&repo, None)
}

/// The facts (for the JSON's per-environment engine and value) and the findings.
fn check_input_findings(
    repo: &Repo,
    env: Option<&str>,
) -> Result<(parity::ParityInput, Vec<parity::Finding>), Failure> {
    let input = parity::gather(repo);
    let input = match env {
        None => input,
        Some(name) => input.only_env(name).ok_or_else(|| {
            Failure(format!(
                "no environment `{name}` in hk-console.yaml (known: {})",
                repo.environment_names().join(", ")
            ))
        })?,
    };
    let mut findings = parity::check(&input);
    findings.sort_by(|a, b| (&a.env, &a.file, a.line).cmp(&(&b.env, &b.file, b.line)));
    Ok((input, findings))
}

fn check_status(findings: &[parity::Finding]) -> Status {
    match parity::exit_code(findings) {
        0 => Status::Clean,
        1 => Status::Violations,
        _ => Status::CouldNotRun,
    }
}

fn print_check(repo: &Repo, env: Option<&str>) -> CmdResult {
    let (input, findings) = check_input_findings(repo, env)?;
    if let Some(line) = &input.engine_line {
        outln!("{line}");
    }
    for f in &findings {
        outln!("{f}");
    }
    outln!("{}", parity::summary(&findings));
    Ok(check_status(&findings))
}

fn ssh_trust(cli: &Cli, host: &str, target: Option<&Path>) -> CmdResult {
    use crate::exec::ssh::{trust_host, TrustOutcome};
    let repo = load_repo(cli)?;
    let settings = crate::context::connect_settings(&repo, host)?;
    let mut options = crate::context::ssh_options(&repo);
    let target = match target {
        Some(t) => {
            // The file being appended to is also one the verdict must consult.
            if !options.known_hosts.iter().any(|k| k == t) {
                options.known_hosts.push(t.to_path_buf());
            }
            t.to_path_buf()
        }
        None => options
            .known_hosts
            .first()
            .cloned()
            .ok_or_else(|| Failure("no known_hosts file to append to".into()))?,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let where_ = format!(
        "{} ({}:{})",
        settings.host_alias, settings.address, settings.port
    );
    let outcome = runtime.block_on(trust_host(&settings, &options, &target, |scanned| {
        errln!("{where_} presents {}", scanned.fingerprint);
        eprint!("Type yes to append it to {}: ", target.display());
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer).is_ok() && answer.trim() == "yes"
    }))?;
    match outcome {
        TrustOutcome::AlreadyTrusted { fingerprint } => {
            outln!("{where_}: {fingerprint} is already trusted; nothing written");
            Ok(Status::Clean)
        }
        TrustOutcome::Appended { fingerprint, .. } => {
            outln!("{where_}: {fingerprint} appended to {}", target.display());
            Ok(Status::Clean)
        }
        TrustOutcome::Declined { fingerprint } => {
            outln!("{where_}: {fingerprint} NOT trusted (you did not type yes); nothing written");
            Ok(Status::Violations)
        }
        TrustOutcome::Changed { fingerprint, expected } => Err(Failure(format!(
            "{where_}: HOST KEY CHANGED: it presents {fingerprint}, but {expected}\n  hint: if the host was rebuilt, remove the old entry by hand (ssh-keygen -R), then trust again"
        ))),
    }
}
