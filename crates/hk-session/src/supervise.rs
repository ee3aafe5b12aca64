//! The session's way out when the console cannot finish its work.
//!
//! Owns: stopping every supervised child (`exec::process::stop_all`, SIGINT, then SIGTERM,
//! then SIGKILL) and journaling the run as abandoned, naming the cause, with how each of
//! its processes ended ([`abandon`], [`abandon_and_stop`]); the causes from outside
//! ([`Signals`]: SIGHUP when the terminal goes away, SIGTERM, SIGINT); and a panic of the
//! thread that drives the session ([`install_panic_hook`], [`mark_driver_thread`],
//! [`take_panic_stops`]).
//! Must not: know the terminal. Whoever owns one passes its restore to the panic hook.

use std::sync::{Mutex, Once, OnceLock};
use std::thread::ThreadId;
use std::time::Duration;

use tokio::signal::unix::{signal, Signal, SignalKind};

use hk_effects::exec::process::{self, StopReport};
use hk_engine::runbook::machine::{Input, Timestamp};

use super::{Session, SessionEffect};

/// How long an abandoning console gives its children per rung of the ladder: all three
/// rungs fit in the 5 s an operator (and the tests) may expect.
pub const ABANDON_INT_GRACE: Duration = Duration::from_millis(2000);
pub const ABANDON_TERM_GRACE: Duration = Duration::from_millis(1500);

static PANIC_HOOK: Once = Once::new();
/// The thread the session is driven on: a panic there takes the console down, so the hook
/// stops the children; a panic in a task elsewhere is caught by tokio and the console (and
/// its supervision) carries on.
static DRIVER_THREAD: OnceLock<ThreadId> = OnceLock::new();
/// What the panic hook's ladder did, for the driver to journal once the unwind reaches it.
static PANIC_STOPS: Mutex<Vec<StopReport>> = Mutex::new(Vec::new());

/// Chain a panic hook that stops the supervised children (a panic of the driver thread),
/// then runs `restore` (the terminal's, so the report from the previous hook, e.g.
/// color-eyre's, prints on a usable screen). Installed once.
pub fn install_panic_hook(restore: fn()) {
    PANIC_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if DRIVER_THREAD.get() == Some(&std::thread::current().id()) {
                let stops = process::stop_all(ABANDON_INT_GRACE, ABANDON_TERM_GRACE);
                PANIC_STOPS
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .extend(stops);
            }
            restore();
            previous(info);
        }));
    });
}

/// This thread drives the session: a panic on it stops the children.
pub fn mark_driver_thread() {
    let _ = DRIVER_THREAD.set(std::thread::current().id());
}

/// What the panic hook's ladder did.
pub fn take_panic_stops() -> Vec<StopReport> {
    std::mem::take(&mut *PANIC_STOPS.lock().unwrap_or_else(|p| p.into_inner()))
}

/// The signals that make the console go: each says why, as the journal will.
pub struct Signals {
    hup: Signal,
    term: Signal,
    int: Signal,
}

impl Signals {
    pub fn new() -> std::io::Result<Signals> {
        Ok(Signals {
            hup: signal(SignalKind::hangup())?,
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// The next one, as the reason the run is abandoned.
    pub async fn recv(&mut self) -> &'static str {
        match self.next().await {
            Caught::Hup => "console lost its terminal (SIGHUP)",
            Caught::Term => "console was told to stop (SIGTERM)",
            Caught::Int => "console was interrupted (SIGINT)",
        }
    }

    /// The next one, for a driver that words its own reason (the headless run).
    pub async fn next(&mut self) -> Caught {
        tokio::select! {
            _ = self.hup.recv() => Caught::Hup,
            _ = self.term.recv() => Caught::Term,
            _ = self.int.recv() => Caught::Int,
        }
    }
}

/// A signal [`Signals`] caught.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caught {
    Hup,
    Term,
    Int,
}

impl Caught {
    pub fn name(self) -> &'static str {
        match self {
            Caught::Hup => "SIGHUP",
            Caught::Term => "SIGTERM",
            Caught::Int => "SIGINT",
        }
    }

    /// The signal's number (a process that stops on it exits 128 + this, by convention).
    pub fn number(self) -> u8 {
        match self {
            Caught::Hup => 1,
            Caught::Int => 2,
            Caught::Term => 15,
        }
    }
}

/// The console is going away and `stops` is what the ladder did to the supervised
/// children: journal the run as abandoned (what was in flight becomes interrupted, naming
/// why), then how each of its processes ended.
pub fn abandon(
    mut session: Option<&mut Session>,
    reason: &str,
    stops: &[StopReport],
    now: Timestamp,
) -> Vec<SessionEffect> {
    let mut out = journal_abandoned(session.as_deref_mut(), reason, now);
    for stop in stops {
        out.extend(record_stop(session.as_deref_mut(), reason, stop, now));
    }
    out
}

/// [`abandon`] with the ladder run here, after the abandonment is journaled.
pub fn abandon_and_stop(
    mut session: Option<&mut Session>,
    reason: &str,
    int_grace: Duration,
    term_grace: Duration,
    now: Timestamp,
) -> Vec<SessionEffect> {
    let mut out = journal_abandoned(session.as_deref_mut(), reason, now);
    let stops = process::stop_all(int_grace, term_grace);
    for stop in &stops {
        out.extend(record_stop(session.as_deref_mut(), reason, stop, now));
    }
    out
}

fn journal_abandoned(
    session: Option<&mut Session>,
    reason: &str,
    now: Timestamp,
) -> Vec<SessionEffect> {
    match session {
        Some(s) if s.is_active() => s.feed(
            Input::Abandoned {
                reason: reason.to_string(),
            },
            now,
        ),
        _ => Vec::new(),
    }
}

fn record_stop(
    session: Option<&mut Session>,
    reason: &str,
    stop: &StopReport,
    now: Timestamp,
) -> Vec<SessionEffect> {
    let step = session.as_ref().and_then(|s| {
        s.run.steps().find_map(|(st, r)| {
            r.process
                .as_ref()
                .filter(|p| p.pid == stop.child.pid)
                .map(|_| (st.n, r.attempt))
        })
    });
    match (session, step) {
        (Some(s), Some((n, attempt))) if stop.ended => s.feed(
            Input::ProcessEnded {
                n,
                attempt,
                pid: stop.child.pid,
                // The reason is a clause of its own ("the headless run was told to stop
                // (SIGTERM)", "console lost its terminal (SIGHUP)"): said after a colon,
                // never glued to an article ("stopped as the the headless run").
                how: format!("stopped: {reason}: {}", stop.describe()),
            },
            now,
        ),
        _ => {
            tracing::error!(report = %stop.describe(), reason, "child on abandonment");
            vec![SessionEffect::Notice(format!(
                "{reason}: {}",
                stop.describe()
            ))]
        }
    }
}
