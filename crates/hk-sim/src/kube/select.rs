//! Label and field selectors, parsed and matched as the real API server does.
//!
//! Owns: parsing `labelSelector` (`a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`,
//! `!a`, comma = AND) and `fieldSelector` (`f=v`, `f==v`, `f!=v` over the fields the resource
//! supports; an unsupported field is the real server's 400 `field label not supported`),
//! and matching them against an object's JSON.
//! Must not: know about HTTP or the store.

use serde_json::Value;

use super::resources::ResourceType;

#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelOp {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    reqs: Vec<(String, LabelOp)>,
}

/// Split at commas that are not inside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

/// A selector the API server would answer 400 to, in its words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("unable to parse requirement: `{requirement}`")]
    Requirement { requirement: String },
    #[error("unable to parse requirement: `{requirement}`: expected (v1,v2,...)")]
    SetValues { requirement: String },
    #[error("invalid selector: '{selector}'; can't understand '{part}'")]
    FieldSyntax { selector: String, part: String },
    #[error("field label not supported: {label}")]
    FieldLabel { label: String },
}

fn set_values(rest: &str, whole: &str) -> Result<Vec<String>, SelectorError> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| SelectorError::SetValues {
            requirement: whole.to_string(),
        })?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

fn parse_requirement(raw: &str) -> Result<(String, LabelOp), SelectorError> {
    let r = raw.trim();
    let bad = || SelectorError::Requirement {
        requirement: r.to_string(),
    };
    if let Some(key) = r.strip_prefix('!') {
        let key = key.trim();
        return if valid_key(key) {
            Ok((key.to_string(), LabelOp::DoesNotExist))
        } else {
            Err(bad())
        };
    }
    for (sym, make) in [
        ("!=", LabelOp::NotEq as fn(String) -> LabelOp),
        ("==", LabelOp::Eq),
        ("=", LabelOp::Eq),
    ] {
        if let Some((k, v)) = r.split_once(sym) {
            let k = k.trim();
            if !valid_key(k) {
                return Err(bad());
            }
            return Ok((k.to_string(), make(v.trim().to_string())));
        }
    }
    if let Some((k, rest)) = r.split_once(' ') {
        let rest = rest.trim_start();
        let k = k.trim();
        if let Some(vals) = rest.strip_prefix("notin") {
            return Ok((k.to_string(), LabelOp::NotIn(set_values(vals, r)?)));
        }
        if let Some(vals) = rest.strip_prefix("in") {
            return Ok((k.to_string(), LabelOp::In(set_values(vals, r)?)));
        }
        return Err(bad());
    }
    if valid_key(r) {
        Ok((r.to_string(), LabelOp::Exists))
    } else {
        Err(bad())
    }
}

impl LabelSelector {
    pub fn parse(s: &str) -> Result<LabelSelector, SelectorError> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(LabelSelector { reqs });
        }
        for part in split_top_level(s) {
            reqs.push(parse_requirement(part)?);
        }
        Ok(LabelSelector { reqs })
    }

    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// Whether the object's `metadata.labels` satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels");
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.reqs.iter().all(|(k, op)| match op {
            LabelOp::Eq(v) => get(k) == Some(v.as_str()),
            LabelOp::NotEq(v) => get(k) != Some(v.as_str()),
            LabelOp::In(vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelOp::NotIn(vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            LabelOp::Exists => get(k).is_some(),
            LabelOp::DoesNotExist => get(k).is_none(),
        })
    }
}

/// A parsed field selector over one resource's selectable fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    /// (path, default when absent, equal?, value)
    reqs: Vec<(&'static [&'static str], &'static str, bool, String)>,
}

impl FieldSelector {
    pub fn parse(s: &str, res: &ResourceType) -> Result<FieldSelector, SelectorError> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(FieldSelector { reqs });
        }
        for part in s.split(',') {
            let part = part.trim();
            let (label, eq, value) = if let Some((l, v)) = part.split_once("!=") {
                (l, false, v)
            } else if let Some((l, v)) = part.split_once("==") {
                (l, true, v)
            } else if let Some((l, v)) = part.split_once('=') {
                (l, true, v)
            } else {
                return Err(SelectorError::FieldSyntax {
                    selector: s.to_string(),
                    part: part.to_string(),
                });
            };
            let field = res
                .field(label.trim())
                .ok_or_else(|| SelectorError::FieldLabel {
                    label: label.trim().to_string(),
                })?;
            reqs.push((field.path, field.default, eq, value.trim().to_string()));
        }
        Ok(FieldSelector { reqs })
    }

    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.reqs.iter().all(|(path, default, eq, want)| {
            let mut at = Some(obj);
            for p in path.iter() {
                at = at.and_then(|v| v.get(*p));
            }
            let have = match at {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Bool(b)) => b.to_string(),
                Some(Value::Number(n)) => n.to_string(),
                _ => default.to_string(),
            };
            (have == *want) == *eq
        })
    }
}

/// Both selectors of a request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selectors {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Selectors {
    pub fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::resources::by_path;
    use serde_json::json;

    fn pod(labels: Value, node: Option<&str>) -> Value {
        let mut p = json!({"metadata": {"name": "p1", "namespace": "kube-system", "labels": labels},
            "spec": {}});
        if let Some(n) = node {
            p["spec"]["nodeName"] = json!(n);
        }
        p
    }

    #[test]
    fn label_selector_forms() {
        let p = pod(json!({"k8s-app": "cilium", "tier": "node"}), None);
        let yes = [
            "",
            "k8s-app=cilium",
            "k8s-app==cilium",
            "k8s-app=cilium,tier=node",
            "tier in (node, control)",
            "tier notin (control)",
            "absent notin (x)",
            "k8s-app",
            "!absent",
            "tier!=control",
            "absent!=x",
        ];
        for s in yes {
            let sel = LabelSelector::parse(s).expect(s);
            assert!(sel.matches(&p), "{s} should match");
        }
        let no = [
            "k8s-app=kube-vip",
            "k8s-app=cilium,tier=control",
            "tier in (control)",
            "absent in (x)",
            "absent",
            "!tier",
            "tier!=node",
        ];
        for s in no {
            let sel = LabelSelector::parse(s).expect(s);
            assert!(!sel.matches(&p), "{s} should not match");
        }
        assert!(LabelSelector::parse("a in b").is_err());
        assert!(LabelSelector::parse("!").is_err());
        assert!(LabelSelector::parse("a b").is_err());
    }

    #[test]
    fn field_selector_forms() {
        let pods = by_path("", "v1", "pods").expect("served");
        let p = pod(json!({}), Some("k3s-prod-1"));
        let m = |s: &str| FieldSelector::parse(s, pods).expect(s).matches(&p);
        assert!(m("spec.nodeName=k3s-prod-1"));
        assert!(m("metadata.name=p1,metadata.namespace=kube-system"));
        assert!(!m("spec.nodeName=k3s-prod-2"));
        assert!(m("spec.nodeName!=k3s-prod-2"));
        assert!(m("spec.hostNetwork=false"));
        assert!(m("status.phase="));
        let err = FieldSelector::parse("spec.foo=x", pods).expect_err("unsupported");
        assert_eq!(err.to_string(), "field label not supported: spec.foo");
        let cm = by_path("", "v1", "configmaps").expect("served");
        assert!(FieldSelector::parse("spec.nodeName=x", cm).is_err());
    }
}
