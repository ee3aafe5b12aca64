//! The terminal owner.
//!
//! Owns: raw mode, the alternate screen and mouse capture ([`Tui`]: entered on
//! construction, restored by [`Tui::exit`], on `Drop`, and by the panic hook, which
//! `session::supervise` chains: the children are stopped first, then the terminal is
//! restored before the panic report prints).
//! Must not: hold UI state (that is `ui::app::App`), run the event loop (that is
//! `ui::event_loop`), or know the run.

use std::io::{self, Stdout};

use crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use crossterm::{cursor, execute};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

/// The terminal, in raw mode on the alternate screen while this value lives.
pub struct Tui {
    pub terminal: Terminal<CrosstermBackend<Stdout>>,
    active: bool,
}

/// The panic hook's restore: its error has nowhere to go but the report after it.
fn restore_for_panic() {
    let _ = restore();
}

/// Put the terminal back as we found it. Safe to call more than once.
pub fn restore() -> io::Result<()> {
    let raw = disable_raw_mode();
    let screen = write_restore(&mut io::stdout());
    raw.and(screen)
}

/// What goes to the terminal to give it back: mouse reports off (a shell left with them
/// on prints escape codes for every click), the main screen, the cursor. One sequence for
/// every way out: quit, drop, panic, suspend.
pub fn write_restore(w: &mut impl io::Write) -> io::Result<()> {
    execute!(w, DisableMouseCapture, LeaveAlternateScreen, cursor::Show)
}

impl Tui {
    pub fn enter() -> io::Result<Tui> {
        hk_session::supervise::install_panic_hook(restore_for_panic);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_restore_sequence_turns_mouse_reporting_off() {
        let mut out: Vec<u8> = Vec::new();
        write_restore(&mut out).expect("written");
        let text = String::from_utf8(out).expect("ascii");
        // Every mouse mode enable_mouse_capture turns on is turned off again (normal,
        // button, any-event tracking; the SGR and urxvt encodings).
        for off in [
            "\x1b[?1000l",
            "\x1b[?1002l",
            "\x1b[?1003l",
            "\x1b[?1006l",
            "\x1b[?1015l",
        ] {
            assert!(text.contains(off), "{off:?} missing from {text:?}");
        }
        // The main screen back and the cursor shown, after the mouse is off.
        let leave = text
            .find("\x1b[?1049l")
            .expect("leaves the alternate screen");
        let mouse = text.find("\x1b[?1000l").expect("mouse off");
        assert!(mouse < leave, "{text:?}");
        assert!(text.ends_with("\x1b[?25h"), "{text:?}");
    }
}
