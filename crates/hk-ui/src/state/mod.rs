//! The console's state, in rooms of its own: what the app keeps and the panes draw.
//!
//! Owns: the types of each concern: the screens and their focus ([`screens`]), the open run
//! ([`run`]), the overlays and their modals ([`overlay`], [`field`]), the look overlay
//! ([`look`]), the host picker ([`picker`]), the take-over modal ([`takeover`]) and the
//! Check screen's result ([`check`]).
//! Must not: import `app`, `panes` or `view`: the app changes these, the panes read them
//! through the small views the app lends them, so no module reaches back.
pub mod check;
pub mod field;
pub mod look;
pub mod overlay;
pub mod picker;
pub mod run;
pub mod screens;
pub mod takeover;
