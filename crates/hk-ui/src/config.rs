//! The console's user config: `$XDG_CONFIG_HOME/hk-console/config.yaml`.
//!
//! Owns: reading `theme:` and `keys:` (per screen, key -> action) over the defaults.
//! Lenient like themes: a bad entry is a [`ConfigWarning`] naming file, line, column and key,
//! shown in the UI; the default binding stays. A missing file is no config.
//! Must not: read anything but this file.
//!
//! ```yaml
//! theme: light
//! keys:
//!   home:
//!     x: quit
//!   run:
//!     ctrl-a: abort
//!   live:
//!     L: back
//! ```

use std::path::{Path, PathBuf};

use hk_engine::yaml::{self, Node};

use super::action::Action;
use super::keymap::{Key, KeyMode, Keymaps};
use super::theme::ThemeWarning;

/// A problem in the config file; the same shape as a theme's.
pub type ConfigWarning = ThemeWarning;

#[derive(Debug, Clone, Default)]
pub struct UiConfig {
    pub theme: Option<String>,
    pub keymaps: Keymaps,
    pub warnings: Vec<ConfigWarning>,
}

/// `$XDG_CONFIG_HOME/hk-console/config.yaml`, else `$HOME/.config/hk-console/config.yaml`.
pub fn config_path() -> Option<PathBuf> {
    super::theme::user_theme_dir().and_then(|themes| themes.parent().map(|d| d.join("config.yaml")))
}

impl UiConfig {
    /// Read `path`; a missing file gives the defaults and no warning.
    pub fn load(path: &Path) -> UiConfig {
        match hk_engine::repo::read::read_to_string(path) {
            Ok(text) => Self::parse(&path.display().to_string(), &text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => UiConfig::default(),
            Err(e) => UiConfig {
                warnings: vec![warn(
                    &path.display().to_string(),
                    None,
                    "",
                    format!("cannot read: {e}"),
                )],
                ..UiConfig::default()
            },
        }
    }

    pub fn parse(file: &str, text: &str) -> UiConfig {
        let mut cfg = UiConfig::default();
        let root = match yaml::parse_one(text) {
            Ok(n) => n,
            Err(e) => {
                cfg.warnings.push(ThemeWarning {
                    file: file.into(),
                    line: e.mark.line,
                    col: e.mark.col,
                    key: String::new(),
                    message: format!("not YAML ({}); using the defaults", e.message),
                });
                return cfg;
            }
        };
        if root.is_null() {
            return cfg;
        }
        let Some(entries) = root.as_map() else {
            cfg.warnings.push(warn(
                file,
                Some(&root),
                "",
                "expected a mapping (theme:, keys:)".into(),
            ));
            return cfg;
        };
        for (k, v) in entries {
            match k.as_key().as_deref() {
                Some("theme") => match v.as_str() {
                    Some(t) => cfg.theme = Some(t.to_string()),
                    None => cfg.warnings.push(warn(
                        file,
                        Some(v),
                        "theme",
                        "expected a theme name".into(),
                    )),
                },
                Some("keys") => cfg.parse_keys(file, v),
                other => cfg.warnings.push(warn(
                    file,
                    Some(k),
                    other.unwrap_or(""),
                    "unknown setting (known: theme, keys)".into(),
                )),
            }
        }
        cfg
    }

    fn parse_keys(&mut self, file: &str, node: &Node) {
        let Some(modes) = node.as_map() else {
            self.warnings.push(warn(
                file,
                Some(node),
                "keys",
                "expected a mapping of screen: {key: action}".into(),
            ));
            return;
        };
        for (mk, mv) in modes {
            let name = mk.as_key().unwrap_or_default();
            let mode = match name.as_str() {
                "home" => KeyMode::Home,
                "run" => KeyMode::Run,
                "live" => KeyMode::Live,
                "check" => KeyMode::Check,
                _ => {
                    self.warnings.push(warn(
                        file,
                        Some(mk),
                        &name,
                        "unknown screen (known: home, run, live, check)".into(),
                    ));
                    continue;
                }
            };
            let Some(binds) = mv.as_map() else {
                self.warnings.push(warn(
                    file,
                    Some(mv),
                    &name,
                    "expected a mapping of key: action".into(),
                ));
                continue;
            };
            for (kk, kv) in binds {
                let key_text = kk.as_key().unwrap_or_default();
                let key = match Key::parse(&key_text) {
                    Ok(k) => k,
                    Err(m) => {
                        self.warnings.push(warn(
                            file,
                            Some(kk),
                            &format!("keys.{name}.{key_text}"),
                            m.to_string(),
                        ));
                        continue;
                    }
                };
                let action = kv.as_str().and_then(|a| {
                    serde_json::from_value::<Action>(serde_json::Value::String(a.into())).ok()
                });
                match (action, self.keymaps.maps.get_mut(&mode)) {
                    (Some(a), Some(map)) => map.bind(key, a),
                    (None, _) => self.warnings.push(warn(
                        file,
                        Some(kv),
                        &format!("keys.{name}.{key_text}"),
                        format!(
                            "`{}` is not an action (e.g. quit, back, help, command-line, start-run, abort, retry, skip, filter, toggle-follow)",
                            kv.as_str().unwrap_or("?")
                        ),
                    )),
                    (Some(_), None) => {}
                }
            }
        }
    }
}

fn warn(file: &str, node: Option<&Node>, key: &str, message: String) -> ConfigWarning {
    ThemeWarning {
        file: file.into(),
        line: node.map_or(0, |n| n.mark.line),
        col: node.map_or(0, |n| n.mark.col),
        key: key.into(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bindings_override_and_bad_entries_warn_with_position() {
        let cfg = UiConfig::parse(
            "config.yaml",
            "theme: light\nkeys:\n  run:\n    x: abort\n    y: fly\n  nowhere:\n    q: quit\n",
        );
        assert_eq!(cfg.theme.as_deref(), Some("light"));
        let run = cfg.keymaps.get(KeyMode::Run).expect("run");
        assert_eq!(run.get(&Key::plain('x')), Some(&Action::Abort));
        // Defaults stay.
        assert_eq!(run.get(&Key::plain('s')), Some(&Action::StartRun));
        let w: Vec<String> = cfg.warnings.iter().map(|w| w.to_string()).collect();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].starts_with("config.yaml:5:8: key `keys.run.y`: `fly` is not an action"),
            "{}",
            w[0]
        );
        assert!(
            w[1].starts_with("config.yaml:6:3: key `nowhere`: unknown screen"),
            "{}",
            w[1]
        );
    }

    #[test]
    fn internal_actions_cannot_be_bound() {
        let cfg = UiConfig::parse("c.yaml", "keys:\n  home:\n    t: tick\n");
        assert_eq!(cfg.warnings.len(), 1);
    }
}
