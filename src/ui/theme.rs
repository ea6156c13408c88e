//! Themes: semantic colour slots over a palette, loaded from `themes/*.toml` (all embedded),
//! or a file whose slots layer over the default. Degrades for 256/16-colour terminals and
//! `NO_COLOR`; `ascii` swaps box and block glyphs for plain characters.

use std::path::Path;

use ratatui::style::{Color, Modifier, Style};

pub const BUILTIN: &[(&str, &str)] = &[
    ("default", include_str!("../../themes/default.toml")),
    ("light", include_str!("../../themes/light.toml")),
    ("high-contrast", include_str!("../../themes/high-contrast.toml")),
    ("colorblind", include_str!("../../themes/colorblind.toml")),
    ("mono", include_str!("../../themes/mono.toml")),
];

/// How many colours the terminal shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    TrueColor,
    Ansi256,
    Ansi16,
    Mono,
}

impl Depth {
    /// From the environment: `NO_COLOR`, `COLORTERM`, `TERM`.
    pub fn detect() -> Self {
        let var = |k: &str| std::env::var(k).unwrap_or_default();
        if std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) {
            Self::Mono
        } else if matches!(var("COLORTERM").as_str(), "truecolor" | "24bit") {
            Self::TrueColor
        } else if var("TERM").contains("256") {
            Self::Ansi256
        } else {
            Self::Ansi16
        }
    }
}

macro_rules! slots {
    ($($name:ident),+ $(,)?) => {
        /// The semantic colour slots every theme file may set.
        #[derive(Debug, Clone, PartialEq)]
        pub struct Colors { $(pub $name: Color),+ }
        pub const SLOTS: &[&str] = &[$(stringify!($name)),+];
        impl Colors {
            fn slot_mut(&mut self, key: &str) -> Option<&mut Color> {
                match key { $(stringify!($name) => Some(&mut self.$name),)+ _ => None }
            }
            fn map(&mut self, f: impl Fn(Color) -> Color) {
                $(self.$name = f(self.$name);)+
            }
        }
    };
}

slots!(
    text,
    dim,
    header_fg,
    header_bg,
    simulated,
    border,
    title,
    selection_fg,
    selection_bg,
    util_low,
    util_mid,
    util_high,
    mig_free_instance,
    free_slice,
    unusable_slice,
    ok,
    warning,
    danger,
    accent,
);

#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub name: String,
    pub c: Colors,
    /// No colour: selection and header use reverse video, bars rely on glyphs.
    pub mono: bool,
    pub ascii: bool,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: {key}{}: {why}", value.as_ref().map(|v| format!(" = {v}")).unwrap_or_default())]
pub struct ThemeError {
    pub file: String,
    pub key: String,
    pub value: Option<String>,
    pub why: String,
}

impl Theme {
    /// The embedded default theme at full colour.
    pub fn default_theme() -> Self {
        let mut c = Colors::placeholder();
        // The embedded default is tested to load; fall back to the placeholder palette if not.
        let _ = layer(&mut c, BUILTIN[0].1, "themes/default.toml");
        Self { name: "default".into(), c, mono: false, ascii: false }
    }

    /// A built-in name or a file path; files layer over the default. Then adapt to `depth`.
    pub fn load(name_or_path: Option<&str>, depth: Depth, ascii: bool) -> Result<Self, ThemeError> {
        // Without colour (NO_COLOR) the theme asked for is not drawn, but a missing or broken
        // one is still an error: the same config must not pass on one terminal and fail on
        // the next.
        if depth == Depth::Mono
            && let Some(n) = name_or_path
        {
            Self::load(Some(n), Depth::TrueColor, ascii)?;
        }
        let mut theme = Self::default_theme();
        let wanted = match depth {
            Depth::Mono => Some("mono"),
            _ => name_or_path,
        };
        if let Some(n) = wanted {
            theme.name = n.to_string();
            match BUILTIN.iter().find(|(b, _)| *b == n) {
                Some((b, text)) => layer(&mut theme.c, text, &format!("themes/{b}.toml"))?,
                None => {
                    let path = Path::new(n);
                    let text = crate::files::read_text(path, crate::files::CONFIG_LIMIT).map_err(|e| ThemeError {
                        file: n.into(),
                        key: "(file)".into(),
                        value: None,
                        why: format!(
                            "{e}; built-in themes: {}",
                            BUILTIN.iter().map(|(b, _)| *b).collect::<Vec<_>>().join(", ")
                        ),
                    })?;
                    layer(&mut theme.c, &text, n)?;
                }
            }
        }
        theme.mono = depth == Depth::Mono || theme.name == "mono";
        match depth {
            Depth::Ansi256 => theme.c.map(to_256),
            Depth::Ansi16 => theme.c.map(to_16),
            Depth::Mono => theme.c.map(|_| Color::Reset),
            Depth::TrueColor => {}
        }
        theme.ascii = ascii;
        Ok(theme)
    }

    pub fn text(&self) -> Style {
        Style::new().fg(self.c.text)
    }

    pub fn dim(&self) -> Style {
        if self.mono { Style::new().add_modifier(Modifier::DIM) } else { Style::new().fg(self.c.dim) }
    }

    pub fn fg(&self, c: Color) -> Style {
        Style::new().fg(c)
    }

    pub fn header(&self) -> Style {
        if self.mono {
            Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD)
        } else {
            Style::new().fg(self.c.header_fg).bg(self.c.header_bg).add_modifier(Modifier::BOLD)
        }
    }

    pub fn selection(&self) -> Style {
        if self.mono {
            Style::new().add_modifier(Modifier::REVERSED)
        } else {
            Style::new().fg(self.c.selection_fg).bg(self.c.selection_bg)
        }
    }

    pub fn title(&self) -> Style {
        Style::new().fg(self.c.title).add_modifier(Modifier::BOLD)
    }

    pub fn border(&self) -> Style {
        Style::new().fg(self.c.border)
    }

    /// The colour for a utilisation: low under 30 %, high from 70 %.
    pub fn util_color(&self, pct: f64) -> Color {
        if pct < 30.0 {
            self.c.util_low
        } else if pct < 70.0 {
            self.c.util_mid
        } else {
            self.c.util_high
        }
    }
}

impl Colors {
    fn placeholder() -> Self {
        Self {
            text: Color::Reset,
            dim: Color::DarkGray,
            header_fg: Color::Black,
            header_bg: Color::Cyan,
            simulated: Color::Yellow,
            border: Color::DarkGray,
            title: Color::Cyan,
            selection_fg: Color::White,
            selection_bg: Color::Blue,
            util_low: Color::Blue,
            util_mid: Color::Green,
            util_high: Color::Yellow,
            mig_free_instance: Color::DarkGray,
            free_slice: Color::Gray,
            unusable_slice: Color::Magenta,
            ok: Color::Green,
            warning: Color::Yellow,
            danger: Color::Red,
            accent: Color::Magenta,
        }
    }
}

/// Apply a theme file's `[colors]` over `c`; errors name the file, key and value.
pub(crate) fn layer(c: &mut Colors, text: &str, file: &str) -> Result<(), ThemeError> {
    // A bad value is quoted short, as the config's are (a 100 KB value is not echoed whole).
    let err = |key: &str, value: Option<String>, why: &str| ThemeError {
        file: file.into(),
        key: crate::config::shown(key),
        value: value.map(|v| crate::config::shown(&v)),
        why: why.into(),
    };
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| err("(syntax)", None, e.message()))?;
    for (k, v) in &table {
        if k != "colors" {
            return Err(err(k, None, "unknown key; a theme file has one [colors] section"));
        }
        let Some(colors) = v.as_table() else { return Err(err(k, Some(v.to_string()), "expected a [colors] section")) };
        for (slot, value) in colors {
            let key = format!("colors.{slot}");
            let target = c
                .slot_mut(slot)
                .ok_or_else(|| err(&key, None, &format!("unknown slot; slots: {}", SLOTS.join(", "))))?;
            *target = parse_color(value).ok_or_else(|| {
                err(&key, Some(value.to_string()), "expected a colour name, \"#rrggbb\", an index 0-255 or \"reset\"")
            })?;
        }
    }
    Ok(())
}

fn parse_color(v: &toml::Value) -> Option<Color> {
    if let Some(i) = v.as_integer() {
        return u8::try_from(i).ok().map(Color::Indexed);
    }
    let s = v.as_str()?.trim().to_ascii_lowercase();
    if let Some(hex) = s.strip_prefix('#') {
        // Six hex digits exactly (from_str_radix alone takes a sign: `#+fffff`).
        if hex.len() != 6 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let n = u32::from_str_radix(hex, 16).ok()?;
        return Some(Color::Rgb((n >> 16) as u8, (n >> 8) as u8, n as u8));
    }
    if s == "reset" {
        return Some(Color::Reset);
    }
    s.parse::<Color>().ok().filter(|c| !matches!(c, Color::Rgb(..) | Color::Indexed(_)))
}

const ANSI16: [(Color, (u8, u8, u8)); 16] = [
    (Color::Black, (0, 0, 0)),
    (Color::Red, (205, 0, 0)),
    (Color::Green, (0, 205, 0)),
    (Color::Yellow, (205, 205, 0)),
    (Color::Blue, (0, 0, 238)),
    (Color::Magenta, (205, 0, 205)),
    (Color::Cyan, (0, 205, 205)),
    (Color::Gray, (229, 229, 229)),
    (Color::DarkGray, (127, 127, 127)),
    (Color::LightRed, (255, 0, 0)),
    (Color::LightGreen, (0, 255, 0)),
    (Color::LightYellow, (255, 255, 0)),
    (Color::LightBlue, (92, 92, 255)),
    (Color::LightMagenta, (255, 0, 255)),
    (Color::LightCyan, (0, 255, 255)),
    (Color::White, (255, 255, 255)),
];

fn dist(a: (u8, u8, u8), b: (u8, u8, u8)) -> u32 {
    let d = |x: u8, y: u8| (i32::from(x) - i32::from(y)).unsigned_abs();
    d(a.0, b.0).pow(2) * 3 + d(a.1, b.1).pow(2) * 4 + d(a.2, b.2).pow(2) * 2
}

/// The nearest of the 16 ANSI colours.
pub fn to_16(c: Color) -> Color {
    match c {
        Color::Rgb(r, g, b) => ANSI16.iter().min_by_key(|(_, rgb)| dist(*rgb, (r, g, b))).map_or(c, |(n, _)| *n),
        other => other,
    }
}

/// The nearest xterm 256-colour cube or grey entry.
pub fn to_256(c: Color) -> Color {
    let Color::Rgb(r, g, b) = c else { return c };
    let level = |x: u8| {
        if x < 48 {
            0
        } else if x < 115 {
            1
        } else {
            (x - 35) / 40
        }
    };
    let cube = 16 + 36 * level(r) + 6 * level(g) + level(b);
    let steps = [0u8, 95, 135, 175, 215, 255];
    let cube_rgb = (steps[usize::from(level(r))], steps[usize::from(level(g))], steps[usize::from(level(b))]);
    let avg = ((u16::from(r) + u16::from(g) + u16::from(b)) / 3) as u8;
    let gi = if avg < 8 { 0 } else { ((avg - 8) / 10).min(23) };
    let grey = 8 + gi * 10;
    if dist((grey, grey, grey), (r, g, b)) < dist(cube_rgb, (r, g, b)) {
        Color::Indexed(232 + gi)
    } else {
        Color::Indexed(cube)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_theme_loads_and_sets_every_slot() {
        for (name, text) in BUILTIN {
            let mut c = Colors::placeholder();
            c.map(|_| Color::Indexed(254));
            assert_eq!(layer(&mut c, text, name), Ok(()));
            let t = Theme { name: (*name).into(), c, mono: false, ascii: false };
            let debug = format!("{:?}", t.c);
            assert!(!debug.contains("Indexed(254)"), "{name} leaves a slot unset: {debug}");
            assert!(Theme::load(Some(name), Depth::TrueColor, false).is_ok());
        }
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("themes");
        let files = std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0);
        assert_eq!(files, BUILTIN.len(), "every file in themes/ is embedded");
    }

    #[test]
    fn partial_files_layer_over_the_default() {
        let mut c = Theme::default_theme().c;
        assert_eq!(layer(&mut c, "[colors]\ndanger = \"#010203\"\n", "p.toml"), Ok(()));
        assert_eq!(c.danger, Color::Rgb(1, 2, 3));
        assert_eq!(c.ok, Theme::default_theme().c.ok);
        // Six hex digits or nothing: a sign was read as a number.
        for bad in ["#+fffff", "#-00000", "#ff ff0", "#fffffff"] {
            assert_eq!(parse_color(&toml::Value::String(bad.into())), None, "{bad}");
        }
    }

    #[test]
    fn bad_theme_files_name_the_key() {
        let mut c = Theme::default_theme().c;
        let e = layer(&mut c, "[colors]\ndanger = \"blurple\"\n", "bad.toml").map_err(|e| e.to_string());
        assert_eq!(
            e,
            Err("bad.toml: colors.danger = \"blurple\": expected a colour name, \"#rrggbb\", an index 0-255 or \"reset\"".into())
        );
        let e = layer(&mut c, "[colors]\ndangr = \"red\"\n", "bad.toml").map_err(|e| e.to_string());
        assert!(e.is_err_and(|e| e.starts_with("bad.toml: colors.dangr: unknown slot")));
        assert!(Theme::load(Some("/nonexistent/theme.toml"), Depth::TrueColor, false).is_err());
        // Without colour too (NO_COLOR ignored a missing theme).
        assert!(Theme::load(Some("/nonexistent/theme.toml"), Depth::Mono, false).is_err());
        assert!(Theme::load(Some("light"), Depth::Mono, false).is_ok_and(|t| t.mono));
    }

    #[test]
    fn depth_degrades() {
        let t16 = Theme::load(None, Depth::Ansi16, false).unwrap_or_else(|e| panic!("{e}"));
        let debug = format!("{:?}", t16.c);
        assert!(!debug.contains("Rgb"), "{debug}");
        let mono = Theme::load(Some("light"), Depth::Mono, false).unwrap_or_else(|e| panic!("{e}"));
        assert!(mono.mono);
        assert_eq!(mono.c.danger, Color::Reset);
        assert_eq!(to_16(Color::Rgb(250, 10, 10)), Color::LightRed);
        assert_eq!(to_256(Color::Rgb(0, 0, 0)), Color::Indexed(16));
    }
}
