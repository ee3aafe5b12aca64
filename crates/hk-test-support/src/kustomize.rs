//! A kustomize runner for the engine's tests (hk-engine's `repo::flux::BuildRunner`): the
//! engine starts no process, and its tests may not build the effects (whose runner the
//! binary uses), so the tests run the binary here, plainly: to its end, no time limit.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use hk_engine::repo::flux::{BuildOutput, BuildRunner};

pub struct Plain;

impl BuildRunner for Plain {
    fn output(
        &self,
        program: &Path,
        args: &[OsString],
        _: Duration,
    ) -> Result<BuildOutput, String> {
        let out = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run it: {e}"))?;
        Ok(BuildOutput {
            success: out.status.success(),
            stdout: out.stdout,
            stderr: out.stderr,
        })
    }
}

/// The runner, as `gather::parity_input` takes it.
pub fn runner() -> Arc<dyn BuildRunner> {
    Arc::new(Plain)
}
