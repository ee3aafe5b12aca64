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
    let env = AnsibleEnv::from_process();
    if let Some(p) = &env.vault_password_file {
        return Some(env.expand(&p.to_string_lossy(), ansible_dir));
    }
    let cfg = AnsibleCfg::load(ansible_dir, &env);
    match cfg.get("vault_password_file") {
        Some((v, _)) if !v.is_empty() => Some(cfg.path(v)),
        _ => None,
    }
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
pub type ScriptRunner<'a> = &'a dyn Fn(&Path) -> Result<String, String>;

/// Scan `roots` for vaulted content and decrypt it with the password in
/// `password_file` (if any) to learn what to mask. A password file that is a script is
/// not run: its vaulted values are unknown ([`scan_running`] runs it).
pub fn scan(roots: &[PathBuf], password_file: Option<&Path>) -> VaultScan {
    scan_running(roots, password_file, None)
}

/// [`scan`], with `runner` for a password file that is a script.
pub fn scan_running(
    roots: &[PathBuf],
    password_file: Option<&Path>,
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
    if texts.is_empty() {
        // Nothing vaulted, yet the password itself stays a secret wherever it shows.
        if let Some(p) = password_file {
            match std::fs::metadata(p) {
                Ok(m) if is_executable(&m) => {
                    if let Some(Ok(pw)) = runner.map(|run| run(p)) {
                        scan.learn(&pw);
                    }
                }
                Ok(_) => {
                    if let Ok(t) = read_capped(p) {
                        scan.learn(t.trim());
                    }
                }
                Err(_) => {}
            }
        }
        return scan;
    }
    let password = match password_file {
        None => {
            scan.locked = Some("no vault password file (ansible.cfg `vault_password_file`): the vaulted values are unknown".into());
            return scan;
        }
        Some(p) => match std::fs::metadata(p) {
            Ok(m) if is_executable(&m) => match runner {
                Some(run) => match run(p) {
                    Ok(pw) => pw,
                    Err(e) => {
                        scan.locked = Some(format!(
                            "the vault password script {} failed: {e}: the vaulted values are unknown",
                            p.display()
                        ));
                        return scan;
                    }
                },
                None => {
                    scan.locked = Some(format!(
                        "the vault password file {} is a script, which hk-console does not run: the vaulted values are unknown",
                        p.display()
                    ));
                    return scan;
                }
            },
            _ => match read_capped(p) {
                Ok(t) => t.trim().to_string(),
                Err(e) => {
                    scan.locked = Some(format!("cannot read the vault password file: {e}"));
                    return scan;
                }
            },
        },
    };
    // The password opens every vaulted value: it is masked like one.
    scan.learn(&password);
    for (file, whole, text) in texts {
        match decrypt(&text, password.as_bytes()) {
            Ok(plain) => {
                let plain = String::from_utf8_lossy(&plain).into_owned();
                if whole {
                    scan.learn_file(&plain);
                } else {
                    scan.learn(&plain);
                }
            }
            Err(e) => {
                let why = format!("{}: {e}", file.display());
                scan.problems.push(why.clone());
                scan.locked.get_or_insert(why);
            }
        }
    }
    scan
}

/// Whether ansible-playbook, given the password file it is configured with, can open one
/// whole-file vault: what a run would meet when it loads that file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opens {
    Yes,
    /// No vault password is configured at all.
    NoPassword,
    /// The password file is a script, which hk-console does not run: cannot tell.
    Script(PathBuf),
    /// The configured password file cannot be read (absent, not a file, too big).
    Unreadable(String),
    /// The configured password does not open it (or it is not a vault ansible reads).
    Fails(VaultError),
}

/// [`Opens`] for the vaulted `text` with the password in `password_file`. Nothing
/// decrypted leaves this function.
pub fn opens(text: &str, password_file: Option<&Path>) -> Opens {
    let Some(p) = password_file else {
        return Opens::NoPassword;
    };
    match std::fs::metadata(p) {
        Ok(m) if is_executable(&m) => return Opens::Script(p.to_path_buf()),
        Err(e) => return Opens::Unreadable(format!("{}: {e}", p.display())),
        Ok(_) => {}
    }
    let password = match read_capped(p) {
        Ok(t) => t.trim().to_string(),
        Err(e) => return Opens::Unreadable(e),
    };
    match decrypt(text, password.as_bytes()) {
        Ok(_) => Opens::Yes,
        Err(e) => Opens::Fails(e),
    }
}

/// Whether a vault identity list (`--vault-id` sources) is configured, which hk-console
/// does not evaluate: `ANSIBLE_VAULT_IDENTITY_LIST`, or `vault_identity_list` in the
/// ansible.cfg ansible-playbook reads ([`AnsibleCfg`]).
pub fn identity_list_configured(ansible_dir: &Path) -> bool {
    if std::env::var_os("ANSIBLE_VAULT_IDENTITY_LIST").is_some_and(|v| !v.is_empty()) {
        return true;
    }
    AnsibleCfg::load(ansible_dir, &AnsibleEnv::from_process())
        .get("vault_identity_list")
        .is_some_and(|(v, _)| !v.is_empty())
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
/// environment's vault file, with the password file ansible-playbook would use.
pub fn scan_repo(repo: &super::Repo) -> VaultScan {
    let pw = password_file(&repo.ansible_dir);
    scan(&repo_roots(repo), pw.as_deref())
}

/// [`scan_repo`], running a password file that is a script with `runner`.
pub fn scan_repo_running(repo: &super::Repo, runner: ScriptRunner<'_>) -> VaultScan {
    let pw = password_file(&repo.ansible_dir);
    scan_running(&repo_roots(repo), pw.as_deref(), Some(runner))
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
