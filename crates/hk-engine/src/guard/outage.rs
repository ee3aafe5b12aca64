//! PURE. How long the control-plane VIP did not answer while a step ran (issue 39): from
//! the probes of VIP:port taken during the step (each its time and whether a TCP connect
//! succeeded), the unanswered time in all, the longest stretch and when it was. The
//! probing is the effects' (`observe::vip_outage`); this only sums what they saw.

use serde::{Deserialize, Serialize};

use crate::checks::live::Timestamp;
use crate::time::{clock, span_ms, Style};

/// One probe: when it was sent and whether VIP:port accepted the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probe {
    pub at: Timestamp,
    pub answered: bool,
}

/// What the probes of one step say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VipOutage {
    pub vip: String,
    pub probes: usize,
    pub unanswered: usize,
    /// Unanswered time in all: each unanswered stretch from its first unanswered probe to
    /// the next answered one (or the last probe, when it never answered again).
    pub total_ms: u64,
    /// The longest stretch: (from, to, ms).
    pub longest: Option<(Timestamp, Timestamp, u64)>,
    /// Whether the last probe went unanswered (the VIP had not come back when the step
    /// ended).
    pub down_at_end: bool,
}

/// Sum `probes` (in the order they were sent) of `vip` (`ADDR:PORT`).
pub fn summarize(vip: &str, probes: &[Probe]) -> VipOutage {
    let mut out = VipOutage {
        vip: vip.to_string(),
        probes: probes.len(),
        unanswered: probes.iter().filter(|p| !p.answered).count(),
        total_ms: 0,
        longest: None,
        down_at_end: probes.last().is_some_and(|p| !p.answered),
    };
    let mut from: Option<Timestamp> = None;
    for p in probes {
        match (p.answered, from) {
            (false, None) => from = Some(p.at),
            (true, Some(f)) => {
                out.add(f, p.at);
                from = None;
            }
            _ => {}
        }
    }
    if let (Some(f), Some(last)) = (from, probes.last()) {
        out.add(f, last.at);
    }
    out
}

impl VipOutage {
    fn add(&mut self, from: Timestamp, to: Timestamp) {
        let ms = to.0.saturating_sub(from.0);
        self.total_ms += ms;
        if self.longest.is_none_or(|(_, _, l)| ms > l) {
            self.longest = Some((from, to, ms));
        }
    }

    /// [`VipOutage::line`] and who held the VIP's Lease (`lease`, `NAMESPACE/NAME`) once the
    /// step ended: the holder, no holder, or why it could not be read (never left out).
    pub fn line_with_holder(&self, lease: &str, holder: &Result<Option<String>, String>) -> String {
        let after = match holder {
            Ok(Some(h)) => format!("the Lease {lease} held by {h} after it"),
            Ok(None) => format!("the Lease {lease} held by no one after it"),
            Err(why) => format!("who held the Lease {lease} after it could not be read: {why}"),
        };
        format!("{}; {after}", self.line())
    }

    /// The line the step's output and its record carry.
    pub fn line(&self) -> String {
        if self.probes == 0 {
            return format!("VIP {}: not probed during this step", self.vip);
        }
        if self.unanswered == 0 {
            return format!(
                "VIP {}: answered all {} probes during this step",
                self.vip, self.probes
            );
        }
        let longest = self
            .longest
            .map(|(f, t, ms)| {
                format!(
                    "; longest {} from {} to {}",
                    span_ms(ms, Style::Words),
                    clock(f),
                    clock(t)
                )
            })
            .unwrap_or_default();
        format!(
            "VIP {}: did not answer for {} during this step ({} of {} probes unanswered{longest}){}",
            self.vip,
            span_ms(self.total_ms, Style::Words),
            self.unanswered,
            self.probes,
            if self.down_at_end {
                "; STILL not answering when the step ended"
            } else {
                ""
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_holder_after_is_said_whatever_was_read() {
        let o = summarize("10.0.0.9:6443", &probes("++..++"));
        let lease = "kube-system/plndr-cp-lock";
        assert!(o
            .line_with_holder(lease, &Ok(Some("k3s-prod-2".into())))
            .ends_with("; the Lease kube-system/plndr-cp-lock held by k3s-prod-2 after it"));
        assert!(o
            .line_with_holder(lease, &Ok(None))
            .ends_with("held by no one after it"));
        let unread = o.line_with_holder(lease, &Err("no answer within 3 s".into()));
        assert!(
            unread.starts_with("VIP 10.0.0.9:6443: did not answer for"),
            "{unread}"
        );
        assert!(
            unread.ends_with("after it could not be read: no answer within 3 s"),
            "{unread}"
        );
    }

    fn probes(pattern: &str) -> Vec<Probe> {
        // One char per 200 ms from noon: `+` answered, `.` not.
        pattern
            .chars()
            .enumerate()
            .map(|(i, c)| Probe {
                at: Timestamp(43_200_000 + 200 * i as u64),
                answered: c == '+',
            })
            .collect()
    }

    #[test]
    fn outages_are_summed_and_the_longest_named() {
        let o = summarize("192.168.2.9:6443", &probes("+++++"));
        assert_eq!(
            o.line(),
            "VIP 192.168.2.9:6443: answered all 5 probes during this step"
        );
        // Down from probe 2 to probe 4 (400 ms), then from 6 to 11 (1 s).
        let o = summarize("192.168.2.9:6443", &probes("++..++.....+"));
        assert_eq!((o.total_ms, o.unanswered, o.probes), (1_400, 7, 12));
        assert_eq!(o.longest.map(|l| l.2), Some(1_000));
        assert!(!o.down_at_end);
        assert!(
            o.line().starts_with("VIP 192.168.2.9:6443: did not answer for 1400ms during this step (7 of 12 probes unanswered; longest 1s from 12:00:01 to 12:00:02)"),
            "{}",
            o.line()
        );
        // Never back.
        let o = summarize("v:1", &probes("+...."));
        assert!(o.down_at_end);
        assert_eq!(o.total_ms, 600);
        assert!(o
            .line()
            .ends_with("STILL not answering when the step ended"));
        assert_eq!(
            summarize("v:1", &[]).line(),
            "VIP v:1: not probed during this step"
        );
    }
}
