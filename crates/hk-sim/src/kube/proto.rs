//! The few Kubernetes protobuf request bodies the simulation understands, read into the JSON
//! the rest of the server works on: kubectl sends its access reviews and `create namespace`
//! as protobuf (`application/vnd.kubernetes.protobuf`).
//!
//! Owns: the envelope (`k8s\0` + `runtime.Unknown`), and the messages
//! SelfSubjectAccessReview, SelfSubjectRulesReview, Namespace and ConfigMap (its string
//! data), field by field as
//! k8s.io/api's generated.proto numbers them. A field the simulation does not model, set to
//! anything but its empty value, is refused by name: a body half understood is never taken
//! for the whole.
//! Must not: encode (answers are JSON, which every such client also accepts).

use prost::encoding::{decode_key, decode_varint, WireType};
use serde_json::{json, Map, Value};

/// What in a protobuf body the simulation could not read (the server answers 415 with it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    #[error("protobuf {what}: {source}")]
    Wire {
        what: &'static str,
        #[source]
        source: prost::DecodeError,
    },
    #[error("protobuf {what}: {source}")]
    Length {
        what: &'static str,
        #[source]
        source: std::num::TryFromIntError,
    },
    #[error("protobuf {what}: {why}")]
    Malformed {
        what: &'static str,
        why: &'static str,
    },
    /// A field the simulation does not model, set.
    #[error("the protobuf field {what}.{name}")]
    UnmodelledField {
        what: &'static str,
        name: &'static str,
    },
    #[error("the protobuf field {what} #{tag}")]
    UnknownField { what: &'static str, tag: u32 },
    #[error("protobuf {what} #{tag}: not UTF-8")]
    NotUtf8 {
        what: &'static str,
        tag: u32,
        #[source]
        source: std::string::FromUtf8Error,
    },
    #[error("protobuf {what} #{tag}: not a {expected}")]
    WrongType {
        what: &'static str,
        tag: u32,
        expected: &'static str,
    },
    #[error("a protobuf body without the k8s envelope")]
    NoEnvelope,
    #[error("a protobuf body without its TypeMeta")]
    NoTypeMeta,
    #[error("runtime.Unknown.raw: not bytes")]
    RawNotBytes,
    #[error("a protobuf {api_version} {kind}")]
    UnknownKind { api_version: String, kind: String },
}

/// One field's value on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed(u64),
}

/// A message's fields, in wire order.
struct Msg<'a> {
    what: &'static str,
    fields: Vec<(u32, Field<'a>)>,
}

fn parse<'a>(what: &'static str, mut buf: &'a [u8]) -> Result<Msg<'a>, ProtoError> {
    let wire = |source| ProtoError::Wire { what, source };
    let bad = |why| ProtoError::Malformed { what, why };
    let mut fields = Vec::new();
    while !buf.is_empty() {
        let (tag, wt) = decode_key(&mut buf).map_err(wire)?;
        let v = match wt {
            WireType::Varint => Field::Varint(decode_varint(&mut buf).map_err(wire)?),
            WireType::LengthDelimited => {
                let n = decode_varint(&mut buf).map_err(wire)?;
                let n = usize::try_from(n).map_err(|source| ProtoError::Length { what, source })?;
                if n > buf.len() {
                    return Err(bad("a length past the end of the body"));
                }
                let (head, rest) = buf.split_at(n);
                buf = rest;
                Field::Bytes(head)
            }
            WireType::SixtyFourBit | WireType::ThirtyTwoBit => {
                let n = if wt == WireType::SixtyFourBit { 8 } else { 4 };
                if n > buf.len() {
                    return Err(bad("a fixed-width value past the end of the body"));
                }
                let (head, rest) = buf.split_at(n);
                buf = rest;
                let mut b = [0u8; 8];
                b[..n].copy_from_slice(head);
                Field::Fixed(u64::from_le_bytes(b))
            }
            WireType::StartGroup | WireType::EndGroup => {
                return Err(bad("groups are not used by Kubernetes messages"))
            }
        };
        fields.push((tag, v));
    }
    Ok(Msg { what, fields })
}

fn is_empty(f: &Field<'_>) -> bool {
    match f {
        Field::Varint(v) | Field::Fixed(v) => *v == 0,
        Field::Bytes(b) => b.is_empty(),
    }
}

impl<'a> Msg<'a> {
    /// Refuse any field but `known`, and any of `ignored` that is not empty (Go's generated
    /// code writes every non-pointer field, set or not).
    fn only(&self, known: &[u32], ignored: &[(u32, &'static str)]) -> Result<(), ProtoError> {
        for (tag, v) in &self.fields {
            if known.contains(tag) {
                continue;
            }
            match ignored.iter().find(|(t, _)| t == tag) {
                Some(_) if is_empty(v) => {}
                Some((_, name)) => {
                    return Err(ProtoError::UnmodelledField {
                        what: self.what,
                        name,
                    });
                }
                None => {
                    return Err(ProtoError::UnknownField {
                        what: self.what,
                        tag: *tag,
                    })
                }
            }
        }
        Ok(())
    }

    fn last(&self, tag: u32) -> Option<Field<'a>> {
        self.fields
            .iter()
            .rev()
            .find(|(t, _)| *t == tag)
            .map(|f| f.1)
    }

    fn wrong_type(&self, tag: u32, expected: &'static str) -> ProtoError {
        ProtoError::WrongType {
            what: self.what,
            tag,
            expected,
        }
    }

    fn utf8(&self, tag: u32, b: &[u8]) -> Result<String, ProtoError> {
        String::from_utf8(b.to_vec()).map_err(|source| ProtoError::NotUtf8 {
            what: self.what,
            tag,
            source,
        })
    }

    fn string(&self, tag: u32) -> Result<Option<String>, ProtoError> {
        match self.last(tag) {
            None => Ok(None),
            Some(Field::Bytes(b)) => self.utf8(tag, b).map(Some),
            Some(_) => Err(self.wrong_type(tag, "string")),
        }
    }

    fn strings(&self, tag: u32) -> Result<Vec<String>, ProtoError> {
        self.fields
            .iter()
            .filter(|(t, _)| *t == tag)
            .map(|(_, f)| match f {
                Field::Bytes(b) => self.utf8(tag, b),
                _ => Err(self.wrong_type(tag, "string")),
            })
            .collect()
    }

    fn message(&self, what: &'static str, tag: u32) -> Result<Option<Msg<'a>>, ProtoError> {
        match self.last(tag) {
            None => Ok(None),
            Some(Field::Bytes(b)) => parse(what, b).map(Some),
            Some(_) => Err(self.wrong_type(tag, "message")),
        }
    }

    /// A `map<string, string>` field: repeated entries of {key = 1, value = 2}.
    fn string_map(&self, tag: u32) -> Result<Map<String, Value>, ProtoError> {
        let mut out = Map::new();
        for (t, f) in &self.fields {
            if *t != tag {
                continue;
            }
            let Field::Bytes(b) = f else {
                return Err(self.wrong_type(tag, "map entry"));
            };
            let e = parse("map entry", b)?;
            e.only(&[1, 2], &[])?;
            out.insert(
                e.string(1)?.unwrap_or_default(),
                json!(e.string(2)?.unwrap_or_default()),
            );
        }
        Ok(out)
    }
}

/// The object inside a protobuf body: (apiVersion, kind, its bytes).
fn envelope(body: &[u8]) -> Result<(String, String, &[u8]), ProtoError> {
    let rest = body.strip_prefix(b"k8s\0").ok_or(ProtoError::NoEnvelope)?;
    let unknown = parse("runtime.Unknown", rest)?;
    unknown.only(&[1, 2], &[(3, "contentEncoding"), (4, "contentType")])?;
    let tm = unknown
        .message("TypeMeta", 1)?
        .ok_or(ProtoError::NoTypeMeta)?;
    tm.only(&[1, 2], &[])?;
    let raw = match unknown.last(2) {
        Some(Field::Bytes(b)) => b,
        None => &[][..],
        Some(_) => return Err(ProtoError::RawNotBytes),
    };
    Ok((
        tm.string(1)?.unwrap_or_default(),
        tm.string(2)?.unwrap_or_default(),
        raw,
    ))
}

/// ObjectMeta (k8s.io/apimachinery generated.proto): what a create from kubectl carries.
/// Fields the server sets itself are taken when empty, refused when set.
fn object_meta(m: &Msg<'_>) -> Result<Value, ProtoError> {
    m.only(
        &[1, 2, 3, 11, 12],
        &[
            (4, "selfLink"),
            (5, "uid"),
            (6, "resourceVersion"),
            (7, "generation"),
            (8, "creationTimestamp"),
            (9, "deletionTimestamp"),
            (10, "deletionGracePeriodSeconds"),
            (13, "ownerReferences"),
            (14, "finalizers"),
            (17, "managedFields"),
        ],
    )?;
    let mut out = Map::new();
    for (tag, key) in [(1, "name"), (2, "generateName"), (3, "namespace")] {
        if let Some(v) = m.string(tag)?.filter(|v| !v.is_empty()) {
            out.insert(key.into(), json!(v));
        }
    }
    for (tag, key) in [(11, "labels"), (12, "annotations")] {
        let map = m.string_map(tag)?;
        if !map.is_empty() {
            out.insert(key.into(), Value::Object(map));
        }
    }
    Ok(Value::Object(out))
}

fn metadata(obj: &Msg<'_>) -> Result<Value, ProtoError> {
    match obj.message("ObjectMeta", 1)? {
        Some(m) => object_meta(&m),
        None => Ok(json!({})),
    }
}

/// A protobuf request body as the JSON object it encodes, for the kinds this module reads;
/// `Err` names what it could not read (the caller answers 415).
pub fn decode(body: &[u8]) -> Result<Value, ProtoError> {
    let (api_version, kind, raw) = envelope(body)?;
    match (api_version.as_str(), kind.as_str()) {
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => {
            let m = parse("SelfSubjectAccessReview", raw)?;
            // The status (#3) is the server's to fill; whatever the client sent is dropped.
            m.only(&[1, 2, 3], &[])?;
            let mut spec = Map::new();
            if let Some(s) = m.message("SelfSubjectAccessReviewSpec", 2)? {
                s.only(&[1, 2], &[])?;
                if let Some(r) = s.message("ResourceAttributes", 1)? {
                    r.only(
                        &[1, 2, 3, 4, 5, 6, 7],
                        &[(8, "fieldSelector"), (9, "labelSelector")],
                    )?;
                    let mut a = Map::new();
                    for (tag, key) in [
                        (1, "namespace"),
                        (2, "verb"),
                        (3, "group"),
                        (4, "version"),
                        (5, "resource"),
                        (6, "subresource"),
                        (7, "name"),
                    ] {
                        if let Some(v) = r.string(tag)?.filter(|v| !v.is_empty()) {
                            a.insert(key.into(), json!(v));
                        }
                    }
                    spec.insert("resourceAttributes".into(), Value::Object(a));
                }
                if let Some(n) = s.message("NonResourceAttributes", 2)? {
                    n.only(&[1, 2], &[])?;
                    spec.insert(
                        "nonResourceAttributes".into(),
                        json!({"path": n.string(1)?.unwrap_or_default(),
                            "verb": n.string(2)?.unwrap_or_default()}),
                    );
                }
            }
            Ok(
                json!({"apiVersion": api_version, "kind": kind, "metadata": metadata(&m)?,
                "spec": spec}),
            )
        }
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => {
            let m = parse("SelfSubjectRulesReview", raw)?;
            m.only(&[1, 2, 3], &[])?;
            let ns = match m.message("SelfSubjectRulesReviewSpec", 2)? {
                Some(s) => {
                    s.only(&[1], &[])?;
                    s.string(1)?.unwrap_or_default()
                }
                None => String::new(),
            };
            Ok(
                json!({"apiVersion": api_version, "kind": kind, "metadata": metadata(&m)?,
                "spec": {"namespace": ns}}),
            )
        }
        ("v1", "Namespace") => {
            let m = parse("Namespace", raw)?;
            // A create's status (#3) is reset by the server (phase Active).
            m.only(&[1, 2, 3], &[])?;
            let mut out = json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": metadata(&m)?});
            if let Some(s) = m.message("NamespaceSpec", 2)? {
                s.only(&[1], &[])?;
                let f = s.strings(1)?;
                if !f.is_empty() {
                    out["spec"] = json!({"finalizers": f});
                }
            }
            Ok(out)
        }
        ("v1", "ConfigMap") => {
            // `kubectl create configmap --from-literal` sends its ConfigMap as protobuf.
            let m = parse("ConfigMap", raw)?;
            m.only(&[1, 2], &[(3, "binaryData"), (4, "immutable")])?;
            let mut out = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": metadata(&m)?});
            let data = m.string_map(2)?;
            if !data.is_empty() {
                out["data"] = Value::Object(data);
            }
            Ok(out)
        }
        _ => Err(ProtoError::UnknownKind { api_version, kind }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(tag: u32, wt: u8) -> Vec<u8> {
        let mut b = Vec::new();
        prost::encoding::encode_varint(u64::from(tag << 3 | u32::from(wt)), &mut b);
        b
    }

    fn bytes(tag: u32, v: &[u8]) -> Vec<u8> {
        let mut b = key(tag, 2);
        prost::encoding::encode_varint(v.len() as u64, &mut b);
        b.extend_from_slice(v);
        b
    }

    fn wrap(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let tm = [bytes(1, api_version.as_bytes()), bytes(2, kind.as_bytes())].concat();
        let unknown = [bytes(1, &tm), bytes(2, raw), bytes(3, b""), bytes(4, b"")].concat();
        [b"k8s\0".to_vec(), unknown].concat()
    }

    #[test]
    fn an_access_review_as_kubectl_sends_it() {
        // metadata with its always-written empty fields, the spec, an empty status.
        let meta = [
            bytes(1, b""),
            bytes(2, b""),
            bytes(3, b""),
            bytes(4, b""),
            bytes(5, b""),
            bytes(6, b""),
            [key(7, 0), vec![0]].concat(),
            bytes(8, b""),
        ]
        .concat();
        let attrs = [
            bytes(1, b"kube-system"),
            bytes(2, b"delete"),
            bytes(3, b""),
            bytes(4, b""),
            bytes(5, b"pods"),
            bytes(6, b""),
            bytes(7, b""),
        ]
        .concat();
        let spec = bytes(1, &attrs);
        let status = [[key(1, 0), vec![0]].concat(), bytes(2, b"")].concat();
        let raw = [bytes(1, &meta), bytes(2, &spec), bytes(3, &status)].concat();
        let v = decode(&wrap(
            "authorization.k8s.io/v1",
            "SelfSubjectAccessReview",
            &raw,
        ))
        .expect("decodes");
        assert_eq!(
            v["spec"]["resourceAttributes"],
            json!({"namespace": "kube-system", "verb": "delete", "resource": "pods"})
        );
    }

    #[test]
    fn a_configmap_with_its_data() {
        let entry = [bytes(1, b"a"), bytes(2, b"1")].concat();
        let meta = [bytes(1, b"other"), bytes(3, b"scratch")].concat();
        let raw = [bytes(1, &meta), bytes(2, &entry)].concat();
        let v = decode(&wrap("v1", "ConfigMap", &raw)).expect("decodes");
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "other", "namespace": "scratch"}, "data": {"a": "1"}})
        );
        let bin = [bytes(1, &meta), bytes(3, &entry)].concat();
        let e = decode(&wrap("v1", "ConfigMap", &bin)).expect_err("binaryData refused");
        assert!(e.to_string().contains("binaryData"), "{e}");
    }

    #[test]
    fn a_namespace_and_what_is_refused() {
        let labels = bytes(11, &[bytes(1, b"team"), bytes(2, b"a")].concat());
        let meta = [bytes(1, b"rehearsal"), bytes(2, b""), labels].concat();
        let raw = bytes(1, &meta);
        let v = decode(&wrap("v1", "Namespace", &raw)).expect("decodes");
        assert_eq!(
            v["metadata"],
            json!({"name": "rehearsal", "labels": {"team": "a"}})
        );
        // A finalizer in metadata is not modelled: refused by name, not dropped.
        let meta = [bytes(1, b"x"), bytes(14, b"example.com/f")].concat();
        let e = decode(&wrap("v1", "Namespace", &bytes(1, &meta))).expect_err("refused");
        assert_eq!(e.to_string(), "the protobuf field ObjectMeta.finalizers");
        let e = decode(&wrap("apps/v1", "DaemonSet", b"")).expect_err("refused");
        assert_eq!(e.to_string(), "a protobuf apps/v1 DaemonSet");
        assert!(decode(b"{}").is_err());
        let truncated = [b"k8s\0".to_vec(), vec![0x0a, 0x7f]].concat();
        assert!(decode(&truncated).is_err());
    }
}
