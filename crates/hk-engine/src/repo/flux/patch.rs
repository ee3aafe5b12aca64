//! Patches and targets, as kustomize applies them: which resources a `target:` selects (exact
//! group/version/kind, anchored name and namespace patterns matched against a resource's
//! original or current id, Kubernetes label selectors including set-based terms), which one a
//! patch without a target names (its exact group/version/kind, name and namespace, current or
//! any earlier id), strategic merge and JSON6902.
//!
//! Owns: [`Res`] (a built resource and the ids it had), [`Selector`], [`LabelSelector`],
//! [`apply_strategic`], [`apply_json6902`].
//! Must not: read files (the builder hands patches in).

use regex::Regex;

use super::tree::{res_id, LNode, LVal, ResId};
use super::{FluxError, SourceLoc};

/// A resource in a build, with the (namespace, name) pairs it had before transformers renamed
/// it: kustomize lets a patch or a selector name a resource by any of them.
#[derive(Debug, Clone)]
pub(super) struct Res {
    pub(super) node: LNode,
    /// The first is the id it was read (or generated) with; then one per rename.
    pub(super) prev: Vec<(String, String)>,
    /// Generated without `disableNameSuffixHash`: kustomize appends `-<hash>` to its name
    /// once the whole build is done.
    pub(super) needs_hash: bool,
}

impl Res {
    pub(super) fn new(node: LNode) -> Res {
        let id = res_id(&node);
        Res {
            prev: vec![(id.namespace, id.name)],
            node,
            needs_hash: false,
        }
    }

    pub(super) fn id(&self) -> ResId {
        res_id(&self.node)
    }

    /// Record the current id before a transformer changes the name or namespace.
    pub(super) fn remember_id(&mut self) {
        let id = self.id();
        let cur = (id.namespace, id.name);
        if self.prev.last() != Some(&cur) {
            self.prev.push(cur);
        }
    }

    /// Every id it has had, the current one included.
    fn all_ids(&self) -> Vec<(String, String)> {
        let id = self.id();
        let mut out = self.prev.clone();
        out.push((id.namespace, id.name));
        out
    }
}

/// kustomize treats no namespace and `default` as the same namespace.
pub(super) fn effective_ns(ns: &str) -> &str {
    if ns.is_empty() {
        "default"
    } else {
        ns
    }
}

/// A Kubernetes label (or annotation) selector, set-based terms included.
#[derive(Debug, Clone, Default)]
pub(super) struct LabelSelector {
    terms: Vec<Term>,
}

#[derive(Debug, Clone)]
enum Term {
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

impl LabelSelector {
    /// Parse `a=b,c!=d,e in (x,y),!f`; `Err` says what is not understood.
    pub(super) fn parse(text: &str) -> Result<LabelSelector, String> {
        let mut terms = Vec::new();
        for raw in split_top_level(text)? {
            let term = raw.trim();
            if term.is_empty() {
                return Err(format!("an empty term in `{text}`"));
            }
            if let Some(key) = term.strip_prefix('!') {
                terms.push(Term::NotExists(valid_key(key.trim())?));
                continue;
            }
            if let Some((k, v)) = term.split_once("!=") {
                terms.push(Term::NotIn(
                    valid_key(k.trim())?,
                    vec![v.trim().to_string()],
                ));
                continue;
            }
            if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                terms.push(Term::In(valid_key(k.trim())?, vec![v.trim().to_string()]));
                continue;
            }
            if term.contains('>') || term.contains('<') {
                return Err(format!("the numeric comparison `{term}` is not modelled"));
            }
            let words: Vec<&str> = term.splitn(2, char::is_whitespace).collect();
            match words.as_slice() {
                [key] => terms.push(Term::Exists(valid_key(key)?)),
                [key, rest] => {
                    let rest = rest.trim();
                    let (op, set) = if let Some(s) = rest.strip_prefix("notin") {
                        ("notin", s)
                    } else if let Some(s) = rest.strip_prefix("in") {
                        ("in", s)
                    } else {
                        return Err(format!("`{term}` is not a selector term"));
                    };
                    let set = set.trim();
                    let Some(inner) = set.strip_prefix('(').and_then(|s| s.strip_suffix(')'))
                    else {
                        return Err(format!("`{term}`: expected a set in parentheses"));
                    };
                    let values: Vec<String> =
                        inner.split(',').map(|v| v.trim().to_string()).collect();
                    let key = valid_key(key)?;
                    terms.push(if op == "in" {
                        Term::In(key, values)
                    } else {
                        Term::NotIn(key, values)
                    });
                }
                _ => return Err(format!("`{term}` is not a selector term")),
            }
        }
        Ok(LabelSelector { terms })
    }

    pub(super) fn matches(&self, labels: &[(String, String)]) -> bool {
        let get = |k: &str| labels.iter().find(|(lk, _)| lk == k).map(|(_, v)| v);
        self.terms.iter().all(|t| match t {
            Term::Exists(k) => get(k).is_some(),
            Term::NotExists(k) => get(k).is_none(),
            Term::In(k, set) => get(k).is_some_and(|v| set.contains(v)),
            Term::NotIn(k, set) => get(k).is_none_or(|v| !set.contains(v)),
        })
    }
}

fn valid_key(key: &str) -> Result<String, String> {
    let ok = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if ok {
        Ok(key.to_string())
    } else {
        Err(format!("`{key}` is not a label key"))
    }
}

/// Split on the commas that separate terms (not those inside `in (a,b)` sets).
fn split_top_level(text: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c);
            }
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| format!("unbalanced `)` in `{text}`"))?;
                cur.push(c);
            }
            ',' if depth == 0 => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced `(` in `{text}`"));
    }
    out.push(cur);
    Ok(out)
}

/// A `target:` (or a replacement's `select:`): in a patch target every field (group,
/// version, kind, name, namespace) is an anchored regular expression, as kustomize's
/// SelectorRegex matches them; `exact` turns them all into plain equality, as replacements
/// compare them.
#[derive(Debug, Clone, Default)]
pub(super) struct Selector {
    group: Option<String>,
    version: Option<String>,
    kind: Option<String>,
    name: Option<String>,
    namespace: Option<String>,
    gvk_re: [Option<Regex>; 3],
    name_re: Option<Regex>,
    namespace_re: Option<Regex>,
    labels: LabelSelector,
    annotations: LabelSelector,
    exact: bool,
}

const SELECTOR_KEYS: [&str; 7] = [
    "group",
    "version",
    "kind",
    "name",
    "namespace",
    "labelSelector",
    "annotationSelector",
];

impl Selector {
    /// A `target:` of `patches:`/`patchesJson6902:`/a PatchTransformer.
    pub(super) fn from_node(t: &LNode) -> Result<Selector, FluxError> {
        Self::parse(t, false, &[])
    }

    /// A replacement's `select:`/`reject:` entry, or its `source:` (which also carries
    /// `fieldPath` and `options`, read by the caller).
    pub(super) fn exact_from_node(t: &LNode, extra: &[&str]) -> Result<Selector, FluxError> {
        Self::parse(t, true, extra)
    }

    fn parse(t: &LNode, exact: bool, extra: &[&str]) -> Result<Selector, FluxError> {
        if !matches!(t.v, LVal::Map(_)) {
            return Err(FluxError::Unexpected {
                at: t.at.clone(),
                expected: format!("a selector (a mapping), found {}", t.kind_name()),
            });
        }
        for key in t.keys() {
            if !SELECTOR_KEYS.contains(&key) && !extra.contains(&key) {
                let at = t
                    .get(key)
                    .map(|n| n.at.clone())
                    .unwrap_or_else(|| t.at.clone());
                return Err(FluxError::Unexpected {
                    at,
                    expected: format!(
                        "a selector field ({}), not `{key}` (kustomize refuses unknown fields)",
                        SELECTOR_KEYS.join(", ")
                    ),
                });
            }
        }
        let text = |key: &str| -> Result<Option<String>, FluxError> {
            match t.get(key) {
                None => Ok(None),
                Some(n) => match &n.v {
                    LVal::Str(s) | LVal::Other(s) if s.is_empty() => Ok(None),
                    LVal::Str(s) | LVal::Other(s) => Ok(Some(s.clone())),
                    LVal::Null => Ok(None),
                    _ => Err(FluxError::Unexpected {
                        at: n.at.clone(),
                        expected: format!("selector `{key}` to be a string"),
                    }),
                },
            }
        };
        let at_of = |key: &str| {
            t.get(key)
                .map(|n| n.at.clone())
                .unwrap_or_else(|| t.at.clone())
        };
        let re = |key: &str, value: &Option<String>| -> Result<Option<Regex>, FluxError> {
            match value {
                Some(s) if !exact => {
                    Regex::new(&format!("^(?:{s})$"))
                        .map(Some)
                        .map_err(|e| FluxError::Patch {
                            at: at_of(key),
                            message: format!("target {key} `{s}` is not a valid pattern: {e}"),
                        })
                }
                _ => Ok(None),
            }
        };
        let sel = |key: &str| -> Result<LabelSelector, FluxError> {
            match text(key)? {
                None => Ok(LabelSelector::default()),
                Some(s) => LabelSelector::parse(&s).map_err(|why| FluxError::CannotTell {
                    at: at_of(key),
                    what: format!("{key} `{s}`"),
                    why,
                }),
            }
        };
        let name = text("name")?;
        let namespace = text("namespace")?;
        let (group, version, kind) = (text("group")?, text("version")?, text("kind")?);
        Ok(Selector {
            gvk_re: [
                re("group", &group)?,
                re("version", &version)?,
                re("kind", &kind)?,
            ],
            group,
            version,
            kind,
            name_re: re("name", &name)?,
            namespace_re: re("namespace", &namespace)?,
            name,
            namespace,
            labels: sel("labelSelector")?,
            annotations: sel("annotationSelector")?,
            exact,
        })
    }

    fn gvk_matches(&self, id: &ResId) -> bool {
        let one = |re: &Option<Regex>, want: &Option<String>, have: &str| match (re, want) {
            (Some(re), _) => re.is_match(have),
            (None, Some(w)) => w == have,
            (None, None) => true,
        };
        one(&self.gvk_re[0], &self.group, &id.group)
            && one(&self.gvk_re[1], &self.version, &id.version)
            && one(&self.gvk_re[2], &self.kind, &id.kind)
    }

    fn name_matches(&self, name: &str) -> bool {
        match (&self.name_re, &self.name) {
            (Some(re), _) => re.is_match(name),
            (None, Some(n)) => n == name,
            (None, None) => true,
        }
    }

    fn ns_matches(&self, ns: &str) -> bool {
        match (&self.namespace_re, &self.namespace) {
            (Some(re), _) => re.is_match(effective_ns(ns)),
            (None, Some(n)) => effective_ns(n) == effective_ns(ns),
            (None, None) => true,
        }
    }

    pub(super) fn matches(&self, r: &Res) -> bool {
        let id = r.id();
        // Patch targets look at the original and the current id; replacements at every id.
        let ids = if self.exact {
            r.all_ids()
        } else {
            let mut v = vec![r.prev.first().cloned().unwrap_or_default()];
            v.push((id.namespace.clone(), id.name.clone()));
            v
        };
        let ns_ok = ids.iter().any(|(ns, _)| self.ns_matches(ns));
        let name_ok = ids.iter().any(|(_, n)| self.name_matches(n));
        let labels = r.node.path(&["metadata", "labels"]).map(LNode::str_map);
        let annotations = r
            .node
            .path(&["metadata", "annotations"])
            .map(LNode::str_map);
        ns_ok
            && name_ok
            && self.gvk_matches(&id)
            && self.labels.matches(&labels.unwrap_or_default())
            && self.annotations.matches(&annotations.unwrap_or_default())
    }
}

/// Apply `f` to every resource the selector picks; `f` returning `Ok(false)` deletes it.
/// A selector that picks nothing is not an error (kustomize's `patches:` behaves so).
pub(super) fn apply_to_targets(
    sel: &Selector,
    acc: &mut Vec<Res>,
    mut f: impl FnMut(&mut LNode) -> Result<bool, FluxError>,
) -> Result<(), FluxError> {
    let mut i = 0;
    while i < acc.len() {
        if sel.matches(&acc[i]) && !f(&mut acc[i].node)? {
            acc.remove(i);
            continue;
        }
        i += 1;
    }
    Ok(())
}

/// A strategic-merge patch without `target:` applies to the one object whose id (exact
/// group, version, kind, name and namespace; any id it has had) is the patch's own.
pub(super) fn apply_strategic_self_targeted(
    patch: &LNode,
    acc: &mut Vec<Res>,
) -> Result<(), FluxError> {
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
            let id = r.id();
            id.group == pid.group
                && id.version == pid.version
                && id.kind == pid.kind
                && r.all_ids().iter().any(|(ns, name)| {
                    *name == pid.name && effective_ns(ns) == effective_ns(&pid.namespace)
                })
        })
        .map(|(i, _)| i)
        .collect();
    let api = if pid.group.is_empty() {
        pid.version.clone()
    } else {
        format!("{}/{}", pid.group, pid.version)
    };
    match hits.as_slice() {
        [i] => {
            if !apply_strategic(&mut acc[*i].node, patch)? {
                acc.remove(*i);
            }
            Ok(())
        }
        [] => Err(FluxError::Patch {
            at: patch.at.clone(),
            message: format!(
                "no {} {api} named `{}` in namespace `{}` among the resources to patch (kustomize matches apiVersion, kind, name and namespace exactly)",
                pid.kind,
                pid.name,
                effective_ns(&pid.namespace)
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

/// Where an error about the whole patch points.
pub(super) fn first_at(ops: &[LNode], fallback: &SourceLoc) -> SourceLoc {
    ops.first()
        .map(|o| o.at.clone())
        .unwrap_or_else(|| fallback.clone())
}

// ---------------------------------------------------------------------------------------------
// Strategic merge, as kustomize applies it to a custom resource: maps merge key by key, `null`
// deletes, lists are replaced whole (CRDs declare no merge keys), `$patch: replace|delete`.

/// Returns `Ok(false)` when the patch deletes the whole object.
pub(super) fn apply_strategic(target: &mut LNode, patch: &LNode) -> Result<bool, FluxError> {
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

pub(super) fn apply_json6902(target: &mut LNode, ops: &[LNode]) -> Result<bool, FluxError> {
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
