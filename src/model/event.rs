//! Events worth a line in the card view: XIDs, state changes, workloads coming and going.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::card_ref::CardRef;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Event {
    pub at: DateTime<Utc>,
    pub card: Option<CardRef>,
    pub severity: Severity,
    pub text: String,
}
