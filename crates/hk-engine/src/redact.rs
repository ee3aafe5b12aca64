//! no_log-style redaction: every value taken from a vaulted file or marked secret is masked
//! before a line reaches a log, the journal or the screen.
//!
//! A crate-root module (not exec's) because two layers use it: `repo::vault` fills it and the
//! executors apply it; `exec::redact` re-exports it.
//!
//! Owns: [`Redactor`]. Must not: decide what is secret (`repo::vault` learns the vaulted
//! values) or do IO.

/// What a masked secret is replaced with. Fixed width, so the length of a secret leaks nothing.
pub const MASK: &str = "********";

/// Masks known secret values wherever they occur in a line of output or an argv.
#[derive(Clone, Default)]
pub struct Redactor {
    /// Longest first, so a secret that contains a shorter one is masked whole.
    secrets: Vec<String>,
    /// Set when some vaulted value is unknown (no vault password): the added and removed
    /// lines of a diff are withheld, with this reason, since one may hold that value.
    withhold_diffs: Option<String>,
}

/// The secrets are never shown, not even in a debug print: only how many there are.
impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("secrets", &self.secrets.len())
            .field("withhold_diffs", &self.withhold_diffs)
            .finish()
    }
}

/// What a withheld diff line is replaced with (the reason follows it).
pub const WITHHELD: &str = "[diff line withheld: ";

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
        Redactor {
            secrets: all,
            withhold_diffs: None,
        }
    }

    /// This redactor, also withholding the changed lines of every diff (`+`/`-` lines and
    /// the `--- before`/`+++ after` headers of Ansible's `--diff`) because some vaulted
    /// value could not be learned: `why` says which, on every withheld line.
    pub fn withholding_diffs(mut self, why: String) -> Self {
        self.withhold_diffs = Some(why);
        self
    }

    /// The same secrets masked, no line withheld (for output that is not a diff).
    pub fn without_withholding(&self) -> Self {
        Redactor {
            secrets: self.secrets.clone(),
            withhold_diffs: None,
        }
    }

    /// Why diffs are withheld, if they are.
    pub fn withheld_because(&self) -> Option<&str> {
        self.withhold_diffs.as_deref()
    }

    /// A redactor that masks nothing.
    pub fn none() -> Self {
        Redactor::default()
    }

    /// Whether any secret is registered.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty() && self.withhold_diffs.is_none()
    }

    /// The line with every occurrence of every secret replaced by [`MASK`] (and, when
    /// diffs are withheld, a diff line replaced whole).
    pub fn redact(&self, line: &str) -> String {
        if let Some(why) = &self.withhold_diffs {
            if is_diff_line(line) {
                return format!("{WITHHELD}{why}]");
            }
        }
        self.mask(line)
    }

    /// Every occurrence of every secret replaced by [`MASK`].
    fn mask(&self, line: &str) -> String {
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
        // An argv is not a diff: `--check` is a flag, not a removed line.
        argv.iter().map(|a| self.mask(a)).collect()
    }
}

/// The shortest derived form masked: a shorter piece of base64 or a short case variant
/// would match unrelated text too often to be worth masking.
pub const MIN_FORM_LEN: usize = 8;

/// Every form of a secret `value` the mask covers (docs/reliability.md, "What is masked and
/// what is not"): the value; as it shows inside a JSON string; percent-encoded as in a URL;
/// upper- and lower-cased (`| upper`, `| lower`); its base64 (`| b64encode`), whole and as
/// it shows inside a longer base64 string at each of the three byte alignments (so
/// `b64encode(user ~ ':' ~ pass)` is masked: the characters that encode the value's bytes
/// alone, without the neighbours' bits). Derived forms shorter than [`MIN_FORM_LEN`] are
/// left out (they would match unrelated text); the value itself is always in.
pub fn forms_of(value: &str) -> Vec<String> {
    let mut forms = vec![value.to_string()];
    let mut derived = Vec::new();
    let json = serde_json::Value::String(value.to_string()).to_string();
    derived.push(json[1..json.len() - 1].to_string());
    derived.push(percent_encoded(value));
    derived.push(value.to_uppercase());
    derived.push(value.to_lowercase());
    let bytes = value.as_bytes();
    derived.push(data_encoding::BASE64.encode(bytes));
    for k in 0..3usize {
        // `k` unknown bytes before the value: the first characters mix their bits with the
        // value's (none at k = 0, 2 at k = 1, 3 at k = 2), and the characters past the
        // value's last whole 6 bits mix with what follows.
        let mut padded = vec![0u8; k];
        padded.extend_from_slice(bytes);
        let enc = data_encoding::BASE64_NOPAD.encode(&padded);
        let skip = [0, 2, 3][k];
        let end = (padded.len() * 8 / 6).min(enc.len());
        if end > skip {
            derived.push(enc[skip..end].to_string());
        }
    }
    for f in derived {
        if f.len() >= MIN_FORM_LEN && !forms.contains(&f) {
            forms.push(f);
        }
    }
    forms
}

/// `s` as a URL carries it: every byte but the unreserved ones (RFC 3986) as `%XX`.
fn percent_encoded(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A changed line of a unified diff as Ansible's `--diff` prints it. Ansible's own lines
/// (`TASK [..]`, `ok: [host]`, the recap) never start with `+` or `-`.
fn is_diff_line(line: &str) -> bool {
    line.starts_with('+') || line.starts_with('-')
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

    /// Issue 34: a transformed form of a vaulted value reached the output. The cheap ones
    /// are masked: case, URL, and base64 inside a longer base64 string at every alignment,
    /// as `b64encode(user ~ ':' ~ pass)` makes it (here with prefixes of 0 to 7 bytes and
    /// something after the value too).
    #[test]
    fn case_url_and_embedded_base64_forms_are_masked() {
        let secret = "sample-not-a-real-secret";
        let r = Redactor::new(forms_of(secret));
        assert_eq!(
            r.redact("pw=SAMPLE-NOT-A-REAL-SECRET"),
            format!("pw={MASK}")
        );
        let odd = Redactor::new(forms_of("p@ss w/rd:1"));
        assert_eq!(
            odd.redact("url: https://u:p%40ss%20w%2Frd%3A1@h/"),
            format!("url: https://u:{MASK}@h/")
        );
        for user in ["", "a", "ad", "adm", "admi", "admin", "admin:", "operator"] {
            for after in ["", "\n", "@lab"] {
                let plain = format!("{user}:{secret}{after}");
                let b64 = data_encoding::BASE64.encode(plain.as_bytes());
                let shown = r.redact(&format!("Authorization: Basic {b64}"));
                assert!(shown.contains(MASK), "{plain:?}: {shown}");
                // The characters that encode the secret's bytes are gone: all but at most
                // the 3 bytes at its edges that share characters with its neighbours.
                let left = shown
                    .trim_start_matches("Authorization: Basic ")
                    .replace(MASK, "");
                assert!(
                    b64.len() - left.len() >= (secret.len() - 3) * 4 / 3,
                    "{plain:?}: {shown}"
                );
            }
        }
        // Short derived forms are not masked: too likely to match anything.
        assert!(forms_of("abcd")
            .iter()
            .all(|f| f == "abcd" || f.len() >= MIN_FORM_LEN));
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

    #[test]
    fn diffs_withheld_when_a_vaulted_value_is_unknown() {
        let r = Redactor::new(["s3cr3t"]).withholding_diffs("no vault password".into());
        assert_eq!(
            r.redact("+password=anything"),
            format!("{WITHHELD}no vault password]")
        );
        assert_eq!(
            r.redact("--- before: /etc/x"),
            format!("{WITHHELD}no vault password]")
        );
        assert_eq!(
            r.redact("changed: [h] s3cr3t"),
            format!("changed: [h] {MASK}")
        );
        assert_eq!(r.withheld_because(), Some("no vault password"));
        assert!(!format!("{r:?}").contains("s3cr3t"));
    }
}
