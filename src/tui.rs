//! The terminal owner and the event loop.
//!
//! Owns: raw mode, the alternate screen and mouse capture ([`Tui`]: entered on
//! construction, restored by [`Tui::exit`], on `Drop`, and by a panic hook that restores
//! the terminal before the panic report prints), and [`run_loop`]: a `tokio::select!` over
//! crossterm's `EventStream`, a tick (clocks, ages), a frame interval (draws coalesced: at
//! most one per frame, only when something changed), the executor replies and the live
//! updates. Drawing reads the app's state and nothing else.
//! It also owns the console's way out when it cannot finish its work: SIGHUP (the terminal
//! went away), SIGTERM, SIGINT from outside, an input stream that ends or fails, or a panic
//! of the loop. Each runs the stop ladder on every supervised child
//! (`exec::process::stop_all`) and journals the run as abandoned, naming the cause.
//! Must not: hold UI state (that is `ui::app::App`) or block on IO.

use std::io::{self, Stdout};
use std::sync::{Arc, Mutex, Once, OnceLock};
use std::thread::ThreadId;
use std::time::Duration;

use crossterm::event::{DisableMouseCapture, EnableMouseCapture, Event, EventStream};
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use crossterm::{cursor, execute};
use futures::{FutureExt, StreamExt};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

use crate::exec::process::{self, StopReport};

use crate::observe::feed::Update;
use crate::session::exec::{executor_task, Capabilities, ExecReply, ExecRequest};
use crate::ui::action::Action;
use crate::ui::app::{App, Control};
use crate::ui::view;

/// Ticks move clocks and ages on; frames draw. Kept apart so a busy output stream does not
/// speed up the clock and a slow clock does not slow down drawing.
pub const TICK: Duration = Duration::from_millis(250);
pub const FRAME: Duration = Duration::from_millis(33);
/// How long quitting waits for cancelled steps to report before exiting anyway (exec's stop
/// ladder is SIGINT, then SIGTERM, then SIGKILL within this).
pub const STOP_GRACE: Duration = Duration::from_secs(20);

/// The terminal, in raw mode on the alternate screen while this value lives.
pub struct Tui {
    pub terminal: Terminal<CrosstermBackend<Stdout>>,
    active: bool,
}

/// Put the terminal back as we found it. Safe to call more than once.
pub fn restore() -> io::Result<()> {
    let raw = disable_raw_mode();
    let screen = execute!(
        io::stdout(),
        DisableMouseCapture,
        LeaveAlternateScreen,
        cursor::Show
    );
    raw.and(screen)
}

/// How long an abandoning console gives its children per rung of the ladder: all three
/// rungs fit in the 5 s an operator (and the tests) may expect.
pub const ABANDON_INT_GRACE: Duration = Duration::from_millis(2000);
pub const ABANDON_TERM_GRACE: Duration = Duration::from_millis(1500);

static PANIC_HOOK: Once = Once::new();
/// The thread the event loop runs on: a panic there takes the console down, so the hook
/// stops the children; a panic in a task elsewhere is caught by tokio and the console (and
/// its supervision) carries on.
static LOOP_THREAD: OnceLock<ThreadId> = OnceLock::new();
/// What the panic hook's ladder did, for the loop to journal once the unwind reaches it.
static PANIC_STOPS: Mutex<Vec<StopReport>> = Mutex::new(Vec::new());

/// Chain a panic hook that stops the supervised children (a panic of the event loop) and
/// restores the terminal first, so the report (from the previous hook, e.g. color-eyre's)
/// prints on a usable screen.
pub fn install_panic_hook() {
    PANIC_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if LOOP_THREAD.get() == Some(&std::thread::current().id()) {
                let stops = process::stop_all(ABANDON_INT_GRACE, ABANDON_TERM_GRACE);
                PANIC_STOPS
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .extend(stops);
            }
            let _ = restore();
            previous(info);
        }));
    });
}

impl Tui {
    pub fn enter() -> io::Result<Tui> {
        install_panic_hook();
        enable_raw_mode()?;
        let entered = execute!(
            io::stdout(),
            EnterAlternateScreen,
            EnableMouseCapture,
            cursor::Hide
        );
        if let Err(e) = entered {
            let _ = restore();
            return Err(e);
        }
        let terminal = match Terminal::new(CrosstermBackend::new(io::stdout())) {
            Ok(t) => t,
            Err(e) => {
                let _ = restore();
                return Err(e);
            }
        };
        Ok(Tui {
            terminal,
            active: true,
        })
    }

    /// Leave raw mode and the alternate screen.
    pub fn exit(&mut self) -> io::Result<()> {
        if self.active {
            self.active = false;
            restore()?;
        }
        Ok(())
    }

    /// Hand the terminal to another program (an interactive ssh, $EDITOR) until
    /// [`Tui::resume`].
    pub fn suspend(&mut self) -> io::Result<()> {
        self.exit()
    }

    pub fn resume(&mut self) -> io::Result<()> {
        if !self.active {
            enable_raw_mode()?;
            execute!(
                io::stdout(),
                EnterAlternateScreen,
                EnableMouseCapture,
                cursor::Hide
            )?;
            self.active = true;
            self.terminal.clear()?;
        }
        Ok(())
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        let _ = self.exit();
    }
}

/// The executor task the loop talks to, built from the app's capabilities.
struct ExecutorLink {
    caps: Arc<Capabilities>,
    tx: mpsc::Sender<ExecRequest>,
    rx: mpsc::Receiver<ExecReply>,
    task: tokio::task::JoinHandle<()>,
}

impl ExecutorLink {
    fn spawn(caps: Arc<Capabilities>) -> ExecutorLink {
        let (tx, req_rx) = mpsc::channel(64);
        let (reply_tx, rx) = mpsc::channel(1024);
        let task = tokio::spawn(executor_task(Arc::clone(&caps), req_rx, reply_tx));
        ExecutorLink { caps, tx, rx, task }
    }
}

impl Drop for ExecutorLink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Run until the app says quit. Draws only from `app`; every input goes through it.
/// `observations` are the live sources' updates (one judged pane each).
///
/// The executor task holds exactly the app's capabilities: when the app switches to observe
/// mode (`:observe`), the task holding the mutating executors is stopped and one built from
/// the read-only half takes its place.
pub async fn run_loop(
    tui: &mut Tui,
    app: &mut App,
    observations: mpsc::Receiver<Update>,
) -> io::Result<()> {
    let _ = LOOP_THREAD.set(std::thread::current().id());
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
            let stops = std::mem::take(&mut *PANIC_STOPS.lock().unwrap_or_else(|p| p.into_inner()));
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
    let mut hup = signal(SignalKind::hangup())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut exec = ExecutorLink::spawn(Arc::clone(app.capabilities()));
    let mut events = EventStream::new();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut frame = tokio::time::interval(FRAME);
    frame.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let size = tui.terminal.size()?;
    app.update(Action::Resize(size.width, size.height));
    let mut dirty = true;
    let mut obs_open = true;
    // Set when the operator quit with work in flight: wait (bounded) for the executors to
    // report the cancelled steps, so the journal ends in a known state.
    let mut stopping: Option<tokio::time::Instant> = None;
    let ending = loop {
        // Replies already here (a process-started above all) are taken in before a signal
        // is acted on, so the journal can name the processes it stops.
        let abandon = |exec: &mut ExecutorLink, app: &mut App, why: &str| {
            while let Ok(r) = exec.rx.try_recv() {
                app.handle_exec(r);
            }
            Ending::Abandon(why.to_string())
        };
        tokio::select! {
            _ = hup.recv() => break abandon(&mut exec, app, "console lost its terminal (SIGHUP)"),
            _ = term.recv() => break abandon(&mut exec, app, "console was told to stop (SIGTERM)"),
            _ = int.recv() => break abandon(&mut exec, app, "console was interrupted (SIGINT)"),
            ev = events.next() => {
                let control = match ev {
                    Some(Ok(Event::Key(k))) => app.handle_key(k),
                    Some(Ok(Event::Mouse(m))) => app.handle_mouse(m),
                    Some(Ok(Event::Resize(w, h))) => app.update(Action::Resize(w, h)),
                    Some(Ok(_)) => Control::Continue,
                    Some(Err(e)) => {
                        break abandon(&mut exec, app, &format!("console lost its terminal (reading it failed: {e})"))
                    }
                    None => break abandon(&mut exec, app, "console lost its terminal (its input ended)"),
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
                app.now = crate::journal::now();
                app.update(Action::Tick);
                dirty = true;
            }
            _ = frame.tick(), if dirty => {
                tui.terminal.draw(|f| view::draw(f, app))?;
                dirty = false;
            }
            Some(r) = exec.rx.recv() => {
                app.now = crate::journal::now();
                app.handle_exec(r);
                dirty = true;
            }
            obs = observations.recv(), if obs_open => match obs {
                Some(u) => {
                    app.now = crate::journal::now();
                    app.handle_update(u);
                    dirty = true;
                }
                None => obs_open = false,
            },
        }
        if let Some(deadline) = stopping {
            if !app.has_in_flight() || tokio::time::Instant::now() >= deadline {
                break Ending::Done;
            }
        }
        if !Arc::ptr_eq(&exec.caps, app.capabilities()) {
            exec = ExecutorLink::spawn(Arc::clone(app.capabilities()));
        }
        // Hand queued requests to the executor task without ever blocking the loop: what
        // does not fit now stays queued for the next turn.
        while let Some(req) = app.outbox.pop_front() {
            match exec.tx.try_send(req) {
                Ok(()) => {}
                Err(TrySendError::Full(req)) => {
                    app.outbox.push_front(req);
                    break;
                }
                Err(TrySendError::Closed(_)) => {
                    app.status = Some("the executor task has stopped".into());
                    app.outbox.clear();
                    break;
                }
            }
        }
    };
    Ok(ending)
}
