//! Host key verification against OpenSSH `known_hosts` files, strictly: a key that is not
//! recorded, or differs from the recorded one, is refused. No trust-on-first-use.
//!
//! Owns: reading `known_hosts` (plain, `[host]:port`, hashed `|1|salt|hash`, wildcard and
//! negated patterns, `@revoked`; `@cert-authority` lines are not used), the verdict for a
//! presented key, fingerprints, and the line that an explicit `ssh trust` appends.
//! Must not: append anything without the caller having asked (the CLI asks the operator).

use std::io::Write;
use std::path::{Path, PathBuf};

use data_encoding::BASE64;
use hmac::{Hmac, KeyInit, Mac};
use russh::keys::{HashAlg, PublicKey};
use sha1::Sha1;

use super::settings::glob;

/// Errors reading or writing known_hosts files.
#[derive(Debug, thiserror::Error)]
pub enum KnownHostsError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: cannot append: {source}")]
    Write {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot encode host key: {0}")]
    Encode(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    None,
    Revoked,
    CertAuthority,
}

#[derive(Debug, Clone)]
struct Entry {
    file: PathBuf,
    line: usize,
    marker: Marker,
    patterns: Vec<String>,
    key: PublicKey,
}

/// Where a host's key was expected: one recorded entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedKey {
    pub file: PathBuf,
    pub line: usize,
    pub algorithm: String,
    pub fingerprint: String,
}

impl std::fmt::Display for RecordedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: {} {}",
            self.file.display(),
            self.line,
            self.algorithm,
            self.fingerprint
        )
    }
}

/// The answer for one presented host key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostKeyVerdict {
    /// Recorded at this file and line.
    Trusted { file: PathBuf, line: usize },
    /// No entry names this host in any file.
    Unknown,
    /// Entries name this host, but none holds the presented key: they are listed.
    Changed { expected: Vec<RecordedKey> },
    /// The key is marked `@revoked`.
    Revoked { file: PathBuf, line: usize },
}

/// The entries of one or more known_hosts files, in the order given.
#[derive(Debug, Clone, Default)]
pub struct KnownHosts {
    entries: Vec<Entry>,
    files: Vec<PathBuf>,
    /// `file:line: why` for lines that could not be read (skipped, as OpenSSH does).
    pub warnings: Vec<String>,
}

impl KnownHosts {
    /// Reads every file; a file that does not exist contributes nothing.
    pub fn load(files: &[PathBuf]) -> Result<Self, KnownHostsError> {
        let mut kh = KnownHosts {
            files: files.to_vec(),
            ..KnownHosts::default()
        };
        for file in files {
            let text = match std::fs::read_to_string(file) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => {
                    return Err(KnownHostsError::Read {
                        file: file.display().to_string(),
                        source,
                    })
                }
            };
            kh.add_text(file, &text);
        }
        Ok(kh)
    }

    fn add_text(&mut self, file: &Path, text: &str) {
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut fields = line.split_whitespace();
            let mut first = fields.next().unwrap_or_default();
            let marker = match first {
                "@revoked" => Marker::Revoked,
                "@cert-authority" => Marker::CertAuthority,
                _ => Marker::None,
            };
            if marker != Marker::None {
                first = fields.next().unwrap_or_default();
            }
            let (Some(kind), Some(b64)) = (fields.next(), fields.next()) else {
                self.warnings.push(format!(
                    "{}:{}: expected `hosts keytype base64-key`",
                    file.display(),
                    i + 1
                ));
                continue;
            };
            match PublicKey::from_openssh(&format!("{kind} {b64}")) {
                Ok(key) => self.entries.push(Entry {
                    file: file.to_path_buf(),
                    line: i + 1,
                    marker,
                    patterns: first.split(',').map(str::to_string).collect(),
                    key,
                }),
                Err(e) => self.warnings.push(format!(
                    "{}:{}: unreadable {kind} key: {e}",
                    file.display(),
                    i + 1
                )),
            }
        }
    }

    /// The files consulted, for messages ("expected in ...").
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// The verdict for `key` presented by a host reached as `names` (the dialled address
    /// first, then any alias the operator may have recorded it under) on `port`.
    pub fn check(&self, names: &[&str], port: u16, key: &PublicKey) -> HostKeyVerdict {
        let lookups: Vec<String> = names.iter().map(|n| lookup_name(n, port)).collect();
        let mut expected = Vec::new();
        let mut trusted = None;
        for e in &self.entries {
            if e.marker == Marker::CertAuthority {
                continue;
            }
            let same_key = e.key.key_data() == key.key_data();
            if e.marker == Marker::Revoked {
                if same_key {
                    return HostKeyVerdict::Revoked {
                        file: e.file.clone(),
                        line: e.line,
                    };
                }
                continue;
            }
            if !lookups.iter().any(|l| patterns_match(&e.patterns, l)) {
                continue;
            }
            if same_key {
                trusted.get_or_insert((e.file.clone(), e.line));
            } else {
                expected.push(RecordedKey {
                    file: e.file.clone(),
                    line: e.line,
                    algorithm: e.key.algorithm().to_string(),
                    fingerprint: fingerprint(&e.key),
                });
            }
        }
        match (trusted, expected.is_empty()) {
            (Some((file, line)), _) => HostKeyVerdict::Trusted { file, line },
            (None, true) => HostKeyVerdict::Unknown,
            (None, false) => HostKeyVerdict::Changed { expected },
        }
    }
}

/// How OpenSSH names a host in known_hosts: `host`, or `[host]:port` off port 22.
pub fn lookup_name(host: &str, port: u16) -> String {
    if port == 22 {
        host.to_string()
    } else {
        format!("[{host}]:{port}")
    }
}

fn patterns_match(patterns: &[String], name: &str) -> bool {
    let mut hit = false;
    for p in patterns {
        if let Some(hashed) = p.strip_prefix("|1|") {
            if hashed_matches(hashed, name) {
                hit = true;
            }
        } else if let Some(neg) = p.strip_prefix('!') {
            if glob(neg, name) {
                return false;
            }
        } else if glob(p, name) {
            hit = true;
        }
    }
    hit
}

fn hashed_matches(salt_and_hash: &str, name: &str) -> bool {
    let mut parts = salt_and_hash.split('|');
    let (Some(salt), Some(hash)) = (parts.next(), parts.next()) else {
        return false;
    };
    let (Ok(salt), Ok(hash)) = (
        BASE64.decode(salt.as_bytes()),
        BASE64.decode(hash.as_bytes()),
    ) else {
        return false;
    };
    match <Hmac<Sha1> as KeyInit>::new_from_slice(&salt) {
        Ok(mac) => mac
            .chain_update(name.as_bytes())
            .verify_slice(&hash)
            .is_ok(),
        Err(_) => false,
    }
}

/// `SHA256:...`, as `ssh-keygen -lf` and OpenSSH's prompts show it.
pub fn fingerprint(key: &PublicKey) -> String {
    key.fingerprint(HashAlg::Sha256).to_string()
}

/// The known_hosts line recording `key` for `host` on `port` (not hashed, so the operator
/// can read what was trusted).
pub fn trust_line(host: &str, port: u16, key: &PublicKey) -> Result<String, KnownHostsError> {
    let mut bare = key.clone();
    bare.set_comment("");
    let text = bare
        .to_openssh()
        .map_err(|e| KnownHostsError::Encode(e.to_string()))?;
    Ok(format!("{} {}", lookup_name(host, port), text.trim()))
}

/// Appends one line to a known_hosts file (created 0600 if absent), flushed to disk.
pub fn append_line(path: &Path, line: &str) -> Result<(), KnownHostsError> {
    let werr = |source| KnownHostsError::Write {
        file: path.display().to_string(),
        source,
    };
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir).map_err(werr)?;
        }
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.create(true).append(true);
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path).map_err(werr)?;
    // A file not ending in a newline would glue our entry onto its last line.
    let needs_nl = std::fs::read(path)
        .map(|b| !b.is_empty() && !b.ends_with(b"\n"))
        .unwrap_or(false);
    if needs_nl {
        f.write_all(b"\n").map_err(werr)?;
    }
    f.write_all(format!("{line}\n").as_bytes()).map_err(werr)?;
    f.sync_all().map_err(werr)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Two throwaway ed25519 public keys (generated for these tests, never used anywhere).
    const K1: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIChfeNNmnSGptMLH0+9LMiV9/cvVkdyttxiK6BvxRuux";
    const K2: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBnr99ADIi9/st1aw+sA6AwV6D+I/FfWjRxbXGd4xQvb";

    fn key(s: &str) -> PublicKey {
        PublicKey::from_openssh(s).expect("key")
    }

    fn hashed(name: &str, salt: &[u8]) -> String {
        let mac = <Hmac<Sha1> as KeyInit>::new_from_slice(salt).expect("mac");
        let out = mac.chain_update(name.as_bytes()).finalize().into_bytes();
        format!("|1|{}|{}", BASE64.encode(salt), BASE64.encode(&out))
    }

    fn kh(text: &str) -> KnownHosts {
        let mut k = KnownHosts::default();
        k.add_text(Path::new("/kh"), text);
        k
    }

    #[test]
    fn plain_port_and_hashed_entries() {
        let text = format!(
            "# c\n\n10.0.0.1,gw {K1}\n[10.0.0.2]:2222 {K1}\n{} {K2} comment\n",
            hashed("[10.0.0.3]:2200", b"0123456789abcdef0123")
        );
        let k = kh(&text);
        assert!(k.warnings.is_empty(), "{:?}", k.warnings);
        assert_eq!(
            k.check(&["10.0.0.1"], 22, &key(K1)),
            HostKeyVerdict::Trusted {
                file: "/kh".into(),
                line: 3
            }
        );
        // Off port 22 only `[host]:port` entries count.
        assert_eq!(
            k.check(&["10.0.0.1"], 2222, &key(K1)),
            HostKeyVerdict::Unknown
        );
        assert_eq!(
            k.check(&["10.0.0.2"], 2222, &key(K1)),
            HostKeyVerdict::Trusted {
                file: "/kh".into(),
                line: 4
            }
        );
        assert_eq!(
            k.check(&["10.0.0.3"], 2200, &key(K2)),
            HostKeyVerdict::Trusted {
                file: "/kh".into(),
                line: 5
            }
        );
        match k.check(&["10.0.0.3"], 2200, &key(K1)) {
            HostKeyVerdict::Changed { expected } => {
                assert_eq!(expected.len(), 1);
                assert_eq!(expected[0].line, 5);
                assert_eq!(expected[0].fingerprint, fingerprint(&key(K2)));
                assert!(expected[0]
                    .to_string()
                    .starts_with("/kh:5: ssh-ed25519 SHA256:"));
            }
            other => panic!("expected Changed, got {other:?}"),
        }
    }

    #[test]
    fn wildcards_negation_revoked_and_garbage() {
        let text = format!("*.lab,!bad.lab {K1}\n@revoked * {K2}\nnot a key line\n");
        let k = kh(&text);
        assert_eq!(k.warnings.len(), 1);
        assert!(k.warnings[0].starts_with("/kh:3:"), "{:?}", k.warnings);
        assert!(matches!(
            k.check(&["a.lab"], 22, &key(K1)),
            HostKeyVerdict::Trusted { .. }
        ));
        assert_eq!(k.check(&["bad.lab"], 22, &key(K1)), HostKeyVerdict::Unknown);
        assert_eq!(
            k.check(&["a.lab"], 22, &key(K2)),
            HostKeyVerdict::Revoked {
                file: "/kh".into(),
                line: 2
            }
        );
    }

    #[test]
    fn trust_line_round_trips() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("sub/known_hosts");
        let line = trust_line("10.0.0.9", 2222, &key(K2)).expect("line");
        assert_eq!(line, format!("[10.0.0.9]:2222 {K2}"));
        append_line(&path, &line).expect("append");
        let k = KnownHosts::load(&[path.clone(), dir.path().join("missing")]).expect("load");
        assert!(matches!(
            k.check(&["10.0.0.9"], 2222, &key(K2)),
            HostKeyVerdict::Trusted { line: 1, .. }
        ));
        assert_eq!(k.files().len(), 2);
    }
}
