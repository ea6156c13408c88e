//! Replay as UI state: the moment shown, speed, pause, and what the timeline marks (actions,
//! source outages). Keys move the moment; the loop decodes the frame for it. Pure.

use chrono::{DateTime, Duration, Utc};

/// The slowest and fastest playback.
pub const MIN_SPEED: f64 = 0.25;
pub const MAX_SPEED: f64 = 64.0;

#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    /// Every frame's time, in order.
    pub times: Vec<DateTime<Utc>>,
    /// The moment shown: playback moves it on the recording's clock.
    pub pos: DateTime<Utc>,
    pub speed: f64,
    pub paused: bool,
    /// Audited actions: when, and one line each.
    pub actions: Vec<(DateTime<Utc>, String)>,
    /// Spans where some source was not live.
    pub outages: Vec<(DateTime<Utc>, DateTime<Utc>)>,
    /// What is replayed: the file's name, or "Prometheus history".
    pub what: String,
    /// The position moved by more than playback does: the loop forgets sparkline history.
    pub jumped: bool,
}

impl Replay {
    pub fn new(times: Vec<DateTime<Utc>>, speed: f64, what: String) -> Self {
        let pos = times.first().copied().unwrap_or_default();
        Self {
            times,
            pos,
            speed: speed.clamp(MIN_SPEED, MAX_SPEED),
            paused: false,
            actions: Vec::new(),
            outages: Vec::new(),
            what,
            jumped: false,
        }
    }

    pub fn start(&self) -> DateTime<Utc> {
        self.times.first().copied().unwrap_or_default()
    }

    pub fn end(&self) -> DateTime<Utc> {
        self.times.last().copied().unwrap_or_default()
    }

    /// The position of the frame shown: the last at or before `pos`.
    pub fn frame(&self) -> Option<usize> {
        if self.times.is_empty() {
            return None;
        }
        Some(self.times.partition_point(|t| *t <= self.pos).saturating_sub(1))
    }

    /// `real` of wall time passed while playing: the moment moves `speed` times as far; at the
    /// end it stops there, paused.
    pub fn advance(&mut self, real: std::time::Duration) -> bool {
        if self.paused || self.times.is_empty() {
            return false;
        }
        let ms = (real.as_secs_f64() * self.speed * 1000.0) as i64;
        let before = self.frame();
        self.pos = self.pos.checked_add_signed(Duration::milliseconds(ms)).unwrap_or(self.end()).min(self.end());
        if self.pos >= self.end() {
            self.paused = true;
        }
        self.frame() != before
    }

    /// Go to `t` (clamped to the recording).
    pub fn go(&mut self, t: DateTime<Utc>) {
        self.pos = t.min(self.end()).max(self.start());
        self.jumped = true;
    }

    /// The recorded time of the frame shown.
    pub fn shown_at(&self) -> DateTime<Utc> {
        self.frame().and_then(|i| self.times.get(i)).copied().unwrap_or(self.pos)
    }

    /// One frame back or on (paused, as a video player steps).
    pub fn step(&mut self, by: isize) {
        self.paused = true;
        let Some(i) = self.frame() else { return };
        let j = i.saturating_add_signed(by).min(self.times.len() - 1);
        self.pos = self.times[j];
        self.jumped |= by < 0;
    }

    /// Twice as fast (to the next power of two), or half.
    pub fn faster(&mut self, up: bool) {
        let l = self.speed.log2();
        let next = if up { l.floor() + 1.0 } else { l.ceil() - 1.0 };
        self.speed = 2f64.powf(next).clamp(MIN_SPEED, MAX_SPEED);
    }

    /// `60×`, `0.25×`.
    pub fn speed_text(&self) -> String {
        if self.speed.fract() == 0.0 { format!("{}×", self.speed as u64) } else { format!("{}×", self.speed) }
    }

    /// The actions at or before the moment shown, most recent first.
    pub fn last_action(&self) -> Option<&(DateTime<Utc>, String)> {
        let at = self.shown_at();
        self.actions.iter().rev().find(|(t, _)| *t <= at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_764_468_000 + s, 0).single().unwrap_or_default()
    }

    fn replay() -> Replay {
        Replay::new((0..100).map(|i| t(i * 10)).collect(), 60.0, "r.tsrec".into())
    }

    #[test]
    fn playback_moves_speed_times_the_wall_and_stops_at_the_end() {
        let mut r = replay();
        assert_eq!(r.frame(), Some(0));
        assert!(r.advance(std::time::Duration::from_millis(500)), "30 s at 60×: frame 3");
        assert_eq!(r.frame(), Some(3));
        r.advance(std::time::Duration::from_secs(3600));
        assert_eq!((r.frame(), r.paused), (Some(99), true));
    }

    #[test]
    fn steps_pause_and_speeds_are_powers_of_two_within_limits() {
        let mut r = replay();
        r.go(t(505));
        assert_eq!(r.frame(), Some(50));
        r.step(1);
        assert_eq!((r.frame(), r.paused), (Some(51), true));
        r.step(-3);
        assert_eq!(r.frame(), Some(48));
        r.faster(true);
        assert_eq!(r.speed, 64.0, "60 to the next power of two");
        r.faster(true);
        assert_eq!(r.speed, 64.0);
        r.faster(false);
        assert_eq!(r.speed, 32.0);
        for _ in 0..10 {
            r.faster(false);
        }
        assert_eq!(r.speed_text(), "0.25×");
    }
}
