//! The everyday tools an operator types on a Debian node (coreutils, procps, iproute2,
//! util-linux, and a common subset of `awk` and `sed`), answering from the node's simulated
//! state: its files ([`super::fs`] plus what [`NodeState`] computes), units, disks, mounts,
//! addresses and clock, in the formats the real tools print.
//!
//! Every option, operand form or program construct a tool here does not model fails with
//! [`Output::unsimulated`] (exit 2, "hk-console simulation: `X` is not simulated"), never a
//! guessed success.
//!
//! Owns: the utilities' output formats. Must not: run anything on the real host.
//!
//! One file (over 800 lines): a flat table of small tools sharing one option parser and the
//! `unsimulated` refusal; each tool is short.

use std::net::IpAddr;

use regex::Regex;

use super::fs::{normalize, FileKind, FsError};
use super::node::{format_clock, fs_uuid, processes, Mount, NodeState, SESSION_PID};
use super::shell::Output;

/// Who runs a command, and where.
pub struct Cx<'a> {
    pub user: &'a str,
    pub uid: u32,
    pub cwd: &'a str,
}

impl Cx<'_> {
    fn path(&self, p: &str) -> String {
        normalize(self.cwd, p)
    }
}

/// Where each simulated utility lives (for `command -v`, `which`, `type`).
pub const COMMANDS: &[(&str, &str)] = &[
    ("awk", "/usr/bin/awk"),
    ("basename", "/usr/bin/basename"),
    ("cat", "/usr/bin/cat"),
    ("chmod", "/usr/bin/chmod"),
    ("cp", "/usr/bin/cp"),
    ("curl", "/usr/bin/curl"),
    ("cut", "/usr/bin/cut"),
    ("date", "/usr/bin/date"),
    ("df", "/usr/bin/df"),
    ("findmnt", "/usr/bin/findmnt"),
    ("free", "/usr/bin/free"),
    ("grep", "/usr/bin/grep"),
    ("head", "/usr/bin/head"),
    ("hostname", "/usr/bin/hostname"),
    ("id", "/usr/bin/id"),
    ("ip", "/usr/sbin/ip"),
    ("journalctl", "/usr/bin/journalctl"),
    ("ls", "/usr/bin/ls"),
    ("lsblk", "/usr/bin/lsblk"),
    ("mkdir", "/usr/bin/mkdir"),
    ("mv", "/usr/bin/mv"),
    ("nproc", "/usr/bin/nproc"),
    ("ps", "/usr/bin/ps"),
    ("rm", "/usr/bin/rm"),
    ("rmdir", "/usr/bin/rmdir"),
    ("sed", "/usr/bin/sed"),
    ("sleep", "/usr/bin/sleep"),
    ("sort", "/usr/bin/sort"),
    ("ss", "/usr/bin/ss"),
    ("systemctl", "/usr/bin/systemctl"),
    ("tail", "/usr/bin/tail"),
    ("tee", "/usr/bin/tee"),
    ("touch", "/usr/bin/touch"),
    ("tr", "/usr/bin/tr"),
    ("uname", "/usr/bin/uname"),
    ("uniq", "/usr/bin/uniq"),
    ("uptime", "/usr/bin/uptime"),
    ("wc", "/usr/bin/wc"),
    ("whoami", "/usr/bin/whoami"),
    ("k3s", "/usr/local/bin/k3s"),
];

/// The path `command -v` prints for a simulated utility.
pub fn which(name: &str) -> Option<&'static str> {
    if name.contains('/') {
        return COMMANDS.iter().find(|(_, p)| *p == name).map(|(_, p)| *p);
    }
    COMMANDS.iter().find(|(n, _)| *n == name).map(|(_, p)| *p)
}

fn unsim(name: &str, what: &str) -> Output {
    if what.is_empty() {
        Output::unsimulated(name)
    } else {
        Output::unsimulated(&format!("{name} {what}"))
    }
}

/// Runs one of this module's utilities; None = not one of them.
pub fn run(
    s: &mut NodeState,
    cx: &Cx,
    name: &str,
    args: &[String],
    stdin: &[u8],
) -> Option<Output> {
    Some(match name {
        "uname" => uname(s, args),
        "id" => id(cx, args),
        "ls" => ls(s, cx, args),
        "ps" => ps(s, args),
        "df" => df(s, args),
        "free" => free(s, args),
        "nproc" => nproc(s, args),
        "findmnt" => findmnt(s, args),
        "lsblk" => lsblk(s, args),
        "wc" => wc(s, cx, args, stdin),
        "awk" => awk(s, cx, args, stdin),
        "sed" => sed(s, cx, args, stdin),
        "sort" => sort(s, cx, args, stdin),
        "uniq" => uniq(s, cx, args, stdin),
        "cut" => cut(s, cx, args, stdin),
        "tr" => tr(args, stdin),
        "ip" => ip(s, args),
        "ss" => ss(s, args),
        "mkdir" => mkdir(s, cx, args),
        "rm" | "rmdir" => rm(s, cx, name == "rmdir", args),
        "touch" => touch(s, cx, args),
        "cp" | "mv" => cp_mv(s, cx, name == "mv", args),
        "chmod" => chmod(s, cx, args),
        "tee" => tee(s, cx, args, stdin),
        _ => return None,
    })
}

/// Reads the operands (or stdin when there are none, or for `-`) as text.
fn inputs(
    s: &NodeState,
    cx: &Cx,
    name: &str,
    files: &[String],
    stdin: &[u8],
) -> Result<Vec<(String, String)>, Output> {
    if files.is_empty() {
        return Ok(vec![(
            "-".into(),
            String::from_utf8_lossy(stdin).into_owned(),
        )]);
    }
    let mut v = Vec::new();
    for f in files {
        if f == "-" {
            v.push(("-".into(), String::from_utf8_lossy(stdin).into_owned()));
            continue;
        }
        match s.read_path(&cx.path(f), cx.uid) {
            Ok(d) => v.push((f.clone(), String::from_utf8_lossy(&d).into_owned())),
            Err(e) if name == "sed" => {
                return Err(Output::fail(2, format!("sed: can't read {f}: {e}\n")))
            }
            Err(e) => return Err(Output::fail(1, format!("{name}: {f}: {e}\n"))),
        }
    }
    Ok(v)
}

/// Splits `-abc` style flags; Err(option) for a long option or an unknown letter.
fn short_flags<'a>(
    args: &'a [String],
    known: &str,
) -> Result<(Vec<char>, Vec<&'a String>), String> {
    let mut flags = Vec::new();
    let mut rest = Vec::new();
    let mut only_operands = false;
    for a in args {
        if only_operands || !a.starts_with('-') || a == "-" {
            rest.push(a);
        } else if a == "--" {
            only_operands = true;
        } else if a.starts_with("--") {
            return Err(a.clone());
        } else {
            for c in a[1..].chars() {
                if !known.contains(c) {
                    return Err(format!("-{c}"));
                }
                flags.push(c);
            }
        }
    }
    Ok((flags, rest))
}

// ---- system identity ----

fn uname(s: &NodeState, args: &[String]) -> Output {
    let mut want = Vec::new();
    for a in args {
        let long = match a.as_str() {
            "--all" => "a",
            "--kernel-name" => "s",
            "--nodename" => "n",
            "--kernel-release" => "r",
            "--kernel-version" => "v",
            "--machine" => "m",
            "--processor" => "p",
            "--hardware-platform" => "i",
            "--operating-system" => "o",
            a if a.starts_with('-') && !a.starts_with("--") && a.len() > 1 => &a[1..],
            _ => return unsim("uname", a),
        };
        for c in long.chars() {
            if !"asnrvmpio".contains(c) {
                return unsim("uname", &format!("-{c}"));
            }
            want.push(c);
        }
    }
    if want.is_empty() {
        want.push('s');
    }
    let all = want.contains(&'a');
    let mut fields = Vec::new();
    for (c, v) in [
        ('s', "Linux".to_string()),
        ('n', s.hostname.clone()),
        ('r', s.kernel_release.clone()),
        ('v', s.kernel_version.clone()),
        ('m', "x86_64".to_string()),
        ('p', "unknown".to_string()),
        ('i', "unknown".to_string()),
        ('o', "GNU/Linux".to_string()),
    ] {
        // -a leaves out the unknown processor and platform, as GNU uname does.
        let shown = want.contains(&c) || (all && c != 'p' && c != 'i');
        if shown {
            fields.push(v);
        }
    }
    Output::ok(format!("{}\n", fields.join(" ")))
}

fn id(cx: &Cx, args: &[String]) -> Output {
    let (flags, rest) = match short_flags(args, "ugnG") {
        Ok(x) => x,
        Err(o) => return unsim("id", &o),
    };
    if let Some(u) = rest.first() {
        if u.as_str() != cx.user {
            return unsim("id", &format!("{u} (another user)"));
        }
    }
    let uid = cx.uid;
    let name = if uid == 0 { "root" } else { cx.user };
    let groups: Vec<(u32, &str)> = if uid == 0 {
        vec![(0, "root")]
    } else {
        vec![(uid, name), (27, "sudo")]
    };
    let named = flags.contains(&'n');
    // uid and gid are the same number and name here (each user has its own group).
    let line = if flags.contains(&'u') || flags.contains(&'g') {
        if named {
            name.to_string()
        } else {
            uid.to_string()
        }
    } else if flags.contains(&'G') {
        groups
            .iter()
            .map(|(g, n)| if named { n.to_string() } else { g.to_string() })
            .collect::<Vec<_>>()
            .join(" ")
    } else if named {
        return Output::fail(
            1,
            "id: cannot print only names or real IDs in default format\n",
        );
    } else {
        let gs: Vec<String> = groups.iter().map(|(g, n)| format!("{g}({n})")).collect();
        format!(
            "uid={uid}({name}) gid={uid}({name}) groups={}",
            gs.join(",")
        )
    };
    Output::ok(format!("{line}\n"))
}

// ---- files ----

fn user_name(s: &NodeState, uid: u32) -> String {
    if uid == 0 {
        "root".into()
    } else {
        s.login_user.clone()
    }
}

fn human(bytes: u64) -> String {
    // GNU's -h: powers of 1024, one decimal below 10, rounded up.
    let units = ["", "K", "M", "G", "T", "P"];
    let mut v = bytes as f64;
    let mut k = 0;
    while v >= 1024.0 && k + 1 < units.len() {
        v /= 1024.0;
        k += 1;
    }
    if k == 0 {
        format!("{bytes}")
    } else if v < 10.0 {
        format!("{:.1}{}", (v * 10.0).ceil() / 10.0, units[k])
    } else {
        format!("{:.0}{}", v.ceil(), units[k])
    }
}

fn ls(s: &NodeState, cx: &Cx, args: &[String]) -> Output {
    let (flags, rest) = match short_flags(args, "laA1dh") {
        Ok(x) => x,
        Err(o) => return unsim("ls", &o),
    };
    let long = flags.contains(&'l');
    let all = flags.contains(&'a');
    let almost = flags.contains(&'A');
    let dir_itself = flags.contains(&'d');
    let hum = flags.contains(&'h');
    let operands: Vec<String> = if rest.is_empty() {
        vec![".".into()]
    } else {
        rest.iter().map(|a| a.to_string()).collect()
    };
    let mut out = Output::default();
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    for o in &operands {
        let p = cx.path(o);
        match s.stat(&p) {
            None => {
                out.stderr.extend_from_slice(
                    format!("ls: cannot access '{o}': No such file or directory\n").as_bytes(),
                );
                out.status = 2;
            }
            Some(st) if st.kind == FileKind::Dir && !dir_itself => dirs.push((o.clone(), p)),
            Some(_) => files.push((o.clone(), p)),
        }
    }
    let line = |name: &str, path: &str| -> String {
        if !long {
            return format!("{name}\n");
        }
        let Some(st) = s.stat(path) else {
            return format!("{name}\n");
        };
        let size = if hum {
            human(st.size)
        } else {
            st.size.to_string()
        };
        let links = if st.kind == FileKind::Dir { 2 } else { 1 };
        let owner = user_name(s, st.uid);
        format!(
            "{} {links} {owner} {owner} {size:>5} {} {name}\n",
            st.mode_string(),
            format_clock(st.mtime_ms)
        )
    };
    for (name, path) in &files {
        out.stdout.extend_from_slice(line(name, path).as_bytes());
    }
    let many = operands.len() > 1;
    for (k, (name, path)) in dirs.iter().enumerate() {
        let entries = match s.list_path(path, cx.uid) {
            Ok(e) => e,
            Err(e) => {
                out.stderr.extend_from_slice(
                    format!("ls: cannot open directory '{name}': {e}\n").as_bytes(),
                );
                out.status = 2;
                continue;
            }
        };
        if many {
            if k > 0 || !files.is_empty() {
                out.stdout.push(b'\n');
            }
            out.stdout
                .extend_from_slice(format!("{name}:\n").as_bytes());
        }
        let mut shown: Vec<(String, String)> = Vec::new();
        if all {
            shown.push((".".into(), path.clone()));
            shown.push(("..".into(), super::fs::parent(path).to_string()));
        }
        for e in entries {
            if e.starts_with('.') && !all && !almost {
                continue;
            }
            let child = if path == "/" {
                format!("/{e}")
            } else {
                format!("{path}/{e}")
            };
            shown.push((e, child));
        }
        if long {
            let blocks: u64 = shown
                .iter()
                .filter_map(|(_, p)| s.stat(p))
                .map(|st| st.size.div_ceil(4096) * 4)
                .sum();
            out.stdout
                .extend_from_slice(format!("total {blocks}\n").as_bytes());
        }
        for (e, child) in shown {
            out.stdout.extend_from_slice(line(&e, &child).as_bytes());
        }
    }
    out
}

fn mkdir(s: &mut NodeState, cx: &Cx, args: &[String]) -> Output {
    let mut parents = false;
    let mut mode = 0o755;
    let mut dirs = Vec::new();
    let mut k = 0;
    while let Some(a) = args.get(k) {
        match a.as_str() {
            "-p" | "--parents" => parents = true,
            "-m" => {
                match args.get(k + 1).and_then(|m| u32::from_str_radix(m, 8).ok()) {
                    Some(m) => mode = m,
                    None => return unsim("mkdir", "-m with a symbolic mode"),
                }
                k += 1;
            }
            a if a.starts_with('-') => return unsim("mkdir", a),
            a => dirs.push(a.to_string()),
        }
        k += 1;
    }
    if dirs.is_empty() {
        return Output::fail(1, "mkdir: missing operand\n");
    }
    let now = s.now_ms();
    let mut out = Output::default();
    for d in dirs {
        let p = cx.path(&d);
        if parents {
            let mut cur = String::new();
            for part in p.split('/').filter(|x| !x.is_empty()) {
                cur = format!("{cur}/{part}");
                match s.stat(&cur) {
                    Some(st) if st.kind == FileKind::Dir => continue,
                    Some(_) => {
                        out.stderr.extend_from_slice(
                            format!("mkdir: cannot create directory '{d}': Not a directory\n")
                                .as_bytes(),
                        );
                        out.status = 1;
                        break;
                    }
                    None => {
                        if let Err(e) = s.fs.mkdir(&cur, mode, cx.uid, now) {
                            out.stderr.extend_from_slice(
                                format!("mkdir: cannot create directory '{d}': {e}\n").as_bytes(),
                            );
                            out.status = 1;
                            break;
                        }
                    }
                }
            }
        } else if let Err(e) = s.fs.mkdir(&p, mode, cx.uid, now) {
            out.stderr.extend_from_slice(
                format!("mkdir: cannot create directory '{d}': {e}\n").as_bytes(),
            );
            out.status = 1;
        }
    }
    out
}

fn rm(s: &mut NodeState, cx: &Cx, rmdir: bool, args: &[String]) -> Output {
    let name = if rmdir { "rmdir" } else { "rm" };
    let (flags, rest) = match short_flags(args, if rmdir { "" } else { "rfRd" }) {
        Ok(x) => x,
        Err(o) => return unsim(name, &o),
    };
    let force = flags.contains(&'f');
    let recursive = flags.contains(&'r') || flags.contains(&'R');
    let dir = rmdir || flags.contains(&'d');
    if rest.is_empty() && !force {
        return Output::fail(1, format!("{name}: missing operand\n"));
    }
    let mut out = Output::default();
    for f in rest {
        let p = cx.path(f);
        if s.is_virtual(&p) {
            return unsim(name, &format!("{f} (a file the node computes)"));
        }
        match s.fs.remove(&p, dir, recursive, cx.uid) {
            Ok(()) => {}
            Err(FsError::NotFound) if force => {}
            Err(e) => {
                let msg = if rmdir {
                    format!("rmdir: failed to remove '{f}': {e}\n")
                } else {
                    format!("rm: cannot remove '{f}': {e}\n")
                };
                out.stderr.extend_from_slice(msg.as_bytes());
                out.status = 1;
            }
        }
    }
    out
}

fn touch(s: &mut NodeState, cx: &Cx, args: &[String]) -> Output {
    let (_, rest) = match short_flags(args, "") {
        Ok(x) => x,
        Err(o) => return unsim("touch", &o),
    };
    if rest.is_empty() {
        return Output::fail(1, "touch: missing file operand\n");
    }
    let now = s.now_ms();
    let mut out = Output::default();
    for f in rest {
        let p = cx.path(f);
        if s.is_virtual(&p) {
            continue;
        }
        if let Err(e) = s.fs.touch(&p, cx.uid, now) {
            out.stderr
                .extend_from_slice(format!("touch: cannot touch '{f}': {e}\n").as_bytes());
            out.status = 1;
        }
    }
    out
}

fn cp_mv(s: &mut NodeState, cx: &Cx, mv: bool, args: &[String]) -> Output {
    let name = if mv { "mv" } else { "cp" };
    let (_, rest) = match short_flags(args, "f") {
        Ok(x) => x,
        Err(o) => return unsim(name, &o),
    };
    let [src, dst] = rest.as_slice() else {
        return unsim(name, "with other than one source and one destination");
    };
    let from = cx.path(src);
    let mut to = cx.path(dst);
    if s.stat(&to).is_some_and(|st| st.kind == FileKind::Dir) {
        let base = from.rsplit('/').next().unwrap_or_default().to_string();
        to = normalize(&to, &base);
    }
    let now = s.now_ms();
    let r = if mv {
        if s.is_virtual(&from) {
            return unsim("mv", &format!("{src} (a file the node computes)"));
        }
        s.fs.rename(&from, &to, cx.uid)
    } else {
        match s.stat(&from) {
            Some(st) if st.kind == FileKind::Dir => {
                return unsim("cp", "of a directory (-r)");
            }
            _ => {}
        }
        s.read_path(&from, cx.uid)
            .and_then(|d| s.write_path(&to, &d, false, cx.uid, now))
    };
    match r {
        Ok(()) => Output::ok(""),
        Err(e) if mv => Output::fail(1, format!("mv: cannot move '{src}' to '{dst}': {e}\n")),
        Err(e) => Output::fail(1, format!("cp: cannot copy '{src}' to '{dst}': {e}\n")),
    }
}

fn chmod(s: &mut NodeState, cx: &Cx, args: &[String]) -> Output {
    let [mode, files @ ..] = args else {
        return Output::fail(1, "chmod: missing operand\n");
    };
    if files.is_empty() {
        return Output::fail(1, format!("chmod: missing operand after '{mode}'\n"));
    }
    let mut out = Output::default();
    for f in files {
        let p = cx.path(f);
        let Some(st) = s.stat(&p) else {
            return Output::fail(
                1,
                format!("chmod: cannot access '{f}': No such file or directory\n"),
            );
        };
        let m = if let Ok(m) = u32::from_str_radix(mode, 8) {
            m
        } else {
            match symbolic_mode(mode, st.mode) {
                Some(m) => m,
                None => return unsim("chmod", mode),
            }
        };
        if let Err(e) = s.fs.chmod(&p, m, cx.uid) {
            out.stderr.extend_from_slice(
                format!("chmod: changing permissions of '{f}': {e}\n").as_bytes(),
            );
            out.status = 1;
        }
    }
    out
}

/// `u+x`, `go-w`, `a+r`, `+x`: who (ugoa) then +/- then rwx; None for anything else.
fn symbolic_mode(spec: &str, mode: u32) -> Option<u32> {
    let re = Regex::new(r"^([ugoa]*)([+-])([rwx]+)$").ok()?;
    let c = re.captures(spec)?;
    let who = c.get(1)?.as_str();
    let who = if who.is_empty() || who.contains('a') {
        "ugo"
    } else {
        who
    };
    let mut bits = 0;
    for p in c.get(3)?.as_str().chars() {
        let b = match p {
            'r' => 4,
            'w' => 2,
            _ => 1,
        };
        for w in who.chars() {
            bits |= b
                << match w {
                    'u' => 6,
                    'g' => 3,
                    _ => 0,
                };
        }
    }
    Some(if c.get(2)?.as_str() == "+" {
        mode | bits
    } else {
        mode & !bits
    })
}

fn tee(s: &mut NodeState, cx: &Cx, args: &[String], stdin: &[u8]) -> Output {
    let (flags, rest) = match short_flags(args, "a") {
        Ok(x) => x,
        Err(o) => return unsim("tee", &o),
    };
    let append = flags.contains(&'a');
    let now = s.now_ms();
    let mut out = Output::ok(stdin.to_vec());
    for f in rest {
        if let Err(e) = s.write_path(&cx.path(f), stdin, append, cx.uid, now) {
            out.stderr
                .extend_from_slice(format!("tee: {f}: {e}\n").as_bytes());
            out.status = 1;
        }
    }
    out
}

// ---- processes and resources ----

fn ps(s: &NodeState, args: &[String]) -> Output {
    let style = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        [] => "plain",
        ["aux"] | ["-aux"] | ["auxww"] | ["axu"] => "aux",
        ["-ef"] | ["-e", "-f"] | ["-eF"] => "ef",
        ["-e"] | ["-A"] | ["ax"] | ["-ax"] => "e",
        _ => return unsim("ps", &args.join(" ")),
    };
    let boot = format_clock(s.boot_ms);
    let start_day = boot
        .get(..6)
        .unwrap_or("")
        .replace("  ", " ")
        .replace(' ', "");
    let mut out = String::new();
    let mut procs = processes(s);
    procs.push((SESSION_PID, 1, "root".into(), "-sh".into()));
    procs.push((
        SESSION_PID + 1,
        SESSION_PID,
        "root".into(),
        format!("ps {}", args.join(" ")).trim().to_string(),
    ));
    match style {
        "plain" => {
            out.push_str("    PID TTY          TIME CMD\n");
            out.push_str("   4242 ?        00:00:00 sh\n");
            out.push_str("   4243 ?        00:00:00 ps\n");
        }
        "e" => {
            out.push_str("    PID TTY          TIME CMD\n");
            for (pid, _, _, cmd) in &procs {
                let exe = cmd.split_whitespace().next().unwrap_or_default();
                let comm = exe.rsplit('/').next().unwrap_or(exe).trim_end_matches(':');
                let comm = comm.trim_matches(['[', ']']).trim_start_matches('-');
                out.push_str(&format!("{pid:>7} ?        00:00:00 {comm}\n"));
            }
        }
        "ef" => {
            out.push_str("UID          PID    PPID  C STIME TTY          TIME CMD\n");
            for (pid, ppid, user, cmd) in &procs {
                out.push_str(&format!(
                    "{user:<8} {pid:>7} {ppid:>7}  0 {start_day:<5} ?        00:00:00 {cmd}\n"
                ));
            }
        }
        _ => {
            out.push_str(
                "USER         PID %CPU %MEM    VSZ   RSS TTY      STAT START   TIME COMMAND\n",
            );
            for (pid, _, user, cmd) in &procs {
                out.push_str(&format!(
                    "{user:<8} {pid:>7}  0.0  0.1  10240  4096 ?        Ss   {start_day:<5}   0:00 {cmd}\n"
                ));
            }
        }
    }
    Output::ok(out)
}

/// (source, fstype, size KiB, used KiB, mount point) of the file systems `df` shows: the
/// mount table's, less the pseudo ones that hold no blocks (proc, sysfs, cgroup2, ...), as
/// GNU df leaves them out without `-a`.
fn filesystems(s: &NodeState) -> Vec<(String, String, u64, u64, String)> {
    s.mount_table()
        .into_iter()
        .filter_map(|m| {
            let (size, used) = match (m.fstype.as_str(), m.target.as_str()) {
                ("devtmpfs", _) => (8_117_212, 0),
                ("tmpfs", "/run") => (1_628_804, 1_236),
                ("tmpfs", "/run/lock") => (5_120, 0),
                ("tmpfs", _) => (8_144_016, 0),
                ("vfat", _) => (523_248, 5_972),
                ("ext4" | "xfs" | "btrfs", "/") => (479_079_112, 38_214_520),
                ("ext4" | "xfs" | "btrfs", _) => (97_466_512, 2_410_332),
                _ => return None,
            };
            Some((m.source, m.fstype, size, used, m.target))
        })
        .collect()
}

fn df(s: &NodeState, args: &[String]) -> Output {
    let (flags, rest) = match short_flags(args, "hTkP") {
        Ok(x) => x,
        Err(o) => return unsim("df", &o),
    };
    let hum = flags.contains(&'h');
    let types = flags.contains(&'T');
    let mut fss = filesystems(s);
    if !rest.is_empty() {
        let mut picked = Vec::new();
        for p in &rest {
            let best = fss
                .iter()
                .filter(|f| f.4 == "/" || p.as_str() == f.4 || p.starts_with(&format!("{}/", f.4)))
                .max_by_key(|f| f.4.len())
                .cloned();
            match best {
                Some(b) => picked.push(b),
                None => return unsim("df", p),
            }
        }
        fss = picked;
    }
    let mut rows: Vec<Vec<String>> = vec![{
        let mut h = vec!["Filesystem".to_string()];
        if types {
            h.push("Type".into());
        }
        if hum {
            h.extend(["Size", "Used", "Avail", "Use%"].map(String::from));
        } else {
            h.extend(["1K-blocks", "Used", "Available", "Use%"].map(String::from));
        }
        h.push("Mounted on".into());
        h
    }];
    for (src, fstype, size, used, target) in fss {
        let avail = size.saturating_sub(used);
        let pct = if size == 0 {
            0
        } else {
            (used * 100).div_ceil(size)
        };
        let n = |k: u64| {
            if hum {
                if k == 0 {
                    "0".into()
                } else {
                    human(k * 1024)
                }
            } else {
                k.to_string()
            }
        };
        let mut r = vec![src];
        if types {
            r.push(fstype);
        }
        r.extend([n(size), n(used), n(avail), format!("{pct}%")]);
        r.push(target);
        rows.push(r);
    }
    // GNU df's minimum widths: Filesystem 14, Type 4, the numbers 5, Use% 4.
    let mut min = vec![14];
    if types {
        min.push(4);
    }
    min.extend([5, 5, 5, 4, 0]);
    Output::ok(table(&rows, &[0, usize::from(types)], &min))
}

/// Columns padded to their widest cell (at least `min`): the `left` ones (by index)
/// left-aligned, numbers right-aligned, the last column unpadded ("Mounted on").
fn table(rows: &[Vec<String>], left: &[usize], min: &[usize]) -> String {
    let cols = rows.first().map_or(0, Vec::len);
    let mut w: Vec<usize> = (0..cols)
        .map(|k| min.get(k).copied().unwrap_or(0))
        .collect();
    for r in rows {
        for (k, c) in r.iter().enumerate() {
            w[k] = w[k].max(c.len());
        }
    }
    let mut out = String::new();
    for r in rows {
        let mut line = Vec::new();
        for (k, c) in r.iter().enumerate() {
            if k + 1 == cols {
                line.push(c.clone());
            } else if left.contains(&k) {
                line.push(format!("{c:<width$}", width = w[k]));
            } else {
                line.push(format!("{c:>width$}", width = w[k]));
            }
        }
        out.push_str(line.join(" ").trim_end());
        out.push('\n');
    }
    out
}

/// procps' `free -h`: powers of 1024 with an `i`, one decimal below 10, else the whole
/// number cut down (`15Gi` for 15.5 GiB, where GNU df would round up).
fn free_human(kib: u64) -> String {
    let units = ["Ki", "Mi", "Gi", "Ti", "Pi"];
    let mut v = kib as f64;
    let mut k = 0;
    while v >= 1024.0 && k + 1 < units.len() {
        v /= 1024.0;
        k += 1;
    }
    if v < 10.0 {
        format!("{v:.1}{}", units[k])
    } else {
        format!("{}{}", v.trunc() as u64, units[k])
    }
}

fn nproc(s: &NodeState, args: &[String]) -> Output {
    match args {
        [] => Output::ok(format!("{}\n", s.cpus)),
        [a] if a == "--all" => Output::ok(format!("{}\n", s.cpus)),
        _ => unsim("nproc", &args.join(" ")),
    }
}

fn free(s: &NodeState, args: &[String]) -> Output {
    let (flags, rest) = match short_flags(args, "hmgkbt") {
        Ok(x) => x,
        Err(o) => return unsim("free", &o),
    };
    if let Some(r) = rest.first() {
        return unsim("free", r);
    }
    // From /proc/meminfo's numbers, as procps derives them.
    let m = &s.memory;
    let mem = [
        m.total,
        m.used(),
        m.free,
        m.shmem,
        m.buff_cache(),
        m.available,
    ];
    let swap = [
        m.swap_total,
        m.swap_total.saturating_sub(m.swap_free),
        m.swap_free,
    ];
    let f = |k: u64| -> String {
        if flags.contains(&'h') {
            if k == 0 {
                "0B".into()
            } else {
                free_human(k)
            }
        } else if flags.contains(&'m') {
            (k / 1024).to_string()
        } else if flags.contains(&'g') {
            (k / 1024 / 1024).to_string()
        } else if flags.contains(&'b') {
            (k * 1024).to_string()
        } else {
            k.to_string()
        }
    };
    let mut out = String::from(
        "               total        used        free      shared  buff/cache   available\n",
    );
    out.push_str(&format!("{:<8}", "Mem:"));
    for v in mem {
        out.push_str(&format!("{:>12}", f(v)));
    }
    out.push('\n');
    out.push_str(&format!("{:<8}", "Swap:"));
    for v in swap {
        out.push_str(&format!("{:>12}", f(v)));
    }
    out.push('\n');
    if flags.contains(&'t') {
        out.push_str(&format!("{:<8}", "Total:"));
        for v in [mem[0], mem[1], mem[2]] {
            out.push_str(&format!("{:>12}", f(v)));
        }
        out.push('\n');
    }
    Output::ok(out)
}

// ---- text ----

fn wc(s: &NodeState, cx: &Cx, args: &[String], stdin: &[u8]) -> Output {
    let (mut flags, rest) = match short_flags(args, "lwcm") {
        Ok(x) => x,
        Err(o) => return unsim("wc", &o),
    };
    if flags.is_empty() {
        flags = vec!['l', 'w', 'c'];
    }
    let files: Vec<String> = rest.iter().map(|a| a.to_string()).collect();
    let ins = match inputs(s, cx, "wc", &files, stdin) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let count = |t: &str| -> Vec<u64> {
        ["l", "w", "m", "c"]
            .iter()
            .filter(|c| flags.contains(&c.chars().next().unwrap_or(' ')))
            .map(|c| match *c {
                "l" => t.matches('\n').count() as u64,
                "w" => t.split_whitespace().count() as u64,
                "m" => t.chars().count() as u64,
                _ => t.len() as u64,
            })
            .collect()
    };
    let mut rows: Vec<(Vec<u64>, String)> =
        ins.iter().map(|(n, t)| (count(t), n.clone())).collect();
    if rows.len() > 1 {
        let mut total = vec![0; rows[0].0.len()];
        for (c, _) in &rows {
            for (k, v) in c.iter().enumerate() {
                total[k] += v;
            }
        }
        rows.push((total, "total".into()));
    }
    let single = rows.len() == 1 && rows[0].0.len() == 1;
    let width = if single {
        0
    } else if files.is_empty() {
        7
    } else {
        let bytes: usize = ins.iter().map(|(_, t)| t.len()).sum();
        bytes.to_string().len()
    };
    let mut out = String::new();
    for (c, name) in rows {
        let nums: Vec<String> = c.iter().map(|v| format!("{v:>width$}")).collect();
        out.push_str(&nums.join(" "));
        if name != "-" || !files.is_empty() {
            out.push(' ');
            out.push_str(&name);
        }
        out.push('\n');
    }
    Output::ok(out)
}

fn sort(s: &NodeState, cx: &Cx, args: &[String], stdin: &[u8]) -> Output {
    let mut numeric = false;
    let mut reverse = false;
    let mut unique = false;
    let mut key: Option<usize> = None;
    let mut sep: Option<char> = None;
    let mut files = Vec::new();
    let mut k = 0;
    while let Some(a) = args.get(k) {
        match a.as_str() {
            "-k" | "-t" => {
                let Some(v) = args.get(k + 1) else {
                    return Output::fail(
                        2,
                        format!("sort: option requires an argument -- '{}'\n", &a[1..]),
                    );
                };
                if a == "-k" {
                    match v.parse::<usize>() {
                        Ok(n) if n > 0 => key = Some(n),
                        _ => return unsim("sort", &format!("-k {v}")),
                    }
                } else {
                    let mut cs = v.chars();
                    match (cs.next(), cs.next()) {
                        (Some(c), None) => sep = Some(c),
                        _ => return Output::fail(2, "sort: multi-character tab\n"),
                    }
                }
                k += 1;
            }
            f if f.starts_with('-') && f.len() > 1 && !f.starts_with("--") => {
                for c in f[1..].chars() {
                    match c {
                        'n' => numeric = true,
                        'r' => reverse = true,
                        'u' => unique = true,
                        _ => return unsim("sort", &format!("-{c}")),
                    }
                }
            }
            f if f.starts_with("--") => return unsim("sort", f),
            f => files.push(f.to_string()),
        }
        k += 1;
    }
    let ins = match inputs(s, cx, "sort", &files, stdin) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let text: String = ins.into_iter().map(|(_, t)| t).collect();
    let field = |l: &str| -> String {
        match key {
            None => l.to_string(),
            Some(n) => {
                let parts: Vec<&str> = match sep {
                    Some(c) => l.split(c).collect(),
                    None => l.split_whitespace().collect(),
                };
                parts.get(n - 1..).map(|p| p.join(" ")).unwrap_or_default()
            }
        }
    };
    let num = |l: &str| -> f64 {
        let t = l.trim_start();
        let end = t
            .char_indices()
            .take_while(|(i, c)| c.is_ascii_digit() || *c == '.' || (*i == 0 && *c == '-'))
            .count();
        t[..end].parse().unwrap_or(0.0)
    };
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_by(|a, b| {
        let (fa, fb) = (field(a), field(b));
        let o = if numeric {
            num(&fa)
                .partial_cmp(&num(&fb))
                .unwrap_or(std::cmp::Ordering::Equal)
        } else {
            fa.cmp(&fb)
        };
        o.then_with(|| a.cmp(b))
    });
    if reverse {
        lines.reverse();
    }
    if unique {
        lines.dedup_by(|a, b| {
            if numeric {
                num(&field(a)) == num(&field(b))
            } else {
                field(a) == field(b)
            }
        });
    }
    let mut out = lines.join("\n");
    if !lines.is_empty() {
        out.push('\n');
    }
    Output::ok(out)
}

fn uniq(s: &NodeState, cx: &Cx, args: &[String], stdin: &[u8]) -> Output {
    let (flags, rest) = match short_flags(args, "cdu") {
        Ok(x) => x,
        Err(o) => return unsim("uniq", &o),
    };
    if rest.len() > 1 {
        return unsim("uniq", "with an output file");
    }
    let files: Vec<String> = rest.iter().map(|a| a.to_string()).collect();
    let ins = match inputs(s, cx, "uniq", &files, stdin) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let text: String = ins.into_iter().map(|(_, t)| t).collect();
    let mut groups: Vec<(usize, &str)> = Vec::new();
    for l in text.lines() {
        match groups.last_mut() {
            Some((n, last)) if *last == l => *n += 1,
            _ => groups.push((1, l)),
        }
    }
    let mut out = String::new();
    for (n, l) in groups {
        if (flags.contains(&'d') && n < 2) || (flags.contains(&'u') && n > 1) {
            continue;
        }
        if flags.contains(&'c') {
            out.push_str(&format!("{n:>7} {l}\n"));
        } else {
            out.push_str(&format!("{l}\n"));
        }
    }
    Output::ok(out)
}

/// `1,3`, `2-4`, `3-`, `-2` as a predicate over 1-based positions.
fn ranges(spec: &str) -> Option<Vec<(usize, usize)>> {
    let mut v = Vec::new();
    for part in spec.split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (
                if a.is_empty() { 1 } else { a.parse().ok()? },
                if b.is_empty() {
                    usize::MAX
                } else {
                    b.parse().ok()?
                },
            ),
            None => {
                let n = part.parse().ok()?;
                (n, n)
            }
        };
        if a == 0 {
            return None;
        }
        v.push((a, b));
    }
    Some(v)
}

fn cut(s: &NodeState, cx: &Cx, args: &[String], stdin: &[u8]) -> Output {
    let mut delim = '\t';
    let mut fields = None;
    let mut chars = None;
    let mut files = Vec::new();
    let mut k = 0;
    while let Some(a) = args.get(k) {
        let (opt, val) = if a.len() > 2 && a.starts_with('-') && !a.starts_with("--") {
            (&a[..2], Some(a[2..].to_string()))
        } else {
            (a.as_str(), None)
        };
        let take = |k: &mut usize| -> Option<String> {
            val.clone().or_else(|| {
                *k += 1;
                args.get(*k).cloned()
            })
        };
        match opt {
            "-d" => match take(&mut k).map(|v| v.chars().collect::<Vec<_>>()) {
                Some(v) if v.len() == 1 => delim = v[0],
                _ => return Output::fail(1, "cut: the delimiter must be a single character\n"),
            },
            "-f" => fields = take(&mut k),
            "-c" => chars = take(&mut k),
            o if o.starts_with('-') && o.len() > 1 => return unsim("cut", o),
            f => files.push(f.to_string()),
        }
        k += 1;
    }
    let (spec, by_char) = match (fields, chars) {
        (Some(f), None) => (f, false),
        (None, Some(c)) => (c, true),
        _ => {
            return Output::fail(
                1,
                "cut: you must specify a list of bytes, characters, or fields\n",
            )
        }
    };
    let Some(rs) = ranges(&spec) else {
        return Output::fail(1, format!("cut: invalid field value '{spec}'\n"));
    };
    let pick = |n: usize| rs.iter().any(|(a, b)| (*a..=*b).contains(&n));
    let ins = match inputs(s, cx, "cut", &files, stdin) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let mut out = String::new();
    for (_, t) in ins {
        for l in t.lines() {
            if by_char {
                out.extend(
                    l.chars()
                        .enumerate()
                        .filter(|(i, _)| pick(i + 1))
                        .map(|(_, c)| c),
                );
            } else if !l.contains(delim) {
                out.push_str(l);
            } else {
                let parts: Vec<&str> = l
                    .split(delim)
                    .enumerate()
                    .filter(|(i, _)| pick(i + 1))
                    .map(|(_, p)| p)
                    .collect();
                out.push_str(&parts.join(&delim.to_string()));
            }
            out.push('\n');
        }
    }
    Output::ok(out)
}

/// A `tr` set: ranges `a-z`, classes `[:upper:]` etc., `\n`-style escapes.
fn tr_set(spec: &str) -> Option<Vec<char>> {
    let mut v = Vec::new();
    for (class, chars) in [
        ("[:upper:]", ('A'..='Z').collect::<Vec<_>>()),
        ("[:lower:]", ('a'..='z').collect()),
        ("[:digit:]", ('0'..='9').collect()),
        ("[:space:]", vec![' ', '\t', '\n', '\r', '\x0b', '\x0c']),
        ("[:blank:]", vec![' ', '\t']),
    ] {
        if spec == class {
            return Some(chars);
        }
    }
    if spec.contains("[:") || spec.contains("[=") || spec.contains('*') {
        return None;
    }
    let mut cs: Vec<char> = Vec::new();
    let mut it = spec.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            cs.push(match it.next() {
                Some('n') => '\n',
                Some('t') => '\t',
                Some('r') => '\r',
                Some('\\') => '\\',
                Some(o) => o,
                None => '\\',
            });
        } else {
            cs.push(c);
        }
    }
    let mut k = 0;
    while k < cs.len() {
        if k + 2 < cs.len() && cs[k + 1] == '-' && cs[k] <= cs[k + 2] {
            v.extend(cs[k]..=cs[k + 2]);
            k += 3;
        } else {
            v.push(cs[k]);
            k += 1;
        }
    }
    Some(v)
}

fn tr(args: &[String], stdin: &[u8]) -> Output {
    let (flags, rest) = match short_flags(args, "ds") {
        Ok(x) => x,
        Err(o) => return unsim("tr", &o),
    };
    let sets: Option<Vec<Vec<char>>> = rest.iter().map(|r| tr_set(r)).collect();
    let Some(sets) = sets else {
        return unsim(
            "tr",
            &format!(
                "set {}",
                rest.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        );
    };
    let text = String::from_utf8_lossy(stdin);
    let delete = flags.contains(&'d');
    let squeeze = flags.contains(&'s');
    let mut out = String::new();
    match (delete, squeeze, sets.as_slice()) {
        (true, false, [d]) => out.extend(text.chars().filter(|c| !d.contains(c))),
        (false, true, [sq]) => {
            let mut last = None;
            for c in text.chars() {
                if sq.contains(&c) && last == Some(c) {
                    continue;
                }
                out.push(c);
                last = Some(c);
            }
        }
        (false, _, [from, to]) if !to.is_empty() => {
            let mut last = None;
            for c in text.chars() {
                let m = match from.iter().position(|f| *f == c) {
                    Some(i) => to.get(i).or(to.last()).copied().unwrap_or(c),
                    None => c,
                };
                if squeeze && to.contains(&m) && last == Some(m) {
                    continue;
                }
                out.push(m);
                last = Some(m);
            }
        }
        _ => return unsim("tr", &args.join(" ")),
    }
    Output::ok(out)
}

// ---- awk (a common subset) ----

#[derive(Debug, Clone)]
enum AwkExpr {
    Field(Box<AwkExpr>),
    Num(f64),
    Str(String),
    Var(String),
    Concat(Vec<AwkExpr>),
}

#[derive(Debug, Clone)]
enum AwkPat {
    All,
    Begin,
    End,
    Regex(Regex),
    Match(AwkExpr, bool, Regex),
    Cmp(AwkExpr, String, AwkExpr),
}

#[derive(Debug, Clone)]
struct AwkRule {
    pat: AwkPat,
    /// Each `print` statement's expressions (an empty list prints `$0`).
    prints: Vec<Vec<AwkExpr>>,
}

/// Parses the subset: rules `[pattern] { print [expr, ...]; ... }`, a pattern alone
/// (prints the line); patterns `BEGIN`, `END`, `/re/`, `EXPR ~ /re/`, `EXPR !~ /re/`,
/// `EXPR op EXPR` (== != < <= > >=); expressions `$N`, `$NF`, `$(NF-1)`, `NR`, `NF`,
/// numbers, strings, and concatenation of those. Err names the unmodelled part.
fn awk_parse(src: &str) -> Result<Vec<AwkRule>, String> {
    let mut p = AwkP {
        s: src.chars().collect(),
        i: 0,
    };
    let mut rules = Vec::new();
    loop {
        p.ws();
        if p.i >= p.s.len() {
            break;
        }
        let pat = p.pattern()?;
        p.ws();
        let prints = if p.peek() == Some('{') {
            p.i += 1;
            p.body()?
        } else {
            vec![Vec::new()]
        };
        rules.push(AwkRule { pat, prints });
        p.ws();
        if p.peek() == Some(';') {
            p.i += 1;
        }
    }
    Ok(rules)
}

struct AwkP {
    s: Vec<char>,
    i: usize,
}

impl AwkP {
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }
    fn ws(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t' | '\n')) {
            self.i += 1;
        }
    }
    fn rest(&self) -> String {
        self.s[self.i..].iter().take(20).collect()
    }
    fn word(&mut self) -> String {
        let mut w = String::new();
        while let Some(c) = self
            .peek()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        {
            w.push(c);
            self.i += 1;
        }
        w
    }
    fn regex(&mut self) -> Result<Regex, String> {
        // At `/`.
        self.i += 1;
        let mut r = String::new();
        loop {
            match self.peek() {
                None => return Err("an unterminated /regex/".into()),
                Some('/') => {
                    self.i += 1;
                    break;
                }
                Some('\\') if self.s.get(self.i + 1) == Some(&'/') => {
                    r.push('/');
                    self.i += 2;
                }
                Some(c) => {
                    r.push(c);
                    self.i += 1;
                }
            }
        }
        Regex::new(&r).map_err(|e| format!("the regex /{r}/ ({e})"))
    }
    fn pattern(&mut self) -> Result<AwkPat, String> {
        if self.peek() == Some('{') {
            return Ok(AwkPat::All);
        }
        if self.peek() == Some('/') {
            return Ok(AwkPat::Regex(self.regex()?));
        }
        let save = self.i;
        let w = self.word();
        if w == "BEGIN" {
            return Ok(AwkPat::Begin);
        }
        if w == "END" {
            return Ok(AwkPat::End);
        }
        self.i = save;
        let left = self.expr()?;
        self.ws();
        for op in ["!~", "~", "==", "!=", "<=", ">=", "<", ">"] {
            let n = op.chars().count();
            if self.s[self.i..].iter().take(n).collect::<String>() == op {
                self.i += n;
                self.ws();
                if op.contains('~') {
                    if self.peek() != Some('/') {
                        return Err(format!("a dynamic regex after {op}"));
                    }
                    return Ok(AwkPat::Match(left, op == "~", self.regex()?));
                }
                let right = self.expr()?;
                return Ok(AwkPat::Cmp(left, op.into(), right));
            }
        }
        Err(format!("the pattern before `{}`", self.rest()))
    }
    fn term(&mut self) -> Result<Option<AwkExpr>, String> {
        self.ws();
        match self.peek() {
            Some('$') => {
                self.i += 1;
                let inner = if self.peek() == Some('(') {
                    self.i += 1;
                    let w = self.word();
                    self.ws();
                    let e = if w == "NF" && self.peek() == Some('-') {
                        self.i += 1;
                        let n = self.word();
                        let n: f64 = n.parse().map_err(|_| format!("$(NF-{n})"))?;
                        AwkExpr::Concat(vec![AwkExpr::Var("NF".into()), AwkExpr::Num(-n)])
                    } else {
                        return Err(format!("the field expression $({w}...)"));
                    };
                    self.ws();
                    if self.peek() != Some(')') {
                        return Err("an unclosed $(".into());
                    }
                    self.i += 1;
                    e
                } else {
                    let w = self.word();
                    match w.parse::<f64>() {
                        Ok(n) => AwkExpr::Num(n),
                        Err(_) if w == "NF" => AwkExpr::Var("NF".into()),
                        Err(_) => return Err(format!("the field expression ${w}")),
                    }
                };
                Ok(Some(AwkExpr::Field(Box::new(inner))))
            }
            Some('"') => {
                self.i += 1;
                let mut t = String::new();
                loop {
                    match self.peek() {
                        None => return Err("an unterminated string".into()),
                        Some('"') => {
                            self.i += 1;
                            break;
                        }
                        Some('\\') => {
                            self.i += 1;
                            match self.peek() {
                                Some('n') => t.push('\n'),
                                Some('t') => t.push('\t'),
                                Some(c) => t.push(c),
                                None => {}
                            }
                            self.i += 1;
                        }
                        Some(c) => {
                            t.push(c);
                            self.i += 1;
                        }
                    }
                }
                Ok(Some(AwkExpr::Str(t)))
            }
            Some(c) if c.is_ascii_digit() => {
                let w = self.word();
                w.parse()
                    .map(|n| Some(AwkExpr::Num(n)))
                    .map_err(|_| format!("the number {w}"))
            }
            Some(c) if c.is_ascii_alphabetic() => {
                let save = self.i;
                let w = self.word();
                if matches!(w.as_str(), "NR" | "NF" | "FNR") {
                    Ok(Some(AwkExpr::Var(w)))
                } else {
                    self.i = save;
                    Err(format!("`{w}`"))
                }
            }
            _ => Ok(None),
        }
    }
    fn expr(&mut self) -> Result<AwkExpr, String> {
        let mut parts = Vec::new();
        while let Some(t) = self.term()? {
            parts.push(t);
        }
        match parts.len() {
            0 => Err(format!("the expression at `{}`", self.rest())),
            1 => Ok(parts.remove(0)),
            _ => Ok(AwkExpr::Concat(parts)),
        }
    }
    fn body(&mut self) -> Result<Vec<Vec<AwkExpr>>, String> {
        let mut prints = Vec::new();
        loop {
            self.ws();
            match self.peek() {
                Some('}') => {
                    self.i += 1;
                    return Ok(prints);
                }
                Some(';') => {
                    self.i += 1;
                    continue;
                }
                None => return Err("an unclosed {".into()),
                _ => {}
            }
            let w = self.word();
            if w != "print" {
                return Err(format!("the statement `{w}{}`", self.rest()));
            }
            let mut list = Vec::new();
            loop {
                self.ws();
                if matches!(self.peek(), Some(';' | '}') | None) {
                    break;
                }
                list.push(self.expr()?);
                self.ws();
                if self.peek() == Some(',') {
                    self.i += 1;
                } else if !matches!(self.peek(), Some(';' | '}')) {
                    return Err(format!("the print argument at `{}`", self.rest()));
                }
            }
            prints.push(list);
        }
    }
}

fn awk_value(e: &AwkExpr, fields: &[&str], line: &str, nr: usize) -> String {
    match e {
        AwkExpr::Num(n) => fmt_num(*n),
        AwkExpr::Str(s) => s.clone(),
        AwkExpr::Var(v) if v == "NF" => fields.len().to_string(),
        AwkExpr::Var(_) => nr.to_string(),
        AwkExpr::Field(i) => {
            let k = match i.as_ref() {
                AwkExpr::Concat(p) => {
                    // $(NF-n)
                    let n = match p.get(1) {
                        Some(AwkExpr::Num(n)) => *n,
                        _ => 0.0,
                    };
                    (fields.len() as f64 + n).max(0.0) as usize
                }
                other => awk_value(other, fields, line, nr)
                    .parse::<f64>()
                    .unwrap_or(0.0) as usize,
            };
            if k == 0 {
                line.to_string()
            } else {
                fields.get(k - 1).map(|s| s.to_string()).unwrap_or_default()
            }
        }
        AwkExpr::Concat(p) => p.iter().map(|x| awk_value(x, fields, line, nr)).collect(),
    }
}

fn fmt_num(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

fn awk(s: &NodeState, cx: &Cx, args: &[String], stdin: &[u8]) -> Output {
    let mut fs_sep: Option<String> = None;
    let mut k = 0;
    while let Some(a) = args.get(k) {
        if a == "-F" {
            fs_sep = args.get(k + 1).cloned();
            k += 2;
        } else if let Some(v) = a.strip_prefix("-F") {
            fs_sep = Some(v.to_string());
            k += 1;
        } else if a.starts_with('-') && a.len() > 1 {
            return unsim("awk", a);
        } else {
            break;
        }
    }
    let Some(prog) = args.get(k) else {
        return Output::fail(2, "usage: awk [-F value] 'prog' [file ...]\n");
    };
    let files: Vec<String> = args[k + 1..].to_vec();
    if files.iter().any(|f| f.contains('=')) {
        return unsim("awk", "variable assignments on the command line");
    }
    let rules = match awk_parse(prog) {
        Ok(r) => r,
        Err(what) => return unsim("awk", &format!("program construct: {what}")),
    };
    let ins = match inputs(s, cx, "awk", &files, stdin) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let sep_re = match fs_sep.as_deref() {
        None | Some(" ") => None,
        Some(t) if t.chars().count() == 1 => Some(Regex::new(&regex::escape(t)).ok()),
        Some(t) => Some(Regex::new(t).ok()),
    };
    if matches!(sep_re, Some(None)) {
        return unsim("awk", "this -F separator");
    }
    let mut out = String::new();
    let emit = |out: &mut String, r: &AwkRule, fields: &[&str], line: &str, nr: usize| {
        for p in &r.prints {
            if p.is_empty() {
                out.push_str(line);
            } else {
                let v: Vec<String> = p.iter().map(|e| awk_value(e, fields, line, nr)).collect();
                out.push_str(&v.join(" "));
            }
            out.push('\n');
        }
    };
    for r in rules.iter().filter(|r| matches!(r.pat, AwkPat::Begin)) {
        emit(&mut out, r, &[], "", 0);
    }
    let mut nr = 0;
    let mut last_fields: Vec<String> = Vec::new();
    let mut last_line = String::new();
    for (_, text) in &ins {
        for line in text.lines() {
            nr += 1;
            let fields: Vec<&str> = match &sep_re {
                Some(Some(re)) => re.split(line).collect(),
                _ => line.split_whitespace().collect(),
            };
            for r in &rules {
                let hit = match &r.pat {
                    AwkPat::All => true,
                    AwkPat::Begin | AwkPat::End => false,
                    AwkPat::Regex(re) => re.is_match(line),
                    AwkPat::Match(e, want, re) => {
                        re.is_match(&awk_value(e, &fields, line, nr)) == *want
                    }
                    AwkPat::Cmp(a, op, b) => {
                        let (x, y) = (
                            awk_value(a, &fields, line, nr),
                            awk_value(b, &fields, line, nr),
                        );
                        let ord = match (x.parse::<f64>(), y.parse::<f64>()) {
                            (Ok(p), Ok(q)) => {
                                p.partial_cmp(&q).unwrap_or(std::cmp::Ordering::Equal)
                            }
                            _ => x.cmp(&y),
                        };
                        match op.as_str() {
                            "==" => ord.is_eq(),
                            "!=" => !ord.is_eq(),
                            "<" => ord.is_lt(),
                            "<=" => ord.is_le(),
                            ">" => ord.is_gt(),
                            _ => ord.is_ge(),
                        }
                    }
                };
                if hit {
                    emit(&mut out, r, &fields, line, nr);
                }
            }
            last_fields = fields.iter().map(|f| f.to_string()).collect();
            last_line = line.to_string();
        }
    }
    let lf: Vec<&str> = last_fields.iter().map(String::as_str).collect();
    for r in rules.iter().filter(|r| matches!(r.pat, AwkPat::End)) {
        emit(&mut out, r, &lf, &last_line, nr);
    }
    Output::ok(out)
}

// ---- sed (a common subset) ----

#[derive(Debug)]
enum SedAddr {
    Line(usize),
    Last,
    Re(Regex),
}

#[derive(Debug)]
enum SedCmd {
    Subst(Regex, String, bool, bool),
    Delete,
    Print,
    Quit,
}

/// A POSIX BRE (or ERE with -E) as a Rust regex.
fn sed_regex(re: &str, extended: bool) -> Result<Regex, String> {
    let body = if extended {
        re.to_string()
    } else {
        bre_to_regex(re)
    };
    Regex::new(&body).map_err(|e| format!("the regex {re} ({e})"))
}

/// Parses `[addr]cmd` commands separated by `;` or newlines: addresses N, `$`, `/re/`;
/// commands `s/re/repl/[gp]` (any delimiter), `d`, `p`, `q`.
fn sed_parse(script: &str, extended: bool) -> Result<Vec<(Option<SedAddr>, SedCmd)>, String> {
    let cs: Vec<char> = script.chars().collect();
    let mut i = 0;
    let mut cmds = Vec::new();
    let delimited = |i: &mut usize, d: char| -> Result<String, String> {
        let mut t = String::new();
        loop {
            match cs.get(*i) {
                None => return Err("an unterminated s command".into()),
                Some(&c) if c == d => {
                    *i += 1;
                    return Ok(t);
                }
                Some('\\') if cs.get(*i + 1) == Some(&d) => {
                    t.push(d);
                    *i += 2;
                }
                Some('\\') => {
                    t.push('\\');
                    if let Some(&n) = cs.get(*i + 1) {
                        t.push(n);
                    }
                    *i += 2;
                }
                Some(&c) => {
                    t.push(c);
                    *i += 1;
                }
            }
        }
    };
    while i < cs.len() {
        while matches!(cs.get(i), Some(' ' | ';' | '\n' | '\t')) {
            i += 1;
        }
        if i >= cs.len() {
            break;
        }
        let addr = match cs[i] {
            '$' => {
                i += 1;
                Some(SedAddr::Last)
            }
            '/' => {
                i += 1;
                let r = delimited(&mut i, '/')?;
                Some(SedAddr::Re(sed_regex(&r, extended)?))
            }
            c if c.is_ascii_digit() => {
                let mut n = String::new();
                while let Some(d) = cs.get(i).filter(|c| c.is_ascii_digit()) {
                    n.push(*d);
                    i += 1;
                }
                Some(SedAddr::Line(n.parse().map_err(|_| "a line number")?))
            }
            _ => None,
        };
        if cs.get(i) == Some(&',') {
            return Err("address ranges (a,b)".into());
        }
        let cmd = match cs.get(i) {
            Some('s') => {
                let d = *cs.get(i + 1).ok_or("an s command without a delimiter")?;
                i += 2;
                let re = delimited(&mut i, d)?;
                let repl = delimited(&mut i, d)?;
                let (mut g, mut p) = (false, false);
                while let Some(&f) = cs.get(i) {
                    match f {
                        'g' => g = true,
                        'p' => p = true,
                        ';' | '\n' | ' ' | '}' => break,
                        o => return Err(format!("the s flag {o}")),
                    }
                    i += 1;
                }
                // `\1` and `&` in the replacement, as Rust's `${1}` and `${0}`.
                let mut r = String::new();
                let mut it = repl.chars().peekable();
                while let Some(c) = it.next() {
                    match c {
                        '\\' => match it.next() {
                            Some(n @ '0'..='9') => r.push_str(&format!("${{{n}}}")),
                            Some('n') => r.push('\n'),
                            Some('t') => r.push('\t'),
                            Some(o) => r.push(o),
                            None => {}
                        },
                        '&' => r.push_str("${0}"),
                        '$' => r.push_str("$$"),
                        c => r.push(c),
                    }
                }
                SedCmd::Subst(sed_regex(&re, extended)?, r, g, p)
            }
            Some('d') => {
                i += 1;
                SedCmd::Delete
            }
            Some('p') => {
                i += 1;
                SedCmd::Print
            }
            Some('q') => {
                i += 1;
                SedCmd::Quit
            }
            Some(c) => return Err(format!("the command `{c}`")),
            None => return Err("a missing command".into()),
        };
        cmds.push((addr, cmd));
    }
    Ok(cmds)
}

fn sed(s: &mut NodeState, cx: &Cx, args: &[String], stdin: &[u8]) -> Output {
    let mut quiet = false;
    let mut extended = false;
    let mut in_place = false;
    let mut scripts = Vec::new();
    let mut files = Vec::new();
    let mut k = 0;
    while let Some(a) = args.get(k) {
        match a.as_str() {
            "-e" | "--expression" => {
                match args.get(k + 1) {
                    Some(v) => scripts.push(v.clone()),
                    None => return Output::fail(1, "sed: option requires an argument -- 'e'\n"),
                }
                k += 1;
            }
            "-n" | "--quiet" | "--silent" => quiet = true,
            "-E" | "-r" | "--regexp-extended" => extended = true,
            "-i" | "--in-place" => in_place = true,
            o if o.starts_with('-') && o.len() > 1 => {
                // Combined short flags such as -ne, -Ei.
                let mut ok = true;
                for c in o[1..].chars() {
                    match c {
                        'n' => quiet = true,
                        'E' | 'r' => extended = true,
                        'i' => in_place = true,
                        _ => ok = false,
                    }
                }
                if !ok {
                    return unsim("sed", o);
                }
            }
            f => {
                if scripts.is_empty() {
                    scripts.push(f.to_string());
                } else {
                    files.push(f.to_string());
                }
            }
        }
        k += 1;
    }
    let script = scripts.join("\n");
    let cmds = match sed_parse(&script, extended) {
        Ok(c) => c,
        Err(what) => return unsim("sed", &format!("script construct: {what}")),
    };
    let run_text = |text: &str| -> String {
        let lines: Vec<&str> = text.lines().collect();
        let mut out = String::new();
        for (n, line) in lines.iter().enumerate() {
            let mut cur = line.to_string();
            let mut deleted = false;
            let mut quit = false;
            for (addr, cmd) in &cmds {
                let hit = match addr {
                    None => true,
                    Some(SedAddr::Line(l)) => *l == n + 1,
                    Some(SedAddr::Last) => n + 1 == lines.len(),
                    Some(SedAddr::Re(re)) => re.is_match(&cur),
                };
                if !hit {
                    continue;
                }
                match cmd {
                    SedCmd::Subst(re, repl, g, p) => {
                        if re.is_match(&cur) {
                            cur = if *g {
                                re.replace_all(&cur, repl.as_str()).into_owned()
                            } else {
                                re.replace(&cur, repl.as_str()).into_owned()
                            };
                            if *p {
                                out.push_str(&cur);
                                out.push('\n');
                            }
                        }
                    }
                    SedCmd::Delete => {
                        deleted = true;
                        break;
                    }
                    SedCmd::Print => {
                        out.push_str(&cur);
                        out.push('\n');
                    }
                    SedCmd::Quit => {
                        quit = true;
                        break;
                    }
                }
            }
            if !deleted && !quiet {
                out.push_str(&cur);
                out.push('\n');
            }
            if quit {
                break;
            }
        }
        out
    };
    if in_place {
        if files.is_empty() {
            return Output::fail(1, "sed: no input files\n");
        }
        let now = s.now_ms();
        for f in &files {
            let p = cx.path(f);
            let text = match s.read_path(&p, cx.uid) {
                Ok(d) => String::from_utf8_lossy(&d).into_owned(),
                Err(e) => return Output::fail(4, format!("sed: can't read {f}: {e}\n")),
            };
            if let Err(e) = s.write_path(&p, run_text(&text).as_bytes(), false, cx.uid, now) {
                return Output::fail(4, format!("sed: couldn't edit {f}: {e}\n"));
            }
        }
        return Output::ok("");
    }
    let ins = match inputs(s, cx, "sed", &files, stdin) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let text: String = ins.into_iter().map(|(_, t)| t).collect();
    Output::ok(run_text(&text))
}

// ---- network ----

/// (index, name, flags, mtu, qdisc, state, link line, [(addr, prefix, extra)]).
type Iface = (
    u32,
    String,
    &'static str,
    u32,
    &'static str,
    &'static str,
    String,
    Vec<(IpAddr, u32, String)>,
);

fn interfaces(s: &NodeState) -> Vec<Iface> {
    let lan = s.lan_addr;
    let bcast = {
        let m = if s.lan_prefix == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(s.lan_prefix))
        };
        std::net::Ipv4Addr::from(u32::from(lan) | !m)
    };
    let mut v: Vec<Iface> = vec![
        (
            1,
            "lo".into(),
            "LOOPBACK,UP,LOWER_UP",
            65536,
            "noqueue",
            "UNKNOWN",
            "link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00".into(),
            vec![(
                IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
                8,
                "scope host lo".into(),
            )],
        ),
        (
            2,
            s.default_interface.clone(),
            "BROADCAST,MULTICAST,UP,LOWER_UP",
            1500,
            "fq_codel",
            "UP",
            format!("link/ether {} brd ff:ff:ff:ff:ff:ff", s.mac),
            std::iter::once((
                IpAddr::V4(lan),
                u32::from(s.lan_prefix),
                format!("brd {bcast} scope global {}", s.default_interface),
            ))
            .chain(s.vip_held.map(|v| {
                (
                    IpAddr::V4(v),
                    32,
                    format!("scope global {}", s.default_interface),
                )
            }))
            .collect(),
        ),
    ];
    if let Some(t) = s.tunnel() {
        let prefix = u32::from(t.netmask).count_ones();
        v.push((
            3,
            t.interface.clone(),
            "POINTOPOINT,MULTICAST,NOARP,UP,LOWER_UP",
            1500,
            "fq_codel",
            "UNKNOWN",
            "link/none ".into(),
            vec![(
                IpAddr::V4(t.tunnel_addr),
                prefix,
                format!("scope global {}", t.interface),
            )],
        ));
    }
    v
}

fn ip(s: &NodeState, args: &[String]) -> Output {
    let mut brief = false;
    let mut only4 = false;
    let mut k = 0;
    while let Some(a) = args.get(k) {
        match a.as_str() {
            "-br" | "-brief" | "--brief" => brief = true,
            "-4" => only4 = true,
            "-c" | "-color" | "--color" => {}
            o if o.starts_with('-') => return unsim("ip", o),
            _ => break,
        }
        k += 1;
    }
    let rest: Vec<&str> = args[k..].iter().map(String::as_str).collect();
    let (object, verb_args) = match rest.split_first() {
        Some((o, r)) => (*o, r),
        None => return Output::fail(255, "Usage: ip [ OPTIONS ] OBJECT { COMMAND | help }\n"),
    };
    let ifaces = interfaces(s);
    match object {
        "a" | "addr" | "address" | "l" | "link" => {
            let link = matches!(object, "l" | "link");
            let mut dev = None;
            match verb_args {
                [] | ["show"] | ["list"] => {}
                ["show" | "list", "dev", d] | ["show" | "list", d] | ["dev", d] => dev = Some(*d),
                _ => return unsim("ip", &rest.join(" ")),
            }
            let mut out = String::new();
            let mut found = dev.is_none();
            for (idx, name, flags, mtu, qdisc, state, linkline, addrs) in &ifaces {
                if dev.is_some_and(|d| d != name) {
                    continue;
                }
                found = true;
                if brief {
                    let a: Vec<String> = addrs.iter().map(|(a, p, _)| format!("{a}/{p}")).collect();
                    if link {
                        out.push_str(&format!("{name:<16} {state:<14} <{flags}>\n"));
                    } else {
                        out.push_str(&format!("{name:<16} {state:<14} {} \n", a.join(" ")));
                    }
                    continue;
                }
                out.push_str(&format!(
                    "{idx}: {name}: <{flags}> mtu {mtu} qdisc {qdisc} state {state} group default qlen 1000\n"
                ));
                if !only4 || link {
                    out.push_str(&format!("    {linkline}\n"));
                }
                if link {
                    continue;
                }
                for (a, p, extra) in addrs {
                    out.push_str(&format!("    inet {a}/{p} {extra}\n"));
                    out.push_str("       valid_lft forever preferred_lft forever\n");
                }
            }
            if !found {
                return Output::fail(
                    1,
                    format!("Device \"{}\" does not exist.\n", dev.unwrap_or_default()),
                );
            }
            Output::ok(out)
        }
        "r" | "route" | "ro" => {
            match verb_args {
                [] | ["show"] | ["list"] => {}
                _ => return unsim("ip", &rest.join(" ")),
            }
            let gw = s.lan_gateway;
            let mut out = format!(
                "default via {gw} dev {} proto static onlink \n",
                s.default_interface
            );
            let m = if s.lan_prefix == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(s.lan_prefix))
            };
            let net = std::net::Ipv4Addr::from(u32::from(s.lan_addr) & m);
            out.push_str(&format!(
                "{net}/{} dev {} proto kernel scope link src {} \n",
                s.lan_prefix, s.default_interface, s.lan_addr
            ));
            if let Some(t) = s.tunnel() {
                let tm = u32::from(t.netmask);
                let tnet = std::net::Ipv4Addr::from(u32::from(t.tunnel_addr) & tm);
                out.push_str(&format!(
                    "{tnet}/{} dev {} proto kernel scope link src {} \n",
                    tm.count_ones(),
                    t.interface,
                    t.tunnel_addr
                ));
            }
            Output::ok(out)
        }
        o => unsim("ip", o),
    }
}

fn ss(s: &NodeState, args: &[String]) -> Output {
    let (flags, rest) = match short_flags(args, "tulnpa") {
        Ok(x) => x,
        Err(o) => return unsim("ss", &o),
    };
    if !rest.is_empty() {
        return unsim("ss", "filters");
    }
    if !flags.contains(&'l') {
        return unsim("ss", "without -l (established connections)");
    }
    if !flags.contains(&'n') {
        return unsim("ss", "without -n (service names)");
    }
    let tcp = flags.contains(&'t') || !flags.contains(&'u');
    let udp = flags.contains(&'u');
    let procs = flags.contains(&'p');
    let pid = |unit: &str| s.units.get(unit).map_or(0, |u| u.main_pid);
    let k3s = pid("k3s.service");
    let sshd = pid("ssh.service");
    let lan = s.lan_addr.to_string();
    let mut rows: Vec<(&str, String, String, String)> = Vec::new();
    if tcp {
        for (local, who, p, fd) in [
            ("0.0.0.0:22".to_string(), "sshd", sshd, 3),
            ("127.0.0.1:10248".to_string(), "k3s-server", k3s, 160),
            ("127.0.0.1:10256".to_string(), "k3s-server", k3s, 171),
            (format!("{lan}:2379"), "k3s-server", k3s, 9),
            ("127.0.0.1:2379".to_string(), "k3s-server", k3s, 8),
            (format!("{lan}:2380"), "k3s-server", k3s, 7),
            ("[::]:22".to_string(), "sshd", sshd, 4),
            ("*:6443".to_string(), "k3s-server", k3s, 12),
            ("*:10250".to_string(), "k3s-server", k3s, 158),
        ] {
            let state = "LISTEN";
            let user = format!("users:((\"{who}\",pid={p},fd={fd}))");
            let peer = if local.starts_with('[') || local.starts_with('*') {
                "*:*"
            } else {
                "0.0.0.0:*"
            };
            rows.push((
                "tcp",
                state.to_string(),
                local,
                format!("{peer:<18}{}", if procs { user } else { String::new() }),
            ));
        }
    }
    if udp {
        rows.push((
            "udp",
            "UNCONN".into(),
            "0.0.0.0:8472".into(),
            "0.0.0.0:*".into(),
        ));
    }
    let both = tcp && udp;
    let mut out = String::new();
    if both {
        out.push_str("Netid State  Recv-Q Send-Q Local Address:Port  Peer Address:Port Process\n");
    } else {
        out.push_str("State  Recv-Q Send-Q Local Address:Port  Peer Address:Port Process\n");
    }
    for (net, state, local, peer) in rows {
        let (q, sq) = if state == "LISTEN" {
            ("0", "4096")
        } else {
            ("0", "0")
        };
        let line = format!("{state:<6} {q:<6} {sq:<6} {local:>18} {peer}");
        if both {
            out.push_str(&format!("{net:<5} {}\n", line.trim_end()));
        } else {
            out.push_str(&format!("{}\n", line.trim_end()));
        }
    }
    Output::ok(out)
}

// ---- block devices and mounts (util-linux) ----

/// One row of a util-linux table: its cells by column name, and its depth in the tree.
struct TreeRow {
    depth: usize,
    cells: Vec<String>,
}

/// A util-linux (libsmartcols) table: columns separated by one space, each as wide as its
/// widest cell, the `right` ones right-aligned, the last one unpadded; the first column
/// drawn as a tree (`├─`, `└─`, `│ `) when `tree` is set.
fn smartcols(header: Option<&[String]>, rows: &[TreeRow], right: &[bool], tree: bool) -> String {
    // The tree prefix each row's first cell gets: for every ancestor level, whether that
    // ancestor has a later sibling (`│ `) or not (`  `), then this row's own branch.
    let has_later_sibling = |k: usize| -> bool {
        let d = rows[k].depth;
        rows[k + 1..]
            .iter()
            .take_while(|r| r.depth >= d)
            .any(|r| r.depth == d)
    };
    let mut firsts = Vec::with_capacity(rows.len());
    let mut open: Vec<bool> = Vec::new();
    for (k, r) in rows.iter().enumerate() {
        let cell = r.cells.first().cloned().unwrap_or_default();
        if !tree || r.depth == 0 {
            firsts.push(cell);
            open.clear();
            continue;
        }
        open.truncate(r.depth - 1);
        let later = has_later_sibling(k);
        let mut p: String = open.iter().map(|o| if *o { "│ " } else { "  " }).collect();
        p.push_str(if later { "├─" } else { "└─" });
        open.push(later);
        firsts.push(format!("{p}{cell}"));
    }
    let cols = right.len();
    let mut w = vec![0usize; cols];
    let width = |c: &str| c.chars().count();
    if let Some(h) = header {
        for (k, c) in h.iter().enumerate() {
            w[k] = w[k].max(width(c));
        }
    }
    for (r, first) in rows.iter().zip(&firsts) {
        for (k, wk) in w.iter_mut().enumerate() {
            let c = if k == 0 { first } else { &r.cells[k] };
            *wk = (*wk).max(width(c));
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let mut out = Vec::with_capacity(cols);
        for (k, c) in cells.iter().enumerate() {
            let pad = w[k].saturating_sub(width(c));
            if right[k] {
                out.push(format!("{}{c}", " ".repeat(pad)));
            } else if k + 1 == cols {
                out.push(c.to_string());
            } else {
                out.push(format!("{c}{}", " ".repeat(pad)));
            }
        }
        format!("{}\n", out.join(" "))
    };
    let mut text = String::new();
    if let Some(h) = header {
        text.push_str(&line(h.iter().map(String::as_str).collect()));
    }
    for (r, first) in rows.iter().zip(&firsts) {
        let mut cells: Vec<&str> = vec![first.as_str()];
        cells.extend(r.cells.iter().skip(1).map(String::as_str));
        text.push_str(&line(cells));
    }
    text
}

/// lsblk's SIZE: powers of 1024, one letter, one decimal unless it is `.0` (`465.8G`,
/// `512M`).
fn lsblk_size(bytes: u64) -> String {
    let units = ["B", "K", "M", "G", "T", "P"];
    let mut exp = 0;
    while exp + 1 < units.len() && bytes >= 1u64 << (10 * (exp + 1)) {
        exp += 1;
    }
    if exp == 0 {
        return format!("{bytes}B");
    }
    let tenths = (bytes as f64 / (1u64 << (10 * exp)) as f64 * 10.0).round() as u64;
    if tenths.is_multiple_of(10) {
        format!("{}{}", tenths / 10, units[exp])
    } else {
        format!("{}.{}{}", tenths / 10, tenths % 10, units[exp])
    }
}

/// A device's major:minor as the kernel numbers it: SCSI disks 8 with 16 minors each,
/// NVMe 259 counted in name order, virtio 254.
fn dev_numbers(s: &NodeState, name: &str) -> (u32, u32) {
    let disk = s.partitions.get(name).map_or(name, String::as_str);
    let part: u32 = if disk == name {
        0
    } else {
        name[disk.len()..]
            .trim_start_matches('p')
            .parse()
            .unwrap_or(0)
    };
    let letter = |prefix: &str| {
        disk.strip_prefix(prefix)
            .and_then(|r| r.bytes().next())
            .map_or(0, |b| u32::from(b.saturating_sub(b'a')))
    };
    if disk.starts_with("sd") {
        (8, letter("sd") * 16 + part)
    } else if disk.starts_with("vd") {
        (254, letter("vd") * 16 + part)
    } else {
        let all: Vec<&String> = s
            .disks
            .keys()
            .filter(|d| d.starts_with("nvme"))
            .flat_map(|d| {
                std::iter::once(d).chain(
                    s.partitions
                        .iter()
                        .filter(move |(_, p)| *p == d)
                        .map(|(n, _)| n),
                )
            })
            .collect();
        (259, all.iter().position(|n| *n == name).unwrap_or(0) as u32)
    }
}

/// A column lsblk can print for this device; None = a column not modelled.
fn lsblk_cell(s: &NodeState, name: &str, col: &str, paths: bool, bytes: bool) -> Option<String> {
    let parent = s.partitions.get(name);
    let disk = s.disks.get(parent.map_or(name, String::as_str));
    let dev = format!("/dev/{name}");
    let mounts: Vec<Mount> = s
        .mount_table()
        .into_iter()
        .filter(|m| m.source == dev)
        .collect();
    let fstype = mounts.first().map(|m| m.fstype.clone()).unwrap_or_default();
    let df = filesystems(s)
        .into_iter()
        .find(|f| f.0 == dev)
        .map(|(_, _, size, used, _)| (size, used));
    let size = match (parent, disk) {
        (Some(_), _) => s.partition_sizes.get(name).copied().unwrap_or(0),
        (None, Some(d)) => d.size_bytes,
        (None, None) => 0,
    };
    Some(match col {
        "NAME" if paths => dev,
        "NAME" | "KNAME" => name.to_string(),
        "PATH" => dev,
        "PKNAME" => match parent {
            Some(p) if paths => format!("/dev/{p}"),
            Some(p) => p.clone(),
            None => String::new(),
        },
        "MAJ:MIN" => {
            let (ma, mi) = dev_numbers(s, name);
            format!("{ma:>3}:{mi:<3}")
        }
        "RM" | "RO" => "0".into(),
        "SIZE" if bytes => size.to_string(),
        "SIZE" => lsblk_size(size),
        "TYPE" => if parent.is_some() { "part" } else { "disk" }.into(),
        "MOUNTPOINT" => mounts.first().map(|m| m.target.clone()).unwrap_or_default(),
        "MOUNTPOINTS" => mounts
            .iter()
            .map(|m| m.target.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        "FSTYPE" => fstype.clone(),
        "FSVER" => match fstype.as_str() {
            "ext4" => "1.0".into(),
            "vfat" => "FAT32".into(),
            _ => String::new(),
        },
        "LABEL" => String::new(),
        "UUID" if fstype.is_empty() => String::new(),
        "UUID" => fs_uuid(s, name, &fstype),
        "FSAVAIL" => df
            .map(|(size, used)| {
                let avail = size.saturating_sub(used) * 1024;
                if bytes {
                    avail.to_string()
                } else {
                    lsblk_size(avail)
                }
            })
            .unwrap_or_default(),
        "FSUSE%" => df
            .map(|(size, used)| {
                let pct = if size == 0 {
                    0.0
                } else {
                    used as f64 * 100.0 / size as f64
                };
                format!("{pct:.0}%")
            })
            .unwrap_or_default(),
        "ROTA" => disk
            .map_or("0", |d| if d.rotational { "1" } else { "0" })
            .into(),
        "SCHED" => disk.map(|d| d.scheduler.clone()).unwrap_or_default(),
        "RQ-SIZE" => disk.map(|d| d.nr_requests.to_string()).unwrap_or_default(),
        _ => return None,
    })
}

/// lsblk's right-aligned (number) columns.
fn lsblk_right(col: &str) -> bool {
    matches!(
        col,
        "RM" | "SIZE" | "RO" | "ROTA" | "RQ-SIZE" | "FSAVAIL" | "FSUSE%"
    )
}

/// `lsblk [-ndlpbf] [-o COLS] [DEV...]`: the default tree (NAME MAJ:MIN RM SIZE RO TYPE
/// MOUNTPOINTS), `-f`'s file-system columns, or the columns asked for.
fn lsblk(s: &NodeState, args: &[String]) -> Output {
    const DEFAULT: [&str; 7] = ["NAME", "MAJ:MIN", "RM", "SIZE", "RO", "TYPE", "MOUNTPOINTS"];
    const FS: [&str; 8] = [
        "NAME",
        "FSTYPE",
        "FSVER",
        "LABEL",
        "UUID",
        "FSAVAIL",
        "FSUSE%",
        "MOUNTPOINTS",
    ];
    let mut columns: Vec<String> = DEFAULT.map(String::from).to_vec();
    let (mut noheadings, mut nodeps, mut list, mut paths, mut bytes) =
        (false, false, false, false, false);
    let mut devs = Vec::new();
    let mut k = 0;
    let set_cols = |v: &str| -> Vec<String> {
        v.split(',')
            .filter(|c| !c.is_empty())
            .map(|c| c.to_ascii_uppercase())
            .collect()
    };
    while let Some(a) = args.get(k) {
        if let Some(v) = a.strip_prefix("--output=") {
            columns = set_cols(v);
        } else if a.starts_with("--") {
            match a.as_str() {
                "--noheadings" => noheadings = true,
                "--nodeps" => nodeps = true,
                "--list" => list = true,
                "--paths" => paths = true,
                "--bytes" => bytes = true,
                "--fs" => columns = FS.map(String::from).to_vec(),
                "--output" => {
                    let Some(v) = args.get(k + 1) else {
                        return Output::fail(1, "lsblk: option '--output' requires an argument\n");
                    };
                    columns = set_cols(v);
                    k += 1;
                }
                o => return unsim("lsblk", &format!("option {o}")),
            }
        } else if let Some(flags) = a.strip_prefix('-').filter(|f| !f.is_empty()) {
            for (i, c) in flags.char_indices() {
                match c {
                    'n' => noheadings = true,
                    'd' => nodeps = true,
                    'l' => list = true,
                    'p' => paths = true,
                    'b' => bytes = true,
                    'f' => columns = FS.map(String::from).to_vec(),
                    'o' => {
                        let rest = &flags[i + 1..];
                        let v = if rest.is_empty() {
                            k += 1;
                            match args.get(k) {
                                Some(v) => v.as_str(),
                                None => {
                                    return Output::fail(
                                        1,
                                        "lsblk: option requires an argument -- 'o'\n",
                                    )
                                }
                            }
                        } else {
                            rest
                        };
                        columns = set_cols(v);
                        break;
                    }
                    _ => return unsim("lsblk", &format!("option -{c}")),
                }
            }
        } else {
            devs.push(a.clone());
        }
        k += 1;
    }
    // Which devices, in what order: each disk then its partitions (unless -d), or those named.
    let mut picked: Vec<(String, usize)> = Vec::new();
    let children = |d: &str| -> Vec<String> {
        s.partitions
            .iter()
            .filter(|(_, p)| p.as_str() == d)
            .map(|(n, _)| n.clone())
            .collect()
    };
    if devs.is_empty() {
        for d in s.disks.keys() {
            picked.push((d.clone(), 0));
            if !nodeps {
                picked.extend(children(d).into_iter().map(|c| (c, 1)));
            }
        }
    } else {
        for d in &devs {
            let name = d.strip_prefix("/dev/").unwrap_or(d);
            if s.disks.contains_key(name) {
                picked.push((name.to_string(), 0));
                if !nodeps {
                    picked.extend(children(name).into_iter().map(|c| (c, 1)));
                }
            } else if s.partitions.contains_key(name) {
                picked.push((name.to_string(), 0));
            } else if d.starts_with("/dev/") || !d.contains('/') {
                return Output::fail(32, format!("lsblk: {d}: not a block device\n"));
            } else {
                return unsim("lsblk", d);
            }
        }
    }
    let mut rows = Vec::new();
    for (name, depth) in &picked {
        let mut cells = Vec::new();
        for c in &columns {
            match lsblk_cell(s, name, c, paths, bytes) {
                Some(v) => cells.push(v),
                None => return unsim("lsblk", &format!("column {c}")),
            }
        }
        rows.push(TreeRow {
            depth: *depth,
            cells,
        });
    }
    if columns.is_empty() {
        return Output::fail(1, "lsblk: no columns specified\n");
    }
    let right: Vec<bool> = columns.iter().map(|c| lsblk_right(c)).collect();
    let tree = !list && !nodeps && columns.first().is_some_and(|c| c == "NAME");
    let header = (!noheadings).then_some(columns.as_slice());
    Output::ok(smartcols(header, &rows, &right, tree))
}

/// `findmnt`: with no filter, the tree of every mount (TARGET SOURCE FSTYPE OPTIONS); a
/// mount point or device operand, or `-T PATH` (the mount holding PATH), a single row;
/// `-n`, `-o COLS`, `-l`, `-t TYPE`.
fn findmnt(s: &NodeState, args: &[String]) -> Output {
    let mut columns: Vec<String> = ["TARGET", "SOURCE", "FSTYPE", "OPTIONS"]
        .map(String::from)
        .to_vec();
    let (mut noheadings, mut list) = (false, false);
    let mut target: Option<String> = None;
    let mut operand: Option<String> = None;
    let mut types: Option<Vec<String>> = None;
    let mut k = 0;
    while let Some(a) = args.get(k) {
        let value = |k: &mut usize| -> Option<String> {
            *k += 1;
            args.get(*k).cloned()
        };
        match a.as_str() {
            "-n" | "--noheadings" => noheadings = true,
            "-l" | "--list" => list = true,
            "-k" | "--kernel" => {}
            "-o" | "--output" | "-no" | "-nlo" | "-lno" => {
                noheadings |= a.contains('n');
                list |= a.contains('l');
                let Some(v) = value(&mut k) else {
                    return Output::fail(1, "findmnt: option requires an argument -- 'o'\n");
                };
                columns = v.split(',').map(|c| c.to_ascii_uppercase()).collect();
            }
            "-T" | "--target" => target = value(&mut k),
            "-M" | "--mountpoint" | "-S" | "--source" => operand = value(&mut k),
            "-t" | "--types" => {
                types = value(&mut k).map(|v| v.split(',').map(String::from).collect())
            }
            o if o.starts_with("--output=") => {
                columns = o["--output=".len()..]
                    .split(',')
                    .map(|c| c.to_ascii_uppercase())
                    .collect();
            }
            o if o.starts_with('-') => return unsim("findmnt", &format!("option {o}")),
            o if operand.is_none() => operand = Some(o.to_string()),
            o => return unsim("findmnt", &format!("a second operand {o}")),
        }
        k += 1;
    }
    if let Some(c) = columns
        .iter()
        .find(|c| !matches!(c.as_str(), "TARGET" | "SOURCE" | "FSTYPE" | "OPTIONS"))
    {
        return unsim("findmnt", &format!("column {c}"));
    }
    if let Some(t) = types
        .as_ref()
        .filter(|t| t.iter().any(|x| x.starts_with("no")))
    {
        return unsim("findmnt", &format!("-t {}", t.join(",")));
    }
    let table = s.mount_table();
    let filtered = target.is_some() || operand.is_some() || types.is_some();
    let mut picked: Vec<(usize, &Mount)> = Vec::new();
    if let Some(t) = &target {
        // The mount holding the path: the deepest mount point that is a prefix of it.
        let best = table
            .iter()
            .filter(|m| {
                m.target == "/"
                    || *t == m.target
                    || t.starts_with(&format!("{}/", m.target.trim_end_matches('/')))
            })
            .max_by_key(|m| m.target.len());
        picked.extend(best.map(|m| (0, m)));
    } else if let Some(o) = &operand {
        let o = o.trim_end_matches('/');
        let o = if o.is_empty() { "/" } else { o };
        picked.extend(
            table
                .iter()
                .filter(|m| m.target == o || m.source == o)
                .map(|m| (0, m)),
        );
    } else if filtered {
        picked.extend(table.iter().map(|m| (0, m)));
    } else {
        // The tree: each mount under the deepest earlier-listed mount point above it, the
        // root at the top, children in the kernel's order.
        let parent_of = |m: &Mount| -> Option<usize> {
            if m.target == "/" {
                return None;
            }
            table
                .iter()
                .enumerate()
                .filter(|(_, p)| {
                    p.target != m.target
                        && (p.target == "/" || m.target.starts_with(&format!("{}/", p.target)))
                })
                .max_by_key(|(_, p)| p.target.len())
                .map(|(i, _)| i)
        };
        fn walk(
            table: &[Mount],
            parents: &[Option<usize>],
            at: Option<usize>,
            depth: usize,
            out: &mut Vec<(usize, usize)>,
        ) {
            for (i, p) in parents.iter().enumerate() {
                if *p == at && !(at.is_none() && table[i].target != "/") {
                    out.push((depth, i));
                    walk(table, parents, Some(i), depth + 1, out);
                }
            }
        }
        let parents: Vec<Option<usize>> = table.iter().map(parent_of).collect();
        let mut order = Vec::new();
        walk(&table, &parents, None, 0, &mut order);
        picked.extend(order.into_iter().map(|(d, i)| (d, &table[i])));
    }
    if let Some(t) = &types {
        picked.retain(|(_, m)| t.contains(&m.fstype));
    }
    if picked.is_empty() {
        return Output::fail(1, "");
    }
    let rows: Vec<TreeRow> = picked
        .iter()
        .map(|(depth, m)| TreeRow {
            depth: *depth,
            cells: columns
                .iter()
                .map(|c| match c.as_str() {
                    "TARGET" => m.target.clone(),
                    "SOURCE" => m.source.clone(),
                    "FSTYPE" => m.fstype.clone(),
                    _ => m.options.clone(),
                })
                .collect(),
        })
        .collect();
    let right = vec![false; columns.len()];
    let tree = !list && !filtered && columns.first().is_some_and(|c| c == "TARGET");
    let header = (!noheadings).then_some(columns.as_slice());
    Output::ok(smartcols(header, &rows, &right, tree))
}

/// A POSIX basic regular expression as a Rust regex: `\( \) \{ \} \|` are the operators,
/// their bare forms and `+ ?` literal.
pub(crate) fn bre_to_regex(bre: &str) -> String {
    let mut out = String::new();
    let mut cs = bre.chars().peekable();
    while let Some(c) = cs.next() {
        match c {
            '\\' => match cs.next() {
                Some(n @ ('(' | ')' | '{' | '}' | '|')) => out.push(n),
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None => out.push_str("\\\\"),
            },
            '+' | '?' | '(' | ')' | '{' | '}' | '|' => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::uid_of;
    use crate::node::Clock;

    fn node() -> NodeState {
        NodeState::new("n1", Clock::fixed(1_780_000_000_000))
    }

    fn run1(s: &mut NodeState, name: &str, args: &[&str], stdin: &str) -> Output {
        let cx = Cx {
            user: "debian",
            uid: uid_of("debian"),
            cwd: "/home/debian",
        };
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        run(s, &cx, name, &args, stdin.as_bytes()).expect("a simulated utility")
    }

    fn text(o: &Output) -> String {
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    #[test]
    fn awk_subset_and_its_edges() {
        let mut s = node();
        let t = "a 1 x\nb 2 y\nc 3 z\n";
        assert_eq!(text(&run1(&mut s, "awk", &["{print $2}"], t)), "1\n2\n3\n");
        assert_eq!(
            text(&run1(&mut s, "awk", &["NR==2 {print $1, $NF}"], t)),
            "b y\n"
        );
        assert_eq!(
            text(&run1(&mut s, "awk", &["$2 > 1 {print $1 \"-\" $3}"], t)),
            "b-y\nc-z\n"
        );
        assert_eq!(text(&run1(&mut s, "awk", &["/b|c/"], t)), "b 2 y\nc 3 z\n");
        assert_eq!(
            text(&run1(&mut s, "awk", &["-F:", "{print $2}"], "u:x:1\n")),
            "x\n"
        );
        assert_eq!(text(&run1(&mut s, "awk", &["END {print NR}"], t)), "3\n");
        for prog in [
            "{sum += $2} END {print sum}",
            "{printf \"%s\", $1}",
            "{print length($1)}",
        ] {
            let o = run1(&mut s, "awk", &[prog], t);
            assert!(o.unsimulated && o.status == 2, "{prog}: {o:?}");
        }
    }

    #[test]
    fn sed_sort_uniq_cut_tr_wc() {
        let mut s = node();
        assert_eq!(text(&run1(&mut s, "sed", &["s/a/b/g"], "aa\n")), "bb\n");
        assert_eq!(
            text(&run1(&mut s, "sed", &["-n", "2p"], "1\n2\n3\n")),
            "2\n"
        );
        assert_eq!(text(&run1(&mut s, "sed", &["/x/d"], "x\ny\n")), "y\n");
        assert_eq!(
            text(&run1(&mut s, "sed", &["-E", "s/([0-9]+)/<\\1>/"], "a12\n")),
            "a<12>\n"
        );
        assert!(run1(&mut s, "sed", &["1,2d"], "").unsimulated);
        assert!(run1(&mut s, "sed", &["y/a/b/"], "").unsimulated);
        assert_eq!(text(&run1(&mut s, "sort", &["-n"], "10\n9\n")), "9\n10\n");
        assert_eq!(
            text(&run1(&mut s, "uniq", &["-c"], "a\na\nb\n")),
            "      2 a\n      1 b\n"
        );
        assert_eq!(
            text(&run1(&mut s, "cut", &["-d:", "-f1,3"], "a:b:c\n")),
            "a:c\n"
        );
        assert_eq!(text(&run1(&mut s, "tr", &["a-z", "A-Z"], "abc\n")), "ABC\n");
        assert_eq!(text(&run1(&mut s, "wc", &["-l"], "a\nb\n")), "2\n");
    }

    #[test]
    fn files_written_are_read_back() {
        let mut s = node();
        s.fs.ensure_home("debian", 0);
        assert_eq!(run1(&mut s, "mkdir", &["-p", "d/e"], "").status, 0);
        assert_eq!(run1(&mut s, "tee", &["d/e/f"], "hello\n").status, 0);
        assert_eq!(
            run1(&mut s, "sed", &["-i", "s/hello/bye/", "d/e/f"], "").status,
            0
        );
        assert_eq!(
            s.read_path("/home/debian/d/e/f", 1000),
            Ok(b"bye\n".to_vec())
        );
        let ls = text(&run1(&mut s, "ls", &["-l", "d/e"], ""));
        assert!(
            ls.starts_with("total 4\n-rw-r--r-- 1 debian debian     4 "),
            "{ls}"
        );
        let o = run1(&mut s, "mkdir", &["/etc/x"], "");
        assert_eq!(o.status, 1);
        assert!(String::from_utf8_lossy(&o.stderr).contains("Permission denied"));
    }

    #[test]
    fn lsblk_and_findmnt_print_util_linux_default_tables() {
        let mut s = node();
        assert_eq!(
            text(&run1(&mut s, "lsblk", &[], "")),
            "NAME   MAJ:MIN RM   SIZE RO TYPE MOUNTPOINTS\n\
             sda      8:0    0 465.8G  0 disk \n\
             ├─sda1   8:1    0   512M  0 part /boot/efi\n\
             └─sda2   8:2    0 465.3G  0 part /\n"
        );
        assert_eq!(
            text(&run1(&mut s, "lsblk", &["-ndo", "PKNAME", "/dev/sda2"], "")),
            "sda\n"
        );
        assert_eq!(
            text(&run1(
                &mut s,
                "lsblk",
                &["-d", "-o", "NAME,ROTA,SCHED,RQ-SIZE"],
                ""
            )),
            "NAME ROTA SCHED       RQ-SIZE\nsda     0 mq-deadline      64\n"
        );
        let f = text(&run1(&mut s, "lsblk", &["-f"], ""));
        assert!(f.starts_with("NAME   FSTYPE FSVER LABEL UUID"), "{f}");
        assert!(f.contains("└─sda2 ext4   1.0"), "{f}");
        assert!(f.trim_end().ends_with("420.4G     8% /"), "{f}");
        assert_eq!(run1(&mut s, "lsblk", &["/dev/sdb"], "").status, 32);
        assert!(run1(&mut s, "lsblk", &["-o", "MODEL"], "").unsimulated);
        let fm = text(&run1(&mut s, "findmnt", &[], ""));
        let lines: Vec<&str> = fm.lines().collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            ["TARGET", "SOURCE", "FSTYPE", "OPTIONS"]
        );
        assert!(
            lines[1].starts_with("/ ") && lines[1].contains("/dev/sda2  ext4"),
            "{fm}"
        );
        assert!(fm.contains("├─/sys "), "{fm}");
        assert!(fm.contains("│ ├─/sys/fs/cgroup "), "{fm}");
        assert!(
            lines.last().is_some_and(|l| l.starts_with("└─/boot/efi ")),
            "{fm}"
        );
        // Every mount findmnt draws is a line of /proc/mounts, and the other way round.
        let proc_mounts =
            String::from_utf8(s.read_path("/proc/mounts", 0).expect("mounts")).expect("utf8");
        assert_eq!(proc_mounts.lines().count(), lines.len() - 1);
        let listed = text(&run1(
            &mut s,
            "findmnt",
            &["-rn", "-o", "SOURCE,TARGET"],
            "",
        ));
        assert!(
            run1(&mut s, "findmnt", &["-rn"], "").unsimulated,
            "{listed}"
        );
        let listed = text(&run1(
            &mut s,
            "findmnt",
            &["-ln", "-o", "SOURCE,TARGET,FSTYPE,OPTIONS"],
            "",
        ));
        for (l, m) in listed.lines().zip(proc_mounts.lines()) {
            let a: Vec<&str> = l.split_whitespace().collect();
            let b: Vec<&str> = m.split_whitespace().take(4).collect();
            assert_eq!(a, b);
        }
        assert_eq!(
            text(&run1(
                &mut s,
                "findmnt",
                &["/boot/efi", "-n", "-o", "SOURCE"],
                ""
            )),
            "/dev/sda1\n"
        );
        assert_eq!(
            text(&run1(
                &mut s,
                "findmnt",
                &["-T", "/var/lib/rancher", "-o", "TARGET,SOURCE"],
                ""
            )),
            "TARGET SOURCE\n/      /dev/sda2\n"
        );
        // Not a mount point: findmnt PATH (no -T) finds nothing, exit 1.
        assert_eq!(run1(&mut s, "findmnt", &["/var/lib/rancher"], "").status, 1);
    }

    #[test]
    fn free_nproc_and_proc_agree() {
        let mut s = node();
        let free = text(&run1(&mut s, "free", &[], ""));
        let mem: Vec<u64> = free
            .lines()
            .nth(1)
            .expect("Mem:")
            .split_whitespace()
            .skip(1)
            .map(|v| v.parse().expect("KiB"))
            .collect();
        // total = used + free + buff/cache, as procps computes it.
        assert_eq!(mem[0], mem[1] + mem[2] + mem[4], "{free}");
        let meminfo =
            String::from_utf8(s.read_path("/proc/meminfo", 0).expect("meminfo")).expect("utf8");
        assert!(
            meminfo.starts_with(&format!("MemTotal:       {:>8} kB\n", mem[0])),
            "{meminfo}"
        );
        assert!(
            meminfo.contains(&format!("MemAvailable:   {:>8} kB\n", mem[5])),
            "{meminfo}"
        );
        assert_eq!(
            text(&run1(&mut s, "free", &["-h"], ""))
                .lines()
                .nth(1)
                .map(|l| l.split_whitespace().nth(1)),
            Some(Some("15Gi"))
        );
        let n = text(&run1(&mut s, "nproc", &[], ""));
        let cpuinfo =
            String::from_utf8(s.read_path("/proc/cpuinfo", 0).expect("cpuinfo")).expect("utf8");
        assert_eq!(
            cpuinfo
                .lines()
                .filter(|l| l.starts_with("processor"))
                .count()
                .to_string()
                + "\n",
            n
        );
    }
}
