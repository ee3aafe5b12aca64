//! The repo's vaulted values, learned only to be masked.
//!
//! Owns: decrypting the ansible-vault `1.1`/`1.2` `AES256` format (PBKDF2-HMAC-SHA256 with
//! 10,000 rounds to an AES-256-CTR key, an HMAC-SHA256 key and the counter's IV; the HMAC
//! checked before anything is decrypted), finding the vaulted files and inline `!vault`
//! values of a repo, reading the vault password file its `ansible.cfg` names, and turning
//! what they hold, and the password itself, into a [`Redactor`].
//! Must not: show, log or return a decrypted value anywhere but inside the [`Redactor`]
//! (whose `Debug` shows none either). [`VaultScan`]'s `Debug` counts, never lists.

use super::ansible_cfg::{AnsibleCfg, AnsibleEnv};
use std::path::{Path, PathBuf};

use aes::cipher::{KeyIvInit, StreamCipher};
use hmac::{KeyInit, Mac};

use crate::redact::Redactor;

/// Shorter decrypted values are not masked: a vaulted `true` or `22` masked in every line
/// of output would hide the output, not a secret. Counted in [`VaultScan::too_short`].
pub const MIN_SECRET_LEN: usize = 4;
/// Files larger than this are not read for vaulted content (each is named in a problem).
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// At most this many files are looked at under the ansible dir.
pub const MAX_FILES: usize = 20_000;
/// The ansible-vault key derivation's rounds (fixed by the format).
const PBKDF2_ROUNDS: std::num::NonZeroU32 = std::num::NonZeroU32::new(10_000).expect("non-zero");

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum VaultError {
    #[error("not an ansible-vault text: {0}")]
    Format(String),
    #[error("unsupported vault cipher `{0}` (only AES256 is)")]
    Cipher(String),
    #[error("the vault password does not open it (HMAC mismatch)")]
    WrongPassword,
}

/// Decrypt one ansible-vault text (`$ANSIBLE_VAULT;1.1;AES256` and the hex lines).
pub fn decrypt(text: &str, password: &[u8]) -> Result<Vec<u8>, VaultError> {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let header = lines
        .next()
        .ok_or_else(|| VaultError::Format("empty".into()))?;
    let fields: Vec<&str> = header.split(';').collect();
    if fields.first() != Some(&"$ANSIBLE_VAULT") || fields.len() < 3 {
        return Err(VaultError::Format(
            "no `$ANSIBLE_VAULT;1.1;AES256` header".into(),
        ));
    }
    if !matches!(fields[1], "1.1" | "1.2") {
        return Err(VaultError::Format(format!(
            "vault format version {} (1.1 and 1.2 are read)",
            fields[1]
        )));
    }
    if fields[2].trim() != "AES256" {
        return Err(VaultError::Cipher(fields[2].trim().to_string()));
    }
    let body: String = lines.collect();
    let inner = hex(&body, "body")?;
    let inner = String::from_utf8(inner)
        .map_err(|_| VaultError::Format("the decoded body is not text".into()))?;
    let mut parts = inner.split('\n');
    let (Some(salt), Some(tag), Some(cipher)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(VaultError::Format(
            "the body is not salt, HMAC and ciphertext".into(),
        ));
    };
    let salt = hex(salt, "salt")?;
    let tag = hex(tag, "HMAC")?;
    let mut data = hex(cipher, "ciphertext")?;

    let mut keys = [0u8; 80];
    // ring's PBKDF2: one non-generic function, compiled optimized in every profile. The
    // RustCrypto one is generic and was instantiated here, unoptimized in debug builds:
    // ~0.25 s per vault opened, in every test and CLI run that loads a repo with a vault.
    ring::pbkdf2::derive(
        ring::pbkdf2::PBKDF2_HMAC_SHA256,
        PBKDF2_ROUNDS,
        &salt,
        password,
        &mut keys,
    );
    let (cipher_key, rest) = keys.split_at(32);
    let (hmac_key, iv) = rest.split_at(32);

    let mut mac = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(hmac_key)
        .map_err(|_| VaultError::Format("HMAC key".into()))?;
    mac.update(&data);
    mac.verify_slice(&tag)
        .map_err(|_| VaultError::WrongPassword)?;

    let mut ctr = ctr::Ctr128BE::<aes::Aes256>::new_from_slices(cipher_key, iv)
        .map_err(|_| VaultError::Format("AES key or IV length".into()))?;
    ctr.try_apply_keystream(&mut data)
        .map_err(|_| VaultError::Format("ciphertext too long".into()))?;
    // PKCS#7 padding to the AES block size, as ansible-vault writes it.
    let pad = usize::from(data.last().copied().unwrap_or(0));
    if pad == 0
        || pad > 16
        || pad > data.len()
        || !data[data.len() - pad..]
            .iter()
            .all(|b| usize::from(*b) == pad)
    {
        return Err(VaultError::Format("bad padding".into()));
    }
    data.truncate(data.len() - pad);
    Ok(data)
}

fn hex(text: &str, what: &str) -> Result<Vec<u8>, VaultError> {
    data_encoding::HEXLOWER_PERMISSIVE
        .decode(text.trim().as_bytes())
        .map_err(|_| VaultError::Format(format!("the {what} is not hex")))
}

/// What a repo's vault holds, as far as hk-console may know it: the values to mask.
#[derive(Clone, Default)]
pub struct VaultScan {
    /// Every decrypted value (and its common encodings) to mask. Never shown.
    secrets: Vec<String>,
    /// Files holding vaulted content (whole-file or inline `!vault`).
    pub vaulted_files: Vec<PathBuf>,
    /// Why vaulted content could not be read (no password file, a wrong password, a
    /// password script): the values it holds cannot be masked, so diffs are withheld.
    pub locked: Option<String>,
    /// Decrypted values left unmasked for being shorter than [`MIN_SECRET_LEN`].
    pub too_short: usize,
    /// Files that could not be looked at, each with why.
    pub problems: Vec<String>,
}

impl std::fmt::Debug for VaultScan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VaultScan")
            .field("secrets", &self.secrets.len())
            .field("vaulted_files", &self.vaulted_files)
            .field("locked", &self.locked)
            .field("too_short", &self.too_short)
            .field("problems", &self.problems)
            .finish()
    }
}

impl VaultScan {
    /// How many values (with their encodings) are masked.
    pub fn masked(&self) -> usize {
        self.secrets.len()
    }

    /// The redactor every executor gets: the vaulted values masked and, when some vaulted
    /// content could not be read, diff lines withheld (a value it holds would show there).
    pub fn redactor(&self) -> Redactor {
        let r = Redactor::new(self.secrets.iter().cloned());
        match &self.locked {
            Some(why) => r.withholding_diffs(why.clone()),
            None => r,
        }
    }

    fn learn(&mut self, value: &str) {
        let value = value.trim_end_matches(['\n', '\r']);
        if value.trim().chars().count() < MIN_SECRET_LEN {
            self.too_short += 1;
            return;
        }
        // The value and the forms it shows in (JSON, URL, case, base64 whole and inside a
        // longer base64 string): crate::redact::forms_of.
        for f in crate::redact::forms_of(value) {
            if !self.secrets.contains(&f) {
                self.secrets.push(f);
            }
        }
    }

    /// Learn the values of a decrypted vaulted file: the scalar leaves of its YAML, or the
    /// whole text when it is not a YAML mapping or list (a vaulted key file, say).
    fn learn_file(&mut self, plain: &str) {
        match serde_yaml::from_str::<serde_yaml::Value>(plain) {
            Ok(v @ (serde_yaml::Value::Mapping(_) | serde_yaml::Value::Sequence(_))) => {
                let mut stack = vec![v];
                while let Some(v) = stack.pop() {
                    match v {
                        serde_yaml::Value::String(s) => self.learn(&s),
                        serde_yaml::Value::Number(n) => self.learn(&n.to_string()),
                        serde_yaml::Value::Sequence(items) => stack.extend(items),
                        serde_yaml::Value::Mapping(m) => {
                            stack.extend(m.into_iter().map(|(_, v)| v))
                        }
                        serde_yaml::Value::Tagged(t) => stack.push(t.value),
                        serde_yaml::Value::Bool(_) | serde_yaml::Value::Null => {}
                    }
                }
            }
            _ => self.learn(plain),
        }
    }
}

/// Where ansible-playbook, run from `ansible_dir`, takes its vault password file:
/// `ANSIBLE_VAULT_PASSWORD_FILE` (relative to `ansible_dir`), else `vault_password_file`
/// in `[defaults]` of the ansible.cfg it reads ([`AnsibleCfg`]; relative to that file's
/// directory).
pub fn password_file(ansible_dir: &Path) -> Option<PathBuf> {
    password_file_source(ansible_dir).map(|(path, _)| path)
}

/// [`password_file`] and where it is configured: the ansible.cfg file and line of
/// `vault_password_file`, or None for `ANSIBLE_VAULT_PASSWORD_FILE`.
pub fn password_file_source(ansible_dir: &Path) -> Option<(PathBuf, Option<(PathBuf, usize)>)> {
    let env = AnsibleEnv::from_process();
    if let Some(p) = &env.vault_password_file {
        return Some((env.expand(&p.to_string_lossy(), ansible_dir), None));
    }
    let cfg = AnsibleCfg::load(ansible_dir, &env);
    match cfg.get("vault_password_file") {
        Some((v, line)) if !v.is_empty() => Some((
            cfg.path(v),
            Some((
                cfg.file
                    .clone()
                    .unwrap_or_else(|| ansible_dir.join("ansible.cfg")),
                line,
            )),
        )),
        _ => None,
    }
}

/// A regular file read whole, refused past [`MAX_FILE_BYTES`] or when it is not a
/// regular file (a FIFO would block, a device would never end).
fn read_capped(path: &Path) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{}: not a regular file", path.display()));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!(
            "{}: {} bytes, over the {MAX_FILE_BYTES}-byte limit",
            path.display(),
            meta.len()
        ));
    }
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// The vaulted texts of one file: the whole file, or each inline `!vault` block.
fn vaulted_texts(text: &str) -> Vec<(bool, String)> {
    if text.starts_with("$ANSIBLE_VAULT") {
        return vec![(true, text.to_string())];
    }
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let indent = line.len() - line.trim_start().len();
        let Some(at) = line.find("!vault") else {
            i += 1;
            continue;
        };
        // `key: !vault "$ANSIBLE_VAULT;..."` on one line is rare; the block form is what
        // ansible-vault encrypt_string writes.
        let rest = line[at + "!vault".len()..].trim();
        i += 1;
        if !rest.is_empty() && !rest.starts_with(['|', '>']) {
            continue;
        }
        let mut block = Vec::new();
        while i < lines.len() {
            let l = lines[i];
            let li = l.len() - l.trim_start().len();
            if !l.trim().is_empty() && li <= indent {
                break;
            }
            block.push(l.trim());
            i += 1;
        }
        if block
            .first()
            .is_some_and(|l| l.starts_with("$ANSIBLE_VAULT"))
        {
            out.push((false, block.join("\n")));
        }
    }
    out
}

/// The files to look at: every regular file under the ansible dir, the inventory's
/// directory and each environment's `vault:` file (symlinks and special files skipped).
fn candidate_files(roots: &[PathBuf], scan: &mut VaultScan) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut dirs: Vec<PathBuf> = Vec::new();
    for r in roots {
        match std::fs::symlink_metadata(r) {
            Ok(m) if m.is_dir() => dirs.push(r.clone()),
            Ok(m) if m.is_file() => out.push(r.clone()),
            _ => {}
        }
    }
    let mut seen_dirs = std::collections::HashSet::new();
    while let Some(dir) = dirs.pop() {
        if !seen_dirs.insert(dir.clone()) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            scan.problems
                .push(format!("{}: cannot list the directory", dir.display()));
            continue;
        };
        for e in entries.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            let path = e.path();
            if ft.is_dir() && e.file_name() != ".git" {
                dirs.push(path);
            } else if ft.is_file() {
                if out.len() >= MAX_FILES {
                    scan.problems.push(format!(
                        "{}: more than {MAX_FILES} files; the rest were not looked at for vaulted values",
                        dir.display()
                    ));
                    return out;
                }
                out.push(path);
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Runs an executable vault password file as ansible-playbook does (its standard output,
/// line ends stripped, is the password). The engine runs nothing: the caller that may
/// (hk-effects' `vault_script`) hands one in.
/// It is given the script and the vault id it is asked for (`default` for the password
/// file), which a `*-client` script takes as `--vault-id`.
pub type ScriptRunner<'a> = &'a dyn Fn(&Path, &str) -> Result<String, String>;

/// Where a vault password comes from, as ansible-playbook is configured to take it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasswordSource {
    /// How a message names it: `the vault password file X`, `vault id dev (X)`.
    pub what: String,
    /// The vault id (`default` for the password file).
    pub label: String,
    pub kind: SourceKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceKind {
    /// A file: read (whitespace stripped), or run when it is executable.
    File(PathBuf),
    /// `prompt`: ansible-playbook asks at the terminal.
    Prompt,
}

impl PasswordSource {
    fn file(path: &Path) -> PasswordSource {
        PasswordSource {
            what: format!("the vault password file {}", path.display()),
            label: "default".into(),
            kind: SourceKind::File(path.to_path_buf()),
        }
    }
}

/// Every password source ansible-playbook, run in `ansible_dir`, is configured with: the
/// password file ([`password_file`]) and each `label@source` of the vault identity list
/// (`ANSIBLE_VAULT_IDENTITY_LIST`, else `vault_identity_list` in ansible.cfg; a source
/// without `label@` is the `default` id; a relative path is taken from `ansible_dir`,
/// where ansible-playbook runs).
pub fn password_sources(ansible_dir: &Path) -> Vec<PasswordSource> {
    let mut out: Vec<PasswordSource> = password_file(ansible_dir)
        .iter()
        .map(|p| PasswordSource::file(p))
        .collect();
    let env = AnsibleEnv::from_process();
    let list = match &env.vault_identity_list {
        Some(l) => l.clone(),
        None => AnsibleCfg::load(ansible_dir, &env)
            .get("vault_identity_list")
            .map(|(v, _)| v.to_string())
            .unwrap_or_default(),
    };
    for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (label, source) = item.split_once('@').unwrap_or(("default", item));
        let kind = match source {
            "prompt" | "prompt_ask_vault_pass" => SourceKind::Prompt,
            path => SourceKind::File(env.expand(path, ansible_dir)),
        };
        out.push(PasswordSource {
            what: format!("vault id {label} ({source})"),
            label: label.to_string(),
            kind,
        });
    }
    out
}

/// Why hk-console has no password from a source.
struct NoPassword {
    why: String,
    /// A prompt, or a script (run or not): ansible-playbook may still get a password from
    /// it, so a vault it might open is undecided, not failed.
    undecided: bool,
}

/// The password a source gives, or why hk-console has none from it.
fn password_of(
    src: &PasswordSource,
    runner: Option<ScriptRunner<'_>>,
) -> Result<String, NoPassword> {
    let undecided = |why: String| NoPassword {
        why,
        undecided: true,
    };
    let p = match &src.kind {
        SourceKind::Prompt => {
            return Err(undecided(format!(
                "{} asks at a prompt, which hk-console does not answer",
                src.what
            )))
        }
        SourceKind::File(p) => p,
    };
    match std::fs::metadata(p) {
        Ok(m) if is_executable(&m) => match runner {
            Some(run) => run(p, &src.label)
                .map_err(|e| undecided(format!("{} (a script) failed: {e}", src.what))),
            None => Err(undecided(format!(
                "{} is a script, which hk-console does not run here",
                src.what
            ))),
        },
        _ => read_capped(p)
            .map(|t| t.trim().to_string())
            .map_err(|e| NoPassword {
                why: format!("cannot read {}: {e}", src.what),
                undecided: false,
            }),
    }
}

/// Scan `roots` for vaulted content and decrypt it with the password in
/// `password_file` (if any) to learn what to mask. A password file that is a script is
/// not run: its vaulted values are unknown ([`scan_running`] runs it).
pub fn scan(roots: &[PathBuf], password_file: Option<&Path>) -> VaultScan {
    let sources: Vec<PasswordSource> = password_file
        .map(PasswordSource::file)
        .into_iter()
        .collect();
    scan_running(roots, &sources, None)
}

/// [`scan`] with every password source, and `runner` for a source that is a script: a
/// vaulted text is opened with whichever password opens it, as ansible-playbook tries its
/// secrets.
pub fn scan_running(
    roots: &[PathBuf],
    sources: &[PasswordSource],
    runner: Option<ScriptRunner<'_>>,
) -> VaultScan {
    let mut scan = VaultScan::default();
    let mut texts: Vec<(PathBuf, bool, String)> = Vec::new();
    for file in candidate_files(roots, &mut scan) {
        let Ok(meta) = std::fs::metadata(&file) else {
            continue;
        };
        if meta.len() > MAX_FILE_BYTES {
            // Too big to be a vars file; a whole-file vault is still recognised by its head.
            if head_is_vault(&file) {
                scan.problems.push(format!(
                    "{}: vaulted, over the {MAX_FILE_BYTES}-byte limit: its values are not masked",
                    file.display()
                ));
                scan.vaulted_files.push(file);
            }
            continue;
        }
        let Ok(bytes) = std::fs::read(&file) else {
            continue;
        };
        let Ok(text) = String::from_utf8(bytes) else {
            continue;
        };
        if !text.contains("$ANSIBLE_VAULT") {
            continue;
        }
        let found = vaulted_texts(&text);
        if found.is_empty() {
            continue;
        }
        scan.vaulted_files.push(file.clone());
        texts.extend(found.into_iter().map(|(whole, t)| (file.clone(), whole, t)));
    }
    let mut passwords: Vec<String> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    for src in sources {
        match password_of(src, runner) {
            Ok(pw) if !pw.is_empty() => passwords.push(pw),
            Ok(_) => failures.push(format!("{} is empty", src.what)),
            Err(e) => failures.push(e.why),
        }
    }
    // Each password opens vaulted values: it is masked like one, vaulted files or not.
    for pw in &passwords {
        scan.learn(pw);
    }
    if texts.is_empty() {
        return scan;
    }
    if passwords.is_empty() {
        scan.locked = Some(match failures.first() {
            Some(why) => format!("{why}: the vaulted values are unknown"),
            None => "no vault password file (ansible.cfg `vault_password_file`) and no vault identity list: the vaulted values are unknown".into(),
        });
        return scan;
    }
    for (file, whole, text) in texts {
        let mut last = None;
        let opened = passwords
            .iter()
            .find_map(|pw| match decrypt(&text, pw.as_bytes()) {
                Ok(plain) => Some(plain),
                Err(e) => {
                    last = Some(e);
                    None
                }
            });
        match opened {
            Some(plain) => {
                let plain = String::from_utf8_lossy(&plain).into_owned();
                if whole {
                    scan.learn_file(&plain);
                } else {
                    scan.learn(&plain);
                }
            }
            None => {
                let mut why = format!(
                    "{}: {}",
                    file.display(),
                    last.map(|e| e.to_string()).unwrap_or_default()
                );
                if !failures.is_empty() {
                    why.push_str(&format!(" ({})", failures.join("; ")));
                }
                scan.problems.push(why.clone());
                scan.locked.get_or_insert(why);
            }
        }
    }
    scan
}

/// Whether ansible-playbook, given the password sources it is configured with, can open
/// one whole-file vault: what a run would meet when it loads that file.
#[derive(Debug, Clone, PartialEq)]
pub enum Opens {
    Yes,
    /// No vault password is configured at all.
    NoPassword,
    /// A source hk-console does not read here (a script, a prompt) might open it: cannot
    /// tell, named.
    Undecided(String),
    /// No configured source can be read (absent, not a file, too big).
    Unreadable(String),
    /// No configured password opens it (or it is not a vault ansible reads).
    Fails(VaultError),
}

/// [`Opens`] for the vaulted `text` with every source ([`password_sources`]); scripts are
/// not run and prompts not asked (undecided unless a readable one opens it). Nothing
/// decrypted leaves this function.
pub fn opens_by(text: &str, sources: &[PasswordSource]) -> Opens {
    if sources.is_empty() {
        return Opens::NoPassword;
    }
    let mut undecided: Vec<String> = Vec::new();
    let mut unreadable: Vec<String> = Vec::new();
    let mut last = None;
    for src in sources {
        match password_of(src, None) {
            Ok(pw) => match decrypt(text, pw.as_bytes()) {
                Ok(_) => return Opens::Yes,
                Err(e) => last = Some(e),
            },
            Err(NoPassword {
                why,
                undecided: true,
            }) => undecided.push(why),
            Err(NoPassword { why, .. }) => unreadable.push(why),
        }
    }
    match (last, undecided.is_empty()) {
        (_, false) => Opens::Undecided(undecided.join("; ")),
        (Some(e), true) => Opens::Fails(e),
        (None, true) => Opens::Unreadable(unreadable.join("; ")),
    }
}

fn head_is_vault(file: &Path) -> bool {
    use std::io::Read as _;
    let mut head = [0u8; 14];
    std::fs::File::open(file)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| &head == b"$ANSIBLE_VAULT")
}

fn is_executable(m: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    m.is_file() && m.permissions().mode() & 0o111 != 0
}

/// The scan for a loaded repo: its ansible dir, its inventory's directory and each
/// environment's vault file, with every password source ansible-playbook would use, a
/// script among them run with `runner`. Made once per loaded repo, on the first ask: the
/// console's executors, its etcd probe and its VPN look share it, so a password script
/// (a password manager that may ask for a touch) runs once, not once for each. A repo
/// loaded again is scanned again.
pub fn scan_repo_running<'r>(repo: &'r super::Repo, runner: ScriptRunner<'_>) -> &'r VaultScan {
    repo.vault_scan.get_or_init(|| {
        scan_running(
            &repo_roots(repo),
            &password_sources(&repo.ansible_dir),
            Some(runner),
        )
    })
}

fn repo_roots(repo: &super::Repo) -> Vec<PathBuf> {
    let mut roots = vec![repo.ansible_dir.clone()];
    if let Some(dir) = repo.inventory_path.parent() {
        if !dir.starts_with(&repo.ansible_dir) {
            roots.push(dir.to_path_buf());
        }
    }
    for env in repo.config.environments.values() {
        if let Some(v) = &env.vault {
            roots.push(repo.root.join(v));
        }
    }
    roots
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (PathBuf, String) {
        let root = Path::new(env!("HK_SOURCE_ROOT")).join("inventory");
        let pw = std::fs::read_to_string(root.join(".vault-pass-sample")).expect("pw");
        (root, pw.trim().to_string())
    }

    #[test]
    fn decrypts_what_ansible_vault_wrote() {
        let (root, pw) = sample();
        let text = std::fs::read_to_string(
            root.join("infra/ansible/inventory/group_vars/vpn_egress_gateway/vault.yml"),
        )
        .expect("vault");
        let plain = decrypt(&text, pw.as_bytes()).expect("decrypts");
        let plain = String::from_utf8(plain).expect("utf8");
        assert!(plain.contains("vpn_egress_gateway_pia_password: sample-not-a-real-secret"));
        assert_eq!(
            decrypt(&text, b"not the password"),
            Err(VaultError::WrongPassword)
        );
        assert!(matches!(
            decrypt("$ANSIBLE_VAULT;1.1;AES256\nzz\n", b"x"),
            Err(VaultError::Format(_))
        ));
        assert!(matches!(
            decrypt("$ANSIBLE_VAULT;1.1;DES\n00\n", b"x"),
            Err(VaultError::Cipher(_))
        ));
    }

    #[test]
    fn the_sample_repo_masks_its_vaulted_password() {
        let (root, _) = sample();
        let ansible = root.join("infra/ansible");
        let pw = password_file(&ansible).expect("ansible.cfg names it");
        assert!(pw.ends_with(".vault-pass-sample"), "{}", pw.display());
        let s = scan(std::slice::from_ref(&ansible), Some(&pw));
        assert_eq!(s.locked, None, "{s:?}");
        assert_eq!(s.vaulted_files.len(), 1, "{s:?}");
        let r = s.redactor();
        let line = "+sample-not-a-real-secret";
        assert_eq!(r.redact(line), format!("+{}", crate::redact::MASK));
        let b64 = data_encoding::BASE64.encode(b"sample-not-a-real-secret");
        assert!(!r.redact(&format!("password: {b64}")).contains(&b64));
        // Issue 34: transformed forms of the real vaulted value: `| upper`, and
        // `b64encode(user ~ ':' ~ pass)` (the value inside a longer base64 string).
        assert_eq!(
            r.redact("SAMPLE-NOT-A-REAL-SECRET"),
            crate::redact::MASK.to_string()
        );
        for user in ["k3s", "admin", "operator"] {
            let basic =
                data_encoding::BASE64.encode(format!("{user}:sample-not-a-real-secret").as_bytes());
            let shown = r.redact(&format!("Authorization: Basic {basic}"));
            assert!(shown.contains(crate::redact::MASK), "{user}: {shown}");
        }
        assert!(!format!("{s:?}").contains("sample-not"), "{s:?}");

        let locked = scan(&[ansible], None);
        assert!(locked.locked.is_some());
        assert!(locked.masked() == 0);
    }

    /// The vault password opens every vaulted value: it is masked too, with or without
    /// vaulted content to decrypt.
    #[test]
    fn the_vault_password_itself_is_masked() {
        let (root, password) = sample();
        let ansible = root.join("infra/ansible");
        let pw = password_file(&ansible).expect("ansible.cfg names it");
        let r = scan(std::slice::from_ref(&ansible), Some(&pw)).redactor();
        assert_eq!(
            r.redact(&format!("--vault-pass {password} x")),
            format!("--vault-pass {} x", crate::redact::MASK)
        );
        let empty = tempfile::tempdir().expect("tmp");
        let r = scan(&[empty.path().to_path_buf()], Some(&pw)).redactor();
        assert!(!r.redact(&password).contains(&password));
    }

    #[test]
    fn inline_vault_blocks_are_found() {
        let text = "a: 1\nsecret: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  3132\n  3334\nb: 2\n";
        let found = vaulted_texts(text);
        assert_eq!(
            found,
            vec![(false, "$ANSIBLE_VAULT;1.1;AES256\n3132\n3334".to_string())]
        );
        assert!(vaulted_texts("plain: text\n").is_empty());
    }
}
