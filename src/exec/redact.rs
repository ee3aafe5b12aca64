//! no_log-style redaction: every value taken from a vaulted file or marked secret is masked
//! before a line reaches a log, the journal or the screen.
//!
//! Owns: [`Redactor`]. Must not: decide what is secret (the inventory marks it) or do IO.

/// What a masked secret is replaced with. Fixed width, so the length of a secret leaks nothing.
pub const MASK: &str = "********";

/// Masks known secret values wherever they occur in a line of output or an argv.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Longest first, so a secret that contains a shorter one is masked whole.
    secrets: Vec<String>,
}

impl Redactor {
    /// A redactor for these secret values. Empty values are ignored (they would match
    /// everywhere). A multi-line secret is also masked line by line, because output is
    /// redacted one line at a time.
    pub fn new<I, S>(secrets: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut all: Vec<String> = Vec::new();
        for s in secrets {
            let s: String = s.into();
            if s.contains('\n') {
                for line in s.lines() {
                    let line = line.trim_end_matches('\r');
                    if !line.trim().is_empty() {
                        all.push(line.to_string());
                    }
                }
            }
            if !s.is_empty() {
                all.push(s);
            }
        }
        all.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        all.dedup();
        Redactor { secrets: all }
    }

    /// A redactor that masks nothing.
    pub fn none() -> Self {
        Redactor::default()
    }

    /// Whether any secret is registered.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// The line with every occurrence of every secret replaced by [`MASK`].
    pub fn redact(&self, line: &str) -> String {
        let mut out = line.to_string();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), MASK);
            }
        }
        out
    }

    /// Like [`Redactor::redact`], for text that was cut off at a size cap: a secret cut in
    /// two would leave its beginning at the very end, so a tail that starts any secret is
    /// masked too (over-masking a cut-off tail is the safe side).
    pub fn redact_truncated(&self, text: &str) -> String {
        let mut out = self.redact(text);
        for s in &self.secrets {
            let cut = (1..s.len())
                .rev()
                .filter(|k| s.is_char_boundary(*k))
                .find(|k| out.ends_with(&s[..*k]));
            if let Some(k) = cut {
                out.truncate(out.len() - k);
                out.push_str(MASK);
            }
        }
        out
    }

    /// An argv redacted element by element (`-e become_pass=...` must not be shown).
    pub fn redact_argv(&self, argv: &[String]) -> Vec<String> {
        argv.iter().map(|a| self.redact(a)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_every_occurrence_and_longest_first() {
        let r = Redactor::new(["hunter2", "hunter2-extended", ""]);
        assert_eq!(
            r.redact("pw=hunter2-extended and hunter2 again"),
            format!("pw={MASK} and {MASK} again")
        );
        assert_eq!(r.redact("nothing here"), "nothing here");
    }

    #[test]
    fn multiline_secret_masked_per_line() {
        let r = Redactor::new(["-----BEGIN-----\nc2VjcmV0\n-----END-----"]);
        assert_eq!(
            r.redact("key line c2VjcmV0 leaked"),
            format!("key line {MASK} leaked")
        );
    }

    #[test]
    fn a_secret_cut_by_the_cap_is_masked() {
        let r = Redactor::new(["hunter2"]);
        assert_eq!(r.redact_truncated("pw=hunt"), format!("pw={MASK}"));
        assert_eq!(r.redact_truncated("pw=hunter2 x"), format!("pw={MASK} x"));
        assert_eq!(r.redact_truncated("all clear"), "all clear");
    }

    #[test]
    fn argv_is_redacted() {
        let r = Redactor::new(["s3cr3t"]);
        let argv = vec!["-e".to_string(), "ansible_become_pass=s3cr3t".to_string()];
        assert_eq!(
            r.redact_argv(&argv),
            vec!["-e".to_string(), format!("ansible_become_pass={MASK}")]
        );
        assert!(Redactor::none().is_empty());
    }
}
