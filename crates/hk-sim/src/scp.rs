//! `scp -O` (the legacy SCP/RCP protocol) on a simulated node: the remote side OpenSSH's
//! `scp` starts as `scp -t TARGET` (upload) or `scp -f PATH...` (download), speaking the
//! protocol's `C`/`D`/`E`/`T` records over the channel, over the node's file tree.
//!
//! Owns: [`ScpRequest`] (recognising the command) and [`serve`]. Must not: touch the real
//! host's files. An option this side does not model is refused with the protocol's fatal
//! error record and "hk-console simulation: `scp X` is not simulated", exit 2.

use std::sync::{Arc, Mutex};

use tokio::sync::mpsc::UnboundedReceiver;

use super::fs::{normalize, uid_of, FileKind, FsError};
use super::login::home_of;
use super::node::NodeState;
use super::shell::not_simulated;

/// What the remote `scp` was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScpRequest {
    /// `-t` (sink: the client uploads) or `-f` (source: the client downloads).
    pub sink: bool,
    pub recursive: bool,
    pub preserve: bool,
    /// `-d`: the target must be a directory.
    pub target_dir: bool,
    pub paths: Vec<String>,
    /// An option this side does not model.
    pub unsupported: Option<String>,
}

/// Splits a command line the way the client quoted it (`'...'`, `"..."`, `\x`).
fn split_words(cmd: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur: Option<String> = None;
    let mut cs = cmd.chars();
    while let Some(c) = cs.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if let Some(w) = cur.take() {
                    words.push(w);
                }
            }
            '\'' => {
                let w = cur.get_or_insert_with(String::new);
                for q in cs.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    w.push(q);
                }
            }
            '"' => {
                let w = cur.get_or_insert_with(String::new);
                while let Some(q) = cs.next() {
                    match q {
                        '"' => break,
                        '\\' => {
                            if let Some(n) = cs.next() {
                                w.push(n);
                            }
                        }
                        q => w.push(q),
                    }
                }
            }
            '\\' => {
                if let Some(n) = cs.next() {
                    cur.get_or_insert_with(String::new).push(n);
                }
            }
            c => cur.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(cur);
    words
}

impl ScpRequest {
    /// The request when `command` is a remote `scp -t`/`scp -f`, else None.
    pub fn parse(command: &str) -> Option<ScpRequest> {
        let words = split_words(command);
        let (first, rest) = words.split_first()?;
        if first != "scp" && first != "/usr/bin/scp" {
            return None;
        }
        let mut r = ScpRequest {
            sink: false,
            recursive: false,
            preserve: false,
            target_dir: false,
            paths: Vec::new(),
            unsupported: None,
        };
        let mut mode = None;
        let mut operands = false;
        for w in rest {
            if operands || !w.starts_with('-') || w == "-" {
                r.paths.push(w.clone());
                continue;
            }
            if w == "--" {
                operands = true;
                continue;
            }
            for c in w[1..].chars() {
                match c {
                    't' => mode = Some(true),
                    'f' => mode = Some(false),
                    'r' => r.recursive = true,
                    'p' => r.preserve = true,
                    'd' => r.target_dir = true,
                    // Verbose and the end-of-options marker change nothing on this side.
                    'v' | 'q' => {}
                    c => r.unsupported = Some(format!("scp -{c}")),
                }
            }
        }
        r.sink = mode?;
        Some(r)
    }
}

/// The channel's input, read in protocol units.
struct Input {
    rx: UnboundedReceiver<Vec<u8>>,
    buf: Vec<u8>,
}

impl Input {
    async fn fill(&mut self) -> bool {
        match self.rx.recv().await {
            Some(d) => {
                self.buf.extend_from_slice(&d);
                true
            }
            None => false,
        }
    }

    async fn byte(&mut self) -> Option<u8> {
        while self.buf.is_empty() {
            if !self.fill().await {
                return None;
            }
        }
        Some(self.buf.remove(0))
    }

    async fn line(&mut self) -> Option<String> {
        loop {
            if let Some(k) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=k).collect();
                return Some(String::from_utf8_lossy(&line[..k]).into_owned());
            }
            if !self.fill().await {
                return None;
            }
        }
    }

    async fn exact(&mut self, n: usize) -> Option<Vec<u8>> {
        while self.buf.len() < n {
            if !self.fill().await {
                return None;
            }
        }
        Some(self.buf.drain(..n).collect())
    }
}

/// Where the protocol's replies go.
pub trait Sender: Send {
    fn send(&mut self, data: Vec<u8>) -> impl std::future::Future<Output = ()> + Send;
}

/// Runs one remote `scp`; returns its exit status (0, 1 after a reported error, 2 when the
/// request is not simulated).
pub async fn serve<S: Sender>(
    req: ScpRequest,
    state: Arc<Mutex<NodeState>>,
    user: &str,
    rx: UnboundedReceiver<Vec<u8>>,
    out: &mut S,
) -> i32 {
    let mut input = Input {
        rx,
        buf: Vec::new(),
    };
    if let Some(what) = &req.unsupported {
        out.send(format!("\x02{}\n", not_simulated(what)).into_bytes())
            .await;
        return 2;
    }
    let cx = Ctx {
        state,
        uid: uid_of(user),
        home: home_of(user),
    };
    if req.sink {
        sink(&req, &cx, &mut input, out).await
    } else {
        source(&req, &cx, &mut input, out).await
    }
}

struct Ctx {
    state: Arc<Mutex<NodeState>>,
    uid: u32,
    home: String,
}

impl Ctx {
    fn with<T>(&self, f: impl FnOnce(&mut NodeState) -> T) -> Option<T> {
        self.state.lock().ok().map(|mut s| f(&mut s))
    }
}

async fn sink<S: Sender>(req: &ScpRequest, cx: &Ctx, input: &mut Input, out: &mut S) -> i32 {
    let [target] = req.paths.as_slice() else {
        out.send(b"\x02scp: ambiguous target\n".to_vec()).await;
        return 1;
    };
    let target = normalize(&cx.home, target);
    let is_dir = |p: &str| {
        cx.with(|s| s.stat(p).is_some_and(|st| st.kind == FileKind::Dir))
            .unwrap_or(false)
    };
    if req.target_dir && !is_dir(&target) {
        out.send(format!("\x02scp: {target}: Not a directory\n").into_bytes())
            .await;
        return 1;
    }
    let mut status = 0;
    let mut dirs: Vec<String> = Vec::new();
    let mut mtime: Option<u64> = None;
    out.send(vec![0]).await;
    while let Some(line) = input.line().await {
        let Some(kind) = line.chars().next() else {
            break;
        };
        let rest = &line[1..];
        match kind {
            'T' => {
                mtime = rest
                    .split_whitespace()
                    .next()
                    .and_then(|t| t.parse::<u64>().ok())
                    .map(|t| t * 1000);
                out.send(vec![0]).await;
            }
            'C' | 'D' => {
                let mut f = rest.splitn(3, ' ');
                let (mode, size, name) = (f.next(), f.next(), f.next());
                let (Some(mode), Some(size), Some(name)) = (
                    mode.and_then(|m| u32::from_str_radix(m, 8).ok()),
                    size.and_then(|s| s.parse::<usize>().ok()),
                    name,
                ) else {
                    out.send(b"\x02scp: protocol error: bad record\n".to_vec())
                        .await;
                    return 1;
                };
                if name.contains('/') || name == ".." {
                    out.send(format!("\x02scp: error: unexpected filename: {name}\n").into_bytes())
                        .await;
                    return 1;
                }
                let base = dirs.last().cloned().unwrap_or_else(|| target.clone());
                let dest = if dirs.is_empty() && !is_dir(&base) {
                    base.clone()
                } else {
                    normalize(&base, name)
                };
                if kind == 'D' {
                    if !req.recursive {
                        out.send(b"\x02scp: received directory without -r\n".to_vec())
                            .await;
                        return 1;
                    }
                    let made = cx
                        .with(|s| {
                            if s.stat(&dest).is_some_and(|st| st.kind == FileKind::Dir) {
                                return Ok(());
                            }
                            let now = s.now_ms();
                            s.fs.mkdir(&dest, mode, cx.uid, now)
                        })
                        .unwrap_or(Err(FsError::StateUnavailable));
                    match made {
                        Ok(()) => {
                            dirs.push(dest);
                            out.send(vec![0]).await;
                        }
                        Err(e) => {
                            out.send(format!("\x02scp: {dest}: {e}\n").into_bytes())
                                .await;
                            return 1;
                        }
                    }
                    continue;
                }
                out.send(vec![0]).await;
                let Some(data) = input.exact(size).await else {
                    return 1;
                };
                if input.byte().await != Some(0) {
                    return 1;
                }
                let wrote = cx
                    .with(|s| {
                        let now = s.now_ms();
                        let r = s.write_path(&dest, &data, false, cx.uid, now);
                        if r.is_ok() && !s.is_virtual(&dest) {
                            let _ = s.fs.chmod(&dest, mode, cx.uid);
                            if let (true, Some(t)) = (req.preserve, mtime) {
                                let _ = s.fs.set_mtime(&dest, t);
                            }
                        }
                        r
                    })
                    .unwrap_or(Err(FsError::StateUnavailable));
                mtime = None;
                match wrote {
                    Ok(()) => out.send(vec![0]).await,
                    Err(e) => {
                        status = 1;
                        out.send(format!("\x01scp: {dest}: {e}\n").into_bytes())
                            .await;
                    }
                }
            }
            'E' => {
                dirs.pop();
                out.send(vec![0]).await;
            }
            '\x01' | '\x02' => {
                status = 1;
                if kind == '\x02' {
                    return 1;
                }
            }
            _ => {
                out.send(b"\x02scp: protocol error: unexpected record\n".to_vec())
                    .await;
                return 1;
            }
        }
    }
    status
}

async fn source<S: Sender>(req: &ScpRequest, cx: &Ctx, input: &mut Input, out: &mut S) -> i32 {
    if input.byte().await != Some(0) {
        return 1;
    }
    let mut status = 0;
    for p in &req.paths {
        let path = normalize(&cx.home, p);
        if !send_path(req, cx, input, out, &path, &mut status).await {
            return 1;
        }
    }
    status
}

/// Sends one file or (with -r) directory; false when the client broke off.
async fn send_path<S: Sender>(
    req: &ScpRequest,
    cx: &Ctx,
    input: &mut Input,
    out: &mut S,
    path: &str,
    status: &mut i32,
) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path).to_string();
    let st = cx.with(|s| s.stat(path)).flatten();
    let Some(st) = st else {
        *status = 1;
        out.send(format!("\x01scp: {path}: No such file or directory\n").into_bytes())
            .await;
        return true;
    };
    if req.preserve {
        let t = st.mtime_ms / 1000;
        out.send(format!("T{t} 0 {t} 0\n").into_bytes()).await;
        if input.byte().await != Some(0) {
            return false;
        }
    }
    if st.kind == FileKind::Dir {
        if !req.recursive {
            *status = 1;
            out.send(format!("\x01scp: {path}: not a regular file\n").into_bytes())
                .await;
            return true;
        }
        let names = cx
            .with(|s| s.list_path(path, cx.uid))
            .unwrap_or(Err(FsError::StateUnavailable));
        let names = match names {
            Ok(n) => n,
            Err(e) => {
                *status = 1;
                out.send(format!("\x01scp: {path}: {e}\n").into_bytes())
                    .await;
                return true;
            }
        };
        out.send(format!("D{:04o} 0 {name}\n", st.mode & 0o7777).into_bytes())
            .await;
        if input.byte().await != Some(0) {
            return false;
        }
        for n in names {
            let child = normalize(path, &n);
            if !Box::pin(send_path(req, cx, input, out, &child, status)).await {
                return false;
            }
        }
        out.send(b"E\n".to_vec()).await;
        return input.byte().await == Some(0);
    }
    let data = cx
        .with(|s| s.read_path(path, cx.uid))
        .unwrap_or(Err(FsError::StateUnavailable));
    let data = match data {
        Ok(d) => d,
        Err(e) => {
            *status = 1;
            out.send(format!("\x01scp: {path}: {e}\n").into_bytes())
                .await;
            return true;
        }
    };
    out.send(format!("C{:04o} {} {name}\n", st.mode & 0o7777, data.len()).into_bytes())
        .await;
    if input.byte().await != Some(0) {
        return false;
    }
    let mut d = data;
    d.push(0);
    out.send(d).await;
    input.byte().await == Some(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_the_remote_side() {
        let r = ScpRequest::parse("scp -v -r -t -- '/tmp/a b'").expect("scp");
        assert!(r.sink && r.recursive);
        assert_eq!(r.paths, vec!["/tmp/a b".to_string()]);
        assert!(!ScpRequest::parse("scp -f x").expect("scp").sink);
        assert_eq!(ScpRequest::parse("scp x y"), None);
        assert_eq!(ScpRequest::parse("echo -t"), None);
        assert_eq!(
            ScpRequest::parse("scp -3 -t x").and_then(|r| r.unsupported),
            Some("scp -3".to_string())
        );
    }
}
