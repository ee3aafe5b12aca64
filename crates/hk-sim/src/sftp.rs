//! The simulated nodes' `sftp` subsystem (what `sftp` and `scp` without `-O` speak):
//! russh-sftp's server protocol over the node's file tree ([`NodeState`]'s files), so a
//! file put with sftp is what `cat` shows next, and a file a command wrote is what `get`
//! fetches.
//!
//! Owns: [`SftpSession`]. Must not: touch the real host's files. Requests the simulation
//! does not model (links, extensions, truncating setstat) answer `SSH_FX_OP_UNSUPPORTED`
//! with "hk-console simulation: `sftp X` is not simulated".

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use russh_sftp::protocol::{
    Attrs, Data, File, FileAttributes, Handle, Name, OpenFlags, Status, StatusCode, Version,
};
use russh_sftp::server::{Handler, StatusReply};

use super::fs::{normalize, uid_of, FileKind, FsError, Stat};
use super::login::home_of;
use super::node::NodeState;
use super::shell::not_simulated;

enum Open {
    File(String),
    /// A directory listing; `done` once READDIR returned it.
    Dir {
        path: String,
        done: bool,
    },
}

/// One sftp session: the login's view of a node's files.
pub struct SftpSession {
    state: Arc<Mutex<NodeState>>,
    uid: u32,
    home: String,
    handles: HashMap<String, Open>,
    next: u64,
}

impl SftpSession {
    pub fn new(state: Arc<Mutex<NodeState>>, user: &str) -> Self {
        if let Ok(mut s) = state.lock() {
            let now = s.now_ms();
            s.fs.ensure_home(user, now);
        }
        SftpSession {
            state,
            uid: uid_of(user),
            home: home_of(user),
            handles: HashMap::new(),
            next: 1,
        }
    }

    fn path(&self, p: &str) -> String {
        normalize(&self.home, p)
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut NodeState) -> Result<T, StatusReply>,
    ) -> Result<T, StatusReply> {
        match self.state.lock() {
            Ok(mut s) => f(&mut s),
            Err(_) => Err(reply(FsError::StateUnavailable)),
        }
    }

    fn handle(&mut self, open: Open) -> String {
        let h = self.next.to_string();
        self.next += 1;
        self.handles.insert(h.clone(), open);
        h
    }
}

/// An errno text as the sftp status code OpenSSH's server would send.
fn reply(e: FsError) -> StatusReply {
    let code = match e {
        FsError::NotFound => StatusCode::NoSuchFile,
        FsError::PermissionDenied | FsError::NotPermitted => StatusCode::PermissionDenied,
        _ => StatusCode::Failure,
    };
    code.with_message(e.to_string())
}

fn unsupported(what: &str) -> StatusReply {
    StatusCode::OpUnsupported.with_message(not_simulated(&format!("sftp {what}")))
}

fn ok(id: u32) -> Status {
    Status {
        id,
        status_code: StatusCode::Ok,
        error_message: "Ok".into(),
        language_tag: "en-US".into(),
    }
}

fn attrs(st: &Stat) -> FileAttributes {
    let type_bits = match st.kind {
        FileKind::Dir => 0o040000,
        FileKind::File => 0o100000,
        FileKind::CharDev => 0o020000,
        FileKind::BlockDev => 0o060000,
    };
    FileAttributes {
        size: Some(st.size),
        uid: Some(st.uid),
        user: None,
        gid: Some(st.uid),
        group: None,
        permissions: Some(type_bits | st.mode),
        atime: Some((st.mtime_ms / 1000) as u32),
        mtime: Some((st.mtime_ms / 1000) as u32),
    }
}

impl Handler for SftpSession {
    type Error = StatusReply;

    fn unimplemented(&self) -> Self::Error {
        unsupported("request")
    }

    async fn init(
        &mut self,
        _version: u32,
        _extensions: HashMap<String, String>,
    ) -> Result<Version, Self::Error> {
        Ok(Version::new())
    }

    async fn realpath(&mut self, id: u32, path: String) -> Result<Name, Self::Error> {
        Ok(Name {
            id,
            files: vec![File::dummy(self.path(&path))],
        })
    }

    async fn open(
        &mut self,
        id: u32,
        filename: String,
        pflags: OpenFlags,
        _attrs: FileAttributes,
    ) -> Result<Handle, Self::Error> {
        let p = self.path(&filename);
        let uid = self.uid;
        self.with(|s| {
            let exists = s.stat(&p);
            if exists.as_ref().is_some_and(|st| st.kind == FileKind::Dir) {
                return Err(reply(FsError::IsADirectory));
            }
            if pflags.contains(OpenFlags::EXCLUDE) && exists.is_some() {
                return Err(reply(FsError::Exists));
            }
            if pflags.contains(OpenFlags::WRITE) {
                if exists.is_none() && !pflags.contains(OpenFlags::CREATE) {
                    return Err(reply(FsError::NotFound));
                }
                if exists.is_none() || pflags.contains(OpenFlags::TRUNCATE) {
                    let now = s.now_ms();
                    s.write_path(&p, b"", false, uid, now).map_err(reply)?;
                }
            } else {
                s.read_path(&p, uid).map_err(reply)?;
            }
            Ok(())
        })?;
        let handle = self.handle(Open::File(p));
        Ok(Handle { id, handle })
    }

    async fn close(&mut self, id: u32, handle: String) -> Result<Status, Self::Error> {
        match self.handles.remove(&handle) {
            Some(_) => Ok(ok(id)),
            None => Err(StatusCode::Failure.with_message("invalid handle")),
        }
    }

    async fn read(
        &mut self,
        id: u32,
        handle: String,
        offset: u64,
        len: u32,
    ) -> Result<Data, Self::Error> {
        let Some(Open::File(p)) = self.handles.get(&handle) else {
            return Err(StatusCode::Failure.with_message("invalid handle"));
        };
        let p = p.clone();
        let uid = self.uid;
        let data = self.with(|s| s.read_path(&p, uid).map_err(reply))?;
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        if start >= data.len() {
            return Err(StatusCode::Eof.into());
        }
        let end = start.saturating_add(len as usize).min(data.len());
        Ok(Data {
            id,
            data: data[start..end].to_vec(),
        })
    }

    async fn write(
        &mut self,
        id: u32,
        handle: String,
        offset: u64,
        data: Vec<u8>,
    ) -> Result<Status, Self::Error> {
        let Some(Open::File(p)) = self.handles.get(&handle) else {
            return Err(StatusCode::Failure.with_message("invalid handle"));
        };
        let p = p.clone();
        let uid = self.uid;
        self.with(|s| {
            let now = s.now_ms();
            if s.is_virtual(&p) {
                // Computed files (sysfs) take one whole write, as `echo x > file` does.
                if offset != 0 {
                    return Err(unsupported(
                        "write at an offset into a file the node computes",
                    ));
                }
                return s.write_path(&p, &data, false, uid, now).map_err(reply);
            }
            s.fs.write_at(&p, offset, &data, now).map_err(reply)
        })?;
        Ok(ok(id))
    }

    async fn lstat(&mut self, id: u32, path: String) -> Result<Attrs, Self::Error> {
        self.stat(id, path).await
    }

    async fn stat(&mut self, id: u32, path: String) -> Result<Attrs, Self::Error> {
        let p = self.path(&path);
        let st = self.with(|s| s.stat(&p).ok_or_else(|| reply(FsError::NotFound)))?;
        Ok(Attrs {
            id,
            attrs: attrs(&st),
        })
    }

    async fn fstat(&mut self, id: u32, handle: String) -> Result<Attrs, Self::Error> {
        let p = match self.handles.get(&handle) {
            Some(Open::File(p)) | Some(Open::Dir { path: p, .. }) => p.clone(),
            None => return Err(StatusCode::Failure.with_message("invalid handle")),
        };
        self.stat(id, p).await
    }

    async fn setstat(
        &mut self,
        id: u32,
        path: String,
        attrs: FileAttributes,
    ) -> Result<Status, Self::Error> {
        let p = self.path(&path);
        let uid = self.uid;
        self.with(|s| {
            let st = s.stat(&p).ok_or_else(|| reply(FsError::NotFound))?;
            if attrs.size.is_some_and(|n| n != st.size) {
                return Err(unsupported("setstat changing the size"));
            }
            if let Some(mode) = attrs.permissions {
                if s.is_virtual(&p) {
                    return Err(unsupported("chmod of a file the node computes"));
                }
                s.fs.chmod(&p, mode & 0o7777, uid).map_err(reply)?;
            }
            if let Some(mtime) = attrs.mtime {
                if !s.is_virtual(&p) {
                    s.fs.set_mtime(&p, u64::from(mtime) * 1000).map_err(reply)?;
                }
            }
            Ok(())
        })?;
        Ok(ok(id))
    }

    async fn fsetstat(
        &mut self,
        id: u32,
        handle: String,
        attrs: FileAttributes,
    ) -> Result<Status, Self::Error> {
        let p = match self.handles.get(&handle) {
            Some(Open::File(p)) | Some(Open::Dir { path: p, .. }) => p.clone(),
            None => return Err(StatusCode::Failure.with_message("invalid handle")),
        };
        self.setstat(id, p, attrs).await
    }

    async fn opendir(&mut self, id: u32, path: String) -> Result<Handle, Self::Error> {
        let p = self.path(&path);
        let uid = self.uid;
        self.with(|s| s.list_path(&p, uid).map(|_| ()).map_err(reply))?;
        let handle = self.handle(Open::Dir {
            path: p,
            done: false,
        });
        Ok(Handle { id, handle })
    }

    async fn readdir(&mut self, id: u32, handle: String) -> Result<Name, Self::Error> {
        let p = match self.handles.get_mut(&handle) {
            Some(Open::Dir { done: true, .. }) => return Err(StatusCode::Eof.into()),
            Some(Open::Dir { path, done }) => {
                *done = true;
                path.clone()
            }
            _ => return Err(StatusCode::Failure.with_message("invalid handle")),
        };
        let uid = self.uid;
        let files = self.with(|s| {
            let names = s.list_path(&p, uid).map_err(reply)?;
            let mut files = Vec::new();
            for n in [".", ".."].into_iter().map(String::from).chain(names) {
                let full = match n.as_str() {
                    "." => p.clone(),
                    ".." => super::fs::parent(&p).to_string(),
                    n => normalize(&p, n),
                };
                if let Some(st) = s.stat(&full) {
                    files.push(File::new(n, attrs(&st)));
                }
            }
            Ok(files)
        })?;
        Ok(Name { id, files })
    }

    async fn remove(&mut self, id: u32, filename: String) -> Result<Status, Self::Error> {
        let p = self.path(&filename);
        let uid = self.uid;
        self.with(|s| {
            if s.is_virtual(&p) {
                return Err(unsupported("remove of a file the node computes"));
            }
            s.fs.remove(&p, false, false, uid).map_err(reply)
        })?;
        Ok(ok(id))
    }

    async fn mkdir(
        &mut self,
        id: u32,
        path: String,
        attrs: FileAttributes,
    ) -> Result<Status, Self::Error> {
        let p = self.path(&path);
        let uid = self.uid;
        let mode = attrs.permissions.unwrap_or(0o755) & 0o7777;
        self.with(|s| {
            let now = s.now_ms();
            s.fs.mkdir(&p, mode, uid, now).map_err(reply)
        })?;
        Ok(ok(id))
    }

    async fn rmdir(&mut self, id: u32, path: String) -> Result<Status, Self::Error> {
        let p = self.path(&path);
        let uid = self.uid;
        self.with(|s| s.fs.remove(&p, true, false, uid).map_err(reply))?;
        Ok(ok(id))
    }

    async fn rename(
        &mut self,
        id: u32,
        oldpath: String,
        newpath: String,
    ) -> Result<Status, Self::Error> {
        let (from, to) = (self.path(&oldpath), self.path(&newpath));
        let uid = self.uid;
        self.with(|s| {
            if s.stat(&to).is_some() {
                // SFTP v3 rename does not overwrite (OpenSSH uses posix-rename for that).
                return Err(reply(FsError::Exists));
            }
            s.fs.rename(&from, &to, uid).map_err(reply)
        })?;
        Ok(ok(id))
    }

    async fn readlink(&mut self, _id: u32, _path: String) -> Result<Name, Self::Error> {
        Err(unsupported("readlink"))
    }

    async fn symlink(
        &mut self,
        _id: u32,
        _linkpath: String,
        _targetpath: String,
    ) -> Result<Status, Self::Error> {
        Err(unsupported("symlink"))
    }
}
