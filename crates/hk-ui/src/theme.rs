//! Colour themes: semantic slots, the built-in themes, user overrides, NO_COLOR.
//!
//! Owns: the [`Theme`] the views draw with, loading `themes/*.yaml` (embedded at build time
//! by build/embed.rs) and `$XDG_CONFIG_HOME/hk-console/themes/*.yaml` (a user file of the same
//! name replaces a built-in), and the warnings a bad file produces.
//! Lenient by design (unlike runbooks): a bad theme file never stops the console. Each bad
//! key is a [`ThemeWarning`] naming the file, line, column and key, and that slot falls back
//! to the default theme's colour; a file that is not YAML at all falls back whole.
//! Must not: read anything but theme files; know any screen.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use ratatui::style::{Color, Modifier, Style};

use hk_engine::yaml::{self, Value};

mod table {
    include!(concat!(env!("OUT_DIR"), "/embedded.rs"));
}

/// The built-in theme files as `(file name, text)`.
pub fn builtin_files() -> &'static [(&'static str, &'static str)] {
    table::THEMES
}

/// The name of the theme used when none is asked for.
pub const DEFAULT_THEME: &str = "default";

macro_rules! slots {
    ($($slot:ident: $doc:literal),* $(,)?) => {
        /// Semantic colours. Views ask for a meaning (`ok`, `mutating`), never a colour.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct Palette { $(#[doc = $doc] pub $slot: Color,)* }

        /// Every slot name a theme file may set.
        pub const SLOTS: &[&str] = &[$(stringify!($slot)),*];

        impl Palette {
            fn slot_mut(&mut self, name: &str) -> Option<&mut Color> {
                match name { $(stringify!($slot) => Some(&mut self.$slot),)* _ => None }
            }
        }
    };
}

slots! {
    text: "ordinary text",
    muted: "secondary text: hints, ages, pending steps",
    background: "the screen's background",
    border: "pane borders",
    title: "pane titles",
    focus: "the focused pane's border and the selected row",
    selection: "the selected row's background",
    ok: "done, healthy, on the VIP",
    warn: "stale, awaiting the operator, degraded",
    critical: "failed, single-node dependency, eviction loop, errors",
    unknown: "a live rule could not decide, or a source could not look",
    running: "work in flight",
    mutating: "marks steps and runbooks that change systems",
    read_only: "marks steps and runbooks that change nothing",
    banner_fg: "the observe-mode banner's text",
    banner_bg: "the observe-mode banner's background",
}

/// A palette ready to draw with (or without colour).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Theme {
    pub name: String,
    pub palette: Palette,
    /// NO_COLOR: every style is plain text attributes only.
    pub no_color: bool,
}

/// Something wrong with a theme file; the console keeps going with a fallback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThemeWarning {
    pub file: String,
    pub line: usize,
    pub col: usize,
    /// The key at fault, or empty when the whole file is.
    pub key: String,
    pub message: String,
}

impl fmt::Display for ThemeWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(
                f,
                "{}:{}:{}: {}",
                self.file, self.line, self.col, self.message
            )
        } else {
            write!(
                f,
                "{}:{}:{}: key `{}`: {}",
                self.file, self.line, self.col, self.key, self.message
            )
        }
    }
}

/// The palette of the built-in default theme, in code so there is always one to fall back
/// to even if themes/default.yaml were broken.
pub fn fallback_palette() -> Palette {
    Palette {
        text: Color::Gray,
        muted: Color::DarkGray,
        background: Color::Reset,
        border: Color::DarkGray,
        title: Color::Cyan,
        focus: Color::LightCyan,
        selection: Color::Rgb(0x26, 0x32, 0x38),
        ok: Color::Green,
        warn: Color::Yellow,
        critical: Color::LightRed,
        unknown: Color::Rgb(0xaf, 0x87, 0xff),
        running: Color::LightBlue,
        mutating: Color::LightMagenta,
        read_only: Color::Cyan,
        banner_fg: Color::Black,
        banner_bg: Color::Yellow,
    }
}

/// Why a theme slot's value is not a colour.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ColorError {
    #[error("`{text}` is not a #rrggbb colour")]
    NotHex {
        text: String,
        #[source]
        source: Option<std::num::ParseIntError>,
    },
    #[error("`{text}` is not a colour (use #rrggbb or a name such as red, light-blue, dark-gray, reset)")]
    UnknownName { text: String },
    #[error("expected a colour string")]
    NotAString,
}

/// A colour as theme files write it: a name (`red`, `light-blue`, `dark-gray`, `reset`) or
/// `#rrggbb`.
pub fn parse_color(s: &str) -> Result<Color, ColorError> {
    let t = s.trim();
    if let Some(hex) = t.strip_prefix('#') {
        let not_hex = |source| ColorError::NotHex {
            text: t.to_string(),
            source,
        };
        if hex.len() == 6 && hex.chars().all(|c| c.is_ascii_hexdigit()) {
            let byte =
                |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).map_err(|e| not_hex(Some(e)));
            return Ok(Color::Rgb(byte(0)?, byte(2)?, byte(4)?));
        }
        return Err(not_hex(None));
    }
    let name: String = t
        .chars()
        .filter(|c| *c != '-' && *c != '_' && *c != ' ')
        .collect::<String>()
        .to_ascii_lowercase();
    Ok(match name.as_str() {
        "reset" | "default" => Color::Reset,
        "black" => Color::Black,
        "red" => Color::Red,
        "green" => Color::Green,
        "yellow" => Color::Yellow,
        "blue" => Color::Blue,
        "magenta" => Color::Magenta,
        "cyan" => Color::Cyan,
        "gray" | "grey" => Color::Gray,
        "darkgray" | "darkgrey" => Color::DarkGray,
        "lightred" => Color::LightRed,
        "lightgreen" => Color::LightGreen,
        "lightyellow" => Color::LightYellow,
        "lightblue" => Color::LightBlue,
        "lightmagenta" => Color::LightMagenta,
        "lightcyan" => Color::LightCyan,
        "white" => Color::White,
        _ => {
            return Err(ColorError::UnknownName {
                text: t.to_string(),
            })
        }
    })
}

/// Parse one theme file over `base`: every good slot replaces base's, every bad one warns.
/// `file` is the name to put in warnings.
pub fn parse_theme(file: &str, text: &str, base: Palette) -> (Palette, Vec<ThemeWarning>) {
    let mut palette = base;
    let mut warnings = Vec::new();
    let warn = |line, col, key: &str, message: String| ThemeWarning {
        file: file.to_string(),
        line,
        col,
        key: key.to_string(),
        message,
    };
    let root = match yaml::parse_one(text) {
        Ok(n) => n,
        Err(e) => {
            warnings.push(warn(
                e.mark.line,
                e.mark.col,
                "",
                format!("not YAML ({}); using the default theme", e.message),
            ));
            return (base, warnings);
        }
    };
    let Some(entries) = root.as_map() else {
        warnings.push(warn(
            root.mark.line,
            root.mark.col,
            "",
            "expected a mapping of slot: colour; using the default theme".into(),
        ));
        return (base, warnings);
    };
    for (k, v) in entries {
        let Some(key) = k.as_key() else {
            warnings.push(warn(
                k.mark.line,
                k.mark.col,
                "",
                "expected a slot name".into(),
            ));
            continue;
        };
        if key == "name" || key == "description" {
            continue;
        }
        let Some(slot) = palette.slot_mut(&key) else {
            warnings.push(warn(
                k.mark.line,
                k.mark.col,
                &key,
                format!("unknown slot (known: {})", SLOTS.join(", ")),
            ));
            continue;
        };
        let parsed = match &v.value {
            Value::Str(s) => parse_color(s),
            _ => Err(ColorError::NotAString),
        };
        match parsed {
            Ok(c) => *slot = c,
            Err(m) => warnings.push(warn(
                v.mark.line,
                v.mark.col,
                &key,
                format!("{m}; using the default colour"),
            )),
        }
    }
    (palette, warnings)
}

/// Where user themes live: `$XDG_CONFIG_HOME/hk-console/themes`, else
/// `$HOME/.config/hk-console/themes`.
pub fn user_theme_dir() -> Option<PathBuf> {
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    let base = xdg.or_else(|| {
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(|h| PathBuf::from(h).join(".config"))
    })?;
    Some(base.join("hk-console").join("themes"))
}

/// Every theme by name: the built-ins, then the user directory's files over them.
#[derive(Debug, Clone, Default)]
pub struct ThemeSet {
    /// name -> (file shown in warnings, text)
    files: BTreeMap<String, (String, String)>,
    /// Problems reading the user directory itself.
    pub read_warnings: Vec<ThemeWarning>,
}

impl ThemeSet {
    /// The built-in themes only.
    pub fn builtin() -> Self {
        let mut set = ThemeSet::default();
        for (file, text) in builtin_files() {
            set.insert(&format!("themes/{file}"), file, text);
        }
        set
    }

    /// The built-ins with `dir`'s `*.yaml` over them (a missing dir adds nothing).
    pub fn with_user_dir(dir: Option<&Path>) -> Self {
        let mut set = Self::builtin();
        let Some(dir) = dir else { return set };
        let Ok(entries) = std::fs::read_dir(dir) else {
            return set;
        };
        let mut paths: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
        paths.sort();
        for p in paths {
            let is_yaml = p.extension().is_some_and(|e| e == "yaml" || e == "yml");
            let Some(file) = p.file_name().and_then(|f| f.to_str()) else {
                continue;
            };
            if !is_yaml {
                continue;
            }
            match hk_engine::repo::read::read_to_string(&p) {
                Ok(text) => set.insert(&p.display().to_string(), file, &text),
                Err(e) => set.read_warnings.push(ThemeWarning {
                    file: p.display().to_string(),
                    line: 0,
                    col: 0,
                    key: String::new(),
                    message: format!("cannot read: {e}"),
                }),
            }
        }
        set
    }

    fn insert(&mut self, shown: &str, file: &str, text: &str) {
        let name = file
            .trim_end_matches(".yaml")
            .trim_end_matches(".yml")
            .to_string();
        self.files
            .insert(name, (shown.to_string(), text.to_string()));
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }

    /// Theme `name`, with the warnings its file produced. An unknown name warns and gives the
    /// default. `no_color` comes from [`no_color_env`] in the app.
    pub fn load(&self, name: &str, no_color: bool) -> (Theme, Vec<ThemeWarning>) {
        let mut warnings = self.read_warnings.clone();
        let base = match self.files.get(DEFAULT_THEME) {
            Some((file, text)) if name != DEFAULT_THEME => {
                // The default's own problems are reported when it is the one asked for.
                parse_theme(file, text, fallback_palette()).0
            }
            _ => fallback_palette(),
        };
        let (palette, name) = match self.files.get(name) {
            Some((file, text)) => {
                let (p, w) = parse_theme(file, text, base);
                warnings.extend(w);
                (p, name.to_string())
            }
            None => {
                warnings.push(ThemeWarning {
                    file: format!("{name}.yaml"),
                    line: 0,
                    col: 0,
                    key: String::new(),
                    message: format!(
                        "no theme named `{name}` (have: {}); using the default theme",
                        self.names().collect::<Vec<_>>().join(", ")
                    ),
                });
                (base, DEFAULT_THEME.to_string())
            }
        };
        (
            Theme {
                name,
                palette,
                no_color,
            },
            warnings,
        )
    }
}

/// NO_COLOR (https://no-color.org): present and not empty disables colour.
pub fn no_color_env() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

impl Theme {
    /// The built-in default, for tests and as the first frame's theme.
    pub fn fallback() -> Theme {
        Theme {
            name: DEFAULT_THEME.into(),
            palette: fallback_palette(),
            no_color: false,
        }
    }

    fn fg(&self, c: Color) -> Style {
        if self.no_color {
            Style::default()
        } else {
            Style::default().fg(c)
        }
    }

    pub fn text(&self) -> Style {
        self.fg(self.palette.text)
    }
    pub fn muted(&self) -> Style {
        if self.no_color {
            Style::default().add_modifier(Modifier::DIM)
        } else {
            self.fg(self.palette.muted)
        }
    }
    pub fn border(&self) -> Style {
        self.fg(self.palette.border)
    }
    pub fn title(&self) -> Style {
        self.fg(self.palette.title).add_modifier(Modifier::BOLD)
    }
    pub fn focus(&self) -> Style {
        self.fg(self.palette.focus).add_modifier(Modifier::BOLD)
    }
    /// The selected row: reversed without colour so it still shows.
    pub fn selected(&self) -> Style {
        if self.no_color {
            Style::default().add_modifier(Modifier::REVERSED)
        } else {
            Style::default()
                .bg(self.palette.selection)
                .fg(self.palette.focus)
                .add_modifier(Modifier::BOLD)
        }
    }
    pub fn ok(&self) -> Style {
        self.fg(self.palette.ok)
    }
    pub fn warn(&self) -> Style {
        self.fg(self.palette.warn)
    }
    pub fn critical(&self) -> Style {
        self.fg(self.palette.critical).add_modifier(Modifier::BOLD)
    }
    /// A live rule that could not decide, or a source that could not look.
    pub fn unknown(&self) -> Style {
        self.fg(self.palette.unknown)
    }
    /// The slot of a live verdict's severity.
    pub fn severity(&self, s: hk_engine::checks::live::Severity) -> Style {
        use hk_engine::checks::live::Severity;
        match s {
            Severity::Ok => self.ok(),
            Severity::Warn => self.warn(),
            Severity::Critical => self.critical(),
            Severity::Unknown => self.unknown(),
        }
    }
    pub fn running(&self) -> Style {
        self.fg(self.palette.running)
    }
    pub fn mutating(&self) -> Style {
        self.fg(self.palette.mutating)
    }
    pub fn read_only(&self) -> Style {
        self.fg(self.palette.read_only)
    }
    pub fn banner(&self) -> Style {
        if self.no_color {
            Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD)
        } else {
            Style::default()
                .fg(self.palette.banner_fg)
                .bg(self.palette.banner_bg)
                .add_modifier(Modifier::BOLD)
        }
    }
    pub fn background(&self) -> Style {
        if self.no_color {
            Style::default()
        } else {
            Style::default().bg(self.palette.background)
        }
    }
}
