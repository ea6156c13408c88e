//! MIG schedules: windows of the day in a time zone, each with a layout, for a group of cards;
//! which window holds at an instant and the changes over the next hours (DST-aware: a window
//! that starts in a skipped hour starts when the clock resumes; one in a repeated hour starts
//! the first time). Pure: the config builds them; `tessera schedule` and the console read them.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::fleet::{Card, Node};

/// What to do with work still on a card when its change is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Running {
    /// Wait for it to end (the default): the card changes once it is idle.
    Wait,
    /// Preempt eligible training after confirmation; inference is never preempted.
    Preempt,
}

impl Running {
    /// As the config writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Wait => "wait",
            Self::Preempt => "preempt",
        }
    }
}

/// One window: local start and end in minutes after midnight (end ≤ start crosses midnight,
/// and belongs to the day it starts; end 1440 is midnight), the days it starts on (Monday first), the layout.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub name: String,
    pub start_min: u16,
    pub end_min: u16,
    pub days: [bool; 7],
    /// A layout in `repartition`'s text (`whole`, `1g.10gb,1g.10gb`, `3g.40gb@0,...`).
    pub layout: String,
    /// The named mig-parted config it was given as (`all-1g.10gb`), if so.
    pub mig_config: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Schedule {
    pub name: String,
    /// Node name globs (`*`, `?`); empty: every node.
    pub nodes: Vec<String>,
    /// Node labels that must all be there with these values (Kubernetes labels); empty: any.
    pub node_labels: Vec<(String, String)>,
    /// A GPU model (catalog name or as sources write it); `None`: every model.
    pub model: Option<String>,
    pub tz_name: String,
    pub tz: jiff::tz::TimeZone,
    pub windows: Vec<Window>,
    /// Stop new work on a card this long before its change.
    pub lead: Duration,
    /// Never change a card again sooner than this after a change.
    pub min_hold: Duration,
    pub running: Running,
    /// `tessera schedule run` may apply its changes without an operator (never preempting).
    pub unattended: bool,
}

impl PartialEq for Schedule {
    /// The zone by its name: the same name is the same rules.
    fn eq(&self, o: &Self) -> bool {
        (
            &self.name,
            &self.nodes,
            &self.node_labels,
            &self.model,
            &self.tz_name,
            &self.windows,
            self.lead,
            self.min_hold,
            self.running,
            self.unattended,
        ) == (
            &o.name,
            &o.nodes,
            &o.node_labels,
            &o.model,
            &o.tz_name,
            &o.windows,
            o.lead,
            o.min_hold,
            o.running,
            o.unattended,
        )
    }
}

/// A change the schedule makes: at `at` the window `window` begins.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub at: DateTime<Utc>,
    pub window: usize,
}

/// `*` any run of characters, `?` one; everything else itself.
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    // Iterative matching with one backtrack point (the last `*`).
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < t.len() {
        if i < p.len() && (p[i] == '?' || p[i] == t[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

/// Why a window's hours or days did not read; each quotes the text it was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    #[error("{0:?}: expected HH:MM-HH:MM")]
    NotHours(String),
    #[error("{0:?}: expected HH:MM")]
    NotTime(String),
    #[error("{0:?}: bad hour")]
    BadHour(String),
    #[error("{0:?}: bad minute")]
    BadMinute(String),
    #[error("{0:?}: not a time of day")]
    NotTimeOfDay(String),
    #[error("{0:?}: not a day (mon, tue, ... sun)")]
    NotDay(String),
    #[error("no day given")]
    NoDay,
}

/// `"08:00-20:00"` to minutes after midnight; `24:00` is accepted as an end.
pub fn parse_hours(text: &str) -> Result<(u16, u16), WindowError> {
    let (a, b) = text.split_once('-').ok_or_else(|| WindowError::NotHours(text.into()))?;
    let hm = |s: &str, end: bool| -> Result<u16, WindowError> {
        let (h, m) = s.trim().split_once(':').ok_or_else(|| WindowError::NotTime(s.into()))?;
        let (h, m): (u16, u16) = (
            h.parse().map_err(|_| WindowError::BadHour(s.into()))?,
            m.parse().map_err(|_| WindowError::BadMinute(s.into()))?,
        );
        if m > 59 || h > 24 || (h == 24 && (m > 0 || !end)) {
            return Err(WindowError::NotTimeOfDay(s.into()));
        }
        Ok(h * 60 + m)
    };
    // An end at or before the start crosses midnight: `10:00-10:00` is 24 hours from 10:00.
    Ok((hm(a, false)?, hm(b, true)?))
}

const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/// Days a window starts on: names (`mon`), ranges (`mon-fri`, `fri-mon` wraps), or `all`.
pub fn parse_days(items: &[String]) -> Result<[bool; 7], WindowError> {
    let day = |s: &str| {
        let l = s.trim().to_ascii_lowercase();
        DAYS.iter()
            .position(|d| l.starts_with(d) && (l.len() == 3 || DAYS_LONG.contains(&l.as_str())))
            .ok_or_else(|| WindowError::NotDay(s.into()))
    };
    let mut out = [false; 7];
    for item in items {
        if item.eq_ignore_ascii_case("all") {
            out = [true; 7];
            continue;
        }
        match item.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (day(a)?, day(b)?);
                let mut d = a;
                loop {
                    out[d] = true;
                    if d == b {
                        break;
                    }
                    d = (d + 1) % 7;
                }
            }
            None => out[day(item)?] = true,
        }
    }
    if !out.contains(&true) {
        return Err(WindowError::NoDay);
    }
    Ok(out)
}

const DAYS_LONG: [&str; 7] = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"];

fn to_jiff(t: DateTime<Utc>) -> Option<jiff::Timestamp> {
    jiff::Timestamp::from_second(t.timestamp()).ok()
}

fn to_chrono(t: jiff::Timestamp) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(t.as_second(), 0)
}

impl Schedule {
    /// Whether the schedule covers `card` on `node`: a node glob matches (or none is given)
    /// and the model matches (or none is given). Never a DynamicMIG card: the DRA driver lays
    /// it out per claim.
    pub fn covers(&self, node: &Node, card: &Card) -> bool {
        if card.dra.as_ref().is_some_and(|d| d.dynamic) {
            return false;
        }
        let node_ok = (self.nodes.is_empty() || self.nodes.iter().any(|g| glob(g, &node.name)))
            && self.node_labels.iter().all(|(k, v)| node.labels.get(k) == Some(v));
        let model_ok = self
            .model
            .as_deref()
            .is_none_or(|m| super::mig::catalog::model_key(m) == super::mig::catalog::model_key(&card.model));
        node_ok && model_ok
    }

    /// The instant a window starts on local date `date`: the start time in the zone, the
    /// first of two in a repeated hour, the end of the gap in a skipped one.
    fn start_on(&self, date: jiff::civil::Date, w: &Window) -> Option<jiff::Timestamp> {
        let (h, m) = (i8::try_from(w.start_min / 60).ok()?, i8::try_from(w.start_min % 60).ok()?);
        let dt = date.at(h, m, 0, 0);
        self.tz.to_ambiguous_zoned(dt).compatible().ok().map(|z| z.timestamp())
    }

    /// The instant a window that starts on `date` ends, on the local clock: the next day when
    /// it crosses midnight (so a night window ends at 08:00 local on a DST day too).
    fn end_on(&self, date: jiff::civil::Date, w: &Window) -> Option<jiff::Timestamp> {
        let crosses = w.end_min <= w.start_min || w.end_min == 24 * 60;
        let day = if crosses { date.checked_add(jiff::Span::new().days(1)).ok()? } else { date };
        let end = w.end_min % (24 * 60);
        let (h, m) = (i8::try_from(end / 60).ok()?, i8::try_from(end % 60).ok()?);
        self.tz.to_ambiguous_zoned(day.at(h, m, 0, 0)).compatible().ok().map(|z| z.timestamp())
    }

    /// The window in effect at `t` (the latest start at or before `t` whose window has not
    /// ended), with its start; `None` between windows.
    pub fn active_since(&self, t: DateTime<Utc>) -> Option<(usize, DateTime<Utc>)> {
        let ts = to_jiff(t)?;
        let today = ts.to_zoned(self.tz.clone()).date();
        let mut best: Option<(jiff::Timestamp, usize)> = None;
        for back in 0..=2 {
            let date = today.checked_sub(jiff::Span::new().days(back)).ok()?;
            for (i, w) in self.windows.iter().enumerate() {
                let wd = date.weekday().to_monday_zero_offset() as usize;
                if !w.days[wd] {
                    continue;
                }
                let (Some(start), Some(end)) = (self.start_on(date, w), self.end_on(date, w)) else { continue };
                // The latest start wins; at one instant the earlier-listed window does.
                if start <= ts && ts < end && best.is_none_or(|(b, _)| start > b) {
                    best = Some((start, i));
                }
            }
        }
        best.and_then(|(s, i)| Some((i, to_chrono(s)?)))
    }

    /// The window in effect at `t`, or `None` between windows.
    pub fn active_at(&self, t: DateTime<Utc>) -> Option<usize> {
        self.active_since(t).map(|(i, _)| i)
    }

    /// Whether a change at `at` comes within `min_hold` of the last change at `last`.
    pub fn held(&self, last: Option<DateTime<Utc>>, at: DateTime<Utc>) -> bool {
        let hold = chrono::Duration::seconds(i64::try_from(self.min_hold.as_secs()).unwrap_or(i64::MAX / 2));
        last.is_some_and(|l| at - l < hold)
    }

    /// Window starts in `(from, from + hours]`, in order (one per instant: the earlier-listed
    /// window where two start together). `min_hold` is the timeline's: it counts the changes
    /// a card actually makes.
    pub fn changes(&self, from: DateTime<Utc>, hours: i64) -> Vec<Change> {
        let (Some(f), Some(to)) = (to_jiff(from), to_jiff(from + chrono::Duration::hours(hours))) else {
            return Vec::new();
        };
        let today = f.to_zoned(self.tz.clone()).date();
        let mut starts: Vec<(jiff::Timestamp, usize)> = Vec::new();
        for day in -1..=(hours / 24 + 2) {
            let Ok(date) = today.checked_add(jiff::Span::new().days(day)) else { continue };
            let wd = date.weekday().to_monday_zero_offset() as usize;
            for (i, w) in self.windows.iter().enumerate().filter(|(_, w)| w.days[wd]) {
                // A window the clock skips whole (02:30-03:30 on a spring-forward day) holds
                // for no instant: no change, and no drain ahead of one that never comes.
                let empty = match (self.start_on(date, w), self.end_on(date, w)) {
                    (Some(s), Some(e)) => s >= e,
                    _ => true,
                };
                if empty {
                    continue;
                }
                if let Some(s) = self.start_on(date, w).filter(|s| *s > f && *s <= to) {
                    starts.push((s, i));
                }
            }
        }
        starts.sort();
        starts.dedup_by_key(|(s, _)| *s);
        starts.into_iter().filter_map(|(s, window)| Some(Change { at: to_chrono(s)?, window })).collect()
    }
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
