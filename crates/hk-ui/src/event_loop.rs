//! The console's event loop: terminal events, ticks, frames, executor replies and live
//! updates, into the app; the app's requests out through the session's pump.
//!
//! Owns: [`run_loop`], a `tokio::select!` over the terminal's input (read on a thread of its
//! own, [`terminal_input`]), a tick (clocks,
//! ages), a frame interval (draws coalesced: at most one per frame, only when something
//! changed), the pump's replies, the live updates and the signals that make the console go
//! (`session::supervise::Signals`). Quitting with a step in flight waits (bounded) for it
//! to be cancelled; any other ending (SIGHUP, SIGTERM, SIGINT from outside, an input
//! stream that ends or fails, a panic of the loop) has the session journal the run as
//! abandoned and stop every supervised child.
//! Must not: own the terminal (that is `crate::tui`) or decide anything about the run
//! (the session does).

use std::io;
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::Event;
use futures::FutureExt;
use tokio::sync::mpsc;

use crate::tui::Tui;
use hk_effects::exec::process;
use hk_effects::observe::feed::Update;
use hk_session::pump::{LockPump, Pump};
use hk_session::supervise::{self, Signals, ABANDON_INT_GRACE, ABANDON_TERM_GRACE};

use super::action::Action;
use super::app::{App, Control};
use super::view;

/// Ticks move clocks and ages on; frames draw. Kept apart so a busy output stream does not
/// speed up the clock and a slow clock does not slow down drawing.
pub const TICK: Duration = Duration::from_millis(250);
pub const FRAME: Duration = Duration::from_millis(33);
/// How long quitting waits for cancelled steps to report before exiting anyway (exec's stop
/// ladder is SIGINT, then SIGTERM, then SIGKILL within this).
pub const STOP_GRACE: Duration = Duration::from_secs(20);

/// Run until the app says quit. Draws only from `app`; every input goes through it.
/// `observations` are the live sources' updates (one judged pane each).
///
/// The pump's executors are exactly the app's capabilities: when the app switches to
/// observe mode (`:observe`), the pump holding the mutating executors is stopped and one
/// built from the read-only half takes its place.
pub async fn run_loop(
    tui: &mut Tui,
    app: &mut App,
    observations: mpsc::Receiver<Update>,
) -> io::Result<()> {
    supervise::mark_driver_thread();
    let looped = std::panic::AssertUnwindSafe(loop_until_done(tui, app, observations))
        .catch_unwind()
        .await;
    match looped {
        Ok(Ok(Ending::Done)) => {
            // Quitting waited (bounded) for cancelled steps; anything still running past
            // that wait is stopped rather than left behind.
            let stops = process::stop_all(ABANDON_INT_GRACE, ABANDON_TERM_GRACE);
            if !stops.is_empty() {
                app.abandon("the console quit while a step was still running", &stops);
            }
            Ok(())
        }
        Ok(Ok(Ending::Abandon(reason))) => {
            app.abandon_and_stop(&reason, ABANDON_INT_GRACE, ABANDON_TERM_GRACE);
            Ok(())
        }
        Ok(Err(e)) => {
            app.abandon_and_stop(
                &format!("the console's terminal failed: {e}"),
                ABANDON_INT_GRACE,
                ABANDON_TERM_GRACE,
            );
            Err(e)
        }
        Err(panic) => {
            let stops = supervise::take_panic_stops();
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            // The hook stopped the children already; journal it (the app may be mid-update,
            // but its journal appends whole lines or nothing).
            app.abandon(&format!("the console panicked: {what}"), &stops);
            std::panic::resume_unwind(panic)
        }
    }
}

/// The terminal's input, read on a thread of its own and handed over a channel; the
/// channel ends after the first error.
///
/// Not crossterm's `EventStream` on the loop's task: on a terminal whose other end went away
/// (a closed tmux pane, an ssh session dropped) crossterm 0.28's reader loops forever on
/// reads of 0 bytes (crossterm-rs/crossterm#793, a fix proposed in #1067) inside the poll,
/// so the loop never got back to its signals: an orphaned console burnt a core and did not
/// answer SIGHUP or SIGTERM (seen: 9 min of CPU left behind by a tmux test). On a thread of
/// its own a spinning read stops nothing else, and [`hung_up`] sees the hang-up.
fn terminal_input() -> io::Result<mpsc::Receiver<io::Result<Event>>> {
    let (tx, rx) = mpsc::channel(64);
    std::thread::Builder::new()
        .name("terminal-input".into())
        .spawn(move || loop {
            let read = crossterm::event::read();
            let failed = read.is_err();
            if tx.blocking_send(read).is_err() || failed {
                break;
            }
        })?;
    Ok(rx)
}

/// Whether the terminal on standard input has hung up (its other end closed), asked
/// without reading. False where standard input is no terminal (crossterm then reads
/// /dev/tty, whose end SIGHUP reports).
fn hung_up() -> bool {
    use std::io::IsTerminal;
    use std::os::fd::AsFd;
    let stdin = io::stdin();
    if !stdin.is_terminal() {
        return false;
    }
    let mut fds = [nix::poll::PollFd::new(
        stdin.as_fd(),
        nix::poll::PollFlags::POLLIN,
    )];
    match nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO) {
        Ok(_) => fds[0].revents().is_some_and(|r| {
            r.intersects(nix::poll::PollFlags::POLLHUP | nix::poll::PollFlags::POLLNVAL)
        }),
        Err(_) => false,
    }
}

/// How the loop ended.
enum Ending {
    /// The operator quit.
    Done,
    /// The console must go without finishing: why.
    Abandon(String),
}

async fn loop_until_done(
    tui: &mut Tui,
    app: &mut App,
    mut observations: mpsc::Receiver<Update>,
) -> io::Result<Ending> {
    let mut signals = Signals::new()?;
    // SIGTSTP from outside (in raw mode ^Z is a key, not a signal): the terminal is handed
    // back (mouse capture off, main screen) before the process stops, and taken again on
    // SIGCONT, so a stopped console never leaves a shell reporting every click.
    let mut tstp = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::from_raw(
        nix::sys::signal::Signal::SIGTSTP as i32,
    ))?;
    let mut pump = Pump::spawn(Arc::clone(app.capabilities()));
    let mut locks = LockPump::default();
    let mut events = terminal_input()?;
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut frame = tokio::time::interval(FRAME);
    frame.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let size = tui.terminal.size()?;
    app.update(Action::Resize(size.width, size.height));
    let mut dirty = true;
    let mut obs_open = true;
    // Looks are taken off the UI task; their answers come back here.
    let (look_tx, mut look_rx) = mpsc::channel::<(u64, hk_effects::observe::look::LookResult)>(16);
    // Set when the operator quit with work in flight: wait (bounded) for the executors to
    // report the cancelled steps, so the journal ends in a known state.
    let mut stopping: Option<tokio::time::Instant> = None;
    let ending = loop {
        // Replies already here (a process-started above all) are taken in before a signal
        // is acted on, so the journal can name the processes it stops.
        let abandon = |pump: &mut Pump, app: &mut App, why: &str| {
            while let Some(r) = pump.try_recv() {
                app.handle_exec(r);
            }
            Ending::Abandon(why.to_string())
        };
        tokio::select! {
            why = signals.recv() => break abandon(&mut pump, app, why),
            _ = tstp.recv() => {
                tui.suspend()?;
                // SIGSTOP cannot be caught: the process stops here until SIGCONT.
                if let Err(e) = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP) {
                    app.set_status(Some(format!("could not stop on SIGTSTP: {e}")));
                }
                tui.resume()?;
                app.set_now(hk_engine::journal::now());
                dirty = true;
            }
            ev = events.recv() => {
                // What a key decides is journaled at the time it was pressed, not at the
                // last tick's (after a SIGSTOP, that tick may be long gone).
                app.set_now(hk_engine::journal::now());
                let control = match ev {
                    Some(Ok(Event::Key(k))) => app.handle_key(k),
                    Some(Ok(Event::Mouse(m))) => app.handle_mouse(m),
                    Some(Ok(Event::Resize(w, h))) => app.update(Action::Resize(w, h)),
                    Some(Ok(_)) => Control::Continue,
                    Some(Err(e)) => {
                        break abandon(&mut pump, app, &format!("console lost its terminal (reading it failed: {e})"))
                    }
                    None => break abandon(&mut pump, app, "console lost its terminal (its input ended)"),
                };
                dirty = true;
                if control == Control::Quit {
                    if stopping.is_some() || !app.cancel_in_flight() {
                        break Ending::Done;
                    }
                    stopping = Some(tokio::time::Instant::now() + STOP_GRACE);
                }
            }
            _ = tick.tick() => {
                if hung_up() {
                    break abandon(&mut pump, app, "console lost its terminal (it hung up)");
                }
                app.set_now(hk_engine::journal::now());
                app.update(Action::Tick);
                dirty = true;
            }
            _ = frame.tick(), if dirty => {
                tui.terminal.draw(|f| view::draw(f, app))?;
                dirty = false;
            }
            Some(r) = pump.recv() => {
                app.set_now(hk_engine::journal::now());
                app.handle_exec(r);
                dirty = true;
            }
            obs = observations.recv(), if obs_open => match obs {
                Some(u) => {
                    app.set_now(hk_engine::journal::now());
                    app.handle_update(u);
                    dirty = true;
                }
                None => obs_open = false,
            },
            Some(answer) = locks.recv() => {
                app.set_now(hk_engine::journal::now());
                app.handle_lock(answer);
                dirty = true;
            }
            Some((seq, result)) = look_rx.recv() => {
                app.set_now(hk_engine::journal::now());
                app.handle_look(seq, result);
                dirty = true;
            }
        }
        // Whatever the event said on the status line is kept in the messages log (M).
        app.keep_status();
        if let Some(deadline) = stopping {
            if !app.has_in_flight() || tokio::time::Instant::now() >= deadline {
                break Ending::Done;
            }
        }
        if !pump.serves(app.capabilities()) {
            pump = Pump::spawn(Arc::clone(app.capabilities()));
        }
        // Hand queued requests over without ever blocking the loop: what does not fit now
        // stays queued for the next turn.
        while let Some((req, looker)) = app.next_look() {
            let Some(looker) = looker else {
                break;
            };
            let tx = look_tx.clone();
            tokio::spawn(async move {
                let result = looker.take(req.look, req.kind).await;
                // The console may have quit meanwhile: nobody to tell.
                let _ = tx.send((req.seq, result)).await;
            });
        }
        // The run lock's calls go off the UI task too: a cluster that does not answer
        // must not hold the screen.
        locks.run(app.lock_outbox_mut());
        if let Err(closed) = pump.flush(app.outbox_mut()) {
            app.set_status(Some(closed.to_string()));
        }
    };
    Ok(ending)
}
