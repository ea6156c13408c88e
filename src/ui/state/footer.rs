//! The footer's message: what was said, and since when it shows (it goes after a while).

use chrono::{DateTime, Utc};

/// The footer's message and since when it shows.
#[derive(Debug, Default)]
pub struct Footer {
    pub message: Option<String>,
    /// The message shown and since when (wall clock): it goes after `MESSAGE_FOR`.
    pub since: Option<(String, DateTime<Utc>)>,
}
