//! How a simulated node's SSH channel ends and what a pty does to its output: shared by the
//! emulated shell's channels ([`super::ssh`]) and the real userland's ([`super::userland`]).

use russh::server;
use russh::{ChannelId, Sig};

use super::shell::Ending;

/// Sends what a finished command produced, then its ending, EOF and close.
pub async fn finish(
    handle: server::Handle,
    channel: ChannelId,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    ending: Ending,
) {
    if !stdout.is_empty() {
        let _ = handle.data(channel, stdout).await;
    }
    if !stderr.is_empty() {
        let _ = handle.extended_data(channel, 1, stderr).await;
    }
    match ending {
        Ending::Exit(s) => {
            let _ = handle
                .exit_status_request(channel, u32::try_from(s & 0xff).unwrap_or(255))
                .await;
        }
        Ending::Killed => {
            let _ = handle
                .exit_signal_request(channel, Sig::KILL, false, String::new(), String::new())
                .await;
        }
    }
    let _ = handle.eof(channel).await;
    let _ = handle.close(channel).await;
}

/// On a pty there is one stream and the terminal turns `\n` into `\r\n`.
pub fn pty_text(data: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(data.len());
    for &b in data {
        if b == b'\n' {
            v.push(b'\r');
        }
        v.push(b);
    }
    v
}
