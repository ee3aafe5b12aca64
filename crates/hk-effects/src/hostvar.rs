//! A look's settings read from a host's rendered hostvars (the VPN look's service,
//! interface and exit-IP URL; the etcd look's metrics URL).
//!
//! Owns: one string hostvar or its default ([`string_var`]), the checks a value given to a
//! remote command must pass, and [`HostVarError`], which names the host and the variable.
//! Must not: fall back to the default when a value is defined but wrong (a value that
//! cannot be rendered, is no string or fails a check is an error, never the default in
//! disguise).

use hk_engine::repo::resolve::Resolved;
use hk_engine::repo::Repo;

/// A hostvar a look needs that is defined but cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostVarError {
    #[error("{host}: `{var}` is {value}, expected a string")]
    NotAString {
        host: String,
        var: String,
        value: String,
    },
    #[error("{host}: `{var}` cannot be rendered: {reason}")]
    Unrenderable {
        host: String,
        var: String,
        reason: String,
    },
    #[error("{host}: `{var}` is empty")]
    Empty { host: String, var: String },
    #[error("{host}: `{var}` is {value:?}, which the command would take for an option")]
    LooksLikeOption {
        host: String,
        var: String,
        value: String,
    },
    #[error("{host}: `{var}` is {value:?}, which holds a control character")]
    ControlCharacter {
        host: String,
        var: String,
        value: String,
    },
    #[error("{host}: `{var}` is {value}, expected a boolean (true/false, yes/no)")]
    NotABool {
        host: String,
        var: String,
        value: String,
    },
    #[error("{host}: `{var}` is {value:?}, expected an http(s):// URL")]
    NotHttpUrl {
        host: String,
        var: String,
        value: String,
    },
}

/// One string hostvar of `host`: its rendered value, or `default` when the repo does not
/// define it.
pub fn string_var(
    repo: &Repo,
    host: &str,
    var: &str,
    default: &str,
) -> Result<String, HostVarError> {
    match repo.resolve_var(host, var) {
        None => Ok(default.to_string()),
        Some(Resolved::Value(serde_json::Value::String(s))) => Ok(s),
        Some(Resolved::Value(other)) => Err(HostVarError::NotAString {
            host: host.to_string(),
            var: var.to_string(),
            value: other.to_string(),
        }),
        Some(Resolved::Unrenderable { reason }) => Err(HostVarError::Unrenderable {
            host: host.to_string(),
            var: var.to_string(),
            reason,
        }),
    }
}

/// One boolean hostvar of `host`, as Ansible reads one (`true`/`false`, and the strings
/// yes/no/true/false in any case), or `default` when the repo does not define it.
pub fn bool_var(repo: &Repo, host: &str, var: &str, default: bool) -> Result<bool, HostVarError> {
    let err = |value: String, reason: Option<String>| match reason {
        Some(reason) => HostVarError::Unrenderable {
            host: host.to_string(),
            var: var.to_string(),
            reason,
        },
        None => HostVarError::NotABool {
            host: host.to_string(),
            var: var.to_string(),
            value,
        },
    };
    match repo.resolve_var(host, var) {
        None => Ok(default),
        Some(Resolved::Value(serde_json::Value::Bool(b))) => Ok(b),
        Some(Resolved::Value(serde_json::Value::String(s))) => {
            match s.trim().to_ascii_lowercase().as_str() {
                "true" | "yes" | "on" | "1" => Ok(true),
                "false" | "no" | "off" | "0" => Ok(false),
                _ => Err(err(format!("{s:?}"), None)),
            }
        }
        Some(Resolved::Value(other)) => Err(err(other.to_string(), None)),
        Some(Resolved::Unrenderable { reason }) => Err(err(String::new(), Some(reason))),
    }
}

/// A value given to a command as one word: not empty, not taken for an option, no control
/// characters (a newline would end the journal's argument, a NUL cannot be sent).
pub fn check_word(host: &str, var: &str, value: &str) -> Result<(), HostVarError> {
    let (host, var) = (host.to_string(), var.to_string());
    if value.is_empty() {
        return Err(HostVarError::Empty { host, var });
    }
    let value = value.to_string();
    if value.starts_with('-') {
        return Err(HostVarError::LooksLikeOption { host, var, value });
    }
    if value.chars().any(char::is_control) {
        return Err(HostVarError::ControlCharacter { host, var, value });
    }
    Ok(())
}

/// `value` is an http(s):// URL, or the error naming `host` and `var`.
pub fn http_url(host: &str, var: &str, value: String) -> Result<String, HostVarError> {
    if value.starts_with("https://") || value.starts_with("http://") {
        Ok(value)
    } else {
        Err(HostVarError::NotHttpUrl {
            host: host.to_string(),
            var: var.to_string(),
            value,
        })
    }
}
