//! Key bindings per screen, and the help overlay's rows generated from them.
//!
//! Owns: [`Key`] (parse/print `ctrl-c`, `?`, `enter`, `pgdn`...), the default [`Keymap`]
//! of each [`KeyMode`], and [`Keymap::help_rows`] so the help cannot drift from the
//! bindings. Text entry (gate modals, the command line) is not keymapped: there the keys are
//! the text, except Enter, Esc and Tab, which the modal owns.
//! Must not: interpret actions.

use std::collections::BTreeMap;
use std::fmt;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::action::Action;

/// One key with its modifiers, as bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub code: KeyCodeOrd,
    pub ctrl: bool,
    pub alt: bool,
}

/// `KeyCode` restricted to what bindings use, ordered for stable help output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyCodeOrd {
    Char(char),
    Enter,
    Esc,
    Tab,
    BackTab,
    Up,
    Down,
    Left,
    Right,
    PageUp,
    PageDown,
    Home,
    End,
}

/// A key binding's text that names no key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a key (e.g. q, ?, ctrl-c, enter, pgdn)")]
pub struct NotAKey {
    pub text: String,
}

impl Key {
    pub const fn plain(c: char) -> Key {
        Key {
            code: KeyCodeOrd::Char(c),
            ctrl: false,
            alt: false,
        }
    }
    pub const fn code(code: KeyCodeOrd) -> Key {
        Key {
            code,
            ctrl: false,
            alt: false,
        }
    }
    pub const fn ctrl(c: char) -> Key {
        Key {
            code: KeyCodeOrd::Char(c),
            ctrl: true,
            alt: false,
        }
    }

    /// The binding a terminal key event matches, if it can be bound at all.
    pub fn from_event(ev: &KeyEvent) -> Option<Key> {
        let code = match ev.code {
            KeyCode::Char(c) => KeyCodeOrd::Char(c),
            KeyCode::Enter => KeyCodeOrd::Enter,
            KeyCode::Esc => KeyCodeOrd::Esc,
            KeyCode::Tab => KeyCodeOrd::Tab,
            KeyCode::BackTab => KeyCodeOrd::BackTab,
            KeyCode::Up => KeyCodeOrd::Up,
            KeyCode::Down => KeyCodeOrd::Down,
            KeyCode::Left => KeyCodeOrd::Left,
            KeyCode::Right => KeyCodeOrd::Right,
            KeyCode::PageUp => KeyCodeOrd::PageUp,
            KeyCode::PageDown => KeyCodeOrd::PageDown,
            KeyCode::Home => KeyCodeOrd::Home,
            KeyCode::End => KeyCodeOrd::End,
            _ => return None,
        };
        Some(Key {
            code,
            ctrl: ev.modifiers.contains(KeyModifiers::CONTROL),
            alt: ev.modifiers.contains(KeyModifiers::ALT),
        })
    }

    /// Parse `ctrl-c`, `alt-x`, `?`, `G`, `enter`, `esc`, `tab`, `up`, `pgdn`, `home`...
    pub fn parse(s: &str) -> Result<Key, NotAKey> {
        let mut ctrl = false;
        let mut alt = false;
        let mut rest = s;
        loop {
            if let Some(r) = rest.strip_prefix("ctrl-") {
                ctrl = true;
                rest = r;
            } else if let Some(r) = rest.strip_prefix("alt-") {
                alt = true;
                rest = r;
            } else {
                break;
            }
        }
        let code = match rest {
            "enter" => KeyCodeOrd::Enter,
            "esc" => KeyCodeOrd::Esc,
            "tab" => KeyCodeOrd::Tab,
            "backtab" => KeyCodeOrd::BackTab,
            "up" => KeyCodeOrd::Up,
            "down" => KeyCodeOrd::Down,
            "left" => KeyCodeOrd::Left,
            "right" => KeyCodeOrd::Right,
            "pgup" => KeyCodeOrd::PageUp,
            "pgdn" => KeyCodeOrd::PageDown,
            "home" => KeyCodeOrd::Home,
            "end" => KeyCodeOrd::End,
            "space" => KeyCodeOrd::Char(' '),
            _ => {
                let mut chars = rest.chars();
                match (chars.next(), chars.next()) {
                    (Some(c), None) => KeyCodeOrd::Char(c),
                    _ => {
                        return Err(NotAKey {
                            text: s.to_string(),
                        })
                    }
                }
            }
        };
        Ok(Key { code, ctrl, alt })
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ctrl {
            f.write_str("ctrl-")?;
        }
        if self.alt {
            f.write_str("alt-")?;
        }
        match self.code {
            KeyCodeOrd::Char(' ') => f.write_str("space"),
            KeyCodeOrd::Char(c) => write!(f, "{c}"),
            KeyCodeOrd::Enter => f.write_str("enter"),
            KeyCodeOrd::Esc => f.write_str("esc"),
            KeyCodeOrd::Tab => f.write_str("tab"),
            KeyCodeOrd::BackTab => f.write_str("backtab"),
            KeyCodeOrd::Up => f.write_str("up"),
            KeyCodeOrd::Down => f.write_str("down"),
            KeyCodeOrd::Left => f.write_str("left"),
            KeyCodeOrd::Right => f.write_str("right"),
            KeyCodeOrd::PageUp => f.write_str("pgup"),
            KeyCodeOrd::PageDown => f.write_str("pgdn"),
            KeyCodeOrd::Home => f.write_str("home"),
            KeyCodeOrd::End => f.write_str("end"),
        }
    }
}

/// Which keymap applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyMode {
    Home,
    Run,
    Live,
    Check,
    Help,
}

/// Bindings of one mode.
#[derive(Debug, Clone, Default)]
pub struct Keymap {
    bindings: BTreeMap<Key, Action>,
}

impl Keymap {
    pub fn get(&self, key: &Key) -> Option<&Action> {
        self.bindings.get(key)
    }

    pub fn bind(&mut self, key: Key, action: Action) {
        self.bindings.insert(key, action);
    }

    /// One row per action with every key bound to it, in the order of first binding
    /// appearance in the action's declaration (stable across runs).
    pub fn help_rows(&self) -> Vec<(String, &'static str)> {
        let mut by_action: Vec<(Action, Vec<Key>)> = Vec::new();
        for (k, a) in &self.bindings {
            match by_action.iter_mut().find(|(x, _)| x == a) {
                Some((_, keys)) => keys.push(*k),
                None => by_action.push((a.clone(), vec![*k])),
            }
        }
        by_action.sort_by_key(|(a, _)| action_rank(a));
        by_action
            .into_iter()
            .map(|(a, keys)| {
                let keys: Vec<String> = keys.iter().map(Key::to_string).collect();
                (keys.join(" "), a.describe())
            })
            .collect()
    }
}

fn action_rank(a: &Action) -> usize {
    const ORDER: &[Action] = &[
        Action::Up,
        Action::Down,
        Action::PageUp,
        Action::PageDown,
        Action::Top,
        Action::Bottom,
        Action::FocusNext,
        Action::Open,
        Action::NextEnv,
        Action::StartRun,
        Action::Interrupt,
        Action::Retry,
        Action::Skip,
        Action::Abort,
        Action::ToggleFollow,
        Action::ToggleWrap,
        Action::Observe,
        Action::Live,
        Action::Filter,
        Action::NextMatch,
        Action::PrevMatch,
        Action::Messages,
        Action::CommandLine,
        Action::Help,
        Action::Back,
        Action::Quit,
    ];
    ORDER.iter().position(|x| x == a).unwrap_or(ORDER.len())
}

/// Every mode's keymap.
#[derive(Debug, Clone)]
pub struct Keymaps {
    pub maps: BTreeMap<KeyMode, Keymap>,
}

impl Keymaps {
    pub fn get(&self, mode: KeyMode) -> Option<&Keymap> {
        self.maps.get(&mode)
    }
}

impl Default for Keymaps {
    fn default() -> Self {
        use KeyCodeOrd as C;
        let common = |m: &mut Keymap| {
            m.bind(Key::plain('q'), Action::Quit);
            m.bind(Key::code(C::Esc), Action::Back);
            m.bind(Key::plain('?'), Action::Help);
            m.bind(Key::plain(':'), Action::CommandLine);
            m.bind(Key::plain('k'), Action::Up);
            m.bind(Key::code(C::Up), Action::Up);
            m.bind(Key::plain('j'), Action::Down);
            m.bind(Key::code(C::Down), Action::Down);
            m.bind(Key::code(C::PageUp), Action::PageUp);
            m.bind(Key::code(C::PageDown), Action::PageDown);
            m.bind(Key::plain('g'), Action::Top);
            m.bind(Key::plain('G'), Action::Bottom);
            m.bind(Key::code(C::Tab), Action::FocusNext);
            m.bind(Key::ctrl('c'), Action::Interrupt);
            m.bind(Key::plain('/'), Action::Filter);
            m.bind(Key::plain('M'), Action::Messages);
        };
        let mut home = Keymap::default();
        common(&mut home);
        home.bind(Key::code(C::Enter), Action::Open);
        home.bind(Key::plain('e'), Action::NextEnv);
        home.bind(Key::plain('o'), Action::Observe);
        home.bind(Key::plain('l'), Action::Live);
        home.bind(Key::plain('x'), Action::NextStep);
        home.bind(Key::plain('c'), Action::Check);

        let mut run = Keymap::default();
        common(&mut run);
        // Enter brings back a gate hidden with Esc, or the resume decision.
        run.bind(Key::code(C::Enter), Action::Open);
        run.bind(Key::plain('s'), Action::StartRun);
        run.bind(Key::plain('r'), Action::Retry);
        run.bind(Key::plain('S'), Action::Skip);
        run.bind(Key::plain('A'), Action::Abort);
        run.bind(Key::plain('f'), Action::ToggleFollow);
        run.bind(Key::plain('w'), Action::ToggleWrap);
        run.bind(Key::plain('n'), Action::NextMatch);
        run.bind(Key::plain('N'), Action::PrevMatch);
        run.bind(Key::plain('l'), Action::Live);
        run.bind(Key::plain('x'), Action::NextStep);

        // The Live screen only reads: scroll, switch environment, back.
        let mut live = Keymap::default();
        live.bind(Key::plain('q'), Action::Quit);
        live.bind(Key::code(C::Esc), Action::Back);
        live.bind(Key::plain('l'), Action::Live);
        live.bind(Key::plain('x'), Action::NextStep);
        live.bind(Key::plain('?'), Action::Help);
        live.bind(Key::plain(':'), Action::CommandLine);
        live.bind(Key::plain('k'), Action::Up);
        live.bind(Key::code(C::Up), Action::Up);
        live.bind(Key::plain('j'), Action::Down);
        live.bind(Key::code(C::Down), Action::Down);
        live.bind(Key::code(C::PageUp), Action::PageUp);
        live.bind(Key::code(C::PageDown), Action::PageDown);
        live.bind(Key::plain('g'), Action::Top);
        live.bind(Key::plain('G'), Action::Bottom);
        live.bind(Key::plain('e'), Action::NextEnv);
        live.bind(Key::ctrl('c'), Action::Interrupt);
        live.bind(Key::plain('c'), Action::Check);
        live.bind(Key::plain('M'), Action::Messages);

        // The Check screen only reads too: scroll, filter, back.
        let mut check = Keymap::default();
        check.bind(Key::plain('q'), Action::Quit);
        check.bind(Key::code(C::Esc), Action::Back);
        check.bind(Key::plain('c'), Action::Check);
        check.bind(Key::plain('?'), Action::Help);
        check.bind(Key::plain(':'), Action::CommandLine);
        check.bind(Key::plain('k'), Action::Up);
        check.bind(Key::code(C::Up), Action::Up);
        check.bind(Key::plain('j'), Action::Down);
        check.bind(Key::code(C::Down), Action::Down);
        check.bind(Key::code(C::PageUp), Action::PageUp);
        check.bind(Key::code(C::PageDown), Action::PageDown);
        check.bind(Key::plain('g'), Action::Top);
        check.bind(Key::plain('G'), Action::Bottom);
        check.bind(Key::plain('/'), Action::Filter);
        check.bind(Key::ctrl('c'), Action::Interrupt);
        check.bind(Key::plain('M'), Action::Messages);

        let mut help = Keymap::default();
        help.bind(Key::code(C::Esc), Action::Back);
        help.bind(Key::plain('?'), Action::Back);
        help.bind(Key::plain('q'), Action::Back);
        help.bind(Key::ctrl('c'), Action::Back);
        // Help (and the messages overlay) scroll where the terminal is short.
        help.bind(Key::plain('k'), Action::Up);
        help.bind(Key::code(C::Up), Action::Up);
        help.bind(Key::plain('j'), Action::Down);
        help.bind(Key::code(C::Down), Action::Down);
        help.bind(Key::code(C::PageUp), Action::PageUp);
        help.bind(Key::code(C::PageDown), Action::PageDown);
        help.bind(Key::plain('g'), Action::Top);
        help.bind(Key::plain('G'), Action::Bottom);

        let mut maps = BTreeMap::new();
        maps.insert(KeyMode::Home, home);
        maps.insert(KeyMode::Run, run);
        maps.insert(KeyMode::Live, live);
        maps.insert(KeyMode::Check, check);
        maps.insert(KeyMode::Help, help);
        Keymaps { maps }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_and_print_round_trip() {
        for s in [
            "q", "?", "ctrl-c", "enter", "esc", "pgdn", "G", "alt-x", "space",
        ] {
            let k = Key::parse(s).expect(s);
            assert_eq!(k.to_string(), s);
        }
        assert!(Key::parse("ctrl-").is_err());
        assert!(Key::parse("nope").is_err());
    }

    #[test]
    fn help_lists_every_binding_of_the_mode() {
        let maps = Keymaps::default();
        let run = maps.get(KeyMode::Run).expect("run keymap");
        let rows = run.help_rows();
        let all_keys: String = rows.iter().map(|(k, _)| k.clone() + " ").collect();
        for (k, _) in run.bindings.iter() {
            assert!(all_keys.contains(&k.to_string()), "{k} missing from help");
        }
        assert!(rows.iter().any(|(k, d)| k == "s" && d.contains("start")));
    }
}
