//! The terminal owner and the event loop.
//!
//! Owns: raw mode, the alternate screen and mouse capture ([`Tui`]: entered on
//! construction, restored by [`Tui::exit`], on `Drop`, and by a panic hook that restores
//! the terminal before the panic report prints), and [`run_loop`]: a `tokio::select!` over
//! crossterm's `EventStream`, a tick (clocks, ages), a frame interval (draws coalesced: at
//! most one per frame, only when something changed), the executor replies and the live
//! updates. Drawing reads the app's state and nothing else.
//! Must not: hold UI state (that is `ui::app::App`) or block on IO.

use std::io::{self, Stdout};
use std::sync::{Arc, Once};
use std::time::Duration;

use crossterm::event::{DisableMouseCapture, EnableMouseCapture, Event, EventStream};
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use crossterm::{cursor, execute};
use futures::StreamExt;
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

use crate::observe::feed::Update;
use crate::ui::action::Action;
use crate::ui::app::{App, Control};
use crate::ui::exec::{executor_task, Capabilities, ExecReply, ExecRequest};
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

static PANIC_HOOK: Once = Once::new();

/// Chain a panic hook that restores the terminal first, so the report (from the previous
/// hook, e.g. color-eyre's) prints on a usable screen.
pub fn install_panic_hook() {
    PANIC_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
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
    mut observations: mpsc::Receiver<Update>,
) -> io::Result<()> {
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
    loop {
        tokio::select! {
            ev = events.next() => {
                let control = match ev {
                    Some(Ok(Event::Key(k))) => app.handle_key(k),
                    Some(Ok(Event::Mouse(m))) => app.handle_mouse(m),
                    Some(Ok(Event::Resize(w, h))) => app.update(Action::Resize(w, h)),
                    Some(Ok(_)) => Control::Continue,
                    Some(Err(e)) => return Err(e),
                    None => Control::Quit,
                };
                dirty = true;
                if control == Control::Quit {
                    if stopping.is_some() || !app.cancel_in_flight() {
                        break;
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
                break;
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
    }
    Ok(())
}
