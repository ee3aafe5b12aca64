//! The simulation's fault port: how `:fault ENV FAULT [ARG]` reaches the simulated homelab.
//! Here, below the console and the simulation both, so the simulation implements it without
//! depending on any UI, and the console calls it without knowing the simulation.

/// Why a fault changed nothing: the line the console shows for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FaultRefused {
    #[error("no environment `{env}` in the simulation (known: {known})")]
    UnknownEnv { env: String, known: String },
    /// The words are not a fault (unknown name, missing or extra argument): what was
    /// expected.
    #[error("{0}")]
    NotAFault(String),
    #[error("{env}: the kube-vip Lease `{lease}` has no holder; no holder can die")]
    NoHolder { env: String, lease: String },
    #[error("agent-drifts {server}: {env} has servers 1 to {count} ({have})")]
    NoSuchServer {
        env: String,
        server: usize,
        count: usize,
        have: String,
    },
    #[error("{env} has no VPN gateway in the inventory; {fault} has nothing to act on")]
    NoGateway { env: String, fault: String },
    #[error("{env}: the simulation has stopped; nothing changed")]
    Stopped { env: String },
}

/// Where `:fault ENV FAULT [ARG]` goes: the simulated homelab's fault injector, given to
/// the console by `hk-console demo` only (the UI does not know the simulation). Called on
/// the UI task: an implementation must not block (queue the fault, answer at once).
pub trait FaultSink: Send + Sync {
    /// Apply the fault `words` (`holder-dies`, `agent-drifts 2`) to `env` now: one line
    /// saying what happened, or why nothing did.
    fn inject(&self, env: &str, words: &str) -> Result<String, FaultRefused>;
    /// The usage line, with the environments and faults there are.
    fn usage(&self) -> String;
    /// The fault names (for tab completion).
    fn fault_names(&self) -> Vec<String>;
}
