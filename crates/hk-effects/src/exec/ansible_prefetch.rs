//! Running a host's `ansible-playbook --list-hosts --limit HOST` ahead of its step.
//!
//! Each host keeps its own list-hosts confirmation (a mistyped limit is what it catches);
//! what may change is when it runs: while the operator reads the previous host's gate, the
//! next host's list-hosts can already be running. Its answer is used only if the files it
//! depended on are byte for byte what they were when it started: every file and directory
//! the command line names (the playbook, the inventory, `-e @vars` files) and `ansible.cfg`
//! in its working directory, hashed (SHA-256) when the run starts and again when the step
//! starts. Anything changed, unreadable or too large to hash means the step runs it again.
//!
//! Owns: [`Fingerprint`] (the content hash), [`ListHostsCache`] (pure: the entries and the
//! decision to use one or not). The executor (exec/mod.rs) runs the prefetch and keeps the
//! cache; the session says when (a gate asked for host N: prefetch host N+1).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// More files than this under an inventory directory: not hashed, so never reused (such a
/// tree is not an inventory; hashing it would cost more than running list-hosts).
pub const MAX_FILES: usize = 5_000;
/// Entries the cache keeps (the plan's next host, and a few more if several prefetches were
/// asked for before their steps ran); older ones are dropped.
pub const CAPACITY: usize = 8;

/// The SHA-256 of the files a list-hosts run read, taken in a fixed order with their paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    /// The first 12 hex digits (for the step's output line).
    pub fn short(&self) -> String {
        self.0.iter().take(6).map(|b| format!("{b:02x}")).collect()
    }
}

/// The files a command line names, relative to `cwd`: each argument (`@file` as `file`,
/// `--opt=value` as `value`) that exists, plus `cwd/ansible.cfg`. Order: as they appear.
pub fn named_files(argv: &[String], cwd: Option<&Path>) -> Vec<PathBuf> {
    let base = cwd.map(Path::to_path_buf).unwrap_or_default();
    let mut out: Vec<PathBuf> = Vec::new();
    for a in argv.iter().skip(1) {
        let v = a
            .split_once('=')
            .filter(|(k, _)| k.starts_with("--"))
            .map_or(a.as_str(), |(_, v)| v);
        let v = v.strip_prefix('@').unwrap_or(v);
        if v.is_empty() || v.starts_with('-') {
            continue;
        }
        // An inventory may be a comma-separated list of sources.
        for part in v.split(',').filter(|p| !p.is_empty()) {
            let p = base.join(part);
            if p.exists() && !out.contains(&p) {
                out.push(p);
            }
        }
    }
    let cfg = base.join("ansible.cfg");
    if cfg.is_file() && !out.contains(&cfg) {
        out.push(cfg);
    }
    out
}

/// The content hash of `files` (directories walked in name order). `None` when one cannot
/// be read or a directory holds more than [`MAX_FILES`] files: then nothing is reused.
pub fn fingerprint(files: &[PathBuf]) -> Option<Fingerprint> {
    let mut h = Sha256::new();
    let mut count = 0usize;
    for f in files {
        hash_path(&mut h, f, &mut count)?;
    }
    Some(Fingerprint(h.finalize().into()))
}

fn hash_path(h: &mut Sha256, p: &Path, count: &mut usize) -> Option<()> {
    let meta = std::fs::metadata(p).ok()?;
    let name = p.as_os_str().as_encoded_bytes();
    h.update((name.len() as u64).to_le_bytes());
    h.update(name);
    if meta.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
            .ok()?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .ok()?;
        entries.sort();
        h.update(b"d");
        h.update((entries.len() as u64).to_le_bytes());
        for e in entries {
            hash_path(h, &e, count)?;
        }
    } else {
        *count += 1;
        if *count > MAX_FILES {
            return None;
        }
        let bytes = std::fs::read(p).ok()?;
        h.update(b"f");
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
    }
    Some(())
}

/// The files and the hash for one command line (blocking: file reads).
pub fn fingerprint_argv(argv: &[String], cwd: Option<&Path>) -> Option<Fingerprint> {
    fingerprint(&named_files(argv, cwd))
}

/// Whether a prefetched answer may stand for the step: both hashes taken, and equal.
pub fn still_valid(at_start: Option<&Fingerprint>, now: Option<&Fingerprint>) -> bool {
    matches!((at_start, now), (Some(a), Some(b)) if a == b)
}

/// A command line and its working directory: what a prefetched run is looked up by.
type Key = (Vec<String>, Option<PathBuf>);

/// The prefetched runs by command line and working directory.
#[derive(Debug)]
pub struct ListHostsCache<V> {
    entries: VecDeque<(Key, V)>,
}

impl<V> Default for ListHostsCache<V> {
    fn default() -> Self {
        ListHostsCache {
            entries: VecDeque::new(),
        }
    }
}

impl<V> ListHostsCache<V> {
    /// Keeps `v` for this command line, replacing an earlier one (returned, to be stopped),
    /// and dropping the oldest past [`CAPACITY`] (also returned).
    pub fn put(&mut self, argv: &[String], cwd: Option<&Path>, v: V) -> Vec<V> {
        let key = (argv.to_vec(), cwd.map(Path::to_path_buf));
        let mut dropped = Vec::new();
        if let Some(i) = self.entries.iter().position(|(k, _)| *k == key) {
            if let Some((_, old)) = self.entries.remove(i) {
                dropped.push(old);
            }
        }
        self.entries.push_back((key, v));
        while self.entries.len() > CAPACITY {
            if let Some((_, old)) = self.entries.pop_front() {
                dropped.push(old);
            }
        }
        dropped
    }

    /// Takes what was prefetched for this command line, if anything (used at most once).
    pub fn take(&mut self, argv: &[String], cwd: Option<&Path>) -> Option<V> {
        let i = self
            .entries
            .iter()
            .position(|((a, c), _)| a.as_slice() == argv && c.as_deref() == cwd)?;
        self.entries.remove(i).map(|(_, v)| v)
    }

    pub fn has(&self, argv: &[String], cwd: Option<&Path>) -> bool {
        self.entries
            .iter()
            .any(|((a, c), _)| a.as_slice() == argv && c.as_deref() == cwd)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    /// A repo layout like the planner's: cwd is the ansible dir, the inventory a directory.
    fn repo(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("hk-prefetch-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("inventory/group_vars")).expect("dir");
        std::fs::create_dir_all(d.join("playbooks")).expect("dir");
        std::fs::write(
            d.join("inventory/hosts.ini"),
            "[k3s_prod]\nk3s-prod-1\nk3s-prod-2\n",
        )
        .expect("write");
        std::fs::write(d.join("inventory/group_vars/all.yml"), "a: 1\n").expect("write");
        std::fs::write(
            d.join("playbooks/p.yml"),
            "- hosts: k3s_prod\n  tasks: []\n",
        )
        .expect("write");
        std::fs::write(d.join("ansible.cfg"), "[defaults]\n").expect("write");
        d
    }

    fn cmd() -> Vec<String> {
        argv(&[
            "ansible-playbook",
            "-i",
            "inventory/hosts.ini",
            "playbooks/p.yml",
            "-e",
            "k3s_hosts=k3s_prod",
            "--limit",
            "k3s-prod-2",
            "--list-hosts",
        ])
    }

    #[test]
    fn the_command_lines_files_are_hashed() {
        let d = repo("files");
        let files = named_files(&cmd(), Some(&d));
        assert_eq!(
            files,
            vec![
                d.join("inventory/hosts.ini"),
                d.join("playbooks/p.yml"),
                d.join("ansible.cfg")
            ]
        );
        let dir_inv = argv(&[
            "ansible-playbook",
            "--inventory=inventory",
            "@playbooks/p.yml",
        ]);
        assert_eq!(
            named_files(&dir_inv, Some(&d)),
            vec![
                d.join("inventory"),
                d.join("playbooks/p.yml"),
                d.join("ansible.cfg")
            ]
        );
        std::fs::remove_dir_all(&d).ok();
    }

    /// The point of the module: an answer run ahead stands only while every file it read is
    /// unchanged; a changed inventory, playbook, group_vars file (inventory as a directory)
    /// or ansible.cfg, or one that can no longer be read, means run it again.
    #[test]
    fn a_changed_file_means_run_again() {
        let d = repo("changed");
        let c = cmd();
        let mut cache: ListHostsCache<&str> = ListHostsCache::default();
        let at_start = fingerprint_argv(&c, Some(&d));
        assert!(at_start.is_some());
        cache.put(&c, Some(&d), "k3s-prod-2 listed");
        // Unchanged: used.
        let now = fingerprint_argv(&c, Some(&d));
        assert!(still_valid(at_start.as_ref(), now.as_ref()));
        assert_eq!(cache.take(&c, Some(&d)), Some("k3s-prod-2 listed"));
        assert_eq!(cache.take(&c, Some(&d)), None, "used once");

        for (file, text) in [
            (
                "inventory/hosts.ini",
                "[k3s_prod]\nk3s-prod-1\nk3s-prod-3\n",
            ),
            ("playbooks/p.yml", "- hosts: all\n  tasks: []\n"),
            ("ansible.cfg", "[defaults]\ninventory = elsewhere\n"),
        ] {
            let before = fingerprint_argv(&c, Some(&d));
            let old = std::fs::read(d.join(file)).expect("read");
            std::fs::write(d.join(file), text).expect("write");
            let after = fingerprint_argv(&c, Some(&d));
            assert!(
                !still_valid(before.as_ref(), after.as_ref()),
                "{file} changed"
            );
            std::fs::write(d.join(file), old).expect("restore");
            let restored = fingerprint_argv(&c, Some(&d));
            assert!(
                still_valid(before.as_ref(), restored.as_ref()),
                "{file} restored"
            );
        }

        // Inventory given as a directory: a group_vars file inside it counts too.
        let dir_cmd = argv(&[
            "ansible-playbook",
            "-i",
            "inventory",
            "playbooks/p.yml",
            "--list-hosts",
        ]);
        let before = fingerprint_argv(&dir_cmd, Some(&d));
        std::fs::write(d.join("inventory/group_vars/all.yml"), "a: 2\n").expect("write");
        let after = fingerprint_argv(&dir_cmd, Some(&d));
        assert!(!still_valid(before.as_ref(), after.as_ref()));

        // A file that went away: no hash, never reused.
        std::fs::remove_file(d.join("playbooks/p.yml")).expect("rm");
        let gone = fingerprint(&[d.join("playbooks/p.yml")]);
        assert_eq!(gone, None);
        assert!(!still_valid(before.as_ref(), None));
        assert!(!still_valid(None, None));
        std::fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn the_cache_is_bounded_and_replaces_by_command_line() {
        let mut cache: ListHostsCache<usize> = ListHostsCache::default();
        let c = |i: usize| argv(&["ansible-playbook", "p.yml", "--limit", &format!("h{i}")]);
        assert!(cache.put(&c(0), None, 0).is_empty());
        assert_eq!(
            cache.put(&c(0), None, 1),
            vec![0],
            "replaced, the old run handed back"
        );
        for i in 1..CAPACITY + 3 {
            cache.put(&c(i), None, i);
        }
        assert_eq!(cache.len(), CAPACITY);
        assert!(!cache.has(&c(0), None) && !cache.has(&c(1), None));
        assert!(cache.has(&c(CAPACITY + 2), None));
        assert_eq!(
            cache.take(&c(5), Some(Path::new("/elsewhere"))),
            None,
            "cwd is part of the key"
        );
    }
}
