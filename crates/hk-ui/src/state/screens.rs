//! Which screen is up and what the home lists are made of.
//!
//! Owns: [`Screen`], the focus of Home's and the run view's panes, and the summaries the
//! home lists show ([`EnvSummary`], [`RunbookSummary`]). Must not: import the app or the
//! panes (they read these).

use hk_engine::repo::env::Environment;

/// An environment as the home screen lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvSummary {
    pub name: String,
    pub hosts: usize,
    pub vip: Option<String>,
    pub problems: Vec<String>,
    /// The servers (the etcd members), for the gates' quorum arithmetic.
    pub servers: Vec<String>,
    /// The names of the objects its next steps look at (its watch settings: the Lease
    /// hk-console.yaml `names:` or the servers' hostvar names, `cni:`'s agents); `None`:
    /// the defaults.
    pub objects: Option<hk_effects::observe::summary::Objects>,
}

impl From<&Environment> for EnvSummary {
    fn from(e: &Environment) -> Self {
        EnvSummary {
            name: e.name.clone(),
            // Every host of the environment, once: servers, agents and VPN gateways (a
            // gateway is often a server too). It counted the servers only: kriegalex's
            // three servers and two agents showed as "3 hosts".
            hosts: e
                .servers
                .iter()
                .chain(&e.agents)
                .chain(&e.vpn_gateways)
                .map(|h| h.name.as_str())
                .collect::<std::collections::BTreeSet<_>>()
                .len(),
            vip: e.vip.get().map(str::to_string),
            problems: e.problems.iter().map(|p| p.to_string()).collect(),
            servers: e.servers.iter().map(|s| s.name.clone()).collect(),
            objects: None,
        }
    }
}

/// A runbook as the home screen lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunbookSummary {
    pub id: String,
    pub title: String,
    pub mutates: bool,
    pub environments: Vec<String>,
    /// Why it is not offered on this repo (the caller's `context::not_offered`), if not.
    pub not_offered: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Screen {
    Home,
    Run,
    /// Every live pane of the current environment in detail (read-only by nature).
    Live,
    /// The static parity check's findings, file:line (read-only).
    Check,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HomeFocus {
    Environments,
    Runbooks,
    Runs,
}

/// Which pane of the run view has the arrow keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunFocus {
    Steps,
    Output,
}
