//! An executable vault password file, run the way ansible-playbook runs one, so the
//! console learns the vaulted values it must mask (hk-engine's `repo::vault` decrypts; it
//! runs nothing, so it is handed [`run`]).
//!
//! As ansible-core 2.19 does (`ScriptVaultSecret`): the file itself is the command, no
//! arguments (a `*-client` script gets `--vault-id default`), standard output with its line
//! ends stripped is the password, a non-zero exit or an empty output is an error. Unlike
//! Ansible, which lets it read the terminal: its standard input is empty (the console owns
//! the terminal), it gets [`TIMEOUT`] ([`TIMEOUT_ENV`] changes it) and then is killed, and at most [`MAX_OUTPUT`] bytes
//! of its output are read. Its cwd is the directory ansible-playbook runs in.
//! Must not: keep, log or show the password (the caller masks it like a vaulted value).

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a password script may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// The most of its standard output and error that is read.
pub const MAX_OUTPUT: u64 = 64 * 1024;

/// The environment variable that gives a password script longer (or shorter) than
/// [`TIMEOUT`], in seconds: a password manager that waits for a touch of a key may need it.
pub const TIMEOUT_ENV: &str = "HK_VAULT_SCRIPT_TIMEOUT_S";

/// The loaded repo's vaults, read with every password source ansible-playbook would use, a
/// script among them run here ([`run`], in the Ansible directory): made once per loaded
/// repo (hk-engine's `vault::scan_repo_running`), whoever asks first.
pub fn scan_repo(repo: &hk_engine::repo::Repo) -> &hk_engine::repo::vault::VaultScan {
    hk_engine::repo::vault::scan_repo_running(repo, &|p, label| run(p, &repo.ansible_dir, label))
}

/// Runs the script at `path` in `cwd` for vault id `label` (a `*-client` script is given
/// `--vault-id LABEL`, as Ansible gives it); its password, or why there is none.
pub fn run(path: &Path, cwd: &Path, label: &str) -> Result<String, String> {
    let timeout = match std::env::var(TIMEOUT_ENV) {
        Err(_) => TIMEOUT,
        Ok(v) => match v.trim().parse::<f64>() {
            Ok(s) if s > 0.0 && s <= 3600.0 => Duration::from_secs_f64(s),
            _ => {
                return Err(format!(
                    "{TIMEOUT_ENV}={v:?} is not a number of seconds between 0 and 3600"
                ))
            }
        },
    };
    run_within(path, cwd, label, timeout)
}

fn run_within(path: &Path, cwd: &Path, label: &str, timeout: Duration) -> Result<String, String> {
    let mut cmd = Command::new(path);
    let client = path
        .file_stem()
        .is_some_and(|s| s.to_string_lossy().ends_with("-client"));
    if client {
        cmd.args(["--vault-id", label]);
    }
    // Its own process group, so a timeout kills what it started too (a `sleep`, a gpg).
    use std::os::unix::process::CommandExt as _;
    cmd.process_group(0)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // ETXTBSY: a file just written is still open for writing in a child another thread
    // forked meanwhile; it passes once that child has exec'd.
    let mut tries = 0;
    let mut child = loop {
        match cmd.spawn() {
            Err(e) if e.raw_os_error() == Some(nix::libc::ETXTBSY) && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            r => break r.map_err(|e| format!("cannot start it: {e}"))?,
        }
    };
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut o = Vec::new();
        let _ = (&mut out).take(MAX_OUTPUT).read_to_end(&mut o);
        o
    });
    let err_reader = std::thread::spawn(move || {
        let mut e = Vec::new();
        let _ = (&mut err).take(MAX_OUTPUT).read_to_end(&mut e);
        e
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if started.elapsed() >= timeout => {
                if let Ok(pid) = i32::try_from(child.id()) {
                    let _ = nix::sys::signal::killpg(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "no answer within {:.1} s (killed)",
                    timeout.as_secs_f64()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("cannot wait for it: {e}")),
        }
    };
    let stdout = reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    if !status.success() {
        let why = String::from_utf8_lossy(&stderr);
        let why = why.trim();
        return Err(format!(
            "it exited {}{}",
            status
                .code()
                .map(|c| c.to_string())
                .unwrap_or_else(|| "on a signal".into()),
            if why.is_empty() {
                String::new()
            } else {
                format!(": {}", why.lines().last().unwrap_or(why))
            }
        ));
    }
    let pw = String::from_utf8(stdout).map_err(|_| "its output is not UTF-8".to_string())?;
    let pw = pw.trim_matches(['\r', '\n']).to_string();
    if pw.is_empty() {
        return Err("it printed no password".into());
    }
    Ok(pw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(dir: &Path, name: &str, body: &str) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt as _;
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        p
    }

    #[test]
    fn a_script_is_run_as_ansible_runs_it() {
        let tmp = tempfile::tempdir().expect("tmp");
        let d = tmp.path();
        // Line ends stripped, inner spaces kept; cwd is the one given; stdin is empty.
        let p = script(d, "pw", "printf ' s3cret pw \\r\\n'");
        assert_eq!(run(&p, d, "default").as_deref(), Ok(" s3cret pw "));
        let p = script(d, "cwd", "pwd");
        assert_eq!(
            run(&p, d, "default").map(std::path::PathBuf::from),
            Ok(d.canonicalize().expect("canon"))
        );
        let p = script(d, "stdin", "cat; echo done");
        assert_eq!(run(&p, d, "default").as_deref(), Ok("done"));
        // A client script is asked for its vault id.
        let p = script(d, "pass-client", "echo \"$1 $2\"");
        assert_eq!(run(&p, d, "default").as_deref(), Ok("--vault-id default"));
        assert_eq!(run(&p, d, "prod").as_deref(), Ok("--vault-id prod"));
    }

    #[test]
    fn a_failing_silent_or_hanging_script_is_an_error_naming_why() {
        let tmp = tempfile::tempdir().expect("tmp");
        let d = tmp.path();
        let p = script(d, "fails", "echo 'no gpg agent' >&2; exit 3");
        assert_eq!(
            run(&p, d, "default"),
            Err("it exited 3: no gpg agent".into())
        );
        let p = script(d, "silent", "true");
        assert_eq!(run(&p, d, "default"), Err("it printed no password".into()));
        let p = script(d, "hangs", "sleep 30");
        let t = Instant::now();
        assert_eq!(
            run_within(&p, d, "default", Duration::from_millis(300)),
            Err("no answer within 0.3 s (killed)".into())
        );
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }
}
