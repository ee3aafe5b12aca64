//! The builtin engine: a `kustomize build` of a directory, as Flux runs it (load restrictions
//! off, no plugins), restricted to what it models exactly. Every field, generator option,
//! patch form and transformer it does not model stops the build with
//! [`FluxError::CannotTell`] naming the file:line and the field: never skipped.
//!
//! Modelled, in kustomize's own order: `resources`/`bases` (files; directories with their own
//! kustomization, recursively), generators (`configMapGenerator` with `literals`, `envs`,
//! `files`, `behavior: create|merge|replace`, `options`/`generatorOptions` incl. the name
//! hash suffix; `generators:` entries that are builtin ConfigMapGenerator configs),
//! `components`, then the transformers: `patchesStrategicMerge`, `patches`, `namespace`,
//! `namePrefix`/`nameSuffix`, `labels`/`commonLabels`, `commonAnnotations`,
//! `patchesJson6902`, `replacements` (inline and `path:`), then `transformers:` entries that
//! are builtin PatchTransformer / ReplacementTransformer configs. A directory without a
//! kustomization file is read as Flux generates one (its YAML files, and subdirectories that
//! have a kustomization, as resources).
//!
//! Must not: fetch remote bases, run plugins, or decrypt anything.
//!
//! Why one file over 800 lines: it is one `Builder` applying kustomize's steps in kustomize's
//! order over shared private state; the patch engine (`patch.rs`) and Flux's substitution
//! (`postbuild.rs`) are already apart, and what remains reads best top to bottom in that order.

use std::path::{Path, PathBuf};

use super::patch::{
    apply_json6902, apply_strategic, apply_strategic_self_targeted, apply_to_targets, effective_ns,
    first_at, Res, Selector,
};
use super::tree::{LNode, LVal, TOP};
use super::{FluxError, SourceLoc, KUSTOMIZATION_FILES, KUSTOMIZE_GROUP};
use crate::yaml;

/// A name hash suffix still to be computed: kustomize appends `-` and ten characters of a
/// content hash. The builtin engine does not compute it; no name Flux looks up can equal this.
pub(super) const HASH_PLACEHOLDER: &str = "<hash>";

/// Kustomization fields the builtin engine models.
const MODELLED: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "resources",
    "bases",
    "components",
    "namespace",
    "namePrefix",
    "nameSuffix",
    "commonLabels",
    "labels",
    "commonAnnotations",
    "patches",
    "patchesStrategicMerge",
    "patchesJson6902",
    "configMapGenerator",
    "generatorOptions",
    "replacements",
    "transformers",
    "generators",
    "sortOptions",
];

/// Kustomization fields kustomize knows and the builtin engine does not model.
const NOT_MODELLED: &[&str] = &[
    "secretGenerator",
    "images",
    "replicas",
    "vars",
    "configurations",
    "crds",
    "openapi",
    "helmCharts",
    "helmGlobals",
    "helmChartInflationGenerator",
    "validators",
    "buildMetadata",
    "imageTags",
];

/// Kinds kustomize's namespace transformer leaves without a namespace.
const CLUSTER_SCOPED: &[&str] = &[
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "PersistentVolume",
    "StorageClass",
    "PriorityClass",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "Node",
    "CSIDriver",
    "CSINode",
    "IngressClass",
    "RuntimeClass",
    "VolumeAttachment",
];

pub(super) struct Builder {
    pub(super) root: PathBuf,
    /// Kustomization directories being built, to refuse cycles.
    stack: Vec<PathBuf>,
}

enum PatchDoc {
    Strategic(LNode),
    Json6902(Vec<LNode>),
}

fn cannot_tell(at: &SourceLoc, what: impl Into<String>, why: impl Into<String>) -> FluxError {
    FluxError::CannotTell {
        at: at.clone(),
        what: what.into(),
        why: why.into(),
    }
}

fn unexpected(at: &SourceLoc, expected: impl Into<String>) -> FluxError {
    FluxError::Unexpected {
        at: at.clone(),
        expected: expected.into(),
    }
}

impl Builder {
    pub(super) fn new(root: &Path) -> Builder {
        Builder {
            root: root.to_path_buf(),
            stack: Vec::new(),
        }
    }

    pub(super) fn rel(&self, path: &Path) -> PathBuf {
        let path = normalize(path);
        path.strip_prefix(normalize(&self.root))
            .map(Path::to_path_buf)
            .unwrap_or(path)
    }

    pub(super) fn loc(&self, file: &Path, line: usize, col: usize) -> SourceLoc {
        SourceLoc {
            file: self.rel(file),
            line,
            col,
        }
    }

    fn read(&self, file: &Path) -> Result<String, FluxError> {
        crate::repo::read::read_to_string(file).map_err(|source| FluxError::Read {
            file: self.rel(file),
            source,
        })
    }

    /// Parse every document of a YAML text that sits in `file` at `embed`.
    pub(super) fn parse(
        &self,
        text: &str,
        file: &Path,
        embed: super::tree::Embed,
    ) -> Result<Vec<LNode>, FluxError> {
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

    pub(super) fn parse_file(&self, file: &Path) -> Result<Vec<LNode>, FluxError> {
        let text = self.read(file)?;
        self.parse(&text, file, TOP)
    }

    pub(super) fn kustomization_file(dir: &Path) -> Option<PathBuf> {
        KUSTOMIZATION_FILES
            .iter()
            .map(|n| dir.join(n))
            .find(|p| p.is_file())
    }

    /// The directory as Flux builds it; hash suffixes applied (as placeholders).
    pub(super) fn build_top(&mut self, dir: &Path) -> Result<Vec<LNode>, FluxError> {
        let built = if Self::kustomization_file(dir).is_some() {
            self.build_dir(dir, None)?
        } else {
            let mut acc = Vec::new();
            for entry in flux_generated_entries(dir).map_err(|source| FluxError::Read {
                file: self.rel(dir),
                source,
            })? {
                let new = match entry {
                    FluxEntry::Dir(d) => self.build_dir(&d, None)?,
                    FluxEntry::File(f) => self.resource_file(&f)?,
                };
                absorb(&mut acc, new)?;
            }
            acc
        };
        Ok(built
            .into_iter()
            .map(|mut r| {
                if r.needs_hash {
                    if let Some(meta) = r.node.get_mut("metadata") {
                        let at = meta.at.clone();
                        let name = meta.str_at(&["name"]).unwrap_or_default().to_string();
                        meta.set(
                            "name",
                            LNode::string(&format!("{name}-{HASH_PLACEHOLDER}"), &at),
                        );
                    }
                }
                r.node
            })
            .collect())
    }

    fn build_dir(&mut self, dir: &Path, from: Option<SourceLoc>) -> Result<Vec<Res>, FluxError> {
        self.build_kustomization(dir, from, Vec::new(), false)
    }

    /// Build the kustomization in `dir` onto `acc` (empty for a Kustomization, the parent's
    /// resources for a Component, whose transformers apply to everything built so far).
    fn build_kustomization(
        &mut self,
        dir: &Path,
        from: Option<SourceLoc>,
        acc: Vec<Res>,
        component: bool,
    ) -> Result<Vec<Res>, FluxError> {
        let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        let at = from.unwrap_or_else(|| self.loc(dir, 0, 0));
        if self.stack.contains(&canonical) {
            return Err(FluxError::Cycle {
                at,
                resource: self.rel(dir).display().to_string(),
            });
        }
        let Some(kfile) = Self::kustomization_file(dir) else {
            return Err(FluxError::MissingResource {
                at,
                resource: self.rel(dir).display().to_string(),
                reason: "the directory has no kustomization.yaml".into(),
            });
        };
        let docs = self.parse_file(&kfile)?;
        let k = match docs.as_slice() {
            [k] if matches!(k.v, LVal::Map(_)) => k.clone(),
            [] => LNode::mapping(Vec::new(), &self.loc(&kfile, 1, 1)),
            [k] => return Err(unexpected(&k.at, "a kustomization (a mapping)")),
            [_, second, ..] => {
                return Err(unexpected(
                    &second.at,
                    "one kustomization per file (kustomize refuses a second document)",
                ))
            }
        };
        let kind = k.str_at(&["kind"]).unwrap_or("Kustomization");
        if let Some(api) = k.str_at(&["apiVersion"]) {
            if !api.starts_with(KUSTOMIZE_GROUP) {
                let at = k
                    .get("apiVersion")
                    .map(|n| n.at.clone())
                    .unwrap_or(k.at.clone());
                return Err(unexpected(
                    &at,
                    format!("a kustomize kustomization (apiVersion {KUSTOMIZE_GROUP}…), not `{api}`: kustomize (and Flux) refuse this file; Flux objects belong in their own files, listed under resources:"),
                ));
            }
        }
        match (kind, component) {
            ("Component", false) => {
                return Err(unexpected(
                    &at,
                    format!(
                        "a Kustomization at {}, found a Component (components are listed under components:)",
                        self.rel(dir).display()
                    ),
                ))
            }
            ("Kustomization", true) => {
                return Err(unexpected(
                    &at,
                    format!(
                        "a Component at {} (kind: Component)",
                        self.rel(dir).display()
                    ),
                ))
            }
            ("Kustomization" | "Component", _) => {}
            (other, _) => {
                let at = k.get("kind").map(|n| n.at.clone()).unwrap_or(k.at.clone());
                return Err(unexpected(
                    &at,
                    format!("kind Kustomization or Component, not `{other}`"),
                ));
            }
        }
        self.stack.push(canonical);
        let result = self.apply_config(&k, dir, acc);
        self.stack.pop();
        result
    }

    fn apply_config(
        &mut self,
        k: &LNode,
        dir: &Path,
        mut acc: Vec<Res>,
    ) -> Result<Vec<Res>, FluxError> {
        for key in k.keys() {
            let at = k.get(key).map(|n| n.at.clone()).unwrap_or(k.at.clone());
            if NOT_MODELLED.contains(&key) {
                return Err(cannot_tell(
                    &at,
                    format!("kustomization field `{key}`"),
                    "the builtin engine does not model it (install kustomize or kubectl, or name one with kustomize_bin: in hk-console.yaml)",
                ));
            }
            if !MODELLED.contains(&key) {
                return Err(unexpected(
                    &at,
                    format!(
                        "a kustomization field, not `{key}` (kustomize refuses unknown fields)"
                    ),
                ));
            }
        }
        // Resources, each directory built on its own and merged in.
        for field in ["resources", "bases"] {
            for entry in string_list(k, field)? {
                let path = self.local_path(&entry, dir)?;
                let new = if path.is_dir() {
                    self.build_dir(&path, Some(entry.at.clone()))?
                } else if path.is_file() {
                    self.resource_file(&path)?
                } else {
                    return Err(FluxError::MissingResource {
                        at: entry.at.clone(),
                        resource: entry.str().unwrap_or_default().to_string(),
                        reason: format!("no file or directory {}", self.rel(&path).display()),
                    });
                };
                absorb(&mut acc, new)?;
            }
        }
        // Generators.
        let global = GenOptions::from_node(k.get("generatorOptions"), None)?;
        for gen in list(k, "configMapGenerator")? {
            self.config_map_generator(&gen, dir, &global, &mut acc)?;
        }
        for cfg in self.plugin_configs(k, "generators", dir)? {
            match (cfg.str_at(&["apiVersion"]), cfg.str_at(&["kind"])) {
                (Some("builtin"), Some("ConfigMapGenerator")) => {
                    self.config_map_generator(&cfg, dir, &global, &mut acc)?
                }
                (api, kind) => {
                    return Err(cannot_tell(
                        &cfg.at,
                        format!(
                            "generators: entry {} {}",
                            api.unwrap_or("?"),
                            kind.unwrap_or("?")
                        ),
                        "only builtin ConfigMapGenerator configs are modelled",
                    ))
                }
            }
        }
        // Components see everything built and generated so far.
        for entry in string_list(k, "components")? {
            let path = self.local_path(&entry, dir)?;
            if Self::kustomization_file(&path).is_none() {
                return Err(FluxError::MissingResource {
                    at: entry.at.clone(),
                    resource: entry.str().unwrap_or_default().to_string(),
                    reason: "a component is a directory with a kustomization.yaml".into(),
                });
            }
            acc = self.build_kustomization(&path, Some(entry.at.clone()), acc, true)?;
        }

        // kustomize's fixed builtin transformer order.
        for entry in list(k, "patchesStrategicMerge")? {
            let Some(text) = entry.str() else {
                return Err(unexpected(
                    &entry.at,
                    "a file path or an inline strategic-merge patch (a string)",
                ));
            };
            let candidate = dir.join(text);
            let docs = if !text.contains('\n') && candidate.is_file() {
                self.parse_file(&candidate)?
            } else {
                let docs = self.parse_inline(&entry)?;
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
            self.patch_entry(&entry, dir, &mut acc, false)?;
        }
        if let Some(ns) = k.get("namespace") {
            let Some(name) = ns.text() else {
                return Err(unexpected(&ns.at, "`namespace:` to be a string"));
            };
            if !name.is_empty() {
                for r in acc.iter_mut() {
                    set_namespace(r, ns, name);
                }
            }
        }
        let prefix = opt_text(k, "namePrefix")?;
        let suffix = opt_text(k, "nameSuffix")?;
        if prefix.is_some() || suffix.is_some() {
            for r in acc.iter_mut() {
                let id = r.id();
                r.remember_id();
                let (p, s) = (
                    prefix.clone().unwrap_or_default(),
                    suffix.clone().unwrap_or_default(),
                );
                let at = prefix_at(k);
                if let Some(meta) = r.node.get_mut("metadata") {
                    meta.set("name", LNode::string(&format!("{p}{}{s}", id.name), &at));
                }
            }
        }
        for entry in list(k, "labels")? {
            for key in entry.keys() {
                if !matches!(key, "pairs" | "includeSelectors" | "includeTemplates") {
                    let at = entry
                        .get(key)
                        .map(|n| n.at.clone())
                        .unwrap_or(entry.at.clone());
                    return Err(cannot_tell(
                        &at,
                        format!("labels: `{key}`"),
                        "custom label field specs are not modelled",
                    ));
                }
            }
            if let Some(pairs) = entry.get("pairs") {
                add_meta_map(&mut acc, "labels", pairs)?;
            }
        }
        if let Some(pairs) = k.get("commonLabels") {
            add_meta_map(&mut acc, "labels", pairs)?;
        }
        if let Some(pairs) = k.get("commonAnnotations") {
            add_meta_map(&mut acc, "annotations", pairs)?;
        }
        for entry in list(k, "patchesJson6902")? {
            let Some(target) = entry.get("target") else {
                return Err(unexpected(
                    &entry.at,
                    "a `target:` (kind, name) for this patchesJson6902 entry",
                ));
            };
            let sel = Selector::from_node(target)?;
            for doc in self.patch_source(&entry, dir)? {
                let LVal::Seq(ops) = doc.v else {
                    return Err(unexpected(
                        &doc.at,
                        "a JSON6902 patch: a list of operations",
                    ));
                };
                apply_to_targets(&sel, &mut acc, |r| apply_json6902(r, &ops))?;
            }
        }
        for entry in list(k, "replacements")? {
            for replacement in self.replacement_entries(&entry, dir)? {
                apply_replacement(&replacement, &mut acc)?;
            }
        }
        for cfg in self.plugin_configs(k, "transformers", dir)? {
            match (cfg.str_at(&["apiVersion"]), cfg.str_at(&["kind"])) {
                (Some("builtin"), Some("PatchTransformer")) => {
                    for key in cfg.keys() {
                        if !matches!(
                            key,
                            "apiVersion" | "kind" | "metadata" | "patch" | "path" | "target"
                        ) {
                            let at = cfg.get(key).map(|n| n.at.clone()).unwrap_or(cfg.at.clone());
                            return Err(cannot_tell(
                                &at,
                                format!("PatchTransformer `{key}`"),
                                "not modelled",
                            ));
                        }
                    }
                    self.patch_entry(&cfg, dir, &mut acc, true)?;
                }
                (Some("builtin"), Some("ReplacementTransformer")) => {
                    for key in cfg.keys() {
                        if !matches!(key, "apiVersion" | "kind" | "metadata" | "replacements") {
                            let at = cfg.get(key).map(|n| n.at.clone()).unwrap_or(cfg.at.clone());
                            return Err(cannot_tell(
                                &at,
                                format!("ReplacementTransformer `{key}`"),
                                "not modelled",
                            ));
                        }
                    }
                    for entry in list(&cfg, "replacements")? {
                        for replacement in self.replacement_entries(&entry, dir)? {
                            apply_replacement(&replacement, &mut acc)?;
                        }
                    }
                }
                (api, kind) => return Err(cannot_tell(
                    &cfg.at,
                    format!(
                        "transformers: entry {} {}",
                        api.unwrap_or("?"),
                        kind.unwrap_or("?")
                    ),
                    "only builtin PatchTransformer and ReplacementTransformer configs are modelled",
                )),
            }
        }
        Ok(acc)
    }

    /// A file of resources (every document an object).
    fn resource_file(&self, path: &Path) -> Result<Vec<Res>, FluxError> {
        let mut out = Vec::new();
        for doc in self.parse_file(path)? {
            if !matches!(doc.v, LVal::Map(_)) {
                return Err(unexpected(
                    &doc.at,
                    format!("a Kubernetes object (a mapping), found {}", doc.kind_name()),
                ));
            }
            if doc.str_at(&["kind"]).is_none_or(str::is_empty)
                || doc.str_at(&["metadata", "name"]).is_none_or(str::is_empty)
            {
                return Err(unexpected(
                    &doc.at,
                    "a Kubernetes object with kind and metadata.name (kustomize refuses one without)",
                ));
            }
            out.push(Res::new(doc));
        }
        Ok(out)
    }

    /// One `patches:` entry, or a PatchTransformer config (same fields).
    fn patch_entry(
        &self,
        entry: &LNode,
        dir: &Path,
        acc: &mut Vec<Res>,
        transformer: bool,
    ) -> Result<(), FluxError> {
        if !transformer {
            for key in entry.keys() {
                match key {
                    "path" | "patch" | "target" => {}
                    "options" => {
                        let at = entry
                            .get(key)
                            .map(|n| n.at.clone())
                            .unwrap_or(entry.at.clone());
                        return Err(cannot_tell(
                            &at,
                            "patches: `options` (allowNameChange/allowKindChange)",
                            "not modelled",
                        ));
                    }
                    other => {
                        let at = entry
                            .get(key)
                            .map(|n| n.at.clone())
                            .unwrap_or(entry.at.clone());
                        return Err(unexpected(
                            &at,
                            format!(
                                "a patch entry field (path, patch, target, options), not `{other}`"
                            ),
                        ));
                    }
                }
            }
        }
        let docs = self.patch_source(entry, dir)?;
        let target = match entry.get("target") {
            Some(t) => Some(Selector::from_node(t)?),
            None => None,
        };
        for doc in docs {
            match (classify(doc)?, &target) {
                (PatchDoc::Strategic(p), Some(sel)) => {
                    apply_to_targets(sel, acc, |r| apply_strategic(r, &p))?;
                }
                (PatchDoc::Strategic(p), None) => apply_strategic_self_targeted(&p, acc)?,
                (PatchDoc::Json6902(ops), Some(sel)) => {
                    apply_to_targets(sel, acc, |r| apply_json6902(r, &ops))?;
                }
                (PatchDoc::Json6902(ops), None) => {
                    return Err(unexpected(
                        &first_at(&ops, &entry.at),
                        "a `target:` for a JSON6902 patch (it names no object itself)",
                    ))
                }
            }
        }
        Ok(())
    }

    /// The config objects of a `transformers:`/`generators:` list: file paths or inline YAML.
    fn plugin_configs(&self, k: &LNode, field: &str, dir: &Path) -> Result<Vec<LNode>, FluxError> {
        let mut out = Vec::new();
        for entry in list(k, field)? {
            let Some(text) = entry.str() else {
                return Err(unexpected(
                    &entry.at,
                    format!("`{field}:` entries to be file paths or inline configs (strings)"),
                ));
            };
            let docs = if text.contains('\n') {
                self.parse_inline(&entry)?
            } else {
                let path = self.local_path(&entry, dir)?;
                if path.is_dir() {
                    return Err(cannot_tell(
                        &entry.at,
                        format!("{field}: directory `{text}`"),
                        "configs built from a kustomization are not modelled",
                    ));
                }
                if !path.is_file() {
                    return Err(FluxError::MissingResource {
                        at: entry.at.clone(),
                        resource: text.to_string(),
                        reason: format!("no file {}", self.rel(&path).display()),
                    });
                }
                self.parse_file(&path)?
            };
            out.extend(docs);
        }
        Ok(out)
    }

    fn local_path(&self, entry: &LNode, dir: &Path) -> Result<PathBuf, FluxError> {
        let text = entry.str().unwrap_or_default();
        if text.contains("://") || text.starts_with("github.com/") || text.starts_with("git@") {
            return Err(cannot_tell(
                &entry.at,
                format!("remote `{text}`"),
                "remote bases are not fetched",
            ));
        }
        Ok(dir.join(text))
    }

    /// `configMapGenerator` entries (and builtin ConfigMapGenerator configs).
    fn config_map_generator(
        &self,
        gen: &LNode,
        dir: &Path,
        global: &GenOptions,
        acc: &mut Vec<Res>,
    ) -> Result<(), FluxError> {
        let is_config = gen.get("apiVersion").is_some();
        for key in gen.keys() {
            let at = gen.get(key).map(|n| n.at.clone()).unwrap_or(gen.at.clone());
            match key {
                "name" | "namespace" | "behavior" | "literals" | "envs" | "files" | "options" => {}
                "apiVersion" | "kind" | "metadata" if is_config => {}
                "env" | "kvSources" => {
                    return Err(cannot_tell(
                        &at,
                        format!("configMapGenerator `{key}`"),
                        "not modelled",
                    ))
                }
                other => {
                    return Err(unexpected(
                        &at,
                        format!("a configMapGenerator field, not `{other}`"),
                    ))
                }
            }
        }
        let (name, namespace) = if is_config {
            (
                gen.str_at(&["metadata", "name"]),
                gen.str_at(&["metadata", "namespace"]),
            )
        } else {
            (gen.str_at(&["name"]), gen.str_at(&["namespace"]))
        };
        let Some(name) = name else {
            return Err(unexpected(
                &gen.at,
                "a `name:` for this configMapGenerator entry",
            ));
        };
        let options = GenOptions::from_node(gen.get("options"), Some(global))?;
        let mut data: Vec<(String, LNode)> = Vec::new();
        let mut put = |key: String, value: LNode, at: &SourceLoc| -> Result<(), FluxError> {
            if data.iter().any(|(k, _)| *k == key) {
                return Err(unexpected(
                    at,
                    format!("a key once per ConfigMap; `{key}` is already set (kustomize refuses)"),
                ));
            }
            data.push((key, value));
            Ok(())
        };
        for env in string_list(gen, "envs")? {
            let path = self.local_path(&env, dir)?;
            let text =
                crate::repo::read::read_to_string(&path).map_err(|source| FluxError::Read {
                    file: self.rel(&path),
                    source,
                })?;
            for (i, line) in text.lines().enumerate() {
                let at = self.loc(&path, i + 1, 1);
                let line = if i == 0 {
                    line.trim_start_matches('\u{feff}')
                } else {
                    line
                };
                let line = line.trim_start();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let Some((key, value)) = line.split_once('=') else {
                    return Err(cannot_tell(
                        &at,
                        format!("env line `{line}`"),
                        "a key without `=` takes its value from kustomize's own environment",
                    ));
                };
                put(key.to_string(), LNode::string(value, &at), &at)?;
            }
        }
        for lit in list(gen, "literals")? {
            let text = lit.text().unwrap_or_default();
            let Some((key, value)) = text.split_once('=') else {
                return Err(unexpected(&lit.at, "a literal KEY=VALUE"));
            };
            put(
                key.to_string(),
                LNode::string(remove_quotes(value), &lit.at),
                &lit.at,
            )?;
        }
        for file in string_list(gen, "files")? {
            let text = file.str().unwrap_or_default();
            let (key, rel) = match text.split_once('=') {
                Some((k, p)) => (k.to_string(), p),
                None => (
                    Path::new(text)
                        .file_name()
                        .map(|n| n.to_string_lossy().to_string())
                        .unwrap_or_default(),
                    text,
                ),
            };
            let path = dir.join(rel);
            if path.is_dir() {
                return Err(cannot_tell(
                    &file.at,
                    format!("files: directory `{rel}`"),
                    "not modelled",
                ));
            }
            let content =
                crate::repo::read::read_to_string(&path).map_err(|source| FluxError::Read {
                    file: self.rel(&path),
                    source,
                })?;
            let at = self.loc(&path, 1, 1);
            put(key, LNode::string(&content, &at), &file.at)?;
        }
        let behavior = gen.str_at(&["behavior"]).unwrap_or("create");
        let at = gen.at.clone();
        let s = |v: &str| LNode::string(v, &at);
        let mut meta = vec![("name".to_string(), s(name))];
        if let Some(ns) = namespace {
            meta.push(("namespace".to_string(), s(ns)));
        }
        if !options.labels.is_empty() {
            meta.push(("labels".into(), pairs_node(&options.labels, &at)));
        }
        if !options.annotations.is_empty() {
            meta.push(("annotations".into(), pairs_node(&options.annotations, &at)));
        }
        let mut entries = vec![
            ("apiVersion".into(), s("v1")),
            ("kind".into(), s("ConfigMap")),
            ("metadata".into(), LNode::mapping(meta, &at)),
        ];
        if !data.is_empty() {
            entries.push(("data".into(), LNode::mapping(data.clone(), &at)));
        }
        if options.immutable {
            entries.push((
                "immutable".into(),
                LNode {
                    v: LVal::Other("true".into()),
                    at: at.clone(),
                },
            ));
        }
        let mut new = Res::new(LNode::mapping(entries, &at));
        new.needs_hash = !options.disable_hash;
        let ns = namespace.unwrap_or_default();
        let existing = acc.iter().position(|r| {
            let id = r.id();
            id.kind == "ConfigMap"
                && id.group.is_empty()
                && id.name == name
                && effective_ns(&id.namespace) == effective_ns(ns)
        });
        match (behavior, existing) {
            ("create", None) => acc.push(new),
            ("create", Some(_)) => {
                return Err(unexpected(
                    &at,
                    format!("a new ConfigMap, but `{name}` already exists (use behavior: merge or replace)"),
                ))
            }
            ("merge" | "replace", None) => {
                return Err(unexpected(
                    &at,
                    format!("an existing ConfigMap `{name}` to {behavior} (kustomize refuses: it does not exist)"),
                ))
            }
            ("merge", Some(i)) => {
                let old = &mut acc[i];
                if old.node.get("data").is_none() && !data.is_empty() {
                    old.node.set("data", LNode::mapping(Vec::new(), &at));
                }
                if let Some(d) = old.node.get_mut("data") {
                    for (k, v) in data {
                        d.set(&k, v);
                    }
                }
                for (field, pairs) in [("labels", &options.labels), ("annotations", &options.annotations)] {
                    if !pairs.is_empty() {
                        add_pairs(&mut old.node, field, pairs, &at);
                    }
                }
                old.needs_hash = old.needs_hash && new.needs_hash;
            }
            ("replace", Some(i)) => {
                let old_hash = acc[i].needs_hash;
                new.needs_hash = new.needs_hash && old_hash;
                new.prev = acc[i].prev.clone();
                acc[i] = new;
            }
            (other, _) => {
                let at = gen.get("behavior").map(|n| n.at.clone()).unwrap_or(at);
                return Err(unexpected(
                    &at,
                    format!("behavior create, merge or replace, not `{other}`"),
                ));
            }
        }
        Ok(())
    }

    /// The documents of a `patches:`/`patchesJson6902:` entry: `path:` a file, or inline `patch:`.
    fn patch_source(&self, entry: &LNode, dir: &Path) -> Result<Vec<LNode>, FluxError> {
        if let Some(p) = entry.get("path") {
            let Some(text) = p.str() else {
                return Err(unexpected(&p.at, "a file path (a string)"));
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
        Err(unexpected(
            &entry.at,
            "a patch entry with `path:` or `patch:`",
        ))
    }

    /// A `replacements:` entry: inline, or `path:` a file holding one or a list.
    fn replacement_entries(&self, entry: &LNode, dir: &Path) -> Result<Vec<LNode>, FluxError> {
        let Some(p) = entry.get("path") else {
            return Ok(vec![entry.clone()]);
        };
        if entry.keys().len() > 1 {
            return Err(unexpected(
                &entry.at,
                "a replacement with either `path:` or source/targets",
            ));
        }
        let Some(text) = p.str() else {
            return Err(unexpected(&p.at, "a file path (a string)"));
        };
        let file = dir.join(text);
        if !file.is_file() {
            return Err(FluxError::MissingResource {
                at: p.at.clone(),
                resource: text.to_string(),
                reason: format!("no replacement file {}", self.rel(&file).display()),
            });
        }
        let mut out = Vec::new();
        for doc in self.parse_file(&file)? {
            match doc.v {
                LVal::Seq(items) => out.extend(items),
                LVal::Map(_) => out.push(doc),
                _ => return Err(unexpected(&doc.at, "a replacement or a list of them")),
            }
        }
        Ok(out)
    }

    pub(super) fn parse_inline(&self, node: &LNode) -> Result<Vec<LNode>, FluxError> {
        let Some(text) = node.str() else {
            return Err(unexpected(&node.at, "an inline patch (a string)"));
        };
        // The string's mark is where its first content line starts (for a block scalar the
        // line after `|`), so positions inside it shift by that much.
        let embed = super::tree::Embed {
            line0: node.at.line.saturating_sub(1),
            col0: node.at.col.saturating_sub(1),
        };
        let file = self.root.join(&node.at.file);
        self.parse(text, &file, embed)
    }
}

/// One entry of the kustomization Flux generates for a directory without one.
pub(super) enum FluxEntry {
    File(PathBuf),
    Dir(PathBuf),
}

/// What Flux's generated kustomization lists, in its walk order: every `.yaml`/`.yml` file,
/// and every subdirectory holding a kustomization (not descended into).
pub(super) fn flux_generated_entries(dir: &Path) -> std::io::Result<Vec<FluxEntry>> {
    let mut out = Vec::new();
    walk(dir, &mut out)?;
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<FluxEntry>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if Builder::kustomization_file(&path).is_some() {
                out.push(FluxEntry::Dir(path));
            } else {
                walk(&path, out)?;
            }
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml") | Some("yml")
        ) {
            out.push(FluxEntry::File(path));
        }
    }
    Ok(())
}

/// Add `new` to the accumulated resources; kustomize refuses two resources with one id.
fn absorb(acc: &mut Vec<Res>, new: Vec<Res>) -> Result<(), FluxError> {
    for r in new {
        let id = r.id();
        if acc.iter().any(|o| {
            let oid = o.id();
            oid.group == id.group
                && oid.version == id.version
                && oid.kind == id.kind
                && oid.name == id.name
                && effective_ns(&oid.namespace) == effective_ns(&id.namespace)
        }) {
            return Err(unexpected(
                &r.node.at,
                format!(
                    "one resource per id; {} `{}` is already in the build (kustomize refuses: may not add resource with an already registered id)",
                    id.kind, id.name
                ),
            ));
        }
        acc.push(r);
    }
    Ok(())
}

/// Generator options: `options:` of one generator over `generatorOptions:`.
#[derive(Debug, Clone, Default)]
struct GenOptions {
    labels: Vec<(String, LNode)>,
    annotations: Vec<(String, LNode)>,
    disable_hash: bool,
    immutable: bool,
}

impl GenOptions {
    fn from_node(
        node: Option<&LNode>,
        global: Option<&GenOptions>,
    ) -> Result<GenOptions, FluxError> {
        let mut out = GenOptions::default();
        if let Some(n) = node {
            for key in n.keys() {
                let at = n.get(key).map(|v| v.at.clone()).unwrap_or(n.at.clone());
                match key {
                    "labels" | "annotations" | "disableNameSuffixHash" | "immutable" => {}
                    other => {
                        return Err(unexpected(
                            &at,
                            format!("a generator option (labels, annotations, disableNameSuffixHash, immutable), not `{other}`"),
                        ))
                    }
                }
            }
            let pairs = |key: &str| match n.get(key).map(|m| &m.v) {
                Some(LVal::Map(entries)) => entries.clone(),
                _ => Vec::new(),
            };
            out.labels = pairs("labels");
            out.annotations = pairs("annotations");
            out.disable_hash = n.get("disableNameSuffixHash").and_then(LNode::text) == Some("true");
            out.immutable = n.get("immutable").and_then(LNode::text) == Some("true");
        }
        if let Some(g) = global {
            for (k, v) in &g.labels {
                set_pair(&mut out.labels, k, v);
            }
            for (k, v) in &g.annotations {
                set_pair(&mut out.annotations, k, v);
            }
            out.disable_hash |= g.disable_hash;
            out.immutable |= g.immutable;
        }
        Ok(out)
    }
}

fn set_pair(pairs: &mut Vec<(String, LNode)>, key: &str, value: &LNode) {
    match pairs.iter_mut().find(|(k, _)| k == key) {
        Some(slot) => slot.1 = value.clone(),
        None => pairs.push((key.to_string(), value.clone())),
    }
}

fn pairs_node(pairs: &[(String, LNode)], at: &SourceLoc) -> LNode {
    LNode::mapping(pairs.to_vec(), at)
}

fn add_pairs(node: &mut LNode, field: &str, pairs: &[(String, LNode)], at: &SourceLoc) {
    if node.get("metadata").is_none() {
        node.set("metadata", LNode::mapping(Vec::new(), at));
    }
    let Some(meta) = node.get_mut("metadata") else {
        return;
    };
    if !matches!(meta.get(field).map(|m| &m.v), Some(LVal::Map(_))) {
        meta.set(field, LNode::mapping(Vec::new(), at));
    }
    if let Some(map) = meta.get_mut(field) {
        for (k, v) in pairs {
            map.set(k, v.clone());
        }
    }
}

/// `commonLabels`/`labels[].pairs`/`commonAnnotations`: onto every resource's metadata.
fn add_meta_map(acc: &mut [Res], field: &str, pairs: &LNode) -> Result<(), FluxError> {
    let LVal::Map(entries) = &pairs.v else {
        return Err(unexpected(&pairs.at, format!("{field} as a mapping")));
    };
    for (k, v) in entries {
        if v.text().is_none() {
            return Err(unexpected(
                &v.at,
                format!("{field} value of `{k}` to be a string"),
            ));
        }
    }
    let entries: Vec<(String, LNode)> = entries
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                LNode::string(v.text().unwrap_or_default(), &v.at),
            )
        })
        .collect();
    for r in acc.iter_mut() {
        add_pairs(&mut r.node, field, &entries, &pairs.at);
    }
    Ok(())
}

/// kustomize's literal sources: a value wrapped in matching quotes loses them.
fn remove_quotes(value: &str) -> &str {
    let b = value.as_bytes();
    if b.len() >= 2
        && ((b[0] == b'"' && b[b.len() - 1] == b'"') || (b[0] == b'\'' && b[b.len() - 1] == b'\''))
    {
        &value[1..value.len() - 1]
    } else {
        value
    }
}

fn prefix_at(k: &LNode) -> SourceLoc {
    k.get("namePrefix")
        .or_else(|| k.get("nameSuffix"))
        .map(|n| n.at.clone())
        .unwrap_or_else(|| k.at.clone())
}

fn opt_text(k: &LNode, field: &str) -> Result<Option<String>, FluxError> {
    match k.get(field) {
        None => Ok(None),
        Some(n) => match n.text() {
            Some("") => Ok(None),
            Some(s) => Ok(Some(s.to_string())),
            None => Err(unexpected(&n.at, format!("`{field}:` to be a string"))),
        },
    }
}

/// Namespaced kinds take the kustomization's namespace (replacing theirs).
fn set_namespace(r: &mut Res, ns_node: &LNode, ns: &str) {
    let kind = r.id().kind;
    if CLUSTER_SCOPED.contains(&kind.as_str()) {
        return;
    }
    r.remember_id();
    if let Some(meta) = r.node.get_mut("metadata") {
        meta.set("namespace", LNode::string(ns, &ns_node.at));
    }
}

/// `a/b/../c` -> `a/c`, without touching the filesystem (kustomize paths are lexical).
pub(super) fn normalize(path: &Path) -> PathBuf {
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

fn list(k: &LNode, field: &str) -> Result<Vec<LNode>, FluxError> {
    match k.get(field) {
        None => Ok(Vec::new()),
        Some(LNode { v: LVal::Null, .. }) => Ok(Vec::new()),
        Some(LNode {
            v: LVal::Seq(items),
            ..
        }) => Ok(items.clone()),
        Some(other) => Err(unexpected(
            &other.at,
            format!("`{field}:` to be a list, found {}", other.kind_name()),
        )),
    }
}

fn string_list(k: &LNode, field: &str) -> Result<Vec<LNode>, FluxError> {
    let items = list(k, field)?;
    for item in &items {
        if item.str().is_none() {
            return Err(unexpected(
                &item.at,
                format!(
                    "`{field}:` entries to be paths (strings), found {}",
                    item.kind_name()
                ),
            ));
        }
    }
    Ok(items)
}

fn classify(doc: LNode) -> Result<PatchDoc, FluxError> {
    match doc.v {
        LVal::Seq(ops) => Ok(PatchDoc::Json6902(ops)),
        LVal::Map(_) => Ok(PatchDoc::Strategic(doc)),
        _ => Err(unexpected(
            &doc.at,
            format!(
                "a patch: a strategic-merge object (a mapping) or JSON6902 operations (a list), found {}",
                doc.kind_name()
            ),
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// Replacements.

/// One step of a replacement field path: a key, or the list element whose `key` is `value`.
enum Step {
    Key(String),
    Match(String, String),
}

fn field_path(text: &str, at: &SourceLoc) -> Result<Vec<Step>, FluxError> {
    let mut steps = Vec::new();
    for part in text.split('.') {
        let mut rest = part;
        // `containers[name=x]` is `containers` then `[name=x]`.
        if let Some(i) = rest.find('[') {
            if i > 0 {
                steps.push(Step::Key(rest[..i].to_string()));
                rest = &rest[i..];
            }
        }
        if let Some(inner) = rest.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            match inner.split_once('=') {
                Some((k, v)) if !k.is_empty() => {
                    steps.push(Step::Match(k.to_string(), v.to_string()))
                }
                _ => {
                    return Err(cannot_tell(
                        at,
                        format!("fieldPath `{text}`"),
                        "only keys and [key=value] list matches are modelled",
                    ))
                }
            }
        } else if rest.is_empty() || rest.contains('*') || rest.contains('[') || rest.contains(']')
        {
            return Err(cannot_tell(
                at,
                format!("fieldPath `{text}`"),
                "only keys and [key=value] list matches are modelled",
            ));
        } else {
            steps.push(Step::Key(rest.to_string()));
        }
    }
    Ok(steps)
}

fn get_path<'a>(node: &'a LNode, steps: &[Step]) -> Option<&'a LNode> {
    steps.iter().try_fold(node, |n, step| match (step, &n.v) {
        (Step::Key(k), LVal::Map(_)) => n.get(k),
        (Step::Match(k, v), LVal::Seq(items)) => items
            .iter()
            .find(|i| i.get(k).and_then(LNode::text) == Some(v.as_str())),
        _ => None,
    })
}

/// Set the node at `steps`; with `create`, missing mappings on the way are made.
fn set_path(node: &mut LNode, steps: &[Step], value: LNode, create: bool) -> Result<bool, String> {
    let Some((first, rest)) = steps.split_first() else {
        *node = value;
        return Ok(true);
    };
    match first {
        Step::Key(k) => {
            if !matches!(node.v, LVal::Map(_)) {
                if create && matches!(node.v, LVal::Null) {
                    node.v = LVal::Map(Vec::new());
                } else {
                    return Ok(false);
                }
            }
            if node.get(k).is_none() {
                if !create {
                    return Ok(false);
                }
                let at = node.at.clone();
                node.set(k, LNode { v: LVal::Null, at });
            }
            match node.get_mut(k) {
                Some(child) => set_path(child, rest, value, create),
                None => Ok(false),
            }
        }
        Step::Match(k, v) => {
            let LVal::Seq(items) = &mut node.v else {
                return Ok(false);
            };
            match items
                .iter_mut()
                .find(|i| i.get(k).and_then(LNode::text) == Some(v.as_str()))
            {
                Some(item) => set_path(item, rest, value, create),
                None if create => Err(format!(
                    "creating the list element [{k}={v}] is not modelled"
                )),
                None => Ok(false),
            }
        }
    }
}

fn check_options(opts: Option<&LNode>, allowed: &[&str]) -> Result<bool, FluxError> {
    let Some(o) = opts else {
        return Ok(false);
    };
    for key in o.keys() {
        let at = o.get(key).map(|n| n.at.clone()).unwrap_or(o.at.clone());
        if !allowed.contains(&key) {
            return Err(cannot_tell(
                &at,
                format!("replacement option `{key}`"),
                "only `create` is modelled",
            ));
        }
    }
    Ok(o.get("create").and_then(LNode::text) == Some("true"))
}

fn apply_replacement(rep: &LNode, acc: &mut [Res]) -> Result<(), FluxError> {
    for key in rep.keys() {
        if !matches!(key, "source" | "targets") {
            let at = rep.get(key).map(|n| n.at.clone()).unwrap_or(rep.at.clone());
            return Err(unexpected(
                &at,
                format!("a replacement field (source, targets, path), not `{key}`"),
            ));
        }
    }
    let Some(source) = rep.get("source") else {
        return Err(unexpected(&rep.at, "a replacement `source:`"));
    };
    let sel = Selector::exact_from_node(source, &["fieldPath", "options"])?;
    check_options(source.get("options"), &[])?;
    let hits: Vec<&Res> = acc.iter().filter(|r| sel.matches(r)).collect();
    let src = match hits.as_slice() {
        [one] => *one,
        [] => return Err(unexpected(
            &source.at,
            "a replacement source that selects one resource; it selects none (kustomize refuses)",
        )),
        many => {
            return Err(unexpected(
                &source.at,
                format!(
                "a replacement source that selects one resource; it selects {} (kustomize refuses)",
                many.len()
            ),
            ))
        }
    };
    let fp = source.str_at(&["fieldPath"]).unwrap_or("metadata.name");
    let steps = field_path(fp, &source.at)?;
    let Some(value) = get_path(&src.node, &steps).cloned() else {
        return Err(unexpected(
            &source.at,
            format!("the replacement source's fieldPath `{fp}` to exist (kustomize refuses)"),
        ));
    };
    let LVal::Seq(targets) = rep
        .get("targets")
        .map(|t| t.v.clone())
        .unwrap_or(LVal::Null)
    else {
        return Err(unexpected(&rep.at, "replacement `targets:` (a list)"));
    };
    for target in &targets {
        for key in target.keys() {
            if !matches!(key, "select" | "reject" | "fieldPaths" | "options") {
                let at = target
                    .get(key)
                    .map(|n| n.at.clone())
                    .unwrap_or(target.at.clone());
                return Err(unexpected(
                    &at,
                    format!("a replacement target field, not `{key}`"),
                ));
            }
        }
        let Some(select) = target.get("select") else {
            return Err(unexpected(&target.at, "a replacement target `select:`"));
        };
        let select = Selector::exact_from_node(select, &[])?;
        let rejects = match target.get("reject").map(|r| &r.v) {
            None => Vec::new(),
            Some(LVal::Seq(items)) => items
                .iter()
                .map(|i| Selector::exact_from_node(i, &[]))
                .collect::<Result<Vec<_>, _>>()?,
            Some(_) => {
                return Err(unexpected(
                    &target.at,
                    "`reject:` to be a list of selectors",
                ))
            }
        };
        let create = check_options(target.get("options"), &["create"])?;
        let paths: Vec<LNode> = match target.get("fieldPaths").map(|p| &p.v) {
            Some(LVal::Seq(items)) => items.clone(),
            _ => {
                return Err(unexpected(
                    &target.at,
                    "replacement target `fieldPaths:` (a list)",
                ))
            }
        };
        for r in acc.iter_mut() {
            if !select.matches(r) || rejects.iter().any(|rj| rj.matches(r)) {
                continue;
            }
            for p in &paths {
                let Some(text) = p.text() else {
                    return Err(unexpected(&p.at, "a fieldPath (a string)"));
                };
                let steps = field_path(text, &p.at)?;
                match set_path(&mut r.node, &steps, value.clone(), create) {
                    Ok(true) => {}
                    Ok(false) => {
                        return Err(FluxError::Patch {
                            at: p.at.clone(),
                            message: format!(
                                "unable to find field `{text}` in replacement target {} `{}` (kustomize refuses; options.create: true makes it)",
                                r.id().kind,
                                r.id().name
                            ),
                        })
                    }
                    Err(why) => return Err(cannot_tell(&p.at, format!("fieldPath `{text}`"), why)),
                }
            }
        }
    }
    Ok(())
}
