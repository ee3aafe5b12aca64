//! The host picker's state: a runbook that runs on one host of a group, opened without
//! naming the host, lists the hosts the planner itself offers.
//!
//! Owns: [`HostPicker`] (the hosts, the selection). Must not: import the app or the panes
//! (`panes::picker` draws it; the app plans for the host picked).

/// The open picker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPicker {
    pub runbook: String,
    pub env: String,
    /// The target group the runbook takes one host of.
    pub group: String,
    /// The group's hosts, as the planner listed them.
    pub hosts: Vec<String>,
    pub sel: usize,
}

impl HostPicker {
    pub fn selected(&self) -> Option<&str> {
        self.hosts.get(self.sel).map(String::as_str)
    }

    /// Move the selection by `d`, within the list.
    pub fn step(&mut self, d: isize) {
        let last = self.hosts.len().saturating_sub(1);
        self.sel = self.sel.saturating_add_signed(d).min(last);
    }
}
