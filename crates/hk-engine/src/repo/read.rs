//! Reading one repo file, bounded: the one reader every repo file read goes through.
//!
//! Owns: refusing what is not a regular file before reading it (a FIFO blocks forever, a
//! device such as `/dev/zero` never ends), capping how many bytes are read, and saying where
//! text that is not UTF-8 starts (file:line:col, not just the file); listing the regular
//! files under a directory, bounded ([`files_under`]).
//! Must not: parse anything, or read more than [`MAX_FILE_BYTES`] + 1 bytes of any file.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The largest repo file read (`repo.max_file_bytes`, 8 MiB). Inventories, vars files,
/// runbooks and `hk-console.yaml` are kilobytes; this only stops a wrong path or a generated
/// monster from being read into memory whole.
pub const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{}: cannot read: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {kind}, not a regular file: refused before reading (expected a regular file; a FIFO or device can block or never end)", path.display())]
    NotAFile { path: PathBuf, kind: &'static str },
    #[error("{}: larger than {MAX_FILE_BYTES} bytes (limit repo.max_file_bytes): refused rather than read whole", path.display())]
    TooLarge { path: PathBuf },
    #[error("{}:{line}:{col}: bytes that are not UTF-8 (expected UTF-8 text)", path.display())]
    NotUtf8 {
        path: PathBuf,
        line: usize,
        col: usize,
    },
}

impl ReadError {
    /// What went wrong without the path (for error types that print the path themselves).
    pub fn reason(&self) -> String {
        match self {
            ReadError::Io { source, .. } => source.to_string(),
            ReadError::NotAFile { kind, .. } => format!(
                "{kind}, not a regular file: refused before reading (expected a regular file)"
            ),
            ReadError::TooLarge { .. } => {
                format!("larger than {MAX_FILE_BYTES} bytes (limit repo.max_file_bytes): refused")
            }
            ReadError::NotUtf8 { line, col, .. } => {
                format!("line {line}, column {col}: bytes that are not UTF-8 (expected UTF-8 text)")
            }
        }
    }

    /// The error as an `io::Error` for callers whose error type wraps one. The kind is
    /// `NotFound` when the file is missing, so "missing" checks keep working.
    pub fn into_io(self) -> std::io::Error {
        match self {
            ReadError::Io { source, .. } => source,
            other => std::io::Error::new(std::io::ErrorKind::InvalidData, other.reason()),
        }
    }
}

fn kind_of(ft: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO";
        }
        if ft.is_char_device() {
            return "a character device";
        }
        if ft.is_block_device() {
            return "a block device";
        }
        if ft.is_socket() {
            return "a socket";
        }
    }
    if ft.is_dir() {
        "a directory"
    } else {
        "a special file"
    }
}

/// A repo file's bytes: a regular file (symlinks followed) of at most [`MAX_FILE_BYTES`].
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, ReadError> {
    let io = |source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    // stat before open: opening a FIFO for reading blocks until a writer comes.
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() {
        return Err(ReadError::NotAFile {
            path: path.to_path_buf(),
            kind: kind_of(&meta.file_type()),
        });
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(ReadError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    let file = File::open(path).map_err(io)?;
    // The path may have been swapped between the stat and the open: check what was opened.
    let opened = file.metadata().map_err(io)?;
    if !opened.is_file() {
        return Err(ReadError::NotAFile {
            path: path.to_path_buf(),
            kind: kind_of(&opened.file_type()),
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(opened.len()).unwrap_or(0));
    // `take` holds even when the size the file system reports is wrong (procfs, a file
    // still growing).
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(ReadError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    Ok(bytes)
}

/// A repo file as UTF-8 text, bounded like [`read_bytes`]; bytes that are not UTF-8 are an
/// error naming the line and column where they start.
pub fn read_text(path: &Path) -> Result<String, ReadError> {
    let bytes = read_bytes(path)?;
    String::from_utf8(bytes).map_err(|e| {
        let (line, col) = utf8_error_position(e.as_bytes(), e.utf8_error().valid_up_to());
        ReadError::NotUtf8 {
            path: path.to_path_buf(),
            line,
            col,
        }
    })
}

/// `std::fs::read_to_string` with this module's bounds, for callers whose errors wrap an
/// `io::Error` (the message says what was refused and where bad UTF-8 starts).
pub fn read_to_string(path: &Path) -> std::io::Result<String> {
    read_text(path).map_err(ReadError::into_io)
}

/// 1-based line and column (in characters) of byte offset `at`, which ends valid UTF-8.
pub fn utf8_error_position(bytes: &[u8], at: usize) -> (usize, usize) {
    let before = &bytes[..at.min(bytes.len())];
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let col = std::str::from_utf8(&before[line_start..]).map_or(1, |s| s.chars().count() + 1);
    (line, col)
}

/// The regular files under `dir` (symbolic links not followed), sorted, at most `max` of
/// them: `keep(entry, is_dir)` says which entries count (a directory it refuses is not
/// entered). A directory that cannot be listed is skipped.
pub fn files_under(
    dir: &Path,
    max: usize,
    keep: &dyn Fn(&std::fs::DirEntry, bool) -> bool,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                if keep(&e, true) {
                    stack.push(e.path());
                }
            } else if ft.is_file() && out.len() < max && keep(&e, false) {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_utf8_names_line_and_column() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("x.yaml");
        std::fs::write(&p, b"a: 1\nb: \xc3\xa9t\xff\n").expect("write");
        let err = read_text(&p).expect_err("not utf-8");
        assert!(
            err.to_string()
                .ends_with("x.yaml:2:6: bytes that are not UTF-8 (expected UTF-8 text)"),
            "{err}"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn devices_and_directories_are_refused_by_type() {
        let err = read_bytes(Path::new("/dev/zero")).expect_err("device");
        assert!(err.to_string().contains("a character device"), "{err}");
        let err = read_bytes(Path::new("/")).expect_err("dir");
        assert!(err.to_string().contains("a directory"), "{err}");
        let err = read_bytes(Path::new("/nonexistent-hk")).expect_err("missing");
        assert_eq!(err.into_io().kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn files_over_the_cap_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("big");
        let f = File::create(&p).expect("create");
        f.set_len(MAX_FILE_BYTES + 1).expect("sparse");
        let err = read_bytes(&p).expect_err("too big");
        assert!(
            err.to_string().contains("limit repo.max_file_bytes"),
            "{err}"
        );
    }
}
