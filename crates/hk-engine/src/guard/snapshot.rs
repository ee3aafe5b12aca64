//! PURE. The etcd snapshot taken before a run changes its first server (issue 39, as k3s
//! advises a snapshot before an upgrade): which member it is read from ([`source`]), the
//! gateway's stream turned back into the snapshot's bytes ([`Stream`]), and whether those
//! bytes are a whole snapshot ([`Check`]: etcd's own trailing sha256, bbolt's magic).
//!
//! Owns: the choice and the checks, each a function of what was seen, unit-tested here.
//! Must not: do IO; a member that did not answer is never a source, and bytes that fail a
//! check are never called a snapshot.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::checks::live::human_fsync;
use crate::checks::live::EtcdClientView;
use crate::guard::health::CATCH_UP_ENTRIES;
use crate::guard::leader::SLOW_DISK_MS;

/// The member a snapshot is read from, and why that one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub host: String,
    /// Its applied raft index and DB size at the look (the snapshot holds at least that).
    pub applied_index: u64,
    pub db_size: u64,
    pub why: String,
}

/// Which member to read the snapshot from, judged from one look: `view` (the members'
/// answers) and `fsync_p99_ms`. A source answered, follows the leader the others follow,
/// is no learner and is caught up (within [`CATCH_UP_ENTRIES`] of the most advanced
/// member that answered). Among them: a disk that is not slow first (the snapshot reads
/// the whole DB); then one the run does not change (`changed`: the servers it changes, in
/// order), else the one it changes last; then the first name (a lag within the catch-up
/// distance is the looks' timing, not the member's, and would make the choice flip). A server
/// of `servers` whose member did not answer is named among those passed over. `Err`: no
/// member fits, and why (never a guess).
pub fn source(
    view: &EtcdClientView,
    fsync_p99_ms: &BTreeMap<String, f64>,
    servers: &[String],
    changed: &[String],
) -> Result<Source, String> {
    let Some(leader) = view.leader_id else {
        return Err("the members that answered see no leader".into());
    };
    let newest = view
        .status
        .values()
        .map(|s| s.applied_index)
        .max()
        .unwrap_or_default();
    // (slow disk, how soon the run changes it, name, lag)
    let mut fits: Vec<(bool, usize, &str, u64)> = Vec::new();
    let mut passed_over: Vec<String> = servers
        .iter()
        .filter(|s| !view.member_of.contains_key(*s))
        .map(|s| format!("{s} did not answer"))
        .collect();
    for (host, &id) in &view.member_of {
        let Some(st) = view.status.get(host) else {
            passed_over.push(format!("{host} gave no status"));
            continue;
        };
        if st.learner || view.members.iter().any(|m| m.id == id && m.learner) {
            passed_over.push(format!("{host} is a learner"));
            continue;
        }
        if st.leader != Some(leader) {
            passed_over.push(format!(
                "{host} does not follow the leader the others follow"
            ));
            continue;
        }
        let lag = newest.saturating_sub(st.applied_index);
        if lag > CATCH_UP_ENTRIES {
            passed_over.push(format!("{host} trails by {lag} entries"));
            continue;
        }
        let fsync = fsync_p99_ms.get(host).copied().unwrap_or(f64::INFINITY);
        let soon = match changed.iter().position(|c| c == host) {
            None => 0,
            Some(k) => changed.len() - k,
        };
        fits.push((fsync > SLOW_DISK_MS, soon, host.as_str(), lag));
    }
    fits.sort();
    let passed = if passed_over.is_empty() {
        String::new()
    } else {
        format!("; passed over: {}", passed_over.join(", "))
    };
    let Some(&(_, soon, host, lag)) = fits.first() else {
        return Err(format!(
            "no member can give a snapshot{}",
            if passed_over.is_empty() {
                " (none answered)".to_string()
            } else {
                format!(": {}", passed_over.join(", "))
            }
        ));
    };
    let st = &view.status[host];
    let disk = match fsync_p99_ms.get(host) {
        Some(ms) => format!("WAL fsync p99 {}", human_fsync(*ms)),
        None => "WAL fsync p99 not seen".to_string(),
    };
    let run = if soon == 0 {
        "not changed by this run".to_string()
    } else {
        "changed by this run, no member it leaves alone fit".to_string()
    };
    let behind = match lag {
        0 => "caught up".to_string(),
        1 => "1 entry behind".to_string(),
        k => format!("{k} entries behind"),
    };
    Ok(Source {
        host: host.to_string(),
        applied_index: st.applied_index,
        db_size: st.db_size,
        why: format!("{run}, {behind}, {disk}{passed}"),
    })
}

/// etcd's gateway answers `POST /v3/maintenance/snapshot` with one JSON object per line,
/// `{"result":{"blob":BASE64,"remaining_bytes":N,...}}`, or `{"error":{...}}` where the
/// stream broke: this turns those lines back into the snapshot's bytes as they arrive.
#[derive(Debug, Default)]
pub struct Stream {
    partial: Vec<u8>,
    messages: u64,
    /// The `remaining_bytes` of the last message (0 on the last one etcd sends).
    remaining: Option<u64>,
}

/// A longest line the stream may carry: etcd sends 32 KiB per message (44 KiB as base64);
/// anything far past that is no snapshot stream.
const MAX_LINE: usize = 1 << 20;

impl Stream {
    /// The snapshot bytes in the complete lines of `data` (the rest is kept for the next).
    pub fn push(&mut self, data: &[u8]) -> Result<Vec<u8>, String> {
        self.partial.extend_from_slice(data);
        let mut out = Vec::new();
        while let Some(pos) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=pos).collect();
            self.line(&line, &mut out)?;
        }
        if self.partial.len() > MAX_LINE {
            return Err(format!(
                "etcd's snapshot stream sent {} bytes without a line break: not the gateway's stream",
                self.partial.len()
            ));
        }
        Ok(out)
    }

    /// The bytes of a last line without a line break; `Err` where the stream did not end
    /// as etcd ends it (a last message with nothing remaining).
    pub fn finish(&mut self) -> Result<Vec<u8>, String> {
        let rest = std::mem::take(&mut self.partial);
        let mut out = Vec::new();
        self.line(&rest, &mut out)?;
        match (self.messages, self.remaining) {
            (0, _) => Err("etcd sent no snapshot (an empty answer)".into()),
            (_, Some(0)) => Ok(out),
            (n, Some(r)) => Err(format!(
                "etcd's snapshot stream stopped after {n} messages with {r} bytes still to come"
            )),
            (n, None) => Err(format!(
                "etcd's snapshot stream stopped after {n} messages without saying it was done"
            )),
        }
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        let text = String::from_utf8_lossy(line);
        let text = text.trim();
        if text.is_empty() {
            return Ok(());
        }
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            format!(
                "etcd's snapshot stream: message {} is no JSON ({e}): {}",
                self.messages + 1,
                clip(text)
            )
        })?;
        if let Some(err) = v.get("error") {
            let said = err
                .get("message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
                .unwrap_or_else(|| err.to_string());
            return Err(format!("etcd stopped the snapshot: {said}"));
        }
        if let Some(message) = v.get("message").and_then(|m| m.as_str()) {
            return Err(format!("etcd refused the snapshot: {message}"));
        }
        let Some(result) = v.get("result") else {
            return Err(format!(
                "etcd's snapshot stream: message {} has no result: {}",
                self.messages + 1,
                clip(text)
            ));
        };
        self.messages += 1;
        // uint64s come as strings from the gateway; a zero is left out.
        self.remaining = Some(match result.get("remaining_bytes") {
            None => 0,
            Some(serde_json::Value::String(s)) => s
                .parse()
                .map_err(|_| format!("etcd's snapshot stream: remaining_bytes `{s}`"))?,
            Some(n) => n.as_u64().unwrap_or_default(),
        });
        if let Some(blob) = result.get("blob").and_then(|b| b.as_str()) {
            let bytes = data_encoding::BASE64.decode(blob.as_bytes()).map_err(|e| {
                format!(
                    "etcd's snapshot stream: message {}'s blob is no base64: {e}",
                    self.messages
                )
            })?;
            out.extend_from_slice(&bytes);
        }
        Ok(())
    }
}

/// The length of the sha256 etcd appends to the database it streams.
pub const CHECKSUM_LEN: usize = 32;

/// bbolt's magic number, little-endian, at offset 16 of its first page (the meta page).
const BBOLT_MAGIC: [u8; 4] = [0xed, 0xda, 0x0c, 0xed];

/// What a whole snapshot is: its length, the database's, and etcd's checksum of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub bytes: u64,
    pub db_bytes: u64,
    /// etcd's sha256 of the database, hex (it matched the content).
    pub sha256: String,
}

/// Checks a snapshot as its bytes arrive: the sha256 of all but the last 32 bytes must be
/// those 32 bytes (what etcd appends, and what `etcdutl snapshot restore` checks), and the
/// database must open as bbolt (its magic number where bbolt writes it).
#[derive(Debug, Default)]
pub struct Check {
    hasher: Sha256,
    head: Vec<u8>,
    tail: Vec<u8>,
    len: u64,
}

impl Check {
    pub fn push(&mut self, data: &[u8]) {
        self.len += data.len() as u64;
        if self.head.len() < 20 {
            let take = (20 - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..take]);
        }
        self.tail.extend_from_slice(data);
        if self.tail.len() > CHECKSUM_LEN {
            let cut = self.tail.len() - CHECKSUM_LEN;
            self.hasher.update(&self.tail[..cut]);
            self.tail.drain(..cut);
        }
    }

    pub fn finish(self) -> Result<Verified, String> {
        if self.len < (CHECKSUM_LEN + 20) as u64 {
            return Err(format!(
                "the snapshot is {} bytes: too short to be an etcd database with its checksum",
                self.len
            ));
        }
        let got = self.hasher.finalize();
        if got.as_slice() != self.tail.as_slice() {
            return Err(format!(
                "the snapshot's checksum does not match its content (sha256 {}, etcd appended {}): it is damaged",
                hex(got.as_slice()),
                hex(&self.tail)
            ));
        }
        if self.head[16..20] != BBOLT_MAGIC {
            return Err(
                "the snapshot's checksum matches but it is no bbolt database (no magic number in its first page)"
                    .into(),
            );
        }
        Ok(Verified {
            bytes: self.len,
            db_bytes: self.len - CHECKSUM_LEN as u64,
            sha256: hex(&self.tail),
        })
    }
}

/// The first 200 characters of a line that is not what it should be, visible.
fn clip(text: &str) -> String {
    let cut: String = text.chars().take(200).collect();
    let shown = crate::text::visible(&cut).into_owned();
    if cut.len() < text.len() {
        format!("{shown}…")
    } else {
        shown
    }
}

fn hex(b: &[u8]) -> String {
    data_encoding::HEXLOWER.encode(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::live::{EtcdMemberInfo, EtcdStatus};

    fn view(leader: u64, members: &[(&str, u64, u64, bool)]) -> EtcdClientView {
        let mut v = EtcdClientView {
            leader_id: Some(leader),
            ..EtcdClientView::default()
        };
        for (host, id, idx, learner) in members {
            v.member_of.insert(host.to_string(), *id);
            v.members.push(EtcdMemberInfo {
                id: *id,
                name: host.to_string(),
                peer_urls: vec![],
                client_urls: vec![],
                learner: *learner,
            });
            v.status.insert(
                host.to_string(),
                EtcdStatus {
                    member_id: *id,
                    leader: Some(leader),
                    raft_term: 2,
                    raft_index: *idx,
                    applied_index: *idx,
                    db_size: 20480,
                    db_size_in_use: None,
                    learner: *learner,
                    errors: vec![],
                    version: "3.6.4".into(),
                },
            );
        }
        v.leader_host = v.host_of(leader).map(str::to_string);
        v
    }

    fn p99(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(h, v)| (h.to_string(), *v)).collect()
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_snapshot_comes_from_the_server_the_run_changes_last_unless_its_disk_is_slow() {
        let v = view(
            1,
            &[
                ("a", 1, 100, false),
                ("b", 2, 100, false),
                ("c", 3, 100, false),
            ],
        );
        let fast = p99(&[("a", 2.0), ("b", 2.0), ("c", 2.0)]);
        let s = source(&v, &fast, &[], &names(&["a", "b", "c"])).expect("a source");
        assert_eq!(s.host, "c");
        assert!(s.why.contains("changed by this run"), "{}", s.why);
        // Only a and b are changed: c, left alone, is the source.
        let s = source(&v, &fast, &[], &names(&["b", "a"])).expect("a source");
        assert_eq!(s.host, "c");
        assert!(s.why.starts_with("not changed by this run"), "{}", s.why);
        // c's disk is slow: the last changed of a and b instead.
        let slow = p99(&[("a", 2.0), ("b", 2.0), ("c", 40.0)]);
        let s = source(&v, &slow, &[], &names(&["b", "a"])).expect("a source");
        assert_eq!(s.host, "a");
    }

    #[test]
    fn learners_stragglers_and_the_silent_are_no_source_and_none_left_is_said() {
        let mut v = view(
            1,
            &[
                ("a", 1, 900, false),
                ("b", 2, 100, false),
                ("c", 3, 900, true),
            ],
        );
        v.member_of.insert("d".into(), 4);
        let s = source(&v, &p99(&[]), &names(&["a", "e"]), &names(&["a"])).expect("a is left");
        assert_eq!(s.host, "a");
        assert!(s.why.contains("b trails by 800 entries"), "{}", s.why);
        assert!(s.why.contains("c is a learner"), "{}", s.why);
        assert!(s.why.contains("d gave no status"), "{}", s.why);
        assert!(s.why.contains("e did not answer"), "{}", s.why);
        v.status.remove("a");
        let err = source(&v, &p99(&[]), &[], &names(&["a"])).expect_err("none fits");
        assert!(err.starts_with("no member can give a snapshot: "), "{err}");
        v.leader_id = None;
        assert_eq!(
            source(&v, &p99(&[]), &[], &[]),
            Err("the members that answered see no leader".into())
        );
    }

    /// A database-shaped payload: bbolt's magic where bbolt writes it, then etcd's sha256.
    fn snapshot(db_len: usize) -> Vec<u8> {
        let mut db: Vec<u8> = (0..db_len).map(|i| (i % 251) as u8).collect();
        db[16..20].copy_from_slice(&BBOLT_MAGIC);
        let sum = Sha256::digest(&db);
        db.extend_from_slice(&sum);
        db
    }

    fn stream_of(bytes: &[u8], chunk: usize) -> Vec<u8> {
        let chunks: Vec<&[u8]> = bytes.chunks(chunk).collect();
        let mut out = Vec::new();
        let mut remaining = bytes.len();
        for c in chunks {
            remaining -= c.len();
            let mut result = serde_json::json!({"blob": data_encoding::BASE64.encode(c)});
            if remaining > 0 {
                result["remaining_bytes"] = serde_json::json!(remaining.to_string());
            }
            out.extend_from_slice(
                serde_json::json!({ "result": result })
                    .to_string()
                    .as_bytes(),
            );
            out.push(b'\n');
        }
        out
    }

    #[test]
    fn a_stream_cut_anywhere_gives_back_the_snapshot_and_its_check_passes() {
        let snap = snapshot(70_000);
        let wire = stream_of(&snap, 32 * 1024);
        for cut in [1, 7, 4096, 50_000] {
            let mut s = Stream::default();
            let mut c = Check::default();
            let mut got = Vec::new();
            for piece in wire.chunks(cut) {
                let b = s.push(piece).expect("pushed");
                c.push(&b);
                got.extend(b);
            }
            let b = s.finish().expect("finished");
            c.push(&b);
            got.extend(b);
            assert_eq!(got, snap);
            let v = c.finish().expect("verified");
            assert_eq!((v.bytes, v.db_bytes), (70_032, 70_000));
            assert_eq!(v.sha256, hex(&snap[70_000..]));
        }
    }

    #[test]
    fn a_damaged_short_or_unfinished_snapshot_is_refused_by_name() {
        let mut snap = snapshot(4000);
        snap[100] ^= 1;
        let mut c = Check::default();
        c.push(&snap);
        assert!(c.finish().expect_err("damaged").contains("does not match"));
        let mut c = Check::default();
        c.push(&[0; 40]);
        assert!(c.finish().expect_err("short").contains("too short"));
        let mut plain = vec![0u8; 4000];
        plain.extend_from_slice(&Sha256::digest(&plain[..]));
        let mut c = Check::default();
        c.push(&plain);
        assert!(c.finish().expect_err("no bbolt").contains("no bbolt"));
        // The stream stops before etcd says it is done.
        let wire = stream_of(&snapshot(70_000), 32 * 1024);
        let first_line = wire.iter().position(|b| *b == b'\n').expect("a line") + 1;
        let mut s = Stream::default();
        s.push(&wire[..first_line]).expect("one message");
        let err = s.finish().expect_err("unfinished");
        assert!(err.contains("bytes still to come"), "{err}");
        let mut s = Stream::default();
        s.push(b"{\"error\":{\"grpc_code\":14,\"message\":\"etcdserver: no leader\"}}\n")
            .expect_err("refused");
        assert!(Stream::default()
            .finish()
            .expect_err("empty")
            .contains("no snapshot"));
    }
}
