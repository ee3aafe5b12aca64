//! Field ownership: `metadata.managedFields` as the real API server keeps it (server-side
//! apply, Kubernetes' structured-merge-diff semantics), for the simulated server and the
//! simulation's own writes.
//!
//! Owns: field sets (paths in the FieldsV1 encoding: `f:name`, `k:{"name":"x"}`,
//! `v:"value"`, `i:0`) and their JSON form; the managedFields entries (manager, operation
//! Apply|Update, apiVersion, time, subresource; identity as the real server forms it: the
//! apiVersion counts for Update only); [`track_update`] (an Update owns what it added or
//! changed, and takes it from everyone else) and [`track_apply`] (an Apply owns exactly its
//! configuration, prunes what it stopped applying that nobody else owns, conflicts when a
//! changed field has another owner unless forced, co-owns equal values; for the manager
//! `kubectl` the server's client-side-apply upgrade: conflicts only on fields the
//! last-applied annotation matches are forgiven, and the annotation follows the applied
//! configuration).
//! Lists follow their list type where the simulation knows it ([`list_kind`], by field name
//! as the strategic merge does); an operator's apply through a list it does not know fails
//! with 501 naming the list. Updates (and the simulation's own writes) own such a list as
//! one value (atomic), noted in the module doc of `kube`.
//! Must not: store anything (callers write through the store) or speak HTTP.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};

use super::resources::ResourceType;
use super::status::{ApiError, Cause, Details};

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sub {
    Main,
    Status,
}

/// The annotation client-side `kubectl apply` keeps its configuration in.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// One field's path, each element in its FieldsV1 spelling.
pub type Path = Vec<String>;

/// A set of field paths (a path in the set owns that field; its ancestors are not owned by
/// it unless they are in the set too).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet(BTreeSet<Path>);

impl FieldSet {
    pub fn insert(&mut self, p: Path) {
        self.0.insert(p);
    }
    pub fn contains(&self, p: &[String]) -> bool {
        self.0.contains(p)
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn iter(&self) -> impl Iterator<Item = &Path> {
        self.0.iter()
    }
    pub fn union(&self, o: &FieldSet) -> FieldSet {
        FieldSet(self.0.union(&o.0).cloned().collect())
    }
    pub fn difference(&self, o: &FieldSet) -> FieldSet {
        FieldSet(self.0.difference(&o.0).cloned().collect())
    }
    pub fn intersection(&self, o: &FieldSet) -> FieldSet {
        FieldSet(self.0.intersection(&o.0).cloned().collect())
    }
    /// Whether `p` or anything below it is in the set.
    fn covers(&self, p: &[String]) -> bool {
        self.0
            .range(p.to_vec()..)
            .next()
            .is_some_and(|q| q.starts_with(p))
    }
    fn retain(&mut self, f: impl Fn(&Path) -> bool) {
        self.0.retain(|p| f(p));
    }

    /// The FieldsV1 JSON: a trie, `.` marking a member that also has members below it.
    pub fn to_json(&self) -> Value {
        #[derive(Default)]
        struct Node {
            member: bool,
            children: BTreeMap<String, Node>,
        }
        fn out(n: &Node) -> Value {
            let mut m = Map::new();
            if n.member && !n.children.is_empty() {
                m.insert(".".into(), json!({}));
            }
            for (k, c) in &n.children {
                m.insert(k.clone(), out(c));
            }
            Value::Object(m)
        }
        let mut root = Node::default();
        for p in &self.0 {
            let mut n = &mut root;
            for e in p {
                n = n.children.entry(e.clone()).or_default();
            }
            n.member = true;
        }
        out(&root)
    }

    /// Read a FieldsV1 trie.
    pub fn from_json(v: &Value) -> Result<FieldSet, String> {
        fn walk(v: &Value, at: &mut Path, out: &mut FieldSet) -> Result<(), String> {
            let Value::Object(m) = v else {
                return Err(format!("fieldsV1 at {}: not an object", path_string(at)));
            };
            if m.is_empty() && !at.is_empty() {
                out.insert(at.clone());
            }
            for (k, c) in m {
                if k == "." {
                    out.insert(at.clone());
                    continue;
                }
                if !["f:", "k:", "v:", "i:"].iter().any(|p| k.starts_with(p)) {
                    return Err(format!("fieldsV1: unknown path element `{k}`"));
                }
                at.push(k.clone());
                walk(c, at, out)?;
                at.pop();
            }
            Ok(())
        }
        let mut s = FieldSet::default();
        walk(v, &mut Vec::new(), &mut s)?;
        Ok(s)
    }
}

/// A path as the real server prints it in conflicts: `.data.a`,
/// `.spec.containers[name="agent"].image`, `.metadata.finalizers[="x"]`, `[0]`.
pub fn path_string(p: &[String]) -> String {
    let mut s = String::new();
    for e in p {
        if let Some(f) = e.strip_prefix("f:") {
            s.push('.');
            s.push_str(f);
        } else if let Some(k) = e.strip_prefix("k:") {
            let fields: Vec<String> = serde_json::from_str::<Map<String, Value>>(k)
                .map(|m| m.iter().map(|(k, v)| format!("{k}={v}")).collect())
                .unwrap_or_else(|_| vec![k.to_string()]);
            s.push_str(&format!("[{}]", fields.join(",")));
        } else if let Some(v) = e.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        } else if let Some(i) = e.strip_prefix("i:") {
            s.push_str(&format!("[{i}]"));
        }
    }
    s
}

/// How a list field merges and is owned (its `x-kubernetes-list-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    /// Items identified by these key fields.
    Map(&'static [&'static str]),
    /// Scalars, each owned on its own.
    Set,
    /// One value.
    Atomic,
}

/// The list type of a field, by its name, where the simulation knows it (the Kubernetes
/// types' list types for the fields the served kinds have).
pub fn list_kind(field: &str) -> Option<ListKind> {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets" => Some(ListKind::Map(&["name"])),
        "conditions" => Some(ListKind::Map(&["type"])),
        "volumeMounts" => Some(ListKind::Map(&["mountPath"])),
        "ownerReferences" => Some(ListKind::Map(&["uid"])),
        "finalizers" => Some(ListKind::Set),
        "args" | "command" | "tolerations" | "nodeSelectorTerms" => Some(ListKind::Atomic),
        _ => None,
    }
}

/// Fields whose objects are maps (string keys chosen by users), not structs: a map's own
/// path is owned by the write that adds it, as the real server's comparison has it.
fn is_map_field(field: &str) -> bool {
    matches!(
        field,
        "labels"
            | "annotations"
            | "data"
            | "binaryData"
            | "stringData"
            | "matchLabels"
            | "nodeSelector"
            | "limits"
            | "requests"
            | "capacity"
            | "allocatable"
    )
}

/// Whose writes these are: the operator's (an unknown list type in an apply fails) or the
/// simulation's own and ordinary updates (an unknown list is owned as one value).
#[derive(Debug, Clone, Copy)]
struct Walk {
    strict_lists: bool,
    /// Custom resources keep unknown fields: every object in them is a map.
    custom: bool,
}

impl Walk {
    fn list(&self, field: &str, at: &[String]) -> Result<ListKind, ApiError> {
        match list_kind(field) {
            Some(k) => Ok(k),
            None if self.strict_lists => Err(ApiError::not_simulated(
                501,
                &format!(
                    "server-side apply of the list `{}` (its list type is not modelled; apply it with a JSON merge patch instead)",
                    path_string(at)
                ),
            )),
            None => Ok(ListKind::Atomic),
        }
    }

    fn map_like(&self, field: &str) -> bool {
        self.custom || is_map_field(field)
    }
}

fn key_element(item: &Value, keys: &[&str]) -> Option<String> {
    let mut m = Map::new();
    for k in keys {
        m.insert((*k).to_string(), item.get(*k)?.clone());
    }
    m.sort_keys();
    Some(format!("k:{}", Value::Object(m)))
}

fn value_element(v: &Value) -> String {
    format!("v:{v}")
}

fn field_of(at: &[String]) -> &str {
    at.last()
        .and_then(|e| e.strip_prefix("f:"))
        .unwrap_or_default()
}

/// The fields an apply configuration sets (structured-merge-diff's ToFieldSet): leaves,
/// empty objects, atomic lists, and each keyed list item.
fn config_set(v: &Value, at: &mut Path, w: Walk, out: &mut FieldSet) -> Result<(), ApiError> {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, c) in m {
                at.push(format!("f:{k}"));
                config_set(c, at, w, out)?;
                at.pop();
            }
        }
        Value::Array(a) if !a.is_empty() => match w.list(field_of(at), at)? {
            ListKind::Map(keys) => {
                for item in a {
                    let Some(k) = key_element(item, keys) else {
                        return Err(ApiError::bad_request(format!(
                            "{}: an item lacks the key field(s) {}",
                            path_string(at),
                            keys.join(",")
                        )));
                    };
                    at.push(k);
                    out.insert(at.clone());
                    config_set(item, at, w, out)?;
                    at.pop();
                }
            }
            ListKind::Set => {
                for item in a {
                    at.push(value_element(item));
                    out.insert(at.clone());
                    at.pop();
                }
            }
            ListKind::Atomic => out.insert(at.clone()),
        },
        _ => {
            if !at.is_empty() {
                out.insert(at.clone());
            }
        }
    }
    Ok(())
}

/// Every path of `v` at `at` as a comparison reports an added or removed value: the value
/// itself unless it is a struct, and everything below it.
fn all_paths(v: &Value, at: &mut Path, w: Walk, out: &mut FieldSet) {
    let field = field_of(at).to_string();
    match v {
        Value::Object(m) if !m.is_empty() => {
            let item = at.last().is_some_and(|e| e.starts_with("k:"));
            if item || w.map_like(&field) {
                out.insert(at.clone());
            }
            for (k, c) in m {
                at.push(format!("f:{k}"));
                all_paths(c, at, w, out);
                at.pop();
            }
        }
        Value::Array(a) if !a.is_empty() => {
            out.insert(at.clone());
            match list_kind(&field) {
                Some(ListKind::Map(keys)) if a.iter().all(|i| key_element(i, keys).is_some()) => {
                    for item in a {
                        if let Some(k) = key_element(item, keys) {
                            at.push(k);
                            all_paths(item, at, w, out);
                            at.pop();
                        }
                    }
                }
                Some(ListKind::Set) => {
                    for item in a {
                        at.push(value_element(item));
                        out.insert(at.clone());
                        at.pop();
                    }
                }
                _ => {}
            }
        }
        _ => {
            if !at.is_empty() {
                out.insert(at.clone());
            }
        }
    }
}

/// What changed from `old` to `new` (structured-merge-diff's Compare).
#[derive(Debug, Default)]
struct Comparison {
    added: FieldSet,
    modified: FieldSet,
    removed: FieldSet,
}

fn compare(old: Option<&Value>, new: Option<&Value>, at: &mut Path, w: Walk, c: &mut Comparison) {
    match (old, new) {
        (None, None) => {}
        (Some(o), None) => all_paths(o, at, w, &mut c.removed),
        (None, Some(n)) => all_paths(n, at, w, &mut c.added),
        (Some(Value::Object(om)), Some(Value::Object(nm))) if !om.is_empty() || !nm.is_empty() => {
            if om.is_empty() || nm.is_empty() {
                // An empty object (a leaf) became a filled one, or the reverse.
                c.modified.insert(at.clone());
            }
            let keys: BTreeSet<&String> = om.keys().chain(nm.keys()).collect();
            for k in keys {
                at.push(format!("f:{k}"));
                compare(om.get(k), nm.get(k), at, w, c);
                at.pop();
            }
        }
        (Some(Value::Array(oa)), Some(Value::Array(na))) if oa != na => {
            let field = field_of(at).to_string();
            match list_kind(&field) {
                Some(ListKind::Map(keys))
                    if oa
                        .iter()
                        .chain(na.iter())
                        .all(|i| key_element(i, keys).is_some()) =>
                {
                    let index = |a: &Vec<Value>| -> BTreeMap<String, Value> {
                        a.iter()
                            .filter_map(|i| key_element(i, keys).map(|k| (k, i.clone())))
                            .collect()
                    };
                    let (oi, ni) = (index(oa), index(na));
                    let keys: BTreeSet<&String> = oi.keys().chain(ni.keys()).collect();
                    for k in keys {
                        at.push(k.clone());
                        compare(oi.get(k), ni.get(k), at, w, c);
                        at.pop();
                    }
                }
                Some(ListKind::Set) => {
                    for v in oa.iter().filter(|v| !na.contains(v)) {
                        at.push(value_element(v));
                        c.removed.insert(at.clone());
                        at.pop();
                    }
                    for v in na.iter().filter(|v| !oa.contains(v)) {
                        at.push(value_element(v));
                        c.added.insert(at.clone());
                        at.pop();
                    }
                }
                _ => c.modified.insert(at.clone()),
            }
        }
        (Some(o), Some(n)) => {
            if o != n {
                c.modified.insert(at.clone());
            }
        }
    }
}

/// Merge an apply configuration into the live object (structured-merge-diff's Merge):
/// objects field by field, keyed lists item by item, sets as a union, the rest replaced.
fn merge(live: &mut Value, cfg: &Value, at: &mut Path, w: Walk) -> Result<(), ApiError> {
    match (live, cfg) {
        (Value::Object(l), Value::Object(c)) => {
            for (k, cv) in c {
                at.push(format!("f:{k}"));
                match l.get_mut(k) {
                    Some(lv) => merge(lv, cv, at, w)?,
                    None => {
                        l.insert(k.clone(), cv.clone());
                    }
                }
                at.pop();
            }
        }
        (Value::Array(l), Value::Array(c)) => match w.list(field_of(at), at)? {
            ListKind::Map(keys) => {
                for item in c {
                    let k = key_element(item, keys);
                    let pos = l
                        .iter()
                        .position(|x| k.is_some() && key_element(x, keys) == k);
                    match pos {
                        Some(i) => {
                            at.push(k.unwrap_or_default());
                            merge(&mut l[i], item, at, w)?;
                            at.pop();
                        }
                        None => l.push(item.clone()),
                    }
                }
            }
            ListKind::Set => {
                for item in c {
                    if !l.contains(item) {
                        l.push(item.clone());
                    }
                }
            }
            ListKind::Atomic => *l = c.clone(),
        },
        (l, c) => *l = c.clone(),
    }
    Ok(())
}

/// Remove the value at `p` from `obj`; a map left empty by it goes too (as the API types
/// omit empty maps).
fn remove_path(obj: &mut Value, p: &[String]) {
    let Some((last, parent)) = p.split_last() else {
        return;
    };
    let mut cur = &mut *obj;
    for e in parent {
        let next = match (cur, e) {
            (Value::Object(m), e) if e.starts_with("f:") => m.get_mut(&e[2..]),
            (Value::Array(a), e) => find_item(a, e).and_then(move |i| a.get_mut(i)),
            _ => None,
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    match cur {
        Value::Object(m) => {
            if let Some(f) = last.strip_prefix("f:") {
                m.remove(f);
            }
        }
        Value::Array(a) => {
            if let Some(i) = find_item(a, last) {
                a.remove(i);
            }
        }
        _ => {}
    }
    let emptied = match obj.pointer(&pointer_of(parent)) {
        Some(Value::Object(m)) => m.is_empty() && is_map_field(field_of(parent)),
        _ => false,
    };
    if emptied {
        remove_path(obj, parent);
    }
}

fn pointer_of(p: &[String]) -> String {
    // Only used for field-only paths (maps), so each element is `f:NAME`.
    p.iter()
        .map(|e| {
            format!(
                "/{}",
                e.trim_start_matches("f:")
                    .replace('~', "~0")
                    .replace('/', "~1")
            )
        })
        .collect()
}

fn find_item(a: &[Value], e: &str) -> Option<usize> {
    if let Some(k) = e.strip_prefix("k:") {
        let want: Map<String, Value> = serde_json::from_str(k).ok()?;
        a.iter()
            .position(|x| want.iter().all(|(f, v)| x.get(f) == Some(v)))
    } else if let Some(v) = e.strip_prefix("v:") {
        let want: Value = serde_json::from_str(v).ok()?;
        a.iter().position(|x| *x == want)
    } else {
        e.strip_prefix("i:").and_then(|i| i.parse().ok())
    }
}

/// One `metadata.managedFields` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    pub api_version: String,
    pub time: Option<String>,
    /// `""` for the main resource, `status` for the status subresource.
    pub subresource: String,
    pub fields: FieldSet,
}

impl Entry {
    /// The real server's manager identity: an applier is the same manager whatever
    /// version it applies with.
    fn same_as(&self, manager: &str, operation: &str, api_version: &str, sub: &str) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource == sub
            && (operation == "Apply" || self.api_version == api_version)
    }

    /// How the real server prints a manager in a conflict.
    fn printed(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }

    fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("manager".into(), json!(self.manager));
        m.insert("operation".into(), json!(self.operation));
        m.insert("apiVersion".into(), json!(self.api_version));
        if let Some(t) = &self.time {
            m.insert("time".into(), json!(t));
        }
        m.insert("fieldsType".into(), json!("FieldsV1"));
        m.insert("fieldsV1".into(), self.fields.to_json());
        if !self.subresource.is_empty() {
            m.insert("subresource".into(), json!(self.subresource));
        }
        Value::Object(m)
    }

    fn from_json(v: &Value) -> Result<Entry, String> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let operation = s("operation").unwrap_or_default();
        if operation != "Apply" && operation != "Update" {
            return Err(format!(
                "managedFields: operation {operation:?} (Apply or Update)"
            ));
        }
        if let Some(t) = s("fieldsType").filter(|t| t != "FieldsV1") {
            return Err(format!("managedFields: fieldsType {t:?} (FieldsV1)"));
        }
        Ok(Entry {
            manager: s("manager").unwrap_or_default(),
            operation,
            api_version: s("apiVersion").unwrap_or_default(),
            time: s("time"),
            subresource: s("subresource").unwrap_or_default(),
            fields: FieldSet::from_json(v.get("fieldsV1").unwrap_or(&json!({})))?,
        })
    }
}

fn decode(obj: Option<&Value>) -> Result<Vec<Entry>, String> {
    match obj.and_then(|o| o.pointer("/metadata/managedFields")) {
        Some(Value::Array(a)) => a.iter().map(Entry::from_json).collect(),
        Some(Value::Null) | None => Ok(Vec::new()),
        Some(_) => Err("managedFields: not a list".into()),
    }
}

/// Store `entries` in `obj` in the real server's order (Apply before Update, then oldest
/// first, then by manager).
fn encode(obj: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.fields.is_empty());
    entries.sort_by(|a, b| {
        (
            &a.operation,
            a.time.is_some(),
            &a.time,
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                &b.operation,
                b.time.is_some(),
                &b.time,
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    if let Some(Value::Object(m)) = obj.get_mut("metadata") {
        if entries.is_empty() {
            m.remove("managedFields");
        } else {
            m.insert(
                "managedFields".into(),
                Value::Array(entries.iter().map(Entry::to_json).collect()),
            );
        }
    }
}

fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The fields no manager owns (the server sets them) and, per subresource, the part of the
/// object a write may not change (the main resource of a kind with a status subresource
/// keeps its status; a status write changes only the status).
fn owned_part(res: &ResourceType, sub: Sub, set: &mut FieldSet) {
    const SERVER_SET: [&str; 8] = [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "generation",
        "selfLink",
        "managedFields",
    ];
    set.retain(|p| {
        let Some(top) = p.first().map(String::as_str) else {
            return false;
        };
        if top == "f:apiVersion" || top == "f:kind" {
            return false;
        }
        if top == "f:metadata" {
            let Some(second) = p.get(1) else {
                return false;
            };
            if SERVER_SET.iter().any(|f| second == &format!("f:{f}")) {
                return false;
            }
        }
        match sub {
            Sub::Status => top == "f:status",
            Sub::Main => !(res.status && top == "f:status"),
        }
    });
}

fn sub_name(sub: Sub) -> &'static str {
    match sub {
        Sub::Main => "",
        Sub::Status => "status",
    }
}

fn walk_of(res: &ResourceType, strict_lists: bool) -> Walk {
    Walk {
        strict_lists,
        custom: res.custom,
    }
}

fn changes(res: &ResourceType, sub: Sub, old: Option<&Value>, new: &Value) -> Comparison {
    let w = walk_of(res, false);
    let mut c = Comparison::default();
    compare(
        Some(old.unwrap_or(&json!({}))),
        Some(new),
        &mut Vec::new(),
        w,
        &mut c,
    );
    owned_part(res, sub, &mut c.added);
    owned_part(res, sub, &mut c.modified);
    owned_part(res, sub, &mut c.removed);
    c
}

fn undecodable(what: String) -> ApiError {
    ApiError::not_simulated(501, &format!("stored {what}"))
}

/// An Update (create, replace, or a patch that is not an apply) by `manager`: `new` gets
/// its managedFields. A body carrying managedFields of its own sets them (kubectl's upgrade
/// from client-side apply writes them so); otherwise the live object's are kept.
pub fn track_update(
    res: &ResourceType,
    sub: Sub,
    live: Option<&Value>,
    new: &mut Value,
    manager: &str,
) -> Result<(), ApiError> {
    let given = decode(Some(new)).ok().filter(|e| !e.is_empty());
    let mut entries = match given {
        Some(e) => e,
        None => decode(live).map_err(undecodable)?,
    };
    let api_version = res.api_version();
    let c = changes(res, sub, live, new);
    let took = c.added.union(&c.modified);
    let sub = sub_name(sub);
    for e in entries.iter_mut() {
        e.fields = e.fields.difference(&took).difference(&c.removed);
    }
    if !took.is_empty() {
        match entries
            .iter_mut()
            .find(|e| e.same_as(manager, "Update", &api_version, sub))
        {
            Some(e) => {
                e.fields = e.fields.union(&took);
                e.time = Some(now());
            }
            None => entries.push(Entry {
                manager: manager.to_string(),
                operation: "Update".into(),
                api_version,
                time: Some(now()),
                subresource: sub.to_string(),
                fields: took,
            }),
        }
    }
    encode(new, entries);
    Ok(())
}

/// Take nulls out of an apply configuration's metadata (`creationTimestamp: null`, as
/// `kubectl create --dry-run -o yaml` writes it); a null elsewhere is refused by name.
fn without_nulls(v: &Value, at: &mut Path, strict: bool) -> Result<Value, ApiError> {
    Ok(match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, c) in m {
                at.push(format!("f:{k}"));
                if c.is_null() {
                    let in_meta = at.first().map(String::as_str) == Some("f:metadata");
                    if strict && !in_meta {
                        return Err(ApiError::not_simulated(
                            501,
                            &format!("a null in an apply configuration (`{}`)", path_string(at)),
                        ));
                    }
                } else {
                    out.insert(k.clone(), without_nulls(c, at, strict)?);
                }
                at.pop();
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(
            a.iter()
                .map(|x| without_nulls(x, at, strict))
                .collect::<Result<_, _>>()?,
        ),
        other => other.clone(),
    })
}

/// What an apply is.
#[derive(Debug, Clone, Copy)]
pub struct ApplyOpts<'a> {
    pub manager: &'a str,
    pub force: bool,
    /// An operator's apply (a list of unknown type fails); the simulation's own are lenient.
    pub strict_lists: bool,
}

/// A server-side apply of `config` by `opts.manager` onto `live` (`None`: the object is
/// created from it). Returns the object to store, its managedFields set; a conflict is the
/// real server's 409.
pub fn track_apply(
    res: &ResourceType,
    sub: Sub,
    live: Option<&Value>,
    config: &Value,
    opts: ApplyOpts<'_>,
) -> Result<Value, ApiError> {
    let w = walk_of(res, opts.strict_lists);
    let mut cfg = without_nulls(config, &mut Vec::new(), opts.strict_lists)?;
    if let Value::Object(m) = &mut cfg {
        match sub {
            // The main resource ignores status where status is a subresource.
            Sub::Main if res.status => {
                m.remove("status");
            }
            Sub::Main => {}
            Sub::Status => m.retain(|k, _| k == "status" || k == "apiVersion" || k == "kind"),
        }
    }
    let mut cfg_set = FieldSet::default();
    config_set(&cfg, &mut Vec::new(), w, &mut cfg_set)?;
    owned_part(res, sub, &mut cfg_set);
    let base = live.cloned().unwrap_or_else(|| json!({}));
    let mut entries = decode(live).map_err(undecodable)?;
    let api_version = res.api_version();
    let subn = sub_name(sub);
    let mine = |e: &Entry| e.same_as(opts.manager, "Apply", &api_version, subn);
    let last = entries
        .iter()
        .find(|e| mine(e))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let others = entries
        .iter()
        .filter(|e| !mine(e))
        .fold(FieldSet::default(), |acc, e| acc.union(&e.fields));

    let attempt =
        |force: bool, entries: &mut Vec<Entry>| -> Result<(Value, bool), Vec<(Entry, FieldSet)>> {
            let mut new = base.clone();
            // Merge errors (unknown lists) were found by config_set already.
            let _ = merge(&mut new, &cfg, &mut Vec::new(), w);
            for p in last.difference(&cfg_set).iter() {
                if !others.covers(p) {
                    remove_path(&mut new, p);
                }
            }
            let c = changes(res, sub, live, &new);
            let changed = c.added.union(&c.modified);
            let conflicts: Vec<(Entry, FieldSet)> = entries
                .iter()
                .filter(|e| !mine(e))
                .map(|e| (e.clone(), e.fields.intersection(&changed)))
                .filter(|(_, s)| !s.is_empty())
                .collect();
            if !force && !conflicts.is_empty() {
                return Err(conflicts);
            }
            for e in entries.iter_mut().filter(|e| !mine(e)) {
                e.fields = e.fields.difference(&changed).difference(&c.removed);
            }
            let moved = base.get("metadata").map(strip_meta) != new.get("metadata").map(strip_meta)
                || without_meta(&base) != without_meta(&new);
            Ok((new, moved))
        };

    let mut trial = entries.clone();
    let (mut new, moved) = match attempt(opts.force, &mut trial) {
        Ok(r) => {
            entries = trial;
            r
        }
        Err(conflicts) => {
            let forgiven = opts.manager == "kubectl"
                && forgiven_by_last_applied(res, live)
                    .is_some_and(|ok| conflicts.iter().all(|(_, s)| s.difference(&ok).is_empty()));
            if !forgiven {
                return Err(conflict_error(&conflicts));
            }
            match attempt(true, &mut entries) {
                Ok(r) => r,
                Err(c) => return Err(conflict_error(&c)),
            }
        }
    };
    match entries.iter_mut().find(|e| mine(e)) {
        Some(e) => {
            e.fields = cfg_set;
            if moved {
                e.time = Some(now());
            }
        }
        None => entries.push(Entry {
            manager: opts.manager.to_string(),
            operation: "Apply".into(),
            api_version: api_version.clone(),
            time: moved.then(now),
            subresource: subn.to_string(),
            fields: cfg_set,
        }),
    }
    // The server keeps client-side apply's annotation in step with kubectl's applies, so
    // that a later client-side apply diffs against what was applied last.
    if opts.manager == "kubectl" && sub == Sub::Main {
        if let Some(Value::Object(a)) = new.pointer_mut("/metadata/annotations") {
            if a.contains_key(LAST_APPLIED) {
                a.insert(LAST_APPLIED.into(), json!(last_applied_of(config)));
            }
        }
    }
    encode(&mut new, entries);
    Ok(new)
}

fn strip_meta(m: &Value) -> Value {
    let mut m = m.clone();
    if let Value::Object(o) = &mut m {
        o.remove("managedFields");
        o.remove("resourceVersion");
    }
    m
}

fn without_meta(v: &Value) -> Value {
    let mut v = v.clone();
    if let Value::Object(o) = &mut v {
        o.remove("metadata");
    }
    v
}

/// The annotation's value as the real server writes it: the configuration without the
/// annotation, as compact JSON with sorted keys and a newline.
fn last_applied_of(config: &Value) -> String {
    let mut c = config.clone();
    if let Some(Value::Object(a)) = c.pointer_mut("/metadata/annotations") {
        a.remove(LAST_APPLIED);
    }
    format!("{}\n", sorted(&c))
}

fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out: Map<String, Value> =
                m.iter().map(|(k, v)| (k.clone(), sorted(v))).collect();
            out.sort_keys();
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// The fields of the live object's last-applied annotation that still hold the values it
/// records: conflicts on them are the client-side apply's own, forgiven for `kubectl`.
fn forgiven_by_last_applied(res: &ResourceType, live: Option<&Value>) -> Option<FieldSet> {
    let live = live?;
    let text = live
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())?;
    let last: Value = serde_json::from_str(text).ok()?;
    let w = walk_of(res, false);
    let mut set = FieldSet::default();
    config_set(&last, &mut Vec::new(), w, &mut set).ok()?;
    let mut c = Comparison::default();
    compare(Some(&last), Some(live), &mut Vec::new(), w, &mut c);
    let stale = c.modified.union(&c.added).union(&c.removed);
    Some(set.difference(&stale))
}

/// The real server's apply conflict: 409 Conflict, one cause per field.
fn conflict_error(conflicts: &[(Entry, FieldSet)]) -> ApiError {
    let mut by_manager: Vec<(String, String, Vec<String>)> = conflicts
        .iter()
        .map(|(e, s)| {
            let ident =
                serde_json::to_string(&json!({"manager": e.manager, "operation": e.operation,
                "apiVersion": if e.operation == "Update" { e.api_version.as_str() } else { "" },
                "subresource": e.subresource}))
                .unwrap_or_default();
            (
                ident,
                e.printed(),
                s.iter().map(|p| path_string(p)).collect(),
            )
        })
        .collect();
    by_manager.sort();
    let causes: Vec<Cause> = by_manager
        .iter()
        .flat_map(|(_, who, paths)| {
            paths.iter().map(move |p| Cause {
                reason: "FieldManagerConflict",
                message: format!("conflict with {who}"),
                field: p.clone(),
            })
        })
        .collect();
    let message = if causes.len() == 1 {
        format!(
            "Apply failed with 1 conflict: {}: {}",
            causes[0].message, causes[0].field
        )
    } else {
        let mut lines = Vec::new();
        for (_, who, paths) in &by_manager {
            lines.push(format!("conflicts with {who}:"));
            lines.extend(paths.iter().map(|p| format!("- {p}")));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            causes.len(),
            lines.join("\n")
        )
    };
    ApiError {
        code: 409,
        reason: "Conflict",
        message,
        details: Some(Box::new(Details {
            name: String::new(),
            group: String::new(),
            kind: String::new(),
            causes,
        })),
    }
}

/// The manager a write without `fieldManager` gets: its User-Agent up to the first `/`,
/// printable characters only, at most 128 bytes (the real server's rule).
pub fn manager_from_user_agent(ua: &str) -> String {
    let mut out = String::new();
    for ch in ua.split('/').next().unwrap_or("").chars() {
        if ch.is_control() {
            continue;
        }
        if out.len() + ch.len_utf8() > 128 {
            break;
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::resources::by_kind;

    fn cm() -> &'static ResourceType {
        by_kind("v1", "ConfigMap").expect("configmaps served")
    }

    fn managers(obj: &Value) -> Vec<(String, String)> {
        decode(Some(obj))
            .expect("decodes")
            .into_iter()
            .map(|e| (e.manager, e.operation))
            .collect()
    }

    fn opts(manager: &str, force: bool) -> ApplyOpts<'_> {
        ApplyOpts {
            manager,
            force,
            strict_lists: true,
        }
    }

    #[test]
    fn fields_v1_round_trips_with_dot_for_members_with_children() {
        let v = json!({"f:data": {".": {}, "f:a": {}}, "f:spec": {"f:containers":
            {"k:{\"name\":\"agent\"}": {".": {}, "f:image": {}, "f:name": {}}}}});
        let s = FieldSet::from_json(&v).expect("decodes");
        assert!(s.contains(&["f:data".to_string()]));
        assert_eq!(s.to_json(), v);
        assert_eq!(
            path_string(&[
                "f:spec".into(),
                "f:containers".into(),
                "k:{\"name\":\"agent\"}".into(),
                "f:image".into()
            ]),
            ".spec.containers[name=\"agent\"].image"
        );
        assert!(FieldSet::from_json(&json!({"x:y": {}})).is_err());
    }

    #[test]
    fn update_owns_what_it_sets_and_takes_it_from_others() {
        let mut created = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "d"}, "data": {"a": "1", "b": "2"}});
        track_update(cm(), Sub::Main, None, &mut created, "kubectl-create").expect("create");
        assert_eq!(
            created.pointer("/metadata/managedFields/0/fieldsV1"),
            Some(&json!({"f:data": {".": {}, "f:a": {}, "f:b": {}}}))
        );
        let mut edited = created.clone();
        edited["data"]["a"] = json!("9");
        track_update(cm(), Sub::Main, Some(&created), &mut edited, "kubectl-edit").expect("edit");
        assert_eq!(
            managers(&edited),
            vec![
                ("kubectl-create".to_string(), "Update".to_string()),
                ("kubectl-edit".to_string(), "Update".to_string())
            ]
        );
        let e = decode(Some(&edited)).expect("decodes");
        assert!(!e[0].fields.contains(&["f:data".into(), "f:a".into()]));
        assert!(e[1].fields.contains(&["f:data".into(), "f:a".into()]));
    }

    #[test]
    fn apply_conflicts_co_owns_forces_and_prunes() {
        let mut live = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "d"}, "data": {"a": "1"}});
        track_update(cm(), Sub::Main, None, &mut live, "kubectl-create").expect("create");
        let cfg = |a: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "d"}, "data": {"a": a, "b": "x"}})
        };
        // Equal value: co-owned, no conflict.
        let same = track_apply(cm(), Sub::Main, Some(&live), &cfg("1"), opts("me", false))
            .expect("co-own");
        assert_eq!(managers(&same).len(), 2);
        // A different value another manager owns: the real server's conflict.
        let e = track_apply(cm(), Sub::Main, Some(&same), &cfg("5"), opts("me", false))
            .expect_err("conflict");
        assert_eq!(e.code, 409);
        assert_eq!(
            e.message,
            "Apply failed with 1 conflict: conflict with \"kubectl-create\" using v1: .data.a"
        );
        let forced =
            track_apply(cm(), Sub::Main, Some(&same), &cfg("5"), opts("me", true)).expect("forced");
        assert_eq!(forced["data"]["a"], "5");
        // The creator keeps the map itself (`.data`), not the value it lost.
        let e = decode(Some(&forced)).expect("decodes");
        assert_eq!(e.len(), 2);
        assert_eq!(e[1].fields.to_json(), json!({"f:data": {}}));
        // Stopping to apply `b`, owned by nobody else: it goes.
        let dropped = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "d"}, "data": {"a": "5"}});
        let pruned = track_apply(cm(), Sub::Main, Some(&forced), &dropped, opts("me", false))
            .expect("prune");
        assert_eq!(pruned["data"], json!({"a": "5"}));
    }

    #[test]
    fn unknown_list_types_fail_loudly_for_an_operator() {
        let pod = by_kind("v1", "Pod").expect("pods served");
        let cfg = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"hostAliases": [{"ip": "1.2.3.4"}]}});
        let e = track_apply(pod, Sub::Main, None, &cfg, opts("me", false)).expect_err("501");
        assert_eq!(e.code, 501);
        assert!(e.message.contains(".spec.hostAliases"), "{}", e.message);
    }

    #[test]
    fn manager_from_user_agent_is_the_prefix() {
        assert_eq!(
            manager_from_user_agent("kubectl/v1.34.4 (linux/amd64) kubernetes/abc"),
            "kubectl"
        );
        assert_eq!(manager_from_user_agent(""), "");
    }
}
