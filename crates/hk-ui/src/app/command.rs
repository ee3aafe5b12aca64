//! The `:` command line: what each command does, and Tab's completion.
//!
//! Owns: the commands (`run`, `env`, `theme`, `fault`, `observe`, `live`, `help`,
//! `messages`, `check`, `q`) and their completion. Must not: read keys (the command
//! overlay's handler in `keys` hands the line over) or draw.

use super::{App, Control, Overlay, Screen};
use crate::action::Action;

/// The `:` commands, for Tab.
const COMMANDS: &[&str] = &[
    "run", "env", "theme", "check", "observe", "live", "fault", "help", "messages", "q",
];

impl App {
    pub(super) fn command(&mut self, line: &str) -> Control {
        let mut words = line.split_whitespace();
        let cmd = words.next().unwrap_or("");
        let arg = words.next();
        let arg2 = words.next();
        let arg3 = words.next();
        // A refusal closes the prompt (the keys after it go to the screen again) and says
        // why on the status line; the next `:` brings the line back to be fixed.
        let fail = |app: &mut App, msg: String| {
            app.overlay = None;
            app.status = Some(format!("✗ :{}: {msg}", line.trim()));
            app.refused_command = Some((line.to_string(), msg));
        };
        self.refused_command = None;
        match (cmd, arg) {
            ("q" | "quit" | "q!", _) => return self.update(Action::Quit),
            ("run", Some(id)) => match arg3 {
                Some(host) => self.open_runbook(id, arg2, Some(host)),
                None => self.open_runbook_or_pick(id, arg2),
            },
            ("run", None) => fail(self, "usage: :run RUNBOOK [ENV [HOST]]".into()),
            ("env", Some(name)) => {
                if self.envs.iter().any(|e| e.name == name) {
                    self.current_env = Some(name.to_string());
                    self.env_chosen = true;
                    self.status = Some(format!("environment: {name}"));
                } else {
                    let have: Vec<&str> = self.envs.iter().map(|e| e.name.as_str()).collect();
                    fail(
                        self,
                        format!("no environment `{name}` (have: {})", have.join(", ")),
                    );
                }
            }
            ("theme", Some(name)) => {
                let (theme, warnings) = self.themes.load(name, self.theme.no_color);
                self.theme = theme;
                self.theme_warnings = warnings;
                // With warnings, leave the status line to them.
                self.status = self
                    .theme_warnings
                    .is_empty()
                    .then(|| format!("theme: {}", self.theme.name));
            }
            ("fault", _) => {
                let rest: Vec<&str> = line.split_whitespace().skip(2).collect();
                if let Err(msg) = self.fault(arg, &rest.join(" ")) {
                    fail(self, msg);
                }
            }
            ("observe", _) => self.enter_observe(),
            ("live", _) => {
                if self.screen != Screen::Live {
                    self.toggle_live();
                }
            }
            ("help", _) => {
                self.help_scroll = 0;
                self.overlay = Some(Overlay::Help)
            }
            ("messages" | "msg", _) => self.open_messages(),
            ("check", _) => {
                if self.checker.is_none() {
                    fail(self, "no repo to check".into());
                } else {
                    self.run_check();
                    self.open_check();
                    self.status = Some(match &self.check.findings {
                        Some(Ok(f)) => hk_engine::checks::parity::summary(f),
                        Some(Err(e)) => format!("the check could not run: {e}"),
                        None => "the check did not run".into(),
                    });
                }
            }
            ("", _) => {}
            _ => fail(
                self,
                format!(
                    "unknown command `{}`: try run, env, theme, check, observe, live, help{}, q",
                    line.trim(),
                    if self.faults.is_some() { ", fault" } else { "" }
                ),
            ),
        }
        Control::Continue
    }

    /// `:fault ENV FAULT [ARG]`: to the simulation's fault injector, never in observe mode.
    /// Ok: what happened is on the status line; Err: the message for the command line.
    fn fault(&mut self, env: Option<&str>, words: &str) -> Result<(), String> {
        let Some(sink) = self.faults.clone() else {
            // Wording only: an observe console holds no sink at all.
            return Err(if self.is_observe() {
                "observe mode changes nothing, not even the simulation".into()
            } else {
                "`:fault` works only in the simulated demo (hk-console demo)".into()
            });
        };
        let Some(env) = env else {
            return Err(sink.usage());
        };
        self.status = Some(sink.inject(env, words).map_err(|e| e.to_string())?);
        Ok(())
    }

    /// What Tab could complete `line` with at the word it ends in.
    pub fn candidates(&self, line: &str) -> Vec<String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let ends_space = line.ends_with(' ') || words.is_empty();
        let (prefix, options): (&str, Vec<String>) = match (words.as_slice(), ends_space) {
            ([], _) => ("", COMMANDS.iter().map(|s| s.to_string()).collect()),
            ([c], false) => (c, COMMANDS.iter().map(|s| s.to_string()).collect()),
            ([c], true) | ([c, _], false) => {
                let prefix = if ends_space { "" } else { words[1] };
                let options = match *c {
                    "run" => self
                        .runbooks
                        .iter()
                        .filter(|r| self.for_this_repo(r))
                        .map(|r| r.id.clone())
                        .collect(),
                    "env" | "fault" => self.envs.iter().map(|e| e.name.clone()).collect(),
                    "theme" => self.themes.names().map(str::to_string).collect(),
                    _ => Vec::new(),
                };
                (prefix, options)
            }
            (["run", _], true) | (["run", _, _], false) => {
                let prefix = if ends_space { "" } else { words[2] };
                (prefix, self.envs.iter().map(|e| e.name.clone()).collect())
            }
            (["fault", _], true) | (["fault", _, _], false) => {
                let prefix = if ends_space { "" } else { words[2] };
                let options = self
                    .faults
                    .as_ref()
                    .map(|f| f.fault_names())
                    .unwrap_or_default();
                (prefix, options)
            }
            _ => ("", Vec::new()),
        };
        options
            .into_iter()
            .filter(|o| o.starts_with(prefix))
            .collect()
    }

    /// Tab on the command line: complete the command, then its argument (`:fault`: its
    /// environment, then the fault).
    pub fn complete(&self, line: &str) -> String {
        let words: Vec<&str> = line.split_whitespace().collect();
        let ends_space = line.ends_with(' ');
        let pick = |prefix: &str, options: Vec<String>| -> Option<String> {
            let m: Vec<String> = options
                .into_iter()
                .filter(|o| o.starts_with(prefix))
                .collect();
            match m.as_slice() {
                [one] => Some(one.clone()),
                [] => None,
                many => {
                    // The longest common prefix.
                    let first = &many[0];
                    let len = (0..first.len())
                        .take_while(|&i| {
                            many.iter()
                                .all(|o| o.as_bytes().get(i) == first.as_bytes().get(i))
                        })
                        .count();
                    Some(first[..len].to_string())
                }
            }
        };
        match (words.as_slice(), ends_space) {
            ([], _) => line.to_string(),
            ([c], false) => pick(c, COMMANDS.iter().map(|s| s.to_string()).collect()).map_or(
                line.to_string(),
                |c| {
                    if COMMANDS.contains(&c.as_str()) {
                        format!("{c} ")
                    } else {
                        c
                    }
                },
            ),
            ([c], true) | ([c, _], false) => {
                let prefix = if ends_space { "" } else { words[1] };
                let options: Vec<String> = match *c {
                    "run" => self
                        .runbooks
                        .iter()
                        .filter(|r| self.for_this_repo(r))
                        .map(|r| r.id.clone())
                        .collect(),
                    "env" => self.envs.iter().map(|e| e.name.clone()).collect(),
                    "theme" => self.themes.names().map(str::to_string).collect(),
                    "fault" => self.envs.iter().map(|e| e.name.clone()).collect(),
                    _ => Vec::new(),
                };
                pick(prefix, options).map_or(line.to_string(), |a| format!("{c} {a}"))
            }
            (["fault", env], true) | (["fault", env, _], false) => {
                let prefix = if ends_space { "" } else { words[2] };
                let options = self
                    .faults
                    .as_ref()
                    .map(|f| f.fault_names())
                    .unwrap_or_default();
                pick(prefix, options).map_or(line.to_string(), |a| format!("fault {env} {a}"))
            }
            _ => line.to_string(),
        }
    }
}
