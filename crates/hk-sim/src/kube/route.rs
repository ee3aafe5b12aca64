//! Request paths and query strings, as the API server's URL scheme lays them out.
//!
//! Owns: turning `/api/v1/namespaces/NS/pods/NAME/status` (and the `/apis/GROUP/VERSION/...`,
//! discovery and `/version` forms) into a [`Route`], and a query string into [`Query`]
//! (percent-decoded).
//! Must not: serve anything (that is `server`).

use super::resources::{self, ResourceType};

/// A request for objects of one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub res: &'static ResourceType,
    /// The namespace in the path (namespaced resources only; `None` = every namespace).
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// Only `status` is served.
    pub status: bool,
}

/// What a path asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Version,
    /// `/api`
    CoreVersions,
    /// `/apis`
    Groups,
    /// `/apis/GROUP`
    Group(String),
    /// `/api/v1`, `/apis/GROUP/VERSION`
    ResourceList {
        group: String,
        version: String,
    },
    Objects(Target),
    /// `/healthz`, `/livez`, `/readyz`, optionally one named check (`/readyz/etcd`).
    Health {
        endpoint: String,
        check: Option<String>,
    },
    /// `POST /apis/authorization.k8s.io/v1/selfsubject{access,rules}reviews`.
    Review(String),
    /// `GET /openapi/v3` (`None`) and `/openapi/v3/apis/GROUP/VERSION`.
    OpenApi(Option<String>),
    /// `GET /api/v1/namespaces/NS/pods/NAME/log`: a container's log.
    Log {
        namespace: String,
        name: String,
    },
    /// A pod subresource a real server serves and the simulation does not model
    /// (`exec`, `attach`, `portforward`): its pods run no processes.
    PodUnsimulated(String),
    NotFound,
}

fn is_served(group: &str, version: &str) -> bool {
    resources::group_versions().contains(&(group, version))
}

/// Route a request path.
pub fn route(path: &str) -> Route {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return Route::Version,
        [e @ ("healthz" | "livez" | "readyz"), rest @ ..] if rest.len() <= 1 => {
            return Route::Health {
                endpoint: (*e).to_string(),
                check: rest.first().map(|c| (*c).to_string()),
            }
        }
        ["apis", "authorization.k8s.io", "v1", r @ ("selfsubjectaccessreviews" | "selfsubjectrulesreviews")] => {
            return Route::Review((*r).to_string())
        }
        ["api", "v1", "namespaces", ns, "pods", name, "log"] => {
            return Route::Log {
                namespace: (*ns).to_string(),
                name: (*name).to_string(),
            }
        }
        ["api", "v1", "namespaces", _, "pods", _, sub @ ("exec" | "attach" | "portforward")] => {
            return Route::PodUnsimulated(format!("pods/{sub}"))
        }
        ["openapi", "v3"] => return Route::OpenApi(None),
        ["openapi", "v3", gv @ ..] if !gv.is_empty() => return Route::OpenApi(Some(gv.join("/"))),
        ["api"] => return Route::CoreVersions,
        ["apis"] => return Route::Groups,
        ["apis", g] if resources::group_versions().iter().any(|(x, _)| x == g) => {
            return Route::Group((*g).to_string())
        }
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Route::NotFound,
    };
    if !is_served(group, version) {
        return Route::NotFound;
    }
    if rest.is_empty() {
        return Route::ResourceList {
            group: group.to_string(),
            version: version.to_string(),
        };
    }
    let namespaced_form =
        rest.len() >= 3 && rest[0] == "namespaces" && !matches!(rest[2], "status" | "finalize");
    let (namespace, rest) = if namespaced_form {
        (Some(rest[1].to_string()), &rest[2..])
    } else {
        (None, rest)
    };
    let Some(res) = resources::by_path(group, version, rest[0]) else {
        return Route::NotFound;
    };
    if namespace.is_some() && !res.namespaced {
        return Route::NotFound;
    }
    let (name, status) = match rest[1..] {
        [] => (None, false),
        [n] => (Some(n.to_string()), false),
        [n, "status"] if res.status => (Some(n.to_string()), true),
        _ => return Route::NotFound,
    };
    if res.namespaced && name.is_some() && namespace.is_none() {
        return Route::NotFound;
    }
    Route::Objects(Target {
        res,
        namespace,
        name,
        status,
    })
}

/// A decoded query string.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query(Vec<(String, String)>);

impl Query {
    pub fn parse(q: &str) -> Query {
        Query(
            q.split('&')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap_or((p, ""));
                    (percent_decode(k), percent_decode(v))
                })
                .collect(),
        )
    }

    /// Every (key, value), in order.
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// `key=true` or `key=1`.
    pub fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1"))
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// `%XX` and `+` (form encoding) decoded; malformed escapes kept as written.
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h * 16 + l);
                    i += 3;
                }
                _ => {
                    out.push(b'%');
                    i += 1;
                }
            },
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objects(path: &str) -> Target {
        match route(path) {
            Route::Objects(t) => t,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn resource_paths() {
        let t = objects("/api/v1/namespaces/kube-system/pods");
        assert_eq!(
            (t.res.plural, t.namespace.as_deref(), t.name),
            ("pods", Some("kube-system"), None)
        );
        let t = objects("/api/v1/pods");
        assert_eq!((t.res.plural, t.namespace), ("pods", None));
        let t = objects("/apis/apps/v1/namespaces/kube-system/daemonsets/cilium/status");
        assert_eq!(
            (t.res.kind, t.name.as_deref(), t.status),
            ("DaemonSet", Some("cilium"), true)
        );
        let t = objects("/api/v1/nodes/k3s-1");
        assert_eq!((t.res.kind, t.name.as_deref()), ("Node", Some("k3s-1")));
        let t = objects("/api/v1/namespaces/kube-system");
        assert_eq!(
            (t.res.kind, t.name.as_deref()),
            ("Namespace", Some("kube-system"))
        );
        let t = objects("/api/v1/namespaces/kube-system/status");
        assert_eq!((t.res.kind, t.status), ("Namespace", true));
        let t =
            objects("/apis/helm.toolkit.fluxcd.io/v2/namespaces/flux-system/helmreleases/cilium");
        assert_eq!(t.res.kind, "HelmRelease");
    }

    #[test]
    fn unserved_paths() {
        for p in [
            "/api/v2/pods",
            "/api/v1/secrets",
            "/api/v1/pods/x",
            "/api/v1/namespaces/a/nodes",
            "/api/v1/namespaces/a/configmaps/x/status",
            "/apis/apps/v2/daemonsets",
            "/healthz/etcd/extra",
            "/metrics",
        ] {
            assert_eq!(route(p), Route::NotFound, "{p}");
        }
        // Served since issue 17 (kubectl and k9s probe them).
        assert_eq!(
            route("/readyz/etcd"),
            Route::Health {
                endpoint: "readyz".into(),
                check: Some("etcd".into())
            }
        );
        assert_eq!(route("/api"), Route::CoreVersions);
        assert_eq!(route("/apis/apps"), Route::Group("apps".into()));
        assert_eq!(
            route("/apis/apps/v1"),
            Route::ResourceList {
                group: "apps".into(),
                version: "v1".into()
            }
        );
    }

    #[test]
    fn queries_decode() {
        let q = Query::parse("labelSelector=k8s-app%3Dcilium%2Ctier+in+%28a%29&watch=1&x=%zz&y=%4");
        assert_eq!(q.get("labelSelector"), Some("k8s-app=cilium,tier in (a)"));
        assert!(q.flag("watch"));
        assert!(!q.flag("allowWatchBookmarks"));
        assert_eq!(q.get("x"), Some("%zz"));
        assert_eq!(q.get("y"), Some("%4"));
    }
}
