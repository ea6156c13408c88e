//! The footer's message: what was said, and since when it shows (it goes after a while).

use chrono::{DateTime, Utc};

/// The footer's message and since when it shows.
#[derive(Debug, Default)]
pub struct Footer {
    pub message: Option<String>,
    /// The message shown and since when (wall clock): it goes after `MESSAGE_FOR`.
    pub since: Option<(String, DateTime<Utc>)>,
}

impl Footer {
    /// Say `text` (it goes once shown `MESSAGE_FOR`, or with its view).
    pub fn say(&mut self, text: impl Into<String>) {
        self.message = Some(text.into());
    }

    /// A message goes once shown this long (it stayed for minutes, long after what it said
    /// was over). True when one went.
    pub fn expire(&mut self, wall: DateTime<Utc>) -> bool {
        const MESSAGE_FOR: i64 = 15;
        match (&self.message, &self.since) {
            (None, _) => {
                self.since = None;
                false
            }
            (Some(m), Some((seen, at))) if m == seen => {
                if (wall - *at).num_seconds() >= MESSAGE_FOR {
                    self.message = None;
                    self.since = None;
                    return true;
                }
                false
            }
            (Some(m), _) => {
                self.since = Some((m.clone(), wall));
                false
            }
        }
    }

    /// Say nothing.
    pub fn clear(&mut self) {
        self.message = None;
    }
}
