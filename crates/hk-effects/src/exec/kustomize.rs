//! The kustomize binary run for the engine's Flux builds (hk-engine's
//! `repo::flux::BuildRunner`): the engine says what to build and reads what it printed;
//! the process is started here.
//!
//! Owns: [`Kustomize`], [`output_within`] (a process run to its end, both pipes drained,
//! killed past its limit).
//! Must not: run anything the engine did not ask for, or read the terminal (stdin is empty).

use std::ffi::OsString;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hk_engine::repo::flux::{BuildOutput, BuildRunner};

/// Runs the engine's `kustomize build` / `kubectl kustomize` as a local process.
#[derive(Debug, Clone, Copy, Default)]
pub struct Kustomize;

impl Kustomize {
    /// The runner, shared, as the engine takes it.
    pub fn shared() -> Arc<dyn BuildRunner> {
        Arc::new(Kustomize)
    }
}

impl BuildRunner for Kustomize {
    fn output(
        &self,
        program: &Path,
        args: &[OsString],
        limit: Duration,
    ) -> Result<BuildOutput, String> {
        let mut cmd = Command::new(program);
        cmd.args(args);
        let out = output_within(&mut cmd, limit)?;
        Ok(BuildOutput {
            success: out.status.success(),
            stdout: out.stdout,
            stderr: out.stderr,
        })
    }
}

/// Run `cmd` to its end, its output read; past `limit` it is killed and the error says so.
pub fn output_within(cmd: &mut Command, limit: Duration) -> Result<std::process::Output, String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run it: {e}"))?;
    // Both pipes drained on their own threads, so a large build cannot block on a full pipe.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() >= limit => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "it did not finish within {} s; it was killed",
                    limit.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("cannot wait for it: {e}")),
        }
    };
    Ok(std::process::Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_build_that_hangs_is_killed_and_named() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo partial; sleep 30"]);
        let t = Instant::now();
        let got = output_within(&mut cmd, Duration::from_millis(300));
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        let err = got.err().unwrap_or_default();
        assert!(err.contains("did not finish within"), "{err}");
    }

    #[test]
    fn a_build_that_ends_gives_its_output_and_status() {
        let got = Kustomize
            .output(
                Path::new("sh"),
                &["-c".into(), "echo out; echo err >&2; exit 3".into()],
                Duration::from_secs(20),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got.stdout, b"out\n");
        assert_eq!(got.stderr, b"err\n");
        assert!(!got.success);
        let missing = Kustomize.output(
            Path::new("/nonexistent/kustomize"),
            &[],
            Duration::from_secs(5),
        );
        assert!(missing.is_err_and(|e| e.starts_with("cannot run it")));
    }
}
