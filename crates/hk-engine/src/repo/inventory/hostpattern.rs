//! Host patterns of an INI host line: `host:port`, IPv6 addresses and `[a:b(:s)]` ranges,
//! expanded as Ansible's INI plugin (`_expand_hostpattern`, `parse_address`,
//! `expand_hostname_range`) does, with bounds on how much one pattern may produce.

use std::sync::OnceLock;

use regex::Regex;

use super::{MAX_RANGE_BYTES, MAX_RANGE_HOSTS};

struct Patterns {
    bracketed_hostport: Regex,
    hostport: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| {
        #[allow(clippy::unwrap_used)] // constant patterns, exercised by every test
        Patterns {
            bracketed_hostport: Regex::new(r"^\[(.+)\]:([0-9]+)$").unwrap(),
            hostport: Regex::new(r"^((?:[^:\[\]]|\[[^\]]*\])*):([0-9]+)$").unwrap(),
        }
    })
}

/// Why a host pattern of an INI host line cannot be expanded: Ansible's words where Ansible
/// refuses it too, and the bound crossed where the console is stricter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostPatternError {
    #[error("Invalid host pattern '{pattern}' supplied, ending in ':' is not allowed, this character is reserved to provide a port.")]
    EndsInColon { pattern: String },
    #[error(
        "Invalid host pattern '{pattern}' supplied, '---' is normally a sign this is a YAML file."
    )]
    YamlMarker { pattern: String },
    #[error("host pattern '{pattern}' expands to more than {max} hosts (limit inventory.max_range_hosts): split it or narrow the range", max = MAX_RANGE_HOSTS)]
    TooManyHosts { pattern: String },
    #[error("host pattern '{pattern}' expands to more than {max} bytes of host names (limit inventory.max_range_bytes): split it or narrow the range", max = MAX_RANGE_BYTES)]
    TooManyBytes { pattern: String },
    #[error("host range in '{line}' must be one [begin:end] or [begin:end:step] per bracket")]
    Brackets { line: String },
    #[error("host range must be begin:end or begin:end:step (in '{line}')")]
    Bounds { line: String },
    #[error("host range must specify end value (in '{line}')")]
    NoEnd { line: String },
    #[error("host range must specify equal-length begin and end formats (in '{line}')")]
    UnequalWidths { line: String },
    #[error("host range must have begin <= end (in '{line}')")]
    Descending { line: String },
    #[error("host range bounds must be integers or single letters (in '{line}')")]
    NotNumbers { line: String },
    #[error("host range step must not be zero (in '{line}')")]
    ZeroStep { line: String },
}

/// Ansible's INI `_expand_hostpattern`: split an optional `:port`, expand `[a:b(:s)]` ranges.
pub fn expand_hostpattern(pattern: &str) -> Result<(Vec<String>, Option<u64>), HostPatternError> {
    match host_names(pattern)? {
        (HostNames::One(name), port) => Ok((vec![name.to_string()], port)),
        (HostNames::Many(names), port) => Ok((names, port)),
    }
}

/// The host names of one pattern: the pattern itself (borrowed) or a range's expansion.
pub(super) enum HostNames<'a> {
    One(&'a str),
    Many(Vec<String>),
}

/// [`expand_hostpattern`], borrowing the name where the pattern is the name: with neither
/// `:` nor `[` there is no port to split and no range to expand, and Ansible keeps such a
/// pattern as the name whether or not it looks like a hostname (so nothing is checked but
/// the YAML marker). Most lines of a large inventory are such: no copy, no list.
pub(super) fn host_names(pattern: &str) -> Result<(HostNames<'_>, Option<u64>), HostPatternError> {
    if !pattern.contains([':', '[']) {
        if pattern.trim() == "---" {
            return Err(HostPatternError::YamlMarker {
                pattern: pattern.to_string(),
            });
        }
        return Ok((HostNames::One(pattern), None));
    }
    expand_parsed(pattern)
}

/// The whole of `_expand_hostpattern`, for any pattern (the `:port` and range cases).
fn expand_parsed(pattern: &str) -> Result<(HostNames<'_>, Option<u64>), HostPatternError> {
    let (host, port) = match parse_address(pattern) {
        Some((h, p)) => (h, p),
        None => (pattern.to_string(), None),
    };
    if pattern.trim().ends_with(':') && port.is_none() {
        return Err(HostPatternError::EndsInColon {
            pattern: pattern.to_string(),
        });
    }
    let names = if host.contains('[') {
        expand_hostname_range(&host)?
    } else {
        vec![host]
    };
    if names.iter().any(|n| n.trim() == "---") {
        return Err(HostPatternError::YamlMarker {
            pattern: pattern.to_string(),
        });
    }
    Ok((HostNames::Many(names), port))
}

/// Ansible's `parse_address(allow_ranges=True)`; `None` when not a recognisable host
/// (Ansible then keeps the whole pattern as the name, port included).
fn parse_address(address: &str) -> Option<(String, Option<u64>)> {
    let mut address = address.to_string();
    let mut port = None;
    // Both patterns need a `:` before the port; most host lines have none, and this runs
    // for every host line of every command that loads the inventory (the patterns are not
    // even compiled then).
    if address.contains(':') {
        let p = patterns();
        for re in [&p.bracketed_hostport, &p.hostport] {
            if let Some(c) = re.captures(&address) {
                let (a, pt) = (c.get(1)?.as_str().to_string(), c.get(2)?.as_str());
                port = Some(pt.parse::<u64>().ok()?);
                address = a;
            }
        }
    }
    if is_hostname(&address) || is_ipv6ish(&address) {
        Some((address, port))
    } else {
        None
    }
}

/// Ansible's `hostname` pattern: dot-separated labels of word characters, `-` and
/// `[x:y(:s)]` ranges, starting with a word character or range, not ending in `_` or `-`.
fn is_hostname(s: &str) -> bool {
    s.split('.').all(is_label)
}

fn is_label(label: &str) -> bool {
    let chars: Vec<char> = label.chars().collect();
    if chars.is_empty() {
        return false;
    }
    let mut i = 0;
    let mut last = ' ';
    while i < chars.len() {
        let c = chars[i];
        if c == '[' {
            let Some(len) = alnum_range_len(&chars[i..]) else {
                return false;
            };
            i += len;
            last = ']';
        } else if c.is_alphanumeric() || c == '_' || (c == '-' && i > 0) {
            last = c;
            i += 1;
        } else {
            return false;
        }
    }
    last != '_' && last != '-'
}

/// Length of an `alphanumeric_range` (`[a:z]`, `[0:9]`, optional `:step`) at the start.
fn alnum_range_len(chars: &[char]) -> Option<usize> {
    let end = chars.iter().position(|&c| c == ']')?;
    let body: String = chars[1..end].iter().collect();
    let parts: Vec<&str> = body.split(':').collect();
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    let letter = |s: &str| s.len() == 1 && s.chars().all(|c| c.is_ascii_alphabetic());
    let ok = match parts.as_slice() {
        [a, b] | [a, b, _] => (letter(a) && letter(b)) || (digits(a) && digits(b)),
        _ => false,
    } && (parts.len() == 2 || digits(parts[2]));
    ok.then_some(end + 1)
}

fn is_ipv6ish(s: &str) -> bool {
    s.matches(':').count() >= 2
        && s.chars()
            .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.' || c == '[' || c == ']')
}

/// Ansible's `expand_hostname_range`, including its quirks: the first `[...]` is expanded,
/// then the result recursively; a begin with a leading zero sets a zero-padded width; a
/// single-letter (or letter-run) begin/end makes an alphabetic range over `a..zA..Z`.
/// Bounded: at most [`MAX_RANGE_HOSTS`] hosts and [`MAX_RANGE_BYTES`] bytes of names, each
/// range's size checked before it is built.
pub fn expand_hostname_range(line: &str) -> Result<Vec<String>, HostPatternError> {
    let mut budget = RangeBudget {
        hosts: 0,
        bytes: 0,
        pattern: line,
    };
    let mut all = Vec::new();
    expand_range_into(line, &mut budget, &mut all)?;
    Ok(all)
}

struct RangeBudget<'a> {
    hosts: usize,
    bytes: usize,
    pattern: &'a str,
}

impl RangeBudget<'_> {
    fn too_many(&self) -> HostPatternError {
        HostPatternError::TooManyHosts {
            pattern: self.pattern.to_string(),
        }
    }

    fn spend(&mut self, hosts: usize, bytes: usize) -> Result<(), HostPatternError> {
        self.hosts = self.hosts.saturating_add(hosts);
        self.bytes = self.bytes.saturating_add(bytes);
        if self.hosts > MAX_RANGE_HOSTS {
            return Err(self.too_many());
        }
        if self.bytes > MAX_RANGE_BYTES {
            return Err(HostPatternError::TooManyBytes {
                pattern: self.pattern.to_string(),
            });
        }
        Ok(())
    }
}

fn expand_range_into(
    line: &str,
    budget: &mut RangeBudget<'_>,
    all: &mut Vec<String>,
) -> Result<(), HostPatternError> {
    let replaced = line.replacen('[', "|", 1).replacen(']', "|", 1);
    let parts: Vec<&str> = replaced.split('|').collect();
    let [head, nrange, tail] = parts.as_slice() else {
        return Err(HostPatternError::Brackets { line: line.into() });
    };
    let bounds: Vec<&str> = nrange.split(':').collect();
    if bounds.len() != 2 && bounds.len() != 3 {
        return Err(HostPatternError::Bounds { line: line.into() });
    }
    let beg = if bounds[0].is_empty() { "0" } else { bounds[0] };
    let end = bounds[1];
    let step = bounds.get(2).copied().unwrap_or("1");
    if end.is_empty() {
        return Err(HostPatternError::NoEnd { line: line.into() });
    }
    // Python's len() counts characters: `0\u{661}` is two long.
    let (beg_len, end_len) = (beg.chars().count(), end.chars().count());
    let width = if beg.starts_with('0') && beg_len > 1 {
        if beg_len != end_len {
            return Err(HostPatternError::UnequalWidths { line: line.into() });
        }
        Some(beg_len)
    } else {
        None
    };
    const LETTERS: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let mut seq: Vec<String> = Vec::new();
    let alpha = match (LETTERS.find(beg), LETTERS.find(end)) {
        (Some(ib), Some(ie)) => {
            if ib > ie {
                return Err(HostPatternError::Descending { line: line.into() });
            }
            // A step Python cannot slice with falls through to the numeric attempt.
            match py_int(step) {
                Some(s) if s > 0 => {
                    seq = LETTERS[ib..=ie]
                        .chars()
                        .step_by(usize::try_from(s).unwrap_or(usize::MAX))
                        .map(String::from)
                        .collect();
                    true
                }
                Some(s) if s < 0 => true,
                _ => false,
            }
        }
        _ => false,
    };
    if !alpha {
        let bad = || HostPatternError::NotNumbers { line: line.into() };
        let b = i128::from(py_int(beg).ok_or_else(bad)?);
        let e = i128::from(py_int(end).ok_or_else(bad)?);
        let s = i128::from(py_int(step).ok_or_else(bad)?);
        if s == 0 {
            return Err(HostPatternError::ZeroStep { line: line.into() });
        }
        // Python's range(b, e + 1, s), sized before anything is built.
        let stop = e + 1;
        let count = if s > 0 && b < stop {
            (stop - b + s - 1) / s
        } else if s < 0 && b > stop {
            (b - stop + (-s) - 1) / (-s)
        } else {
            0
        };
        if count > MAX_RANGE_HOSTS as i128 {
            return Err(budget.too_many());
        }
        seq = (0..count).map(|k| (b + k * s).to_string()).collect();
    }
    for item in seq {
        let filled = match width {
            Some(w) => python_zfill(&item, w),
            None => item,
        };
        let name = format!("{head}{filled}{tail}");
        if name.contains('[') {
            budget.spend(0, name.len())?;
            expand_range_into(&name, budget, all)?;
        } else {
            budget.spend(1, name.len())?;
            all.push(name);
        }
    }
    Ok(())
}

/// Python's `int(str)`: digits of any script count (`web[\u{661}:\u{663}]` is web1..web3).
fn py_int(s: &str) -> Option<i64> {
    super::pytext::int(s)
}

fn python_zfill(s: &str, width: usize) -> String {
    let (sign, digits) = match s.strip_prefix('-') {
        Some(d) => ("-", d),
        None => ("", s),
    };
    let pad = width.saturating_sub(s.chars().count());
    format!("{sign}{}{digits}", "0".repeat(pad))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The borrowed name of a pattern with neither `:` nor `[` is what the whole parse
    /// gives, for names that look like hostnames and names that do not (Ansible keeps
    /// both), and the YAML marker is refused on both paths.
    #[test]
    fn a_plain_pattern_is_borrowed_as_the_whole_parse_names_it() {
        let names = |r: Result<(HostNames<'_>, Option<u64>), HostPatternError>| {
            r.map(|(n, port)| {
                let n = match n {
                    HostNames::One(one) => vec![one.to_string()],
                    HostNames::Many(many) => many,
                };
                (n, port)
            })
            .map_err(|e| e.to_string())
        };
        for pattern in [
            "lab5-n3",
            "k3s-dev-1",
            "10.0.0.1",
            "host_",
            "-dash",
            "a..b",
            "caf\u{e9}",
            "we$ird!",
            "x]y",
            "---",
            " --- ",
            "----",
            "",
        ] {
            let fast = host_names(pattern);
            assert!(
                matches!(fast, Ok((HostNames::One(_), None)) | Err(_)),
                "{pattern:?} took the slow path"
            );
            assert_eq!(names(fast), names(expand_parsed(pattern)), "{pattern:?}");
        }
    }

    #[test]
    fn ranges_numeric_padded_alpha_and_steps() {
        assert_eq!(
            expand_hostname_range("web[01:03]").expect("r"),
            ["web01", "web02", "web03"]
        );
        assert_eq!(
            expand_hostname_range("db-[a:c]").expect("r"),
            ["db-a", "db-b", "db-c"]
        );
        assert_eq!(
            expand_hostname_range("n[1:10:4]").expect("r"),
            ["n1", "n5", "n9"]
        );
        assert_eq!(
            expand_hostname_range("x[:2]").expect("r"),
            ["x0", "x1", "x2"]
        );
        assert_eq!(
            expand_hostname_range("[y:B]z").expect("r"),
            ["yz", "zz", "Az", "Bz"]
        );
        assert_eq!(
            expand_hostname_range("r[1:2]c[a:b]").expect("r"),
            ["r1ca", "r1cb", "r2ca", "r2cb"]
        );
        assert_eq!(
            expand_hostname_range("s[a:e:2]").expect("r"),
            ["sa", "sc", "se"]
        );
        assert!(expand_hostname_range("w[01:3]")
            .expect_err("len")
            .to_string()
            .contains("equal-length"));
        assert!(expand_hostname_range("w[1]")
            .expect_err("b")
            .to_string()
            .contains("begin:end"));
        assert!(expand_hostname_range("w[1:]")
            .expect_err("e")
            .to_string()
            .contains("end value"));
        assert!(expand_hostname_range("w[c:a]")
            .expect_err("o")
            .to_string()
            .contains("begin <= end"));
    }

    #[test]
    fn host_port_and_patterns() {
        assert_eq!(
            expand_hostpattern("h:2222").expect("p"),
            (vec!["h".to_string()], Some(2222))
        );
        assert_eq!(
            expand_hostpattern("w[1:2].lan:22").expect("p"),
            (vec!["w1.lan".to_string(), "w2.lan".to_string()], Some(22))
        );
        assert_eq!(
            expand_hostpattern("192.168.1.50").expect("p"),
            (vec!["192.168.1.50".to_string()], None)
        );
        assert_eq!(
            expand_hostpattern("[fe80::1]:22").expect("p"),
            (vec!["fe80::1".to_string()], Some(22))
        );
        assert_eq!(
            expand_hostpattern("fe80::1").expect("p"),
            (vec!["fe80::1".to_string()], None)
        );
        assert!(expand_hostpattern("h:")
            .expect_err("colon")
            .to_string()
            .contains("ending in ':'"));
        assert!(expand_hostpattern("---")
            .expect_err("yaml")
            .to_string()
            .contains("YAML"));
    }
}
