//! Which kustomize builds an overlay: the real one when the operator has it (`kustomize_bin:`
//! in hk-console.yaml, else `kustomize`, else `kubectl` on PATH), the builtin engine
//! otherwise. The real one runs as Flux runs it (load restrictions off), and a directory
//! without a kustomization file is listed as Flux generates one.
//!
//! Owns: [`EngineChoice`] (finding the binary), what it is asked to build and reading its
//! output. Starting the process is not the engine's: a [`BuildRunner`] does it (hk-effects'
//! `exec::kustomize`, which kills it past [`BUILD_LIMIT`]), handed in with the choice.
//! Must not: run anything but `kustomize build` / `kubectl kustomize` on a local directory;
//! start a process itself.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use super::kustomize::{flux_generated_entries, Builder, FluxEntry};
use super::tree::{LNode, TOP};
use super::FluxError;

/// The engine that produced a value (reported per environment by `check --json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// The real kustomize (the binary, or the one kubectl embeds).
    Kustomize,
    /// hk-console's own model of kustomize; says "cannot tell" on what it does not model.
    #[default]
    Builtin,
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Engine::Kustomize => "kustomize",
            Engine::Builtin => "builtin",
        })
    }
}

/// How a binary is asked to build a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryStyle {
    /// `kustomize build DIR`
    Kustomize,
    /// `kubectl kustomize DIR`
    Kubectl,
}

/// What a kustomize binary printed, and whether it exited 0.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildOutput {
    pub success: bool,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Runs a kustomize binary for the engine: `program` with `args`, its standard input empty,
/// both outputs read to the end; past `limit` it is killed and the error says so, as it does
/// when the program cannot be started. The effects implement it (`exec::kustomize`).
pub trait BuildRunner: Send + Sync {
    fn output(
        &self,
        program: &Path,
        args: &[OsString],
        limit: Duration,
    ) -> Result<BuildOutput, String>;
}

/// The runner a [`EngineChoice::Binary`] builds with. Two choices of the same program and
/// style are the same choice, whichever runner runs them.
#[derive(Clone)]
pub struct Runner(pub Arc<dyn BuildRunner>);

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Runner")
    }
}

impl PartialEq for Runner {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Runner {}

/// The engine `check` will use, decided once per run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineChoice {
    Binary {
        program: PathBuf,
        style: BinaryStyle,
        runner: Runner,
    },
    Builtin,
    /// `kustomize_bin:` names something that cannot be run: nothing is built with a guess.
    Missing {
        configured: PathBuf,
        reason: String,
    },
}

impl EngineChoice {
    /// `configured` (hk-console.yaml's `kustomize_bin:`, relative to `root`) wins; else
    /// `kustomize`, else `kubectl`, on `path` (the PATH variable). A binary is run by
    /// `runner`.
    pub fn detect(
        root: &Path,
        configured: Option<&Path>,
        path: Option<OsString>,
        runner: Arc<dyn BuildRunner>,
    ) -> EngineChoice {
        if let Some(c) = configured {
            let program = if c.is_absolute() || c.components().count() > 1 {
                root.join(c)
            } else {
                match find_on_path(&c.to_string_lossy(), path.as_ref()) {
                    Some(p) => p,
                    None => {
                        return EngineChoice::Missing {
                            configured: c.to_path_buf(),
                            reason: "not found on PATH".into(),
                        }
                    }
                }
            };
            if !is_executable(&program) {
                return EngineChoice::Missing {
                    configured: c.to_path_buf(),
                    reason: format!("{} is not an executable file", program.display()),
                };
            }
            return EngineChoice::Binary {
                style: style_of(&program),
                program,
                runner: Runner(runner),
            };
        }
        for (name, style) in [
            ("kustomize", BinaryStyle::Kustomize),
            ("kubectl", BinaryStyle::Kubectl),
        ] {
            if let Some(program) = find_on_path(name, path.as_ref()) {
                return EngineChoice::Binary {
                    program,
                    style,
                    runner: Runner(runner),
                };
            }
        }
        EngineChoice::Builtin
    }

    /// The one line `check` prints about the engine.
    pub fn describe(&self) -> String {
        match self {
            EngineChoice::Binary { program, style, .. } => format!(
                "engine: kustomize ({} {})",
                program.display(),
                match style {
                    BinaryStyle::Kustomize => "build",
                    BinaryStyle::Kubectl => "kustomize",
                }
            ),
            EngineChoice::Builtin => "engine: builtin (no kustomize or kubectl on PATH; name one with kustomize_bin: in hk-console.yaml); what it does not model is reported as cannot tell".into(),
            EngineChoice::Missing { configured, reason } => format!(
                "engine: none (kustomize_bin: {} in hk-console.yaml: {reason})",
                configured.display()
            ),
        }
    }
}

fn style_of(program: &Path) -> BinaryStyle {
    let name = program
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    if name.starts_with("kubectl") {
        BinaryStyle::Kubectl
    } else {
        BinaryStyle::Kustomize
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn find_on_path(name: &str, path: Option<&OsString>) -> Option<PathBuf> {
    let path = path?;
    std::env::split_paths(path)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

/// Build `dir` with the binary (as Flux would: a directory without a kustomization file is
/// listed as Flux generates one). Resources come back without positions of their own: the
/// file is the directory built, line 0.
pub(super) fn build_real(
    builder: &Builder,
    program: &Path,
    style: BinaryStyle,
    runner: &dyn BuildRunner,
    dir: &Path,
) -> Result<Vec<LNode>, FluxError> {
    if Builder::kustomization_file(dir).is_some() {
        return run(builder, program, style, runner, dir);
    }
    let mut out = Vec::new();
    let entries = flux_generated_entries(dir).map_err(|source| FluxError::Read {
        file: builder.rel(dir),
        source,
    })?;
    for entry in entries {
        match entry {
            FluxEntry::Dir(d) => out.extend(run(builder, program, style, runner, &d)?),
            FluxEntry::File(f) => out.extend(builder.parse_file(&f)?),
        }
    }
    Ok(out)
}

fn run(
    builder: &Builder,
    program: &Path,
    style: BinaryStyle,
    runner: &dyn BuildRunner,
    dir: &Path,
) -> Result<Vec<LNode>, FluxError> {
    let verb = match style {
        BinaryStyle::Kustomize => "build",
        BinaryStyle::Kubectl => "kustomize",
    };
    // Flux builds with load restrictions off (files outside the directory are allowed).
    let args: Vec<OsString> = vec![
        verb.into(),
        "--load-restrictor".into(),
        "LoadRestrictionsNone".into(),
        dir.as_os_str().to_owned(),
    ];
    let rel = builder.rel(dir);
    let output =
        runner
            .output(program, &args, BUILD_LIMIT)
            .map_err(|e| FluxError::EngineFailed {
                dir: rel.clone(),
                engine: program.display().to_string(),
                message: e,
                at: None,
            })?;
    if !output.success {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let message = stderr
            .lines()
            .filter(|l| !l.trim_start().starts_with("# Warning:"))
            .map(strip_log_prefix)
            .collect::<Vec<_>>()
            .join("\n");
        return Err(FluxError::EngineFailed {
            dir: rel,
            engine: program.display().to_string(),
            message: message.trim().to_string(),
            at: None,
        });
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let docs = crate::yaml::parse_documents(&text).map_err(|e| FluxError::EngineFailed {
        dir: rel.clone(),
        engine: program.display().to_string(),
        message: format!("its output is not YAML: {}", e.message),
        at: None,
    })?;
    let file = rel.clone();
    Ok(docs
        .iter()
        .filter(|d| !d.is_null())
        .map(|d| {
            let mut n = LNode::lift(d, &file, TOP);
            zero_lines(&mut n);
            n
        })
        .collect())
}

/// How long one `kustomize build` may take before it is killed and the build named as
/// failed (a hung binary must not hang `check`).
pub const BUILD_LIMIT: Duration = Duration::from_secs(120);

/// kubectl logs through klog (`E1203 06:47:52.037629   13827 run.go:72] "command failed"
/// err=...`): keep the message, not the timestamp and pid.
fn strip_log_prefix(line: &str) -> &str {
    let b = line.as_bytes();
    let klog = b.len() > 5
        && matches!(b[0], b'E' | b'W' | b'I' | b'F')
        && b[1..5].iter().all(u8::is_ascii_digit);
    match line.find("] ") {
        Some(i) if klog => &line[i + 2..],
        _ => line,
    }
}

/// Positions in the binary's output mean nothing in the repo; 0 says "no line".
fn zero_lines(n: &mut LNode) {
    n.at.line = 0;
    n.at.col = 0;
    match &mut n.v {
        super::tree::LVal::Seq(items) => items.iter_mut().for_each(zero_lines),
        super::tree::LVal::Map(entries) => entries.iter_mut().for_each(|(_, v)| zero_lines(v)),
        _ => {}
    }
}
