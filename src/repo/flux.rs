//! Flux overlays: the EFFECTIVE value an overlay gives a `postBuild` substitution variable
//! (`K3S_API_HOST` for the parity contract), and where in the repo it was set.
//!
//! Owns: a small, faithful-enough `kustomize build` of an overlay directory, restricted to what
//! can change a Flux Kustomization's `spec.postBuild`: `resources:`/`bases:` (files, or
//! directories with their own kustomization, recursively), `components:`, `configMapGenerator`
//! literals, `patchesStrategicMerge:`, `patches:` (inline or `path:`, strategic merge or
//! JSON6902, with `target:` selectors), `namespace:` and `patchesJson6902:`, applied in
//! kustomize's own order (strategic-merge patches, then `patches:`, then the namespace, then
//! JSON6902; within one list, file order). Then Flux's rule: `substitute` wins over
//! `substituteFrom`, and among `substituteFrom` sources the later wins.
//!
//! Every value keeps the file, line and column it came from, also through inline patches
//! embedded in a kustomization as block scalars.
//!
//! Must not: talk to a cluster, fetch remote bases, or decrypt anything. A `Secret` source or a
//! `ConfigMap` that is not among the overlay's resources cannot be read; when the value could
//! only come from there, the answer is an error saying so, never a guess.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use regex::Regex;
use serde::Serialize;

use crate::yaml::{self, Node, Value};

/// The Flux substitution variable that carries the API server address Cilium dials.
pub const API_HOST_VAR: &str = "K3S_API_HOST";

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
        match self {
            FluxError::MissingOverlay { dir } => Some(SourceLoc {
                file: dir.clone(),
                line: 0,
                col: 0,
            }),
            FluxError::Read { file, .. } => Some(SourceLoc {
                file: file.clone(),
                line: 0,
                col: 0,
            }),
            FluxError::NotSet { overlay, .. } => Some(SourceLoc {
                file: overlay.clone(),
                line: 0,
                col: 0,
            }),
            FluxError::Yaml { at, .. }
            | FluxError::Unexpected { at, .. }
            | FluxError::MissingResource { at, .. }
            | FluxError::Cycle { at, .. }
            | FluxError::Patch { at, .. }
            | FluxError::Undeterminable { at, .. } => Some(at.clone()),
            FluxError::Conflict(c) => Some(c.second_at.clone()),
        }
    }
}

/// The effective `K3S_API_HOST` of the overlay `overlay` (absolute, or relative to `root`).
pub fn overlay_api_host(root: &Path, overlay: &Path) -> Result<OverlayValue, FluxError> {
    effective_substitution(root, overlay, API_HOST_VAR)
}

/// The effective value of the Flux `postBuild` substitution variable `var` in an overlay.
pub fn effective_substitution(
    root: &Path,
    overlay: &Path,
    var: &str,
) -> Result<OverlayValue, FluxError> {
    let (builder, dir, resources) = build_dir(root, overlay)?;
    evaluate(&resources, var, &builder.rel(&dir))
}

/// Every resource kustomize would build from `dir` (relative to `root`, or absolute).
fn build_dir(root: &Path, dir: &Path) -> Result<(Builder, PathBuf, Vec<LNode>), FluxError> {
    // `join` keeps an absolute `dir` as it is.
    let dir = root.join(dir);
    let mut builder = Builder {
        root: root.to_path_buf(),
        stack: Vec::new(),
    };
    if !dir.is_dir() {
        return Err(FluxError::MissingOverlay {
            dir: builder.rel(&dir),
        });
    }
    let resources = builder.build_overlay(&dir)?;
    Ok((builder, dir, resources))
}

/// A value a Flux HelmRelease hands its chart, and where it is written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HelmValue {
    /// `namespace/name` of the HelmRelease.
    pub release: String,
    /// The value as text (before Flux's substitution).
    pub value: String,
    pub at: SourceLoc,
}

/// `spec.values.<keys>` of every HelmRelease (helm.toolkit.fluxcd.io) that Flux would apply
/// from `path` (a Flux Kustomization's `spec.path`, relative to the repo root), built the same
/// way as an overlay. Releases that do not set the value are left out.
pub fn helm_release_values(
    root: &Path,
    path: &Path,
    keys: &[&str],
) -> Result<Vec<HelmValue>, FluxError> {
    let (_, _, resources) = build_dir(root, path)?;
    let mut full = vec!["spec", "values"];
    full.extend_from_slice(keys);
    Ok(resources
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
            Some(HelmValue {
                release: display_name(&res_id(r)),
                value,
                at: node.at.clone(),
            })
        })
        .collect())
}

// ---------------------------------------------------------------------------------------------
// A located tree: a YAML tree where every node remembers its file, so that a value patched in
// from another file still says where it was written.

#[derive(Debug, Clone)]
struct LNode {
    v: LVal,
    at: SourceLoc,
}

#[derive(Debug, Clone)]
enum LVal {
    Null,
    Str(String),
    /// A non-string scalar (bool, number, vaulted) as text.
    Other(String),
    Seq(Vec<LNode>),
    Map(Vec<(String, LNode)>),
}

/// Where an embedded YAML text (an inline patch) starts inside its file.
#[derive(Debug, Clone, Copy)]
struct Embed {
    line0: usize,
    col0: usize,
}

const TOP: Embed = Embed { line0: 0, col0: 0 };

impl LNode {
    fn lift(node: &Node, file: &Path, embed: Embed) -> LNode {
        let at = SourceLoc {
            file: file.to_path_buf(),
            line: embed.line0 + node.mark.line,
            col: embed.col0 + node.mark.col,
        };
        let v = match &node.value {
            Value::Null => LVal::Null,
            Value::Str(s) => LVal::Str(s.clone()),
            Value::Bool(_) | Value::Int(_) | Value::Float(_) | Value::Vaulted => LVal::Other(
                node.as_key()
                    .unwrap_or_else(|| yaml::VAULTED_PLACEHOLDER.into()),
            ),
            Value::Seq(items) => {
                LVal::Seq(items.iter().map(|n| LNode::lift(n, file, embed)).collect())
            }
            Value::Map(entries) => LVal::Map(
                entries
                    .iter()
                    .map(|(k, v)| (k.as_key().unwrap_or_default(), LNode::lift(v, file, embed)))
                    .collect(),
            ),
        };
        LNode { v, at }
    }

    fn get(&self, key: &str) -> Option<&LNode> {
        match &self.v {
            LVal::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn get_mut(&mut self, key: &str) -> Option<&mut LNode> {
        match &mut self.v {
            LVal::Map(entries) => entries.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn path(&self, keys: &[&str]) -> Option<&LNode> {
        keys.iter().try_fold(self, |n, k| n.get(k))
    }

    fn str(&self) -> Option<&str> {
        match &self.v {
            LVal::Str(s) => Some(s),
            _ => None,
        }
    }

    fn str_at(&self, keys: &[&str]) -> Option<&str> {
        self.path(keys).and_then(LNode::str)
    }

    fn set(&mut self, key: &str, value: LNode) {
        if let LVal::Map(entries) = &mut self.v {
            if let Some(slot) = entries.iter_mut().find(|(k, _)| k == key) {
                slot.1 = value;
            } else {
                entries.push((key.to_string(), value));
            }
        }
    }

    fn remove(&mut self, key: &str) -> Option<LNode> {
        match &mut self.v {
            LVal::Map(entries) => {
                let i = entries.iter().position(|(k, _)| k == key)?;
                Some(entries.remove(i).1)
            }
            _ => None,
        }
    }

    /// Equality of content, ignoring where things were written (for JSON6902 `test`).
    fn same_content(&self, other: &LNode) -> bool {
        match (&self.v, &other.v) {
            (LVal::Null, LVal::Null) => true,
            (LVal::Str(a), LVal::Str(b)) | (LVal::Other(a), LVal::Other(b)) => a == b,
            (LVal::Seq(a), LVal::Seq(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same_content(y))
            }
            (LVal::Map(a), LVal::Map(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .all(|(k, v)| b.iter().any(|(k2, v2)| k == k2 && v.same_content(v2)))
            }
            _ => false,
        }
    }

    fn kind_name(&self) -> &'static str {
        match self.v {
            LVal::Null => "null",
            LVal::Str(_) | LVal::Other(_) => "a scalar",
            LVal::Seq(_) => "a list",
            LVal::Map(_) => "a mapping",
        }
    }
}

/// The identity kustomize selects resources by.
#[derive(Debug, Clone, Default)]
struct ResId {
    group: String,
    version: String,
    kind: String,
    name: String,
    namespace: String,
}

fn res_id(doc: &LNode) -> ResId {
    let api_version = doc.str_at(&["apiVersion"]).unwrap_or_default();
    let (group, version) = match api_version.rsplit_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), api_version.to_string()),
    };
    ResId {
        group,
        version,
        kind: doc.str_at(&["kind"]).unwrap_or_default().to_string(),
        name: doc
            .str_at(&["metadata", "name"])
            .unwrap_or_default()
            .to_string(),
        namespace: doc
            .str_at(&["metadata", "namespace"])
            .unwrap_or_default()
            .to_string(),
    }
}

fn is_flux_kustomization(doc: &LNode) -> bool {
    doc.str_at(&["apiVersion"])
        .is_some_and(|a| a.starts_with(FLUX_KS_GROUP))
        && doc.str_at(&["kind"]) == Some("Kustomization")
}

fn display_name(id: &ResId) -> String {
    if id.namespace.is_empty() {
        id.name.clone()
    } else {
        format!("{}/{}", id.namespace, id.name)
    }
}

// ---------------------------------------------------------------------------------------------
// The build.

struct Builder {
    root: PathBuf,
    /// Kustomization directories being built, to refuse cycles.
    stack: Vec<PathBuf>,
}

enum PatchDoc {
    Strategic(LNode),
    Json6902(Vec<LNode>),
}

impl Builder {
    fn rel(&self, path: &Path) -> PathBuf {
        let path = normalize(path);
        path.strip_prefix(normalize(&self.root))
            .map(Path::to_path_buf)
            .unwrap_or(path)
    }

    fn loc(&self, file: &Path, line: usize, col: usize) -> SourceLoc {
        SourceLoc {
            file: self.rel(file),
            line,
            col,
        }
    }

    fn read(&self, file: &Path) -> Result<String, FluxError> {
        std::fs::read_to_string(file).map_err(|source| FluxError::Read {
            file: self.rel(file),
            source,
        })
    }

    /// Parse every document of a YAML text that sits in `file` at `embed`.
    fn parse(&self, text: &str, file: &Path, embed: Embed) -> Result<Vec<LNode>, FluxError> {
        let docs = yaml::parse_documents(text).map_err(|e| FluxError::Yaml {
            at: self.loc(file, embed.line0 + e.mark.line, embed.col0 + e.mark.col),
            message: e.message,
        })?;
        let rel = self.rel(file);
        Ok(docs
            .iter()
            .filter(|d| !d.is_null())
            .map(|d| LNode::lift(d, &rel, embed))
            .collect())
    }

    fn parse_file(&self, file: &Path) -> Result<Vec<LNode>, FluxError> {
        let text = self.read(file)?;
        self.parse(&text, file, TOP)
    }

    fn kustomization_file(dir: &Path) -> Option<PathBuf> {
        KUSTOMIZATION_FILES
            .iter()
            .map(|n| dir.join(n))
            .find(|p| p.is_file())
    }

    /// The overlay itself: with a kustomization file, as kustomize builds it; without one, as
    /// Flux does (every YAML file below the directory is a resource).
    fn build_overlay(&mut self, dir: &Path) -> Result<Vec<LNode>, FluxError> {
        if Self::kustomization_file(dir).is_some() {
            return self.build_dir(dir, None);
        }
        let mut files = Vec::new();
        collect_yaml_files(dir, &mut files).map_err(|source| FluxError::Read {
            file: self.rel(dir),
            source,
        })?;
        files.sort();
        let mut out = Vec::new();
        for f in files {
            out.extend(self.parse_file(&f)?);
        }
        Ok(out)
    }

    fn build_dir(&mut self, dir: &Path, from: Option<SourceLoc>) -> Result<Vec<LNode>, FluxError> {
        let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        if self.stack.contains(&canonical) {
            return Err(FluxError::Cycle {
                at: from.unwrap_or_else(|| self.loc(dir, 0, 0)),
                resource: self.rel(dir).display().to_string(),
            });
        }
        let Some(kfile) = Self::kustomization_file(dir) else {
            return Err(FluxError::MissingResource {
                at: from.unwrap_or_else(|| self.loc(dir, 0, 0)),
                resource: self.rel(dir).display().to_string(),
                reason: "the directory has no kustomization.yaml".into(),
            });
        };
        self.stack.push(canonical);
        let result = self.build_kustomization_file(&kfile, dir, Vec::new());
        self.stack.pop();
        result
    }

    /// Build one kustomization file onto `acc` (empty for a Kustomization, the parent's
    /// resources for a Component, whose patches apply to everything built so far).
    fn build_kustomization_file(
        &mut self,
        kfile: &Path,
        dir: &Path,
        mut acc: Vec<LNode>,
    ) -> Result<Vec<LNode>, FluxError> {
        let docs = self.parse_file(kfile)?;
        let mut config: Option<LNode> = None;
        for doc in docs {
            let api = doc.str_at(&["apiVersion"]);
            let is_config = match api {
                Some(a) => a.starts_with(KUSTOMIZE_GROUP),
                // kustomize accepts a kustomization.yaml without apiVersion/kind.
                None => doc.get("kind").is_none() && matches!(doc.v, LVal::Map(_)),
            };
            if is_config {
                if config.is_some() {
                    return Err(FluxError::Unexpected {
                        at: doc.at.clone(),
                        expected: "one kustomize Kustomization per file, found a second".into(),
                    });
                }
                config = Some(doc);
            } else if matches!(doc.v, LVal::Map(_)) {
                // e.g. Flux Kustomizations written straight into the overlay's file.
                acc.push(doc);
            } else {
                return Err(FluxError::Unexpected {
                    at: doc.at.clone(),
                    expected: format!("a Kubernetes object (a mapping), found {}", doc.kind_name()),
                });
            }
        }
        match config {
            Some(k) => self.apply_config(&k, dir, acc),
            None => Ok(acc),
        }
    }

    fn apply_config(
        &mut self,
        k: &LNode,
        dir: &Path,
        mut acc: Vec<LNode>,
    ) -> Result<Vec<LNode>, FluxError> {
        if !matches!(k.v, LVal::Map(_)) {
            return Err(FluxError::Unexpected {
                at: k.at.clone(),
                expected: "a kustomization (a mapping)".into(),
            });
        }
        for field in ["resources", "bases"] {
            for entry in string_list(k, field)? {
                self.add_resource(&entry, dir, &mut acc)?;
            }
        }
        for entry in string_list(k, "components")? {
            let path = self.local_path(&entry, dir)?;
            let Some(kfile) = Self::kustomization_file(&path) else {
                return Err(FluxError::MissingResource {
                    at: entry.at.clone(),
                    resource: entry.str().unwrap_or_default().to_string(),
                    reason: "a component is a directory with a kustomization.yaml".into(),
                });
            };
            let canonical = path.canonicalize().unwrap_or_else(|_| path.clone());
            if self.stack.contains(&canonical) {
                return Err(FluxError::Cycle {
                    at: entry.at.clone(),
                    resource: entry.str().unwrap_or_default().to_string(),
                });
            }
            self.stack.push(canonical);
            let built = self.build_kustomization_file(&kfile, &path, acc);
            self.stack.pop();
            acc = built?;
        }
        self.config_map_generator(k, &mut acc)?;

        // kustomize's fixed transformer order: patchesStrategicMerge, patches, namespace, ...,
        // patchesJson6902.
        for entry in list(k, "patchesStrategicMerge")? {
            let Some(text) = entry.str() else {
                return Err(FluxError::Unexpected {
                    at: entry.at.clone(),
                    expected: "a file path or an inline strategic-merge patch (a string)".into(),
                });
            };
            let candidate = dir.join(text);
            let docs = if !text.contains('\n') && candidate.is_file() {
                self.parse_file(&candidate)?
            } else {
                let docs = self.parse_inline(&entry)?;
                // A one-line entry that is not an object was meant as a file name.
                if !text.contains('\n') && docs.iter().all(|d| !matches!(d.v, LVal::Map(_))) {
                    return Err(FluxError::MissingResource {
                        at: entry.at.clone(),
                        resource: text.to_string(),
                        reason: format!("no patch file {}", self.rel(&candidate).display()),
                    });
                }
                docs
            };
            for doc in docs {
                apply_strategic_self_targeted(&doc, &mut acc)?;
            }
        }
        for entry in list(k, "patches")? {
            let docs = self.patch_source(&entry, dir)?;
            let target = match entry.get("target") {
                Some(t) => Some(Selector::from_node(t)?),
                None => None,
            };
            for doc in docs {
                match (classify(doc)?, &target) {
                    (PatchDoc::Strategic(p), Some(sel)) => {
                        apply_to_targets(sel, &mut acc, |r| apply_strategic(r, &p))?;
                    }
                    (PatchDoc::Strategic(p), None) => apply_strategic_self_targeted(&p, &mut acc)?,
                    (PatchDoc::Json6902(ops), Some(sel)) => {
                        apply_to_targets(sel, &mut acc, |r| apply_json6902(r, &ops))?;
                    }
                    (PatchDoc::Json6902(ops), None) => {
                        return Err(FluxError::Unexpected {
                            at: ops
                                .first()
                                .map(|o| o.at.clone())
                                .unwrap_or_else(|| entry.at.clone()),
                            expected:
                                "a `target:` for a JSON6902 patch (it names no object itself)"
                                    .into(),
                        })
                    }
                }
            }
        }
        if let Some(ns) = k.get("namespace") {
            if let Some(name) = ns.str() {
                for r in acc.iter_mut() {
                    set_namespace(r, ns, name);
                }
            }
        }
        for entry in list(k, "patchesJson6902")? {
            let Some(target) = entry.get("target") else {
                return Err(FluxError::Unexpected {
                    at: entry.at.clone(),
                    expected: "a `target:` (kind, name) for this patchesJson6902 entry".into(),
                });
            };
            let sel = Selector::from_node(target)?;
            for doc in self.patch_source(&entry, dir)? {
                let LVal::Seq(ops) = doc.v else {
                    return Err(FluxError::Unexpected {
                        at: doc.at.clone(),
                        expected: "a JSON6902 patch: a list of operations".into(),
                    });
                };
                apply_to_targets(&sel, &mut acc, |r| apply_json6902(r, &ops))?;
            }
        }
        Ok(acc)
    }

    fn local_path(&self, entry: &LNode, dir: &Path) -> Result<PathBuf, FluxError> {
        let text = entry.str().unwrap_or_default();
        if text.contains("://") || text.starts_with("github.com/") || text.starts_with("git@") {
            return Err(FluxError::Unexpected {
                at: entry.at.clone(),
                expected: format!("a local path (remote `{text}` is not fetched)"),
            });
        }
        Ok(dir.join(text))
    }

    fn add_resource(
        &mut self,
        entry: &LNode,
        dir: &Path,
        acc: &mut Vec<LNode>,
    ) -> Result<(), FluxError> {
        let path = self.local_path(entry, dir)?;
        if path.is_dir() {
            let built = self.build_dir(&path, Some(entry.at.clone()))?;
            acc.extend(built);
            Ok(())
        } else if path.is_file() {
            for doc in self.parse_file(&path)? {
                if !matches!(doc.v, LVal::Map(_)) {
                    return Err(FluxError::Unexpected {
                        at: doc.at.clone(),
                        expected: format!(
                            "a Kubernetes object (a mapping), found {}",
                            doc.kind_name()
                        ),
                    });
                }
                acc.push(doc);
            }
            Ok(())
        } else {
            Err(FluxError::MissingResource {
                at: entry.at.clone(),
                resource: entry.str().unwrap_or_default().to_string(),
                reason: format!("no file or directory {}", self.rel(&path).display()),
            })
        }
    }

    /// `configMapGenerator` entries with `literals: [KEY=VALUE]` become ConfigMaps, so that a
    /// `substituteFrom` naming one can be read. Name hashes are not modelled: Flux's
    /// `substituteFrom` is not a field kustomize rewrites, so such generators are used with
    /// `disableNameSuffixHash` in practice.
    fn config_map_generator(&self, k: &LNode, acc: &mut Vec<LNode>) -> Result<(), FluxError> {
        for gen in list(k, "configMapGenerator")? {
            let Some(name) = gen.get("name").and_then(LNode::str) else {
                return Err(FluxError::Unexpected {
                    at: gen.at.clone(),
                    expected: "a `name:` for this configMapGenerator entry".into(),
                });
            };
            let mut data = Vec::new();
            for lit in list(&gen, "literals")? {
                let text = lit.str().unwrap_or_default();
                let Some((key, value)) = text.split_once('=') else {
                    return Err(FluxError::Unexpected {
                        at: lit.at.clone(),
                        expected: "a literal KEY=VALUE".into(),
                    });
                };
                let value = value.trim_matches('"').to_string();
                data.push((
                    key.to_string(),
                    LNode {
                        v: LVal::Str(value),
                        at: lit.at.clone(),
                    },
                ));
            }
            let s = |v: &str| LNode {
                v: LVal::Str(v.to_string()),
                at: gen.at.clone(),
            };
            let mut meta = vec![("name".to_string(), s(name))];
            if let Some(ns) = gen.get("namespace").and_then(LNode::str) {
                meta.push(("namespace".to_string(), s(ns)));
            }
            let map = |entries| LNode {
                v: LVal::Map(entries),
                at: gen.at.clone(),
            };
            acc.push(map(vec![
                ("apiVersion".into(), s("v1")),
                ("kind".into(), s("ConfigMap")),
                ("metadata".into(), map(meta)),
                ("data".into(), map(data)),
            ]));
        }
        Ok(())
    }

    /// The documents of a `patches:`/`patchesJson6902:` entry: `path:` a file, or inline `patch:`.
    fn patch_source(&self, entry: &LNode, dir: &Path) -> Result<Vec<LNode>, FluxError> {
        if let Some(p) = entry.get("path") {
            let Some(text) = p.str() else {
                return Err(FluxError::Unexpected {
                    at: p.at.clone(),
                    expected: "a file path (a string)".into(),
                });
            };
            let file = dir.join(text);
            if !file.is_file() {
                return Err(FluxError::MissingResource {
                    at: p.at.clone(),
                    resource: text.to_string(),
                    reason: format!("no patch file {}", self.rel(&file).display()),
                });
            }
            return self.parse_file(&file);
        }
        if let Some(p) = entry.get("patch") {
            return self.parse_inline(p);
        }
        Err(FluxError::Unexpected {
            at: entry.at.clone(),
            expected: "a patch entry with `path:` or `patch:`".into(),
        })
    }

    fn parse_inline(&self, node: &LNode) -> Result<Vec<LNode>, FluxError> {
        let Some(text) = node.str() else {
            return Err(FluxError::Unexpected {
                at: node.at.clone(),
                expected: "an inline patch (a string)".into(),
            });
        };
        // The string's mark is where its first content line starts (for a block scalar the
        // line after `|`), so positions inside it shift by that much.
        let embed = Embed {
            line0: node.at.line.saturating_sub(1),
            col0: node.at.col.saturating_sub(1),
        };
        let file = self.root.join(&node.at.file);
        self.parse(text, &file, embed)
    }
}

/// `a/b/../c` -> `a/c`, without touching the filesystem (kustomize paths are lexical).
fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                let climbs_out = matches!(
                    out.components().next_back(),
                    None | Some(Component::ParentDir)
                );
                if climbs_out {
                    out.push("..");
                } else {
                    out.pop();
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

fn collect_yaml_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_yaml_files(&path, out)?;
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml") | Some("yml")
        ) {
            out.push(path);
        }
    }
    Ok(())
}

fn list(k: &LNode, field: &str) -> Result<Vec<LNode>, FluxError> {
    match k.get(field) {
        None => Ok(Vec::new()),
        Some(LNode { v: LVal::Null, .. }) => Ok(Vec::new()),
        Some(LNode {
            v: LVal::Seq(items),
            ..
        }) => Ok(items.clone()),
        Some(other) => Err(FluxError::Unexpected {
            at: other.at.clone(),
            expected: format!("`{field}:` to be a list, found {}", other.kind_name()),
        }),
    }
}

fn string_list(k: &LNode, field: &str) -> Result<Vec<LNode>, FluxError> {
    let items = list(k, field)?;
    for item in &items {
        if item.str().is_none() {
            return Err(FluxError::Unexpected {
                at: item.at.clone(),
                expected: format!(
                    "`{field}:` entries to be paths (strings), found {}",
                    item.kind_name()
                ),
            });
        }
    }
    Ok(items)
}

fn classify(doc: LNode) -> Result<PatchDoc, FluxError> {
    match doc.v {
        LVal::Seq(ops) => Ok(PatchDoc::Json6902(ops)),
        LVal::Map(_) => Ok(PatchDoc::Strategic(doc)),
        _ => Err(FluxError::Unexpected {
            at: doc.at.clone(),
            expected: format!(
                "a patch: a strategic-merge object (a mapping) or JSON6902 operations (a list), found {}",
                doc.kind_name()
            ),
        }),
    }
}

/// Cluster-scoped kinds keep no namespace when kustomize sets one.
fn set_namespace(r: &mut LNode, ns_node: &LNode, ns: &str) {
    let kind = r.str_at(&["kind"]).unwrap_or_default();
    if matches!(
        kind,
        "Namespace" | "ClusterRole" | "ClusterRoleBinding" | "CustomResourceDefinition"
    ) {
        return;
    }
    if let Some(meta) = r.get_mut("metadata") {
        meta.set(
            "namespace",
            LNode {
                v: LVal::Str(ns.to_string()),
                at: ns_node.at.clone(),
            },
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Targets.

struct Selector {
    group: Option<String>,
    version: Option<String>,
    kind: Option<Regex>,
    name: Option<Regex>,
    namespace: Option<Regex>,
    labels: Vec<(String, Option<String>, bool)>,
    annotations: Vec<(String, Option<String>, bool)>,
}

impl Selector {
    fn from_node(t: &LNode) -> Result<Selector, FluxError> {
        let text = |key: &str| -> Result<Option<String>, FluxError> {
            match t.get(key) {
                None => Ok(None),
                Some(n) => match &n.v {
                    LVal::Str(s) | LVal::Other(s) => Ok(Some(s.clone())),
                    LVal::Null => Ok(None),
                    _ => Err(FluxError::Unexpected {
                        at: n.at.clone(),
                        expected: format!("target `{key}` to be a string"),
                    }),
                },
            }
        };
        let re = |key: &str| -> Result<Option<Regex>, FluxError> {
            match text(key)? {
                None => Ok(None),
                Some(s) => {
                    Regex::new(&format!("^(?:{s})$"))
                        .map(Some)
                        .map_err(|e| FluxError::Patch {
                            at: t
                                .get(key)
                                .map(|n| n.at.clone())
                                .unwrap_or_else(|| t.at.clone()),
                            message: format!("target {key} `{s}` is not a valid pattern: {e}"),
                        })
                }
            }
        };
        let parse_sel = |key: &str| -> Result<Vec<(String, Option<String>, bool)>, FluxError> {
            let Some(s) = text(key)? else {
                return Ok(Vec::new());
            };
            s.split(',')
                .map(|term| {
                    let term = term.trim();
                    if let Some((k, v)) = term.split_once("!=") {
                        Ok((k.trim().to_string(), Some(v.trim().to_string()), false))
                    } else if let Some((k, v)) =
                        term.split_once("==").or_else(|| term.split_once('='))
                    {
                        Ok((k.trim().to_string(), Some(v.trim().to_string()), true))
                    } else if term.contains(' ') || term.contains('(') {
                        Err(FluxError::Unexpected {
                            at: t.at.clone(),
                            expected: format!(
                                "an equality {key} (`k=v`, `k!=v` or `k`), not `{term}`"
                            ),
                        })
                    } else if let Some(k) = term.strip_prefix('!') {
                        Ok((k.to_string(), None, false))
                    } else {
                        Ok((term.to_string(), None, true))
                    }
                })
                .collect()
        };
        Ok(Selector {
            group: text("group")?,
            version: text("version")?,
            kind: re("kind")?,
            name: re("name")?,
            namespace: re("namespace")?,
            labels: parse_sel("labelSelector")?,
            annotations: parse_sel("annotationSelector")?,
        })
    }

    fn matches(&self, r: &LNode) -> bool {
        let id = res_id(r);
        let terms_hold = |field: &str, terms: &[(String, Option<String>, bool)]| {
            terms.iter().all(|(k, v, positive)| {
                let actual = r.path(&["metadata", field, k]).and_then(LNode::str);
                let hit = match v {
                    Some(v) => actual == Some(v.as_str()),
                    None => actual.is_some(),
                };
                hit == *positive
            })
        };
        let eq = |want: &Option<String>, have: &str| want.as_ref().is_none_or(|w| w == have);
        let re = |want: &Option<Regex>, have: &str| want.as_ref().is_none_or(|w| w.is_match(have));
        eq(&self.group, &id.group)
            && eq(&self.version, &id.version)
            && re(&self.kind, &id.kind)
            && re(&self.name, &id.name)
            && re(&self.namespace, &id.namespace)
            && terms_hold("labels", &self.labels)
            && terms_hold("annotations", &self.annotations)
    }
}

/// Apply `f` to every resource the selector picks; `f` returning `Ok(false)` deletes it.
/// A selector that picks nothing is not an error (kustomize's `patches:` behaves so).
fn apply_to_targets(
    sel: &Selector,
    acc: &mut Vec<LNode>,
    mut f: impl FnMut(&mut LNode) -> Result<bool, FluxError>,
) -> Result<(), FluxError> {
    let mut i = 0;
    while i < acc.len() {
        if sel.matches(&acc[i]) && !f(&mut acc[i])? {
            acc.remove(i);
            continue;
        }
        i += 1;
    }
    Ok(())
}

/// A strategic-merge patch without `target:` applies to the one object of its own kind and
/// name (and namespace, if it names one).
fn apply_strategic_self_targeted(patch: &LNode, acc: &mut Vec<LNode>) -> Result<(), FluxError> {
    let pid = res_id(patch);
    if pid.kind.is_empty() || pid.name.is_empty() {
        return Err(FluxError::Unexpected {
            at: patch.at.clone(),
            expected:
                "a strategic-merge patch naming its object (kind and metadata.name), or a `target:`"
                    .into(),
        });
    }
    let hits: Vec<usize> = acc
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            let id = res_id(r);
            id.kind == pid.kind
                && id.name == pid.name
                && (pid.group.is_empty() || id.group == pid.group)
                && (pid.namespace.is_empty() || id.namespace == pid.namespace)
        })
        .map(|(i, _)| i)
        .collect();
    match hits.as_slice() {
        [i] => {
            if !apply_strategic(&mut acc[*i], patch)? {
                acc.remove(*i);
            }
            Ok(())
        }
        [] => Err(FluxError::Patch {
            at: patch.at.clone(),
            message: format!(
                "no {} named `{}` among the resources to patch",
                pid.kind, pid.name
            ),
        }),
        _ => Err(FluxError::Patch {
            at: patch.at.clone(),
            message: format!(
                "{} {} named `{}` match; name a namespace or use a target",
                hits.len(),
                pid.kind,
                pid.name
            ),
        }),
    }
}

// ---------------------------------------------------------------------------------------------
// Strategic merge, as kustomize applies it to a custom resource: maps merge key by key, `null`
// deletes, lists are replaced whole (CRDs declare no merge keys), `$patch: replace|delete`.

/// Returns `Ok(false)` when the patch deletes the whole object.
fn apply_strategic(target: &mut LNode, patch: &LNode) -> Result<bool, FluxError> {
    if patch.str_at(&["$patch"]) == Some("delete") {
        return Ok(false);
    }
    merge_into(target, patch);
    Ok(true)
}

fn strip_directives(node: &LNode) -> LNode {
    match &node.v {
        LVal::Map(entries) => LNode {
            v: LVal::Map(
                entries
                    .iter()
                    .filter(|(k, v)| !k.starts_with('$') && !matches!(v.v, LVal::Null))
                    .map(|(k, v)| (k.clone(), strip_directives(v)))
                    .collect(),
            ),
            at: node.at.clone(),
        },
        _ => node.clone(),
    }
}

fn merge_into(target: &mut LNode, patch: &LNode) {
    let LVal::Map(p_entries) = &patch.v else {
        *target = patch.clone();
        return;
    };
    match patch.str_at(&["$patch"]) {
        Some("replace") => {
            *target = strip_directives(patch);
            return;
        }
        Some("delete") => {
            *target = LNode {
                v: LVal::Map(Vec::new()),
                at: patch.at.clone(),
            };
            return;
        }
        _ => {}
    }
    if !matches!(target.v, LVal::Map(_)) {
        *target = strip_directives(patch);
        return;
    }
    for (key, pv) in p_entries {
        if key.starts_with('$') {
            continue;
        }
        match &pv.v {
            LVal::Null => {
                target.remove(key);
            }
            LVal::Map(_) if pv.str_at(&["$patch"]) == Some("delete") => {
                target.remove(key);
            }
            LVal::Map(_) => match target.get_mut(key) {
                Some(tv) => merge_into(tv, pv),
                None => target.set(key, strip_directives(pv)),
            },
            _ => target.set(key, pv.clone()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// JSON6902 (RFC 6902) over the located tree.

fn apply_json6902(target: &mut LNode, ops: &[LNode]) -> Result<bool, FluxError> {
    for op in ops {
        let err = |message: String| FluxError::Patch {
            at: op.at.clone(),
            message,
        };
        let Some(kind) = op.str_at(&["op"]) else {
            return Err(FluxError::Unexpected {
                at: op.at.clone(),
                expected: "a JSON6902 operation with `op:` and `path:`".into(),
            });
        };
        let Some(path) = op.str_at(&["path"]) else {
            return Err(FluxError::Unexpected {
                at: op.at.clone(),
                expected: "a JSON6902 operation with a `path:` (a JSON pointer)".into(),
            });
        };
        let tokens = pointer(path).map_err(err)?;
        let value = || {
            op.get("value")
                .cloned()
                .ok_or_else(|| FluxError::Unexpected {
                    at: op.at.clone(),
                    expected: format!("a `value:` for the `{kind}` operation"),
                })
        };
        match kind {
            "add" => add(target, &tokens, value()?).map_err(err)?,
            "replace" => {
                let slot = lookup_mut(target, &tokens)
                    .ok_or_else(|| err(format!("replace: nothing at `{path}`")))?;
                *slot = value()?;
            }
            "remove" => {
                remove(target, &tokens).map_err(|m| err(format!("remove: {m}")))?;
            }
            "move" | "copy" => {
                let from = op.str_at(&["from"]).ok_or_else(|| FluxError::Unexpected {
                    at: op.at.clone(),
                    expected: format!("a `from:` for the `{kind}` operation"),
                })?;
                let from_tokens = pointer(from).map_err(err)?;
                let moved = if kind == "move" {
                    remove(target, &from_tokens).map_err(|m| err(format!("move: {m}")))?
                } else {
                    lookup(target, &from_tokens)
                        .cloned()
                        .ok_or_else(|| err(format!("copy: nothing at `{from}`")))?
                };
                add(target, &tokens, moved).map_err(err)?;
            }
            "test" => {
                let expected = value()?;
                let same = lookup(target, &tokens).is_some_and(|n| n.same_content(&expected));
                if !same {
                    return Err(err(format!("test failed at `{path}`")));
                }
            }
            other => {
                return Err(FluxError::Unexpected {
                    at: op.at.clone(),
                    expected: format!("op add, remove, replace, move, copy or test, not `{other}`"),
                })
            }
        }
    }
    Ok(true)
}

fn pointer(path: &str) -> Result<Vec<String>, String> {
    if path.is_empty() {
        return Err("a JSON6902 path of the whole document is not supported here".into());
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(format!(
            "`{path}` is not a JSON pointer (it must start with /)"
        ));
    };
    Ok(rest
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect())
}

fn lookup<'a>(node: &'a LNode, tokens: &[String]) -> Option<&'a LNode> {
    tokens.iter().try_fold(node, |n, t| match &n.v {
        LVal::Map(_) => n.get(t),
        LVal::Seq(items) => t.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

fn lookup_mut<'a>(node: &'a mut LNode, tokens: &[String]) -> Option<&'a mut LNode> {
    let mut cur = node;
    for t in tokens {
        cur = match &mut cur.v {
            LVal::Map(entries) => entries.iter_mut().find(|(k, _)| k == t).map(|(_, v)| v)?,
            LVal::Seq(items) => items.get_mut(t.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn add(target: &mut LNode, tokens: &[String], value: LNode) -> Result<(), String> {
    let Some((last, parent_path)) = tokens.split_last() else {
        return Err("empty path".into());
    };
    let parent = lookup_mut(target, parent_path)
        .ok_or_else(|| format!("add: no parent at `/{}`", parent_path.join("/")))?;
    match &mut parent.v {
        LVal::Map(_) => {
            parent.set(last, value);
            Ok(())
        }
        LVal::Seq(items) => {
            if last == "-" {
                items.push(value);
                return Ok(());
            }
            match last.parse::<usize>() {
                Ok(i) if i <= items.len() => {
                    items.insert(i, value);
                    Ok(())
                }
                _ => Err(format!("add: index `{last}` is out of range")),
            }
        }
        _ => Err(format!("add: `/{}` is a scalar", parent_path.join("/"))),
    }
}

fn remove(target: &mut LNode, tokens: &[String]) -> Result<LNode, String> {
    let Some((last, parent_path)) = tokens.split_last() else {
        return Err("empty path".into());
    };
    let missing = || format!("nothing at `/{}`", tokens.join("/"));
    let parent = lookup_mut(target, parent_path).ok_or_else(missing)?;
    match &mut parent.v {
        LVal::Map(_) => parent.remove(last).ok_or_else(missing),
        LVal::Seq(items) => match last.parse::<usize>() {
            Ok(i) if i < items.len() => Ok(items.remove(i)),
            _ => Err(missing()),
        },
        _ => Err(missing()),
    }
}

// ---------------------------------------------------------------------------------------------
// Flux's side: which value each Flux Kustomization ends up substituting.

struct Candidate {
    value: String,
    at: SourceLoc,
    set_by: SetBy,
    kustomization: String,
    kustomization_at: SourceLoc,
    kustomization_path: Option<String>,
    unread: Vec<String>,
}

fn string_value(node: &LNode, var: &str) -> Result<String, FluxError> {
    match &node.v {
        LVal::Str(s) => Ok(s.clone()),
        _ => Err(FluxError::Unexpected {
            at: node.at.clone(),
            expected: format!(
                "{var} to be a string (Flux substitutes strings only), found {}",
                node.kind_name()
            ),
        }),
    }
}

fn evaluate(resources: &[LNode], var: &str, overlay: &Path) -> Result<OverlayValue, FluxError> {
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut undeterminable: Option<FluxError> = None;
    for ks in resources.iter().filter(|r| is_flux_kustomization(r)) {
        let id = res_id(ks);
        let ks_name = display_name(&id);
        let post_build = ks.path(&["spec", "postBuild"]);
        let mut unread = Vec::new();
        let mut from_source: Option<(String, SourceLoc, String)> = None;
        if let Some(LNode {
            v: LVal::Seq(sources),
            ..
        }) = post_build.and_then(|p| p.get("substituteFrom"))
        {
            for src in sources {
                let kind = src.str_at(&["kind"]).unwrap_or_default();
                let name = src.str_at(&["name"]).unwrap_or_default();
                let found = resources.iter().find(|r| {
                    let rid = res_id(r);
                    rid.kind == kind
                        && rid.name == name
                        && (rid.namespace.is_empty()
                            || id.namespace.is_empty()
                            || rid.namespace == id.namespace)
                });
                match (kind, found) {
                    ("ConfigMap", Some(cm)) => {
                        // Later sources override earlier ones, as Flux merges them in order.
                        if let Some(v) = cm.path(&["data", var]) {
                            from_source =
                                Some((string_value(v, var)?, v.at.clone(), name.to_string()));
                        }
                    }
                    // Not decisive on its own: such sources (typically SOPS Secrets) rarely
                    // carry this variable; they are listed in the answer, and only when nothing
                    // readable sets the value do they make it unknowable.
                    _ => unread.push((format!("{kind} {name}"), src.at.clone())),
                }
            }
        }
        let direct = post_build.and_then(|p| p.path(&["substitute", var]));
        let candidate = match (direct, from_source) {
            (Some(node), _) => Some(Candidate {
                value: string_value(node, var)?,
                at: node.at.clone(),
                set_by: SetBy::Substitute,
                kustomization: ks_name.clone(),
                kustomization_at: ks.at.clone(),
                kustomization_path: ks.str_at(&["spec", "path"]).map(str::to_string),
                unread: unread.iter().map(|(u, _)| u.clone()).collect(),
            }),
            (None, Some((value, at, cm))) => Some(Candidate {
                value,
                at,
                set_by: SetBy::SubstituteFrom { config_map: cm },
                kustomization: ks_name.clone(),
                kustomization_at: ks.at.clone(),
                kustomization_path: ks.str_at(&["spec", "path"]).map(str::to_string),
                unread: unread.iter().map(|(u, _)| u.clone()).collect(),
            }),
            (None, None) => {
                if let (Some((first, at)), None) = (unread.first(), &undeterminable) {
                    undeterminable = Some(FluxError::Undeterminable {
                        at: at.clone(),
                        var: var.to_string(),
                        kustomization: ks_name.clone(),
                        source_ref: first.clone(),
                    });
                }
                None
            }
        };
        if let Some(c) = candidate {
            candidates.push(c);
        }
    }
    let Some(first) = candidates.first() else {
        if let Some(e) = undeterminable {
            return Err(e);
        }
        let flux_count = resources
            .iter()
            .filter(|r| is_flux_kustomization(r))
            .count();
        let hint = if flux_count == 0 {
            " (the overlay builds no Flux Kustomization at all)".to_string()
        } else {
            format!(" ({flux_count} Flux Kustomization(s) built, none sets it)")
        };
        return Err(FluxError::NotSet {
            overlay: overlay.to_path_buf(),
            var: var.to_string(),
            hint,
        });
    };
    if let Some(other) = candidates.iter().find(|c| c.value != first.value) {
        return Err(FluxError::Conflict(Box::new(Conflict {
            var: var.to_string(),
            first_value: first.value.clone(),
            first_at: first.at.clone(),
            first_kustomization: first.kustomization.clone(),
            second_value: other.value.clone(),
            second_at: other.at.clone(),
            second_kustomization: other.kustomization.clone(),
        })));
    }
    let mut unread: BTreeMap<String, ()> = BTreeMap::new();
    for c in &candidates {
        for u in &c.unread {
            unread.insert(u.clone(), ());
        }
    }
    Ok(OverlayValue {
        var: var.to_string(),
        value: first.value.clone(),
        at: first.at.clone(),
        set_by: first.set_by.clone(),
        kustomization: first.kustomization.clone(),
        kustomization_at: first.kustomization_at.clone(),
        kustomization_path: first.kustomization_path.clone(),
        unread_sources: unread.into_keys().collect(),
    })
}
