//! The runbooks shipped in the binary, and the loader that layers directories of overrides
//! on top of them.
//!
//! Owns: the embedded `runbooks/*.yaml` table (written by build.rs) and [`load_layers`],
//! which validates every runbook and keys them by id. Layers, lowest first: the built-in
//! runbooks, the infra repo's own `runbooks/` directory, then `--runbooks DIR`. A runbook
//! of a higher layer with the id of a lower one replaces it (and says so:
//! [`Loaded::replaced`], [`RunbookSet::overrides_shipped`]); a new id adds one. Marks every runbook shipped or not, so the planner can tell a
//! reviewed `mutates: false` from a user's unverified one.
//! Must not: read files. The CLI reads the override directory and passes `(name, text)`
//! pairs in, so this module stays pure.

use std::collections::BTreeMap;

use super::schema::Runbook;
use super::validate::{validate_text, Diagnostic};

// The tables hk-engine embeds (build/embed.rs): the shipped runbooks.
mod table {
    include!(concat!(env!("OUT_DIR"), "/embedded.rs"));
}

/// Every embedded runbook file as `(file name, text)`, sorted by file name.
pub fn embedded() -> &'static [(&'static str, &'static str)] {
    table::RUNBOOKS
}

/// Where a loaded runbook came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Embedded,
    /// From the infra repo's `runbooks/` directory; the file name as the caller gave it.
    Repo(String),
    /// From the `--runbooks` directory; the file name as the caller gave it.
    Override(String),
}

impl Origin {
    /// Where the runbook came from, as `runbooks list` says it.
    pub fn describe(&self) -> String {
        match self {
            Origin::Embedded => "built-in".into(),
            Origin::Repo(f) => format!("the repo's runbooks/: {f}"),
            Origin::Override(f) => format!("--runbooks: {f}"),
        }
    }
}

/// A layer of [`load_layers`]: which directory its files came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// The infra repo's `runbooks/`.
    Repo,
    /// `--runbooks DIR`.
    Flag,
}

/// A validated runbook and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub runbook: Runbook,
    pub origin: Origin,
    /// The id of the embedded runbook this one replaced, if it did.
    pub overrides_embedded: bool,
    /// The runbook of a lower layer with this id that this one replaced, if any.
    pub replaced: Option<Origin>,
}

impl Loaded {
    /// The file that replaced the shipped runbook of this id, if this one did.
    pub fn overrides_shipped(&self) -> Option<&str> {
        match &self.origin {
            Origin::Override(file) | Origin::Repo(file) if self.overrides_embedded => Some(file),
            _ => None,
        }
    }
}

/// All runbooks, by id.
#[derive(Debug, Clone, Default)]
pub struct RunbookSet {
    by_id: BTreeMap<String, Loaded>,
}

impl RunbookSet {
    pub fn get(&self, id: &str) -> Option<&Runbook> {
        self.by_id.get(id).map(|l| &l.runbook)
    }

    pub fn loaded(&self, id: &str) -> Option<&Loaded> {
        self.by_id.get(id)
    }

    /// The file that replaced the shipped runbook `id`, if one did (`--runbooks`): said
    /// wherever the runbook is shown, since the shipped one is what the operator expects.
    pub fn overrides_shipped(&self, id: &str) -> Option<&str> {
        self.by_id.get(id).and_then(Loaded::overrides_shipped)
    }

    /// Ids in sorted order.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.by_id.keys().map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Loaded> {
        self.by_id.values()
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

/// Load the embedded runbooks, then `overrides` (`(file name, text)` pairs, e.g. the
/// `*.yaml` files of `--runbooks DIR`). Every problem in any file is returned, each with
/// its file:line:col; two files of one layer with the same id are an error too.
pub fn load(overrides: &[(String, String)]) -> Result<RunbookSet, Vec<Diagnostic>> {
    load_layers(&[(Layer::Flag, overrides.to_vec())])
}

/// Load the embedded runbooks, then each layer in the order given (lowest first: the
/// repo's `runbooks/`, then `--runbooks`), a later layer's id replacing an earlier one's.
/// Every problem in any file of any layer is returned, each with its file:line:col.
pub fn load_layers(
    layers: &[(Layer, Vec<(String, String)>)],
) -> Result<RunbookSet, Vec<Diagnostic>> {
    let mut diags = Vec::new();
    let mut set = RunbookSet::default();
    let embedded_files: Vec<(String, String)> = embedded()
        .iter()
        .map(|(name, text)| (name.to_string(), text.to_string()))
        .collect();
    // (None: the built-in layer, the files of the layer).
    type Files = [(String, String)];
    let all: Vec<(Option<Layer>, &Files)> = std::iter::once((None, embedded_files.as_slice()))
        .chain(layers.iter().map(|(l, files)| (Some(*l), files.as_slice())))
        .collect();
    for (layer, files) in all {
        let mut ids_in_layer: BTreeMap<String, String> = BTreeMap::new();
        for (name, text) in files.iter() {
            let runbook = match validate_text(name, text) {
                Ok(mut rb) => {
                    rb.shipped = layer.is_none();
                    rb
                }
                Err(mut d) => {
                    diags.append(&mut d);
                    continue;
                }
            };
            if let Some(first) = ids_in_layer.get(&runbook.id) {
                diags.push(Diagnostic {
                    file: name.clone(),
                    line: 1,
                    col: 1,
                    message: format!("runbook id `{}` is also defined in {first}", runbook.id),
                    hint: Some("ids are unique within a directory; rename one of them".into()),
                });
                continue;
            }
            ids_in_layer.insert(runbook.id.clone(), name.clone());
            let origin = match layer {
                None => Origin::Embedded,
                Some(Layer::Repo) => Origin::Repo(name.clone()),
                Some(Layer::Flag) => Origin::Override(name.clone()),
            };
            let below = set.by_id.get(&runbook.id);
            let overrides_embedded = layer.is_some()
                && below.is_some_and(|b| b.origin == Origin::Embedded || b.overrides_embedded);
            let replaced = below.map(|b| b.origin.clone());
            set.by_id.insert(
                runbook.id.clone(),
                Loaded {
                    runbook,
                    origin,
                    overrides_embedded,
                    replaced,
                },
            );
        }
    }
    if diags.is_empty() {
        Ok(set)
    } else {
        Err(diags)
    }
}

/// Keep only the runbook files of a directory listing: `.yaml`/`.yml`, sorted by name so
/// that the result does not depend on the order the directory was read in.
pub fn runbook_files(mut files: Vec<(String, String)>) -> Vec<(String, String)> {
    files.retain(|(name, _)| name.ends_with(".yaml") || name.ends_with(".yml"));
    files.sort_by(|a, b| a.0.cmp(&b.0));
    files
}
