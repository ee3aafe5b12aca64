//! The tmux harness the end-to-end tests share: a detached session on its own socket
//! running the real binary, send-keys, capture-pane, and waiting for the screen.
// Each test binary that includes this uses a different part of it.
#![allow(dead_code)]
use std::process::Command;
use std::time::{Duration, Instant};

pub struct Tmux {
    socket: String,
}

impl Tmux {
    /// A detached tmux server on its own socket running `cmd` in a `w`x`h` window. The
    /// socket is `socket` made unique in this process: the test files of one group binary
    /// each have their own copy of this module, and may choose the same name.
    pub fn launch(socket: String, cmd: &str, w: &str, h: &str) -> Tmux {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmux = Tmux {
            socket: format!("{socket}-{n}-{nanos}"),
        };
        let out = Command::new("tmux")
            .args([
                "-L",
                &tmux.socket,
                "new-session",
                "-d",
                "-s",
                "e2e",
                "-x",
                w,
                "-y",
                h,
                cmd,
            ])
            .output()
            .expect("tmux runs (install tmux: apt-get install tmux)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        tmux
    }

    pub fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs (install tmux: apt-get install tmux)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "e2e"])
    }

    pub fn send(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "e2e"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// A left click (press and release, as a terminal sends them in SGR mouse mode) on the
    /// first cell where the screen shows `what`; fails with the screen if it is not there.
    #[allow(dead_code)]
    pub fn click(&self, what: &str) {
        let s = self.screen();
        let Some((row, col)) = s
            .lines()
            .enumerate()
            .find_map(|(row, line)| line.find(what).map(|at| (row, line[..at].chars().count())))
        else {
            panic!("`{what}` is not on the screen to click:\n{s}");
        };
        for end in ['M', 'm'] {
            let seq = format!("\u{1b}[<0;{};{}{end}", col + 1, row + 1);
            self.run(&["send-keys", "-t", "e2e", "-l", &seq]);
        }
    }

    /// Wait until the screen shows `what`; fail with the screen if it never does.
    pub fn wait_for(&self, what: &str) -> String {
        self.wait_until(Duration::from_secs(20), what, |s| s.contains(what))
    }

    /// Wait until `ok(screen)` holds, polling every 50 ms, at most `within`; fail naming
    /// `what` with the screen if it never does.
    pub fn wait_until(&self, within: Duration, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + within;
        loop {
            let s = self.screen();
            if ok(&s) {
                return s;
            }
            if Instant::now() > deadline {
                panic!("never saw {what:?} in {within:?}; the screen was:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Tmux {
    /// Wait until the screen no longer shows `what`.
    pub fn wait_gone(&self, what: &str) {
        self.wait_until(Duration::from_secs(20), &format!("{what:?} gone"), |s| {
            !s.contains(what)
        });
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

/// `$HK_APISERVER_BIN_DIR` (else `<repo>/target/apiserver-bin`), which must hold each of
/// `bins`: missing = FAIL with the hint, never a skip.
pub fn apiserver_bin_dir(bins: &[&str]) -> std::path::PathBuf {
    let dir = std::env::var_os("HK_APISERVER_BIN_DIR")
        .filter(|d| !d.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/apiserver-bin")
        });
    for b in bins {
        assert!(
            dir.join(b).is_file(),
            "{} not found: set HK_APISERVER_BIN_DIR or run `bash tests/apiserver/build.sh`",
            dir.join(b).display()
        );
    }
    dir
}

/// The live processes whose command line mentions `needle` (a demo's directory), as
/// `pid: command line`.
pub fn processes_mentioning(needle: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            cmd.contains(needle).then(|| format!("{pid}: {cmd}"))
        })
        .collect()
}
