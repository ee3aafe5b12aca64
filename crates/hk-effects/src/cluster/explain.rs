//! Kube client errors in words, for every reader of the API (the watchers, `observe --once`,
//! the run lock, the health probe): the API's status for an API error, else the chain of
//! causes. Owns: [`explain`]. Must not: decide what an error means for a pane or a run.

/// A kube client error in words: the API's status for an API error (a 403 says so), else
/// the chain of causes (`client error (Connect): tcp connect error: Connection refused`).
pub fn explain(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if s.code == 403 => format!("forbidden (403): {}", s.message),
        kube::Error::Api(s) => format!("{} ({}): {}", s.reason, s.code, s.message),
        other => chain(other),
    }
}

/// An error and its sources, each once.
fn chain(e: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = vec![e.to_string()];
    let mut src = e.source();
    while let Some(s) = src {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        src = s.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_is_named() {
        let e = kube::Error::Api(Box::new(kube::core::Status {
            code: 403,
            message: "leases is forbidden: User \"x\" cannot watch".into(),
            reason: "Forbidden".into(),
            ..Default::default()
        }));
        assert_eq!(
            explain(&e),
            "forbidden (403): leases is forbidden: User \"x\" cannot watch"
        );
    }
}
