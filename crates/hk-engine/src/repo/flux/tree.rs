//! A located YAML tree: every node remembers the file, line and column it was written at, so a
//! value patched, replaced or generated from another file still says where it came from.
//!
//! Owns: [`LNode`], lifting positioned YAML ([`crate::yaml`]) into it, and the identity
//! kustomize selects resources by ([`ResId`]).

use std::path::Path;

use super::{SourceLoc, FLUX_KS_GROUP};
use crate::yaml::{self, Node, Value};

#[derive(Debug, Clone)]
pub(super) struct LNode {
    pub(super) v: LVal,
    pub(super) at: SourceLoc,
}

#[derive(Debug, Clone)]
pub(super) enum LVal {
    Null,
    Str(String),
    /// A non-string scalar (bool, number, vaulted) as text.
    Other(String),
    Seq(Vec<LNode>),
    Map(Vec<(String, LNode)>),
}

/// Where an embedded YAML text (an inline patch) starts inside its file.
#[derive(Debug, Clone, Copy)]
pub(super) struct Embed {
    pub(super) line0: usize,
    pub(super) col0: usize,
}

pub(super) const TOP: Embed = Embed { line0: 0, col0: 0 };

impl LNode {
    pub(super) fn lift(node: &Node, file: &Path, embed: Embed) -> LNode {
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

    pub(super) fn get(&self, key: &str) -> Option<&LNode> {
        match &self.v {
            LVal::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub(super) fn get_mut(&mut self, key: &str) -> Option<&mut LNode> {
        match &mut self.v {
            LVal::Map(entries) => entries.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub(super) fn path(&self, keys: &[&str]) -> Option<&LNode> {
        keys.iter().try_fold(self, |n, k| n.get(k))
    }

    pub(super) fn str(&self) -> Option<&str> {
        match &self.v {
            LVal::Str(s) => Some(s),
            _ => None,
        }
    }

    pub(super) fn str_at(&self, keys: &[&str]) -> Option<&str> {
        self.path(keys).and_then(LNode::str)
    }

    pub(super) fn set(&mut self, key: &str, value: LNode) {
        if let LVal::Map(entries) = &mut self.v {
            if let Some(slot) = entries.iter_mut().find(|(k, _)| k == key) {
                slot.1 = value;
            } else {
                entries.push((key.to_string(), value));
            }
        }
    }

    pub(super) fn remove(&mut self, key: &str) -> Option<LNode> {
        match &mut self.v {
            LVal::Map(entries) => {
                let i = entries.iter().position(|(k, _)| k == key)?;
                Some(entries.remove(i).1)
            }
            _ => None,
        }
    }

    /// Equality of content, ignoring where things were written (for JSON6902 `test`).
    pub(super) fn same_content(&self, other: &LNode) -> bool {
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

    pub(super) fn kind_name(&self) -> &'static str {
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
pub(super) struct ResId {
    pub(super) group: String,
    pub(super) version: String,
    pub(super) kind: String,
    pub(super) name: String,
    pub(super) namespace: String,
}

pub(super) fn res_id(doc: &LNode) -> ResId {
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

pub(super) fn is_flux_kustomization(doc: &LNode) -> bool {
    doc.str_at(&["apiVersion"])
        .is_some_and(|a| a.starts_with(FLUX_KS_GROUP))
        && doc.str_at(&["kind"]) == Some("Kustomization")
}

pub(super) fn display_name(id: &ResId) -> String {
    if id.namespace.is_empty() {
        id.name.clone()
    } else {
        format!("{}/{}", id.namespace, id.name)
    }
}

impl LNode {
    pub(super) fn string(s: &str, at: &SourceLoc) -> LNode {
        LNode {
            v: LVal::Str(s.to_string()),
            at: at.clone(),
        }
    }

    pub(super) fn mapping(entries: Vec<(String, LNode)>, at: &SourceLoc) -> LNode {
        LNode {
            v: LVal::Map(entries),
            at: at.clone(),
        }
    }

    /// A scalar as text, whatever YAML typed it as.
    pub(super) fn text(&self) -> Option<&str> {
        match &self.v {
            LVal::Str(s) | LVal::Other(s) => Some(s),
            _ => None,
        }
    }

    /// The keys of a mapping, in file order (empty for anything else).
    pub(super) fn keys(&self) -> Vec<&str> {
        match &self.v {
            LVal::Map(entries) => entries.iter().map(|(k, _)| k.as_str()).collect(),
            _ => Vec::new(),
        }
    }

    /// A string-to-string map (`metadata.labels`, `data`); non-string values are skipped.
    pub(super) fn str_map(&self) -> Vec<(String, String)> {
        match &self.v {
            LVal::Map(entries) => entries
                .iter()
                .filter_map(|(k, v)| v.text().map(|t| (k.clone(), t.to_string())))
                .collect(),
            _ => Vec::new(),
        }
    }
}
