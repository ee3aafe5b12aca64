//! etcd's snapshot taken before a run changes its first server (issue 39; k3s advises one
//! before an upgrade): one look at the members (the etcd pane's), the source chosen
//! ([`hk_engine::guard::snapshot::source`]), then etcd's own snapshot API
//! (`POST /v3/maintenance/snapshot`, a read) asked on that server with its etcd client
//! certificates, its stream written beside the run's journal on the operator's machine
//! (off the cluster the run is about to change), checked (etcd's trailing sha256, bbolt's
//! magic), synced and only then named.
//!
//! Owns: the snapshot's argv ([`snapshot_argv`]) and [`save`].
//! Must not: change anything on a server (the snapshot API is a read), or name a file as a
//! snapshot before its bytes passed the check and reached the disk.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::observe::etcd::{ClientSpec, EtcdSource};
use hk_engine::guard::snapshot::{self, Check, Stream};

/// How long etcd is given to stream its database (a homelab's is tens of MB; etcd's own
/// snapshot has no deadline, the step's timeout bounds it too).
pub const SNAPSHOT_MAX_TIME: Duration = Duration::from_secs(600);

/// How the verdict of a saved snapshot begins.
pub const SAVED: &str = "etcd snapshot saved from ";

/// `curl ... -X POST -d {} URL/v3/maintenance/snapshot`: etcd's snapshot, streamed.
pub fn snapshot_argv(spec: &ClientSpec, max: Duration) -> Vec<String> {
    spec.post(max, "{}", "/v3/maintenance/snapshot")
}

/// A snapshot on disk, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    pub host: String,
    pub path: PathBuf,
    pub bytes: u64,
    pub sha256: String,
    pub applied_index: u64,
    pub elapsed: Duration,
    pub why: String,
}

impl Saved {
    /// The step's verdict: the member, the file, its size, etcd's checksum.
    pub fn line(&self) -> String {
        format!(
            "{SAVED}{} (applied index {}; {}): {}, {} bytes, sha256 {}, checked (etcd's checksum, bbolt) in {:.1} s",
            self.host,
            self.applied_index,
            self.why,
            self.path.display(),
            self.bytes,
            &self.sha256[..16.min(self.sha256.len())],
            self.elapsed.as_secs_f64()
        )
    }
}

/// Why [`save`] did not save: the operator stopped it, or what went wrong, named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaveError {
    Cancelled(String),
    Failed(String),
}

/// Takes `env`'s snapshot before the run changes `changed`: from the member
/// [`snapshot::source`] picks, into the file `path_for(host)` names (written as
/// `FILE.partial`, checked, synced, then renamed and its directory synced). Nothing is
/// left under the final name unless every check passed.
pub async fn save(
    source: &EtcdSource,
    env: &str,
    changed: &[String],
    path_for: &(dyn Fn(&str) -> PathBuf + Send + Sync),
    cancel: &CancellationToken,
    progress: &(dyn Fn(String) + Send + Sync),
) -> Result<Saved, SaveError> {
    let failed = SaveError::Failed;
    let (view, fsync) = crate::etcd_leader::look(source, env, cancel)
        .await
        .map_err(failed)?;
    let specs = source.specs(env).map_err(|e| failed(e.to_string()))?;
    let servers: Vec<String> = specs.iter().map(|m| m.host.clone()).collect();
    let from = snapshot::source(&view, &fsync, &servers, changed).map_err(failed)?;
    progress(format!(
        "snapshot from {} (applied index {}, DB {} bytes): {}",
        from.host, from.applied_index, from.db_size, from.why
    ));
    let spec = specs
        .into_iter()
        .find(|m| m.host == from.host)
        .ok_or_else(|| failed(format!("{} is no server of {env}", from.host)))?
        .client
        .map_err(|e| failed(e.to_string()))?;
    let path = path_for(&from.host);
    let partial = partial_of(&path);
    let began = Instant::now();
    let written = stream_into(source, &from.host, &spec, &partial, cancel).await;
    let verified = match written {
        Ok(v) => v,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
    };
    if let Err(e) = std::fs::rename(&partial, &path).and_then(|()| sync_dir(&path)) {
        let _ = std::fs::remove_file(&partial);
        return Err(failed(format!(
            "the snapshot was checked but could not be kept as {}: {e}",
            path.display()
        )));
    }
    Ok(Saved {
        host: from.host,
        path,
        bytes: verified.bytes,
        sha256: verified.sha256,
        applied_index: from.applied_index,
        elapsed: began.elapsed(),
        why: from.why,
    })
}

fn partial_of(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

fn sync_dir(path: &Path) -> std::io::Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => std::fs::File::open(dir)?.sync_all(),
        _ => Ok(()),
    }
}

/// Streams `host`'s snapshot into `partial`: decoded, checked and synced.
async fn stream_into(
    source: &EtcdSource,
    host: &str,
    spec: &ClientSpec,
    partial: &Path,
    cancel: &CancellationToken,
) -> Result<snapshot::Verified, SaveError> {
    let failed = SaveError::Failed;
    let shown = partial.display().to_string();
    let mut file = std::fs::File::create(partial)
        .map_err(|e| failed(format!("cannot write the snapshot to {shown}: {e}")))?;
    let mut stream = Stream::default();
    let mut check = Check::default();
    let argv = snapshot_argv(spec, SNAPSHOT_MAX_TIME);
    let mut write = |bytes: &[u8], check: &mut Check| -> Result<(), String> {
        check.push(bytes);
        file.write_all(bytes)
            .map_err(|e| format!("writing the snapshot to {shown}: {e}"))
    };
    let out = {
        let mut sink = |data: &[u8]| -> Result<(), String> {
            let bytes = stream.push(data)?;
            write(&bytes, &mut check)
        };
        source
            .stream(
                host,
                &argv,
                SNAPSHOT_MAX_TIME + Duration::from_secs(10),
                cancel,
                &mut sink,
            )
            .await
    };
    if cancel.is_cancelled() {
        return Err(SaveError::Cancelled(
            "stopped at the operator's request; no snapshot kept".into(),
        ));
    }
    let out = out.map_err(|e| failed(format!("{host}: the snapshot: {e}")))?;
    if out.exit_status != Some(0) {
        return Err(failed(format!(
            "{host}: `{}` exited {:?}: {}",
            argv.join(" "),
            out.exit_status,
            out.stderr.trim()
        )));
    }
    let last = stream
        .finish()
        .map_err(|e| failed(format!("{host}: {e}")))?;
    write(&last, &mut check).map_err(failed)?;
    let verified = check.finish().map_err(|e| failed(format!("{host}: {e}")))?;
    file.sync_all()
        .map_err(|e| failed(format!("syncing the snapshot {shown}: {e}")))?;
    Ok(verified)
}
