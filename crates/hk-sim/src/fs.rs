//! A simulated node's writable file tree: the directories of a Debian 12 k3s server and
//! whatever a playbook, `scp`, `sftp` or a redirection writes there, kept in memory so that
//! what one command (or an upload) changes, the next `cat` shows.
//!
//! Paths are absolute and normalised (`/a/./b/../c` is `/a/c`); ownership is a uid and
//! POSIX mode bits, checked the way the kernel does for a non-root user (root may do
//! anything). Files the node computes (`/proc`, `/sys/block`, `/etc/os-release`) are not
//! here: [`super::node::NodeState`] answers them first.
//!
//! Owns: [`Fs`], [`Stat`], [`FileKind`], [`FsError`], [`normalize`]. Must not: touch the real host's
//! file system.

use std::collections::BTreeMap;

/// What a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    File,
    Dir,
    CharDev,
    BlockDev,
}

/// A path's metadata, as `stat(2)` would tell it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    pub kind: FileKind,
    /// Permission bits, with setuid/setgid/sticky (`0o1777` for /tmp).
    pub mode: u32,
    pub uid: u32,
    pub size: u64,
    pub mtime_ms: u64,
    /// A symbolic link to this (sysfs' `/sys/block/sda`): `test -h` is true.
    pub symlink: bool,
}

impl Stat {
    /// `drwxr-xr-x` as `ls -l` prints it.
    pub fn mode_string(&self) -> String {
        let mut s = String::with_capacity(10);
        s.push(if self.symlink {
            'l'
        } else {
            match self.kind {
                FileKind::File => '-',
                FileKind::Dir => 'd',
                FileKind::CharDev => 'c',
                FileKind::BlockDev => 'b',
            }
        });
        for (shift, special, lower, upper) in [
            (6, 0o4000, 's', 'S'),
            (3, 0o2000, 's', 'S'),
            (0, 0o1000, 't', 'T'),
        ] {
            let bits = (self.mode >> shift) & 7;
            s.push(if bits & 4 != 0 { 'r' } else { '-' });
            s.push(if bits & 2 != 0 { 'w' } else { '-' });
            let x = bits & 1 != 0;
            s.push(match (self.mode & special != 0, x) {
                (true, true) => lower,
                (true, false) => upper,
                (false, true) => 'x',
                (false, false) => '-',
            });
        }
        s
    }
}

#[derive(Debug, Clone)]
struct Entry {
    data: Option<Vec<u8>>,
    mode: u32,
    uid: u32,
    mtime_ms: u64,
}

/// The in-memory tree: every directory and regular file by normalised absolute path.
#[derive(Debug, Clone)]
pub struct Fs {
    entries: BTreeMap<String, Entry>,
    /// Directories of which the simulation models only some entries (`/usr/bin`, `/etc`,
    /// the k3s data dir...): listing one would show a real node's directory with most of it
    /// missing, so a listing is refused as not simulated. What is in them can still be read.
    partial: std::collections::BTreeSet<String>,
}

/// `path` made absolute against `cwd` and normalised (`.`/`..`/`//` resolved).
pub fn normalize(cwd: &str, path: &str) -> String {
    let joined = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{cwd}/{path}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for p in joined.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

/// The directory part of a normalised path (`/` for `/x`).
pub fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(k) => &path[..k],
    }
}

/// The uid the simulation gives a login name: root 0, anyone else 1000.
pub fn uid_of(user: &str) -> u32 {
    if user == "root" {
        0
    } else {
        1000
    }
}

/// What [`FsError::NotSimulated`] prints after the tool's own words; a command whose
/// error output carries it is turned into the shell's loud exit 2.
pub const NOT_SIMULATED: &str = "hk-console simulation: this path is not simulated";

/// Why a file operation failed: one variant per refusal, displayed as the `strerror` text
/// the real tool prints after its own words (`cat: f: No such file or directory`), so a
/// simulated command prints the same bytes a real one would.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FsError {
    /// ENOENT.
    #[error("No such file or directory")]
    NotFound,
    /// EACCES: the mode bits refuse it.
    #[error("Permission denied")]
    PermissionDenied,
    /// EPERM: only the owner (or root) may.
    #[error("Operation not permitted")]
    NotPermitted,
    /// ENOTDIR.
    #[error("Not a directory")]
    NotADirectory,
    /// EISDIR.
    #[error("Is a directory")]
    IsADirectory,
    /// EEXIST.
    #[error("File exists")]
    Exists,
    /// ENOTEMPTY.
    #[error("Directory not empty")]
    NotEmpty,
    /// EBUSY (removing `/`).
    #[error("Device or resource busy")]
    Busy,
    /// EFBIG: an offset past what the host can address.
    #[error("File too large")]
    TooLarge,
    /// EINVAL: a sysfs file refuses the value written.
    #[error("Invalid argument")]
    InvalidArgument,
    /// EROFS.
    #[error("Read-only file system")]
    ReadOnly,
    /// dash's own word for a redirection into a directory that does not exist.
    #[error("Directory nonexistent")]
    DirectoryNonexistent,
    /// The node's state could not be reached (its lock was poisoned by a panic).
    #[error("node state unavailable")]
    StateUnavailable,
    /// A path the simulation does not model (most of /proc and /sys): a real node has it,
    /// so ENOENT would be a lie. Commands turn this into the shell's exit 2.
    #[error("{NOT_SIMULATED}")]
    NotSimulated,
}

/// A file operation's result: the value, or the refusal.
pub type FsResult<T> = Result<T, FsError>;

impl Fs {
    /// A Debian 12 server's top-level directories, owned by root, at `now_ms`.
    pub fn debian(now_ms: u64) -> Self {
        // (directory, mode, listed whole or held in part): a Debian 12 install's top level
        // whole, and the directories a fresh install leaves empty; the rest hold far more
        // than the model does, so listing them is refused ([`Fs::list`]).
        const WHOLE: bool = true;
        const PART: bool = false;
        let dirs: &[(&str, u32, bool)] = &[
            ("/", 0o755, WHOLE),
            ("/bin", 0o755, PART),
            ("/boot", 0o755, PART),
            ("/boot/efi", 0o755, PART),
            ("/dev", 0o755, PART),
            ("/etc", 0o755, PART),
            ("/etc/rancher", 0o755, PART),
            ("/etc/rancher/k3s", 0o755, PART),
            ("/etc/systemd", 0o755, PART),
            ("/etc/systemd/system", 0o755, PART),
            ("/home", 0o755, WHOLE),
            ("/lib", 0o755, PART),
            ("/lib64", 0o755, PART),
            ("/lost+found", 0o700, WHOLE),
            ("/media", 0o755, WHOLE),
            ("/mnt", 0o755, WHOLE),
            ("/opt", 0o755, WHOLE),
            ("/proc", 0o755, WHOLE),
            ("/root", 0o700, PART),
            ("/run", 0o755, PART),
            ("/sbin", 0o755, PART),
            ("/srv", 0o755, WHOLE),
            ("/sys", 0o755, WHOLE),
            ("/sys/block", 0o755, WHOLE),
            ("/tmp", 0o1777, WHOLE),
            ("/usr", 0o755, PART),
            ("/usr/bin", 0o755, PART),
            ("/usr/lib", 0o755, PART),
            ("/usr/local", 0o755, PART),
            ("/usr/local/bin", 0o755, PART),
            ("/usr/sbin", 0o755, PART),
            ("/var", 0o755, PART),
            ("/var/lib", 0o755, PART),
            ("/var/lib/rancher", 0o755, WHOLE),
            ("/var/lib/rancher/k3s", 0o755, PART),
            ("/var/log", 0o755, PART),
            ("/var/tmp", 0o1777, WHOLE),
        ];
        let mut fs = Fs {
            entries: BTreeMap::new(),
            partial: std::collections::BTreeSet::new(),
        };
        for &(d, mode, whole) in dirs {
            fs.entries.insert(
                d.to_string(),
                Entry {
                    data: None,
                    mode,
                    uid: 0,
                    mtime_ms: now_ms,
                },
            );
            if !whole {
                fs.partial.insert(d.to_string());
            }
        }
        fs
    }

    /// Makes `/home/USER` (owned by USER) if it is not there: the account's home.
    pub fn ensure_home(&mut self, user: &str, now_ms: u64) {
        if user == "root" {
            return;
        }
        self.entries
            .entry(format!("/home/{user}"))
            .or_insert(Entry {
                data: None,
                mode: 0o755,
                uid: uid_of(user),
                mtime_ms: now_ms,
            });
    }

    pub fn stat(&self, path: &str) -> Option<Stat> {
        self.entries.get(path).map(|e| Stat {
            kind: if e.data.is_some() {
                FileKind::File
            } else {
                FileKind::Dir
            },
            mode: e.mode,
            uid: e.uid,
            size: e.data.as_ref().map_or(4096, |d| d.len() as u64),
            mtime_ms: e.mtime_ms,
            symlink: false,
        })
    }

    /// May `uid` do `want` (4 read, 2 write, 1 exec/search) on this entry?
    fn allows(e: &Entry, uid: u32, want: u32) -> bool {
        if uid == 0 {
            return true;
        }
        let bits = if e.uid == uid { e.mode >> 6 } else { e.mode };
        bits & want == want
    }

    /// The parent directory must exist, be a directory and let `uid` write into it.
    fn writable_dir(&self, path: &str, uid: u32) -> FsResult<()> {
        let dir = parent(path);
        match self.entries.get(dir) {
            None => Err(FsError::NotFound),
            Some(e) if e.data.is_some() => Err(FsError::NotADirectory),
            Some(e) if !Self::allows(e, uid, 3) => Err(FsError::PermissionDenied),
            Some(_) => Ok(()),
        }
    }

    pub fn read(&self, path: &str, uid: u32) -> FsResult<Vec<u8>> {
        match self.entries.get(path) {
            None => Err(FsError::NotFound),
            Some(Entry { data: None, .. }) => Err(FsError::IsADirectory),
            Some(e) if !Self::allows(e, uid, 4) => Err(FsError::PermissionDenied),
            Some(Entry { data: Some(d), .. }) => Ok(d.clone()),
        }
    }

    /// Writes (creating with mode 0644, truncating, or appending) a regular file.
    pub fn write(
        &mut self,
        path: &str,
        data: &[u8],
        append: bool,
        uid: u32,
        now_ms: u64,
    ) -> FsResult<()> {
        match self.entries.get_mut(path) {
            Some(Entry { data: None, .. }) => Err(FsError::IsADirectory),
            Some(e) => {
                if !Self::allows(e, uid, 2) {
                    return Err(FsError::PermissionDenied);
                }
                let d = e.data.get_or_insert_with(Vec::new);
                if !append {
                    d.clear();
                }
                d.extend_from_slice(data);
                e.mtime_ms = now_ms;
                Ok(())
            }
            None => {
                self.writable_dir(path, uid)?;
                self.entries.insert(
                    path.to_string(),
                    Entry {
                        data: Some(data.to_vec()),
                        mode: 0o644,
                        uid,
                        mtime_ms: now_ms,
                    },
                );
                Ok(())
            }
        }
    }

    /// Writes `data` at `offset` (sftp's WRITE), growing the file with zeros if needed.
    pub fn write_at(&mut self, path: &str, offset: u64, data: &[u8], now_ms: u64) -> FsResult<()> {
        let e = self.entries.get_mut(path).ok_or(FsError::NotFound)?;
        let d = e.data.as_mut().ok_or(FsError::IsADirectory)?;
        let start = usize::try_from(offset).map_err(|_| FsError::TooLarge)?;
        let end = start.checked_add(data.len()).ok_or(FsError::TooLarge)?;
        if d.len() < end {
            d.resize(end, 0);
        }
        d[start..end].copy_from_slice(data);
        e.mtime_ms = now_ms;
        Ok(())
    }

    pub fn mkdir(&mut self, path: &str, mode: u32, uid: u32, now_ms: u64) -> FsResult<()> {
        if self.entries.contains_key(path) {
            return Err(FsError::Exists);
        }
        self.writable_dir(path, uid)?;
        self.entries.insert(
            path.to_string(),
            Entry {
                data: None,
                mode: mode & 0o7777,
                uid,
                mtime_ms: now_ms,
            },
        );
        Ok(())
    }

    /// Removes a file, or an empty directory when `dir` (rmdir), or a tree when `recursive`.
    pub fn remove(&mut self, path: &str, dir: bool, recursive: bool, uid: u32) -> FsResult<()> {
        let Some(e) = self.entries.get(path) else {
            return Err(FsError::NotFound);
        };
        if path == "/" {
            return Err(FsError::Busy);
        }
        let is_dir = e.data.is_none();
        if is_dir && !dir && !recursive {
            return Err(FsError::IsADirectory);
        }
        if !is_dir && dir && !recursive {
            return Err(FsError::NotADirectory);
        }
        self.writable_dir(path, uid)?;
        let prefix = format!("{path}/");
        let children: Vec<String> = self
            .entries
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(k, _)| k.clone())
            .collect();
        if !children.is_empty() && !recursive {
            return Err(FsError::NotEmpty);
        }
        for c in children {
            self.entries.remove(&c);
        }
        self.entries.remove(path);
        Ok(())
    }

    pub fn rename(&mut self, from: &str, to: &str, uid: u32) -> FsResult<()> {
        if !self.entries.contains_key(from) {
            return Err(FsError::NotFound);
        }
        self.writable_dir(from, uid)?;
        self.writable_dir(to, uid)?;
        if self.entries.get(to).is_some_and(|e| e.data.is_none()) {
            return Err(FsError::IsADirectory);
        }
        let prefix = format!("{from}/");
        let moved: Vec<String> = self
            .entries
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(k, _)| k.clone())
            .collect();
        for k in moved {
            if let Some(e) = self.entries.remove(&k) {
                self.entries.insert(format!("{to}{}", &k[from.len()..]), e);
            }
        }
        if let Some(e) = self.entries.remove(from) {
            self.entries.insert(to.to_string(), e);
        }
        Ok(())
    }

    pub fn chmod(&mut self, path: &str, mode: u32, uid: u32) -> FsResult<()> {
        let e = self.entries.get_mut(path).ok_or(FsError::NotFound)?;
        if uid != 0 && e.uid != uid {
            return Err(FsError::NotPermitted);
        }
        e.mode = mode & 0o7777;
        Ok(())
    }

    /// Sets a path's modification time (scp -p, sftp setstat).
    pub fn set_mtime(&mut self, path: &str, mtime_ms: u64) -> FsResult<()> {
        let e = self.entries.get_mut(path).ok_or(FsError::NotFound)?;
        e.mtime_ms = mtime_ms;
        Ok(())
    }

    pub fn touch(&mut self, path: &str, uid: u32, now_ms: u64) -> FsResult<()> {
        match self.entries.get_mut(path) {
            Some(e) => {
                e.mtime_ms = now_ms;
                Ok(())
            }
            None => self.write(path, b"", true, uid, now_ms),
        }
    }

    /// Every regular file: its path, mode and content (what a node's real root is seeded
    /// with, [`super::userland`]).
    pub fn regular_files(&self) -> impl Iterator<Item = (&str, u32, &[u8])> {
        self.entries
            .iter()
            .filter_map(|(p, e)| e.data.as_deref().map(|d| (p.as_str(), e.mode, d)))
    }

    /// The names directly inside a directory, sorted.
    pub fn list(&self, path: &str, uid: u32) -> FsResult<Vec<String>> {
        let e = self.entries.get(path).ok_or(FsError::NotFound)?;
        if e.data.is_some() {
            return Err(FsError::NotADirectory);
        }
        if !Self::allows(e, uid, 4) {
            return Err(FsError::PermissionDenied);
        }
        if self.partial.contains(path) {
            return Err(FsError::NotSimulated);
        }
        let prefix = if path == "/" {
            "/".to_string()
        } else {
            format!("{path}/")
        };
        Ok(self
            .entries
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .filter_map(|(k, _)| {
                let rest = &k[prefix.len()..];
                (!rest.is_empty() && !rest.contains('/')).then(|| rest.to_string())
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_normalise() {
        assert_eq!(normalize("/home/u", "x/../y/./z"), "/home/u/y/z");
        assert_eq!(normalize("/home/u", "/../etc//hosts"), "/etc/hosts");
        assert_eq!(parent("/etc/hosts"), "/etc");
        assert_eq!(parent("/etc"), "/");
    }

    #[test]
    fn a_directory_modelled_in_part_is_not_listed() {
        let mut fs = Fs::debian(0);
        assert_eq!(fs.list("/usr/bin", 0), Err(FsError::NotSimulated));
        assert_eq!(fs.list("/etc", 1000), Err(FsError::NotSimulated));
        // Its files the model has still read; directories it owns whole still list.
        fs.write("/etc/hostname", b"n1\n", false, 0, 0)
            .expect("write");
        assert_eq!(fs.read("/etc/hostname", 0), Ok(b"n1\n".to_vec()));
        assert!(fs.list("/", 0).expect("root").contains(&"mnt".to_string()));
        assert_eq!(fs.list("/mnt", 0), Ok(Vec::new()));
        fs.write("/tmp/x", b"", false, 0, 0).expect("write");
        assert_eq!(fs.list("/tmp", 0), Ok(vec!["x".to_string()]));
    }

    #[test]
    fn ownership_is_checked_for_non_root() {
        let mut fs = Fs::debian(0);
        fs.ensure_home("debian", 0);
        assert_eq!(
            fs.write("/etc/x", b"1", false, 1000, 0),
            Err(FsError::PermissionDenied)
        );
        assert_eq!(fs.write("/etc/x", b"1", false, 0, 0), Ok(()));
        assert_eq!(fs.write("/tmp/y", b"a", false, 1000, 0), Ok(()));
        assert_eq!(fs.write("/tmp/y", b"b", true, 1000, 0), Ok(()));
        assert_eq!(fs.read("/tmp/y", 1000), Ok(b"ab".to_vec()));
        assert_eq!(fs.write("/home/debian/f", b"", false, 1000, 0), Ok(()));
        assert_eq!(
            fs.write("/nope/f", b"", false, 0, 0),
            Err(FsError::NotFound)
        );
        assert_eq!(fs.list("/tmp", 1000), Ok(vec!["y".to_string()]));
        assert_eq!(
            fs.remove("/tmp", false, false, 0),
            Err(FsError::IsADirectory)
        );
        assert_eq!(fs.rename("/tmp/y", "/tmp/z", 1000), Ok(()));
        assert_eq!(fs.stat("/tmp/z").map(|s| s.size), Some(2));
        assert_eq!(
            fs.stat("/tmp").map(|s| s.mode_string()).as_deref(),
            Some("drwxrwxrwt")
        );
    }

    /// The simulated tools print a refusal after their own words: each one must read as
    /// the strerror text the real tool prints, byte for byte.
    #[test]
    fn every_refusal_reads_as_its_strerror() {
        for (e, text) in [
            (FsError::NotFound, "No such file or directory"),
            (FsError::PermissionDenied, "Permission denied"),
            (FsError::NotPermitted, "Operation not permitted"),
            (FsError::NotADirectory, "Not a directory"),
            (FsError::IsADirectory, "Is a directory"),
            (FsError::Exists, "File exists"),
            (FsError::NotEmpty, "Directory not empty"),
            (FsError::Busy, "Device or resource busy"),
            (FsError::TooLarge, "File too large"),
            (FsError::InvalidArgument, "Invalid argument"),
            (FsError::ReadOnly, "Read-only file system"),
            (FsError::DirectoryNonexistent, "Directory nonexistent"),
            (FsError::StateUnavailable, "node state unavailable"),
        ] {
            assert_eq!(e.to_string(), text, "{e:?}");
        }
    }
}
