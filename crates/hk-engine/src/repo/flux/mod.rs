//! Flux overlays: the EFFECTIVE value an overlay gives a `postBuild` substitution variable
//! (for the parity contract, the one hk-console.yaml `names.flux_api_host_var` names), and
//! where in the repo it was set.
//!
//! Two engines build an overlay: the real kustomize when the operator has it ([`engine`]:
//! `kustomize_bin:`, `kustomize` or `kubectl` on PATH), and the builtin one ([`kustomize`]),
//! which models kustomize exactly where it claims to and answers "cannot tell"
//! ([`FluxError::CannotTell`]) everywhere else. Either way Flux's own rules then decide the
//! value ([`postbuild`]), and positions (file:line) come from the builtin engine's trace of
//! the source files: every value keeps the file, line and column it came from, also through
//! inline patches embedded in a kustomization as block scalars.
//!
//! Owns: the public answer types ([`OverlayValue`], [`HelmValue`], [`OverlayReport`]),
//! [`FluxError`] and which errors mean "cannot tell" ([`FluxError::is_cannot_tell`]).
//! Must not: talk to a cluster, fetch remote bases, or decrypt anything. A `Secret` source or a
//! `ConfigMap` that is not among the overlay's resources cannot be read; when the value could
//! only come from there, the answer is an error saying so, never a guess.

mod applied;
pub mod engine;
mod kustomize;
mod patch;
pub mod postbuild;
mod tree;

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

pub use self::applied::{applied_objects, Applied};
pub use self::engine::{BinaryStyle, BuildOutput, BuildRunner, Engine, EngineChoice, Runner};
use self::kustomize::Builder;
use self::tree::{display_name, is_flux_kustomization, res_id, LNode, LVal};

const FLUX_KS_GROUP: &str = "kustomize.toolkit.fluxcd.io/";
const HELM_GROUP: &str = "helm.toolkit.fluxcd.io/";
const KUSTOMIZE_GROUP: &str = "kustomize.config.k8s.io/";
const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// A place in the repo: path relative to the repo root when it lies inside it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct SourceLoc {
    pub file: PathBuf,
    pub line: usize,
    pub col: usize,
}

impl fmt::Display for SourceLoc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file.display(), self.line, self.col)
    }
}

/// How the winning value reached the Flux Kustomization.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum SetBy {
    /// `spec.postBuild.substitute.<VAR>` (after all patches).
    Substitute,
    /// `spec.postBuild.substituteFrom` naming this ConfigMap, whose `data.<VAR>` holds it.
    SubstituteFrom { config_map: String },
}

/// The effective value of a substitution variable in an overlay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OverlayValue {
    pub var: String,
    pub value: String,
    /// Where the value text itself was written (a base file, a patch file, an inline patch...).
    pub at: SourceLoc,
    pub set_by: SetBy,
    /// `namespace/name` of the Flux Kustomization that carries it.
    pub kustomization: String,
    /// Where that Flux Kustomization's document starts.
    pub kustomization_at: SourceLoc,
    /// That Kustomization's `spec.path` (relative to its source's root), where the objects
    /// that consume the variable live.
    pub kustomization_path: Option<String>,
    /// `substituteFrom` sources that could not be read (Secrets, ConfigMaps from the cluster).
    /// They do not decide the value here because `substitute` wins, or a readable later
    /// source does; listed so a caller can say what was not looked at.
    pub unread_sources: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum FluxError {
    #[error("{}: overlay directory not found (expected a directory with a kustomization.yaml)", dir.display())]
    MissingOverlay { dir: PathBuf },
    #[error("{}: cannot read: {source}", file.display())]
    Read {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{at}: malformed YAML: {message}")]
    Yaml { at: SourceLoc, message: String },
    #[error("{at}: expected {expected}")]
    Unexpected { at: SourceLoc, expected: String },
    #[error("{at}: resource `{resource}` not found: {reason}")]
    MissingResource {
        at: SourceLoc,
        resource: String,
        reason: String,
    },
    #[error("{at}: `{resource}` includes itself (a cycle of kustomizations)")]
    Cycle { at: SourceLoc, resource: String },
    #[error("{at}: patch cannot be applied: {message}")]
    Patch { at: SourceLoc, message: String },
    #[error("{}: {var} is not set by any Flux Kustomization (kustomize.toolkit.fluxcd.io) in this overlay: expected spec.postBuild.substitute.{var} or a substituteFrom ConfigMap carrying it{hint}", overlay.display())]
    NotSet {
        overlay: PathBuf,
        var: String,
        hint: String,
    },
    #[error("{at}: {var} of Flux Kustomization {kustomization} can only come from {source_ref}, which is not read (not in the overlay, or a Secret); its value cannot be told statically")]
    Undeterminable {
        at: SourceLoc,
        var: String,
        kustomization: String,
        source_ref: String,
    },
    /// Boxed: the error stays small on the happy path.
    #[error("{0}")]
    Conflict(Box<Conflict>),
    /// Something the builtin engine does not model: the answer would be a guess.
    #[error("{at}: cannot tell: {what}: {why}")]
    CannotTell {
        at: SourceLoc,
        what: String,
        why: String,
    },
    /// The real kustomize refused to build (or could not be run): Flux would fail the same way.
    #[error("{}: {engine} refused to build it: {message}", dir.display())]
    EngineFailed {
        dir: PathBuf,
        engine: String,
        message: String,
        /// Where the builtin engine's trace of the same build stops, when it does.
        at: Option<SourceLoc>,
    },
}

/// Two Flux Kustomizations of one overlay substitute different values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub var: String,
    pub first_value: String,
    pub first_at: SourceLoc,
    pub first_kustomization: String,
    pub second_value: String,
    pub second_at: SourceLoc,
    pub second_kustomization: String,
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} is set to `{}` here (Flux Kustomization {}) but to `{}` at {} (Flux Kustomization {}): one overlay, two values",
            self.second_at,
            self.var,
            self.second_value,
            self.second_kustomization,
            self.first_value,
            self.first_at,
            self.first_kustomization
        )
    }
}

impl FluxError {
    /// The most precise place the error points at (for findings).
    pub fn location(&self) -> Option<SourceLoc> {
        let whole = |file: &PathBuf| {
            Some(SourceLoc {
                file: file.clone(),
                line: 0,
                col: 0,
            })
        };
        match self {
            FluxError::MissingOverlay { dir } => whole(dir),
            FluxError::Read { file, .. } => whole(file),
            FluxError::NotSet { overlay, .. } => whole(overlay),
            FluxError::EngineFailed { at: Some(at), .. } => Some(at.clone()),
            FluxError::EngineFailed { dir, .. } => whole(dir),
            FluxError::Yaml { at, .. }
            | FluxError::Unexpected { at, .. }
            | FluxError::MissingResource { at, .. }
            | FluxError::Cycle { at, .. }
            | FluxError::Patch { at, .. }
            | FluxError::Undeterminable { at, .. }
            | FluxError::CannotTell { at, .. } => Some(at.clone()),
            FluxError::Conflict(c) => Some(c.second_at.clone()),
        }
    }

    /// Whether the error leaves the value unknown ("cannot tell", exit 2) rather than known to
    /// be wrong. Only an unset variable and two Flux Kustomizations that disagree are known
    /// answers; everything else (a build kustomize refuses, an unread source, a feature not
    /// modelled) means nobody can say what Flux would substitute.
    pub fn is_cannot_tell(&self) -> bool {
        !matches!(self, FluxError::NotSet { .. } | FluxError::Conflict(_))
    }
}

/// The effective value of the Flux `postBuild` substitution variable `var` in an overlay, by
/// the builtin engine.
pub fn effective_substitution(
    root: &Path,
    overlay: &Path,
    var: &str,
) -> Result<OverlayValue, FluxError> {
    let (rel, resources) = build(root, overlay, &EngineChoice::Builtin)?;
    postbuild::evaluate(&resources, var, &rel)
}

/// A build: the directory (relative to the root) and its resources.
type Built = Result<(PathBuf, Vec<LNode>), FluxError>;

/// Every resource Flux would build from `dir` (relative to `root`, or absolute), with the
/// engine chosen; the directory comes back relative to `root`.
fn build(
    root: &Path,
    dir: &Path,
    choice: &EngineChoice,
) -> Result<(PathBuf, Vec<LNode>), FluxError> {
    // `join` keeps an absolute `dir` as it is.
    let dir = root.join(dir);
    let mut builder = Builder::new(root);
    let rel = builder.rel(&dir);
    if !dir.is_dir() {
        return Err(FluxError::MissingOverlay { dir: rel });
    }
    let resources = match choice {
        EngineChoice::Builtin => builder.build_top(&dir)?,
        EngineChoice::Binary {
            program,
            style,
            runner,
        } => engine::build_real(&builder, program, *style, runner.0.as_ref(), &dir)?,
        EngineChoice::Missing { configured, reason } => {
            return Err(FluxError::EngineFailed {
                dir: rel,
                engine: configured.display().to_string(),
                message: reason.clone(),
                at: None,
            })
        }
    };
    Ok((rel, resources))
}

/// A value a Flux HelmRelease hands its chart, and where it is written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HelmValue {
    /// `namespace/name` of the HelmRelease.
    pub release: String,
    /// The value as text (before Flux's substitution).
    pub value: String,
    pub at: SourceLoc,
    /// The release carries `kustomize.toolkit.fluxcd.io/substitute: disabled`: Flux hands
    /// the chart the text as written, `${...}` and all.
    pub substitution_disabled: bool,
}

/// `spec.values.<keys>` of every HelmRelease (helm.toolkit.fluxcd.io) that Flux would apply
/// from `path` (a Flux Kustomization's `spec.path`, relative to the repo root), built the same
/// way as an overlay, by the builtin engine. Releases that do not set the value are left out.
pub fn helm_release_values(
    root: &Path,
    path: &Path,
    keys: &[&str],
) -> Result<Vec<HelmValue>, FluxError> {
    let (_, resources) = build(root, path, &EngineChoice::Builtin)?;
    Ok(helm_values_of(&resources, keys))
}

fn helm_values_of(resources: &[LNode], keys: &[&str]) -> Vec<HelmValue> {
    let mut full = vec!["spec", "values"];
    full.extend_from_slice(keys);
    resources
        .iter()
        .filter(|r| {
            r.str_at(&["apiVersion"])
                .is_some_and(|a| a.starts_with(HELM_GROUP))
                && r.str_at(&["kind"]) == Some("HelmRelease")
        })
        .filter_map(|r| {
            let node = r.path(&full)?;
            let value = match &node.v {
                LVal::Str(s) | LVal::Other(s) => s.clone(),
                LVal::Null => String::new(),
                _ => return None,
            };
            let disabled = ["labels", "annotations"].iter().any(|f| {
                r.path(&["metadata", f, postbuild::SUBSTITUTE_MARKER])
                    .and_then(LNode::text)
                    == Some("disabled")
            });
            Some(HelmValue {
                release: display_name(&res_id(r)),
                value,
                at: node.at.clone(),
                substitution_disabled: disabled,
            })
        })
        .collect()
}

/// What `check` learns about one environment's overlay, with the engine it used.
#[derive(Debug)]
pub struct OverlayReport {
    pub engine: Engine,
    pub overlay: Result<OverlayValue, FluxError>,
    /// The HelmReleases under the Flux Kustomization's `spec.path`, when the overlay resolved
    /// and names one.
    pub helm: Option<HelmReport>,
}

#[derive(Debug)]
pub struct HelmReport {
    /// The Flux Kustomization's `spec.path`, as written.
    pub path: String,
    /// `values.k8sServiceHost` and `values.k8sServicePort` of each release that sets them.
    pub values: Result<(Vec<HelmValue>, Vec<HelmValue>), FluxError>,
}

/// The overlay's API host variable `var` (an environment's `flux_api_host_var`) and the
/// HelmReleases it feeds, with the engine `choice` names.
/// With a real engine, values come from its build and positions from the builtin engine's
/// trace of the same value (when it agrees); where they disagree the real one is right.
pub fn report(root: &Path, overlay: &Path, choice: &EngineChoice, var: &str) -> OverlayReport {
    let engine = match choice {
        EngineChoice::Builtin => Engine::Builtin,
        _ => Engine::Kustomize,
    };
    let traced = |dir: &Path| build(root, dir, &EngineChoice::Builtin);
    let (value, resources) = match build(root, overlay, choice) {
        Err(FluxError::EngineFailed {
            dir,
            engine,
            message,
            at: None,
        }) => {
            // The place in the sources, from the builtin engine's trace when it fails too.
            let at = traced(overlay)
                .and_then(|(rel, r)| postbuild::evaluate(&r, var, &rel))
                .err()
                .and_then(|e| e.location())
                .filter(|l| l.line > 0);
            let e = FluxError::EngineFailed {
                dir,
                engine,
                message,
                at,
            };
            (Err(e), Vec::new())
        }
        Err(e) => (Err(e), Vec::new()),
        Ok((rel, res)) => {
            let value = postbuild::evaluate(&res, var, &rel).map(|value| match choice {
                EngineChoice::Builtin => value,
                _ => {
                    match traced(overlay).and_then(|(rel, r)| postbuild::evaluate(&r, var, &rel)) {
                        Ok(t) if t.value == value.value && t.set_by == value.set_by => t,
                        _ => value,
                    }
                }
            });
            (value, res)
        }
    };
    let helm = match &value {
        Ok(v) => v.kustomization_path.clone().map(|path| {
            let values = helm_report(root, &resources, v, &path, choice, &traced);
            HelmReport { path, values }
        }),
        Err(_) => None,
    };
    OverlayReport {
        engine,
        overlay: value,
        helm,
    }
}

fn helm_report(
    root: &Path,
    overlay_resources: &[LNode],
    v: &OverlayValue,
    path: &str,
    choice: &EngineChoice,
    traced: &dyn Fn(&Path) -> Built,
) -> Result<(Vec<HelmValue>, Vec<HelmValue>), FluxError> {
    // Flux applies its own spec (patches, prefixes...) to what it builds from spec.path.
    for ks in overlay_resources
        .iter()
        .filter(|r| is_flux_kustomization(r))
    {
        if display_name(&res_id(ks)) == v.kustomization {
            if let Some(spec) = ks.get("spec") {
                postbuild::check_flux_spec(spec)?;
            }
        }
    }
    let rel = Path::new(path.trim_start_matches("./"));
    let (_, resources) = build(root, rel, choice)?;
    // Values from elsewhere, or a post-renderer, can override what spec.values says.
    for r in resources.iter().filter(|r| {
        r.str_at(&["apiVersion"])
            .is_some_and(|a| a.starts_with(HELM_GROUP))
            && r.str_at(&["kind"]) == Some("HelmRelease")
    }) {
        for field in ["valuesFrom", "postRenderers"] {
            if let Some(n) = r.path(&["spec", field]) {
                let at = traced(rel)
                    .ok()
                    .and_then(|(_, t)| {
                        t.into_iter()
                            .find(|x| display_name(&res_id(x)) == display_name(&res_id(r)))
                            .and_then(|x| x.path(&["spec", field]).map(|n| n.at.clone()))
                    })
                    .unwrap_or_else(|| n.at.clone());
                return Err(FluxError::CannotTell {
                    at,
                    what: format!("HelmRelease {} spec.{field}", display_name(&res_id(r))),
                    why: "values or manifests it brings can override spec.values; not modelled"
                        .into(),
                });
            }
        }
    }
    let mut hosts = helm_values_of(&resources, &["k8sServiceHost"]);
    let mut ports = helm_values_of(&resources, &["k8sServicePort"]);
    if !matches!(choice, EngineChoice::Builtin) {
        // Positions from the builtin trace where it sees the same releases and values.
        if let Ok((_, t)) = traced(rel) {
            for (list, key) in [
                (&mut hosts, "k8sServiceHost"),
                (&mut ports, "k8sServicePort"),
            ] {
                let t_values = helm_values_of(&t, &[key]);
                for hv in list.iter_mut() {
                    if let Some(tv) = t_values
                        .iter()
                        .find(|tv| tv.release == hv.release && tv.value == hv.value)
                    {
                        hv.at = tv.at.clone();
                    }
                }
            }
        }
    }
    for hv in &hosts {
        let vars = |name: &str| (name == v.var).then(|| v.value.clone());
        if let Err(why) = postbuild::envsubst(&hv.value, &vars) {
            return Err(FluxError::CannotTell {
                at: hv.at.clone(),
                what: format!("HelmRelease {} k8sServiceHost `{}`", hv.release, hv.value),
                why: why.to_string(),
            });
        }
    }
    Ok((hosts, ports))
}
