//! The fault port: how `:fault TARGET WORDS` reaches whatever stands behind the console
//! (today the simulated homelab of `hk-console demo`). A plain command port: a target, some
//! words, one line back. It knows no vocabulary of what implements it; the implementation
//! says what it understood or why nothing changed, in its own words.

/// Why the words changed nothing: the line the console shows for it, as the implementation
/// worded it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FaultRefused(pub String);

/// Where `:fault TARGET WORDS` goes, given to the console by its composition root (the
/// binary's `demo`; the console does not know what is behind it). Called on the UI task: an
/// implementation must not block (queue the command, answer at once).
pub trait FaultSink: Send + Sync {
    /// Apply `words` to `target` now: one line saying what happened, or why nothing did.
    fn inject(&self, target: &str, words: &str) -> Result<String, FaultRefused>;
    /// The usage line, with the targets and words there are.
    fn usage(&self) -> String;
    /// The first words there are (for tab completion).
    fn fault_names(&self) -> Vec<String>;
}
