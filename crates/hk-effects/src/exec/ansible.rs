//! What ansible-playbook prints, read back as data: the PLAY RECAP per host and the
//! `--list-hosts` host set (where any doubt blocks), and where the binary lives.
//!
//! Owns: the parsers, the list-hosts gate verdict, argv helpers (`--check --diff`), and the
//! lookup of `ansible-playbook` with an install hint when it is missing.
//! Must not: run processes (that is [`super::process`]).
//!
//! One file (just over 800 lines, a third of it tests): the recap and list-hosts parsers and the
//! binary lookup share the ansible-playbook output conventions.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// How to install Ansible where hk-console looks for it; shown when it is missing.
pub const INSTALL_HINT: &str = "install ansible-core: `python3 -m venv ~/.local/hk-venv && \
~/.local/hk-venv/bin/pip install ansible-core` (or `pipx install ansible-core`), then put its \
bin/ on PATH or set HK_ANSIBLE_BIN_DIR to it";

/// The directories searched for Ansible's binaries, in order: `$HK_ANSIBLE_BIN_DIR`, each
/// `$PATH` entry, `/opt/hk-venv/bin`.
pub fn search_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os("HK_ANSIBLE_BIN_DIR") {
        if !d.is_empty() {
            dirs.push(PathBuf::from(d));
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs.push(PathBuf::from("/opt/hk-venv/bin"));
    dirs
}

/// The first executable `name` in `dirs`, or None.
pub fn find_binary(name: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if name.contains('/') {
        let p = PathBuf::from(name);
        return p.is_file().then_some(p);
    }
    dirs.iter().map(|d| d.join(name)).find(|p| {
        std::fs::metadata(p)
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    })
}

/// Whether an ansible-playbook argv asks only to look (`--check`, `--list-hosts`,
/// `--syntax-check`, `--list-tasks`, `--list-tags`). Anything else changes hosts. Necessary,
/// not sufficient: under `--check` a task with `check_mode: false` still runs for real, so
/// whether a preview changes anything is the planner's derivation from the playbook's tasks
/// (`repo::check_mode`, the planned step's `mutates`), which `exec::classify` also requires.
pub fn argv_is_read_only(argv: &[String]) -> bool {
    argv.iter().any(|a| {
        matches!(
            a.as_str(),
            "--check" | "-C" | "--list-hosts" | "--syntax-check" | "--list-tasks" | "--list-tags"
        )
    })
}

/// The check-mode preview of an ansible step: the same argv with `--check --diff`.
pub fn check_argv(argv: &[String]) -> Vec<String> {
    let mut out = argv.to_vec();
    for flag in ["--check", "--diff"] {
        if !out.iter().any(|a| a == flag) {
            out.push(flag.to_string());
        }
    }
    out
}

/// The `--list-hosts` variant of an ansible step: the same targeting, nothing run.
pub fn list_hosts_argv(argv: &[String]) -> Vec<String> {
    let mut out: Vec<String> = argv
        .iter()
        .filter(|a| !matches!(a.as_str(), "--check" | "-C" | "--diff" | "-D"))
        .cloned()
        .collect();
    if !out.iter().any(|a| a == "--list-hosts") {
        out.push("--list-hosts".to_string());
    }
    out
}

/// One host's line of the PLAY RECAP.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HostRecap {
    pub ok: u32,
    pub changed: u32,
    pub unreachable: u32,
    pub failed: u32,
    pub skipped: u32,
    pub rescued: u32,
    pub ignored: u32,
}

impl HostRecap {
    /// Neither failed nor unreachable.
    pub fn succeeded(&self) -> bool {
        self.failed == 0 && self.unreachable == 0
    }
}

/// The PLAY RECAP of a run, per host (the last recap wins if there are several).
pub fn parse_recap<'a, I>(lines: I) -> BTreeMap<String, HostRecap>
where
    I: IntoIterator<Item = &'a str>,
{
    let mut out = BTreeMap::new();
    let mut in_recap = false;
    for raw in lines {
        let line = strip_ansi(raw);
        let t = line.trim();
        if t.starts_with("PLAY RECAP") {
            in_recap = true;
            out.clear();
            continue;
        }
        if !in_recap {
            continue;
        }
        let Some((host, counts)) = t.split_once(" : ").or_else(|| t.split_once(": ")) else {
            if !t.is_empty() {
                in_recap = false;
            }
            continue;
        };
        let mut r = HostRecap::default();
        let mut any = false;
        for kv in counts.split_whitespace() {
            let Some((k, v)) = kv.split_once('=') else {
                continue;
            };
            let Ok(v) = v.parse::<u32>() else { continue };
            any = true;
            match k {
                "ok" => r.ok = v,
                "changed" => r.changed = v,
                "unreachable" => r.unreachable = v,
                "failed" => r.failed = v,
                "skipped" => r.skipped = v,
                "rescued" => r.rescued = v,
                "ignored" => r.ignored = v,
                _ => {}
            }
        }
        if any {
            out.insert(host.trim().to_string(), r);
        } else {
            in_recap = false;
        }
    }
    out
}

/// What a `--check --diff` preview could not show, read from its PLAY RECAP: one sentence
/// per gap, for the approval to state before the diff. Empty only when every host was
/// reached, none failed and no task was skipped.
///
/// A skipped task is one the preview did not exercise: under `--check` Ansible skips what
/// it cannot simulate (a `command`, `shell` or `reboot`), and the default output does not
/// say whether check mode or a `when:` skipped it, so neither does this.
pub fn preview_gaps(recap: &BTreeMap<String, HostRecap>) -> Vec<String> {
    if recap.is_empty() {
        return vec!["the preview printed no PLAY RECAP: what it exercised is unknown".to_string()];
    }
    let mut gaps = Vec::new();
    let unreachable: Vec<&str> = recap
        .iter()
        .filter(|(_, r)| r.unreachable > 0)
        .map(|(h, _)| h.as_str())
        .collect();
    if !unreachable.is_empty() {
        gaps.push(format!(
            "{} host(s) unreachable in the preview, nothing previewed there: {}",
            unreachable.len(),
            unreachable.join(", ")
        ));
    }
    let failed: Vec<&str> = recap
        .iter()
        .filter(|(_, r)| r.failed > 0)
        .map(|(h, _)| h.as_str())
        .collect();
    if !failed.is_empty() {
        gaps.push(format!(
            "{} host(s) failed in the preview: {}",
            failed.len(),
            failed.join(", ")
        ));
    }
    let skipped: u32 = recap.values().map(|r| r.skipped).sum();
    if skipped > 0 {
        let changed: u32 = recap.values().map(|r| r.changed).sum();
        let per_host = if recap.len() > 1 {
            let each: Vec<String> = recap
                .iter()
                .filter(|(_, r)| r.skipped > 0)
                .map(|(h, r)| format!("{h} {}", r.skipped))
                .collect();
            format!(" ({})", each.join(", "))
        } else {
            String::new()
        };
        let lead = if changed == 0 {
            format!("changed=0 with skipped={skipped}: ")
        } else {
            String::new()
        };
        gaps.push(format!(
            "{lead}the preview did not exercise {skipped} task(s){per_host}: skipped under --check \
             (or by a condition), what they change is not in this diff"
        ));
    }
    gaps
}

/// One play as `--list-hosts` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedPlay {
    /// The `play #N (pattern): name` line, as printed.
    pub header: String,
    pub hosts: Vec<String>,
}

/// Why a `--list-hosts` output is not trusted. Each blocks the gate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListHostsDoubt {
    #[error("no `hosts (N):` section in the --list-hosts output")]
    NoHostsSection,
    #[error("`hosts ({declared}):` but {found} host lines followed")]
    CountMismatch { declared: usize, found: usize },
    #[error("unreadable --list-hosts line {line}: {text:?}")]
    Unreadable { line: usize, text: String },
    #[error("ansible warned about the targeting: {0}")]
    Warning(String),
}

/// Parses `--list-hosts` stdout (and stderr, for the warnings that mean the pattern did
/// not match what was meant). Every play must list the same host set; any line that is
/// not understood, any count that does not add up, any targeting warning is a doubt.
pub fn parse_list_hosts(stdout: &str, stderr: &str) -> Result<Vec<ListedPlay>, ListHostsDoubt> {
    for w in stdout.lines().chain(stderr.lines()) {
        let w = strip_ansi(w);
        let lw = w.to_ascii_lowercase();
        if lw.contains("could not match supplied host pattern")
            || lw.contains("no inventory was parsed")
            || lw.contains("provided hosts list is empty")
            || lw.contains("no hosts matched")
        {
            return Err(ListHostsDoubt::Warning(w.trim().to_string()));
        }
    }
    let lines: Vec<String> = stdout.lines().map(strip_ansi).collect();
    let mut plays = Vec::new();
    let mut header = String::new();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim();
        if t.is_empty() || t.starts_with("playbook:") || t.starts_with("pattern:") {
            i += 1;
            continue;
        }
        if t.starts_with("play #") {
            header = t.to_string();
            i += 1;
            continue;
        }
        if let Some(n) = t.strip_prefix("hosts (").and_then(|r| r.strip_suffix("):")) {
            let declared: usize = n.parse().map_err(|_| ListHostsDoubt::Unreadable {
                line: i + 1,
                text: t.to_string(),
            })?;
            let indent = indent_of(&lines[i]);
            let mut hosts = Vec::new();
            i += 1;
            while i < lines.len() && !lines[i].trim().is_empty() && indent_of(&lines[i]) > indent {
                let h = lines[i].trim();
                if h.contains(char::is_whitespace) {
                    return Err(ListHostsDoubt::Unreadable {
                        line: i + 1,
                        text: h.to_string(),
                    });
                }
                hosts.push(h.to_string());
                i += 1;
            }
            if hosts.len() != declared {
                return Err(ListHostsDoubt::CountMismatch {
                    declared,
                    found: hosts.len(),
                });
            }
            plays.push(ListedPlay {
                header: std::mem::take(&mut header),
                hosts,
            });
            continue;
        }
        if t.starts_with("[WARNING]") || t.starts_with("[DEPRECATION WARNING]") {
            i += 1;
            continue;
        }
        return Err(ListHostsDoubt::Unreadable {
            line: i + 1,
            text: t.to_string(),
        });
    }
    if plays.is_empty() {
        return Err(ListHostsDoubt::NoHostsSection);
    }
    Ok(plays)
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// The list-hosts gate: passes only on the exact expected set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListHostsVerdict {
    Pass { hosts: Vec<String> },
    Block { reason: String },
}

/// Compares a parsed host set with the expected one (order ignored; duplicates are doubt).
pub fn list_hosts_gate(
    expected: &[String],
    parsed: &Result<Vec<ListedPlay>, ListHostsDoubt>,
) -> ListHostsVerdict {
    let plays = match parsed {
        Ok(p) => p,
        Err(d) => {
            return ListHostsVerdict::Block {
                reason: d.to_string(),
            }
        }
    };
    // The blast radius is every host any play touches: a multi-play playbook (site.yml's
    // primary-only play beside its all-servers plays) is judged by the union.
    let mut hosts: Vec<String> = Vec::new();
    for p in plays {
        let in_play: BTreeSet<&String> = p.hosts.iter().collect();
        if in_play.len() != p.hosts.len() {
            return ListHostsVerdict::Block {
                reason: format!("a host is listed twice in `{}`: {:?}", p.header, p.hosts),
            };
        }
        for h in &p.hosts {
            if !hosts.contains(h) {
                hosts.push(h.clone());
            }
        }
    }
    let got: BTreeSet<&String> = hosts.iter().collect();
    let want: BTreeSet<&String> = expected.iter().collect();
    if got == want {
        return ListHostsVerdict::Pass { hosts };
    }
    let missing: Vec<&&String> = want.difference(&got).collect();
    let extra: Vec<&&String> = got.difference(&want).collect();
    ListHostsVerdict::Block {
        reason: format!(
            "host set differs from the expected one: missing {missing:?}, unexpected {extra:?}"
        ),
    }
}

/// Removes ANSI colour sequences (ansible colours output when it thinks it may).
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// An ansible binary found in none of the directories looked in; says how to install it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{program} not found (looked in {looked}): {hint}", looked = .looked.join(", "), hint = INSTALL_HINT)]
pub struct NotInstalled {
    pub program: String,
    pub looked: Vec<String>,
}

/// The ansible binary an argv names, resolved; missing gives the install hint.
pub fn resolve_program(argv0: &str, dirs: &[PathBuf]) -> Result<PathBuf, NotInstalled> {
    find_binary(argv0, dirs).ok_or_else(|| NotInstalled {
        program: argv0.to_string(),
        looked: dirs.iter().map(|d| d.display().to_string()).collect(),
    })
}

/// How to start an ansible binary: the program and the arguments that go before the
/// caller's. Usually the binary itself; when the binary (or the interpreter its `#!` line
/// names) is a version manager's shim, the real interpreter and script, so that each start
/// does not pay the shim (pyenv's costs ~0.2-0.4 s a start, and a runbook starts
/// ansible-playbook a dozen times).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub program: PathBuf,
    pub prefix: Vec<String>,
}

/// Whether a file starts like a script (`#!`), and its `#!` line's interpreter and argument.
fn shebang(path: &std::path::Path) -> Option<(String, Option<String>)> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    let head = head.get(..n)?;
    let line = head.strip_prefix(b"#!")?;
    let end = line.iter().position(|b| *b == b'\n').unwrap_or(line.len());
    let line = std::str::from_utf8(line.get(..end)?).ok()?.trim();
    let mut parts = line.splitn(2, char::is_whitespace);
    let interp = parts.next()?.to_string();
    let arg = parts
        .next()
        .map(|a| a.trim().to_string())
        .filter(|a| !a.is_empty());
    Some((interp, arg))
}

/// The interpreter a `#!` line runs, with `/usr/bin/env NAME` looked up in `dirs`.
fn shebang_interpreter(script: &std::path::Path, dirs: &[PathBuf]) -> Option<PathBuf> {
    let (interp, arg) = shebang(script)?;
    if interp.ends_with("/env") {
        return find_binary(arg?.split_whitespace().next()?, dirs);
    }
    Some(PathBuf::from(interp))
}

/// Whether an interpreter path names a Python (`python`, `python3`, `python3.11`, ...).
fn is_python(interp: &std::path::Path) -> bool {
    interp
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("python"))
}

/// Whether `program` reaches Python through a shim: it is itself a script whose interpreter
/// is not Python (a shell shim), or its Python is a script (a shimmed interpreter).
fn through_shim(program: &std::path::Path, dirs: &[PathBuf]) -> bool {
    let Some(interp) = shebang_interpreter(program, dirs) else {
        return false;
    };
    if !is_python(&interp) {
        return true;
    }
    let real = std::fs::canonicalize(&interp).unwrap_or(interp);
    shebang(&real).is_some()
}

/// What `ansible-playbook --version` says it is: `executable location = PATH` and the
/// interpreter in parentheses at the end of `python version = ...`.
pub fn parse_version_paths(text: &str) -> Option<(PathBuf, PathBuf)> {
    let mut location = None;
    let mut python = None;
    for line in text.lines() {
        let line = line.trim();
        if let Some(v) = line.strip_prefix("executable location = ") {
            location = Some(PathBuf::from(v.trim()));
        } else if let Some(v) = line.strip_prefix("python version = ") {
            let v = v.trim_end();
            if let Some(inner) = v.strip_suffix(')').and_then(|v| v.rsplit_once('(')) {
                python = Some(PathBuf::from(inner.1));
            }
        }
    }
    Some((python?, location?))
}

/// [`launch_for`] from async code: asking a shim for `--version` takes a second or more
/// (the shim, then Python's start), which must not stall the runtime's worker that also
/// drives the console's frames and the other executors.
pub async fn launch_for_async(program: PathBuf, dirs: Vec<PathBuf>) -> Launch {
    let fallback = Launch {
        program: program.clone(),
        prefix: Vec::new(),
    };
    match tokio::task::spawn_blocking(move || launch_for(&program, &dirs)).await {
        Ok(launch) => launch,
        Err(e) => {
            // The lookup panicked or the runtime is shutting down: the program as found is
            // always a correct (only slower) way to start it.
            tracing::warn!(program = %fallback.program.display(), error = %e, "ansible launch lookup did not finish: started as found");
            fallback
        }
    }
}

/// How to start `program` (see [`Launch`]). A shim is asked once, per process, where the
/// real interpreter and script are (`--version`); both must exist and the script must be a
/// Python script, else the program is started as found (slower, never different). Blocking:
/// async callers use [`launch_for_async`].
pub fn launch_for(program: &std::path::Path, dirs: &[PathBuf]) -> Launch {
    use std::sync::{Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<BTreeMap<PathBuf, Launch>>> = OnceLock::new();
    let as_found = Launch {
        program: program.to_path_buf(),
        prefix: Vec::new(),
    };
    if !through_shim(program, dirs) {
        return as_found;
    }
    let cache = CACHE.get_or_init(|| Mutex::new(BTreeMap::new()));
    if let Some(hit) = cache.lock().ok().and_then(|c| c.get(program).cloned()) {
        return hit;
    }
    let resolved = std::process::Command::new(program)
        .arg("--version")
        .env("ANSIBLE_NOCOLOR", "1")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| parse_version_paths(&String::from_utf8_lossy(&o.stdout)))
        .filter(|(python, script)| {
            python.is_file()
                && script.is_file()
                && !through_shim(python, dirs)
                && shebang_interpreter(script, dirs).is_some_and(|i| is_python(&i))
        });
    let launch = match resolved {
        Some((python, script)) => {
            tracing::info!(
                program = %program.display(),
                python = %python.display(),
                script = %script.display(),
                "ansible reached through a shim: starting its interpreter directly"
            );
            Launch {
                program: python,
                prefix: vec![script.display().to_string()],
            }
        }
        None => {
            tracing::warn!(
                program = %program.display(),
                "ansible looks shimmed but --version did not name its interpreter: started as found"
            );
            as_found
        }
    };
    if let Ok(mut c) = cache.lock() {
        c.insert(program.to_path_buf(), launch.clone());
    }
    launch
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_output_names_the_interpreter_and_the_script() {
        let text = "ansible-playbook [core 2.19.14]\n  config file = None\n  executable location = /v/bin/ansible-playbook\n  python version = 3.11.7 (main, Jan  1 2024, 00:00:00) [GCC 12.2.0] (/v/bin/python3)\n  jinja version = 3.1.6\n";
        assert_eq!(
            parse_version_paths(text),
            Some((
                PathBuf::from("/v/bin/python3"),
                PathBuf::from("/v/bin/ansible-playbook")
            ))
        );
        assert_eq!(
            parse_version_paths("ansible-playbook [core 2.19.14]\n"),
            None
        );
    }

    /// A slow shim's `--version` (here 1 s) runs off the runtime: on a single-threaded
    /// runtime a ticker keeps ticking while the launch is looked up. Called blocking, the
    /// ticker would not run at all until the lookup returned.
    #[test]
    fn a_slow_shim_does_not_block_the_runtime() {
        use std::os::unix::fs::PermissionsExt;
        use std::sync::atomic::{AtomicU32, Ordering};
        use std::sync::Arc;
        let d = std::env::temp_dir().join(format!("hk-launch-slow-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("temp dir");
        let shim = d.join("ansible-playbook");
        std::fs::write(
            &shim,
            "#!/bin/sh\nsleep 1\necho 'ansible-playbook [core 2.19.14]'\n",
        )
        .expect("temp file");
        std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        let ticks = Arc::new(AtomicU32::new(0));
        let launch = rt.block_on(async {
            let t = ticks.clone();
            let ticker = tokio::spawn(async move {
                loop {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    t.fetch_add(1, Ordering::SeqCst);
                }
            });
            let started = std::time::Instant::now();
            let launch = launch_for_async(shim.clone(), Vec::new()).await;
            assert!(
                started.elapsed() >= std::time::Duration::from_millis(900),
                "the shim's --version was asked (it sleeps 1 s)"
            );
            ticker.abort();
            launch
        });
        let n = ticks.load(Ordering::SeqCst);
        assert!(
            n >= 5,
            "the runtime ran other tasks meanwhile: {n} ticks in ~1 s"
        );
        // --version named no interpreter: started as found, never something else.
        assert_eq!(launch.program, shim);
        assert!(launch.prefix.is_empty());
        std::fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn a_plain_binary_or_python_script_is_started_as_found() {
        let d = std::env::temp_dir().join(format!("hk-launch-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("temp file");
        let py = d.join("python3");
        std::fs::write(&py, b"\x7fELF not really").expect("temp file");
        let script = d.join("ansible-playbook");
        std::fs::write(&script, format!("#!{}\nimport sys\n", py.display())).expect("temp file");
        assert!(!through_shim(&script, &[]));
        let l = launch_for(&script, &[]);
        assert_eq!(l.program, script);
        assert!(l.prefix.is_empty());
        // A shell shim in front is a shim; so is a Python that is itself a script.
        let shim = d.join("shim");
        std::fs::write(
            &shim,
            "#!/bin/sh\nexec pyenv exec ansible-playbook \"$@\"\n",
        )
        .expect("temp file");
        assert!(through_shim(&shim, &[]));
        let shim_py = d.join("python3-shim");
        std::fs::write(&shim_py, "#!/bin/sh\nexec python3 \"$@\"\n").expect("temp file");
        let via = d.join("ap2");
        std::fs::write(&via, format!("#!{}\n", shim_py.display())).expect("temp file");
        assert!(
            through_shim(&via, &[]),
            "a Python that is a script is a shim"
        );
        std::fs::remove_dir_all(&d).expect("temp file");
    }

    #[test]
    fn preview_gaps_name_skips_unreachable_hosts_and_a_missing_recap() {
        let recap = |text: &str| parse_recap(format!("PLAY RECAP ***\n{text}\n").lines());
        assert!(preview_gaps(&recap(
            "k3s-prod-3 : ok=5 changed=2 unreachable=0 failed=0 skipped=0 rescued=0 ignored=0"
        ))
        .is_empty());
        assert_eq!(
            preview_gaps(&recap(
                "k3s-prod-3 : ok=3 changed=0 unreachable=0 failed=0 skipped=2 rescued=0 ignored=0"
            )),
            [
                "changed=0 with skipped=2: the preview did not exercise 2 task(s): skipped under \
              --check (or by a condition), what they change is not in this diff"
            ]
        );
        let two = preview_gaps(&recap(
            "a : ok=3 changed=1 unreachable=0 failed=0 skipped=1 rescued=0 ignored=0\n\
             b : ok=0 changed=0 unreachable=1 failed=0 skipped=0 rescued=0 ignored=0",
        ));
        assert_eq!(two.len(), 2, "{two:?}");
        assert!(two[0].starts_with("1 host(s) unreachable") && two[0].ends_with(": b"));
        assert!(two[1].starts_with("the preview did not exercise 1 task(s) (a 1)"));
        assert_eq!(
            preview_gaps(&BTreeMap::new()),
            ["the preview printed no PLAY RECAP: what it exercised is unknown"]
        );
    }

    const RECAP: &str = "\
PLAY [x] ***********
TASK [t] ***********
ok: [node1]

PLAY RECAP *********************************************************************
node1                      : ok=2    changed=1    unreachable=0    failed=0    skipped=0    rescued=0    ignored=0
\u{1b}[0;31mnode2\u{1b}[0m                      : ok=0    changed=0    unreachable=1    failed=0    skipped=0    rescued=0    ignored=0
node3                      : ok=1    changed=0    unreachable=0    failed=1    skipped=2    rescued=0    ignored=0

";

    #[test]
    fn recap_per_host() {
        let r = parse_recap(RECAP.lines());
        assert_eq!(r.len(), 3);
        assert_eq!(r["node1"].changed, 1);
        assert!(r["node1"].succeeded());
        assert_eq!(r["node2"].unreachable, 1);
        assert!(!r["node2"].succeeded());
        assert_eq!((r["node3"].failed, r["node3"].skipped), (1, 2));
    }

    const LISTED: &str = "
playbook: playbooks/etcd-io-priority.yml

  play #1 (k3s_prod): etcd io priority\tTAGS: []
    pattern: ['k3s_prod']
    hosts (2):
      k3s-prod-3
      k3s-prod-1
";

    #[test]
    fn list_hosts_parsed_and_gated() {
        let p = parse_list_hosts(LISTED, "");
        let plays = p.clone().expect("parsed");
        assert_eq!(plays[0].hosts, vec!["k3s-prod-3", "k3s-prod-1"]);
        assert!(plays[0].header.starts_with("play #1 (k3s_prod)"));
        let exp = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(matches!(
            list_hosts_gate(&exp(&["k3s-prod-1", "k3s-prod-3"]), &p),
            ListHostsVerdict::Pass { .. }
        ));
        match list_hosts_gate(&exp(&["k3s-prod-3"]), &p) {
            ListHostsVerdict::Block { reason } => {
                assert!(reason.contains("k3s-prod-1"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn any_doubt_blocks() {
        let short = LISTED.replace("hosts (2)", "hosts (3)");
        assert_eq!(
            parse_list_hosts(&short, ""),
            Err(ListHostsDoubt::CountMismatch {
                declared: 3,
                found: 2
            })
        );
        assert!(matches!(
            parse_list_hosts(
                LISTED,
                "[WARNING]: Could not match supplied host pattern, ignoring: k3s-prod-9"
            ),
            Err(ListHostsDoubt::Warning(_))
        ));
        assert_eq!(
            parse_list_hosts("\nplaybook: x.yml\n", ""),
            Err(ListHostsDoubt::NoHostsSection)
        );
        let odd = format!("{LISTED}something unexpected\n");
        assert!(matches!(
            parse_list_hosts(&odd, ""),
            Err(ListHostsDoubt::Unreadable { .. })
        ));
        // A second play on other hosts: the gate judges the union of every play's hosts.
        let two = format!("{LISTED}\n  play #2 (x): y\tTAGS: []\n    pattern: ['x']\n    hosts (1):\n      k3s-prod-2\n");
        let parsed = parse_list_hosts(&two, "");
        assert_eq!(parsed.as_ref().map(Vec::len), Ok(2));
        let first_only: Vec<String> = parsed.as_ref().expect("two plays")[0].hosts.clone();
        match list_hosts_gate(&first_only, &parsed) {
            ListHostsVerdict::Block { reason } => {
                assert!(reason.contains("k3s-prod-2"), "{reason}")
            }
            other => panic!("the second play's host is in the blast radius: {other:?}"),
        }
        let mut union = first_only.clone();
        if !union.contains(&"k3s-prod-2".to_string()) {
            union.push("k3s-prod-2".into());
        }
        assert!(matches!(
            list_hosts_gate(&union, &parsed),
            ListHostsVerdict::Pass { .. }
        ));
        let e: Vec<String> = vec![];
        assert!(matches!(
            list_hosts_gate(&e, &parse_list_hosts(&short, "")),
            ListHostsVerdict::Block { .. }
        ));
    }

    #[test]
    fn argv_helpers() {
        let a: Vec<String> = ["ansible-playbook", "-i", "inv", "p.yml", "--limit", "h"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(!argv_is_read_only(&a));
        let c = check_argv(&a);
        assert_eq!(&c[6..], &["--check".to_string(), "--diff".to_string()]);
        assert!(argv_is_read_only(&c));
        assert_eq!(check_argv(&c), c);
        let l = list_hosts_argv(&c);
        assert_eq!(l.last().map(String::as_str), Some("--list-hosts"));
        assert!(!l.iter().any(|x| x == "--check"));
        let err = resolve_program("ansible-playbook-nope", &[PathBuf::from("/nonexistent")])
            .expect_err("missing")
            .to_string();
        assert!(err.contains("pip install ansible-core"), "{err}");
    }
}
