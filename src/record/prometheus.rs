//! Time travel without a recording: past moments rebuilt from Prometheus history (instant
//! queries evaluated at each moment), written as a recording so replay and `snapshot --at`
//! read them like any other.

use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::Frame;
use super::writer::{Recorder, Settings, Summary, WriteError};
use crate::model::SourceKind;
use crate::sources::SourceUpdate;
use crate::sources::http::Client;
use crate::sources::prometheus::{self, collect};
use crate::store::Store;

/// The most moments one rebuild asks for (a week at one a minute is 10,080).
pub const MAX_MOMENTS: u64 = 20_000;

/// Moments in a row without an answer (timed out, or no connection) that stop a rebuild: a
/// hung server cost the whole HTTP timeout a moment, for every moment asked.
pub const UNANSWERED_IN_A_ROW: usize = 3;

/// Why moments could not be rebuilt from Prometheus.
#[derive(Debug, thiserror::Error)]
pub enum RebuildError {
    #[error("--to {} is before --from {}", to.to_rfc3339(), from.to_rfc3339())]
    Backwards { from: DateTime<Utc>, to: DateTime<Utc> },
    #[error("--step: at least 1s")]
    StepTooShort,
    #[error("{} is in the future: Prometheus has only the past", .0.to_rfc3339())]
    Future(DateTime<Utc>),
    #[error("{n} moments from --from to --to at --step {step_s}s: at most {MAX_MOMENTS} (a longer --step)")]
    TooMany { n: u64, step_s: i64 },
    /// What the source said when it had nothing at that moment.
    #[error("Prometheus had nothing at {}: {why}", at.to_rfc3339())]
    NothingAt { at: DateTime<Utc>, why: String },
    #[error("Prometheus did not answer ({0}): stopped at the first moment")]
    NoAnswer(String),
    #[error("Prometheus had nothing in that span: {0}")]
    NothingInSpan(String),
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// The moments from `from` to `to`, `step` apart (both ends included).
pub fn moments(from: DateTime<Utc>, to: DateTime<Utc>, step: Duration) -> Result<Vec<DateTime<Utc>>, RebuildError> {
    if to < from {
        return Err(RebuildError::Backwards { from, to });
    }
    if step < Duration::from_secs(1) {
        return Err(RebuildError::StepTooShort);
    }
    if to > Utc::now() + chrono::Duration::seconds(5) {
        return Err(RebuildError::Future(to));
    }
    let step_ms = i64::try_from(step.as_millis()).unwrap_or(i64::MAX);
    let n = ((to - from).num_milliseconds() / step_ms) as u64 + 1;
    if n > MAX_MOMENTS {
        return Err(RebuildError::TooMany { n, step_s: step_ms / 1000 });
    }
    Ok((0..n as i64).map(|i| from + chrono::Duration::milliseconds(i * step_ms)).collect())
}

/// A store as the engine registers the Prometheus source.
fn store(s: &prometheus::Settings, step: Duration) -> Store {
    let mut store = Store::new();
    store.register("prometheus", SourceKind::Prometheus, step);
    if s.with_queue {
        store.reports_queue("prometheus");
    }
    store
}

/// One moment's collection into `store`: the fleet as Prometheus knew it at `t` (with the
/// span before the first moment, so activity windows are right from the start).
async fn at(
    store: &mut Store,
    s: &prometheus::Settings,
    client: &Client,
    t: DateTime<Utc>,
    first: bool,
) -> Option<crate::sources::SourceError> {
    let mut history = first;
    let result = collect(s, client, Some(t), &mut history).await;
    let err = result.as_ref().err().cloned();
    store.apply(SourceUpdate { source: "prometheus".into(), kind: SourceKind::Prometheus, at: t, result }, t);
    err
}

/// The fleet at `t`; `Err` with what Prometheus said when it had nothing then.
pub async fn moment(s: &prometheus::Settings, client: &Client, t: DateTime<Utc>) -> Result<Frame, RebuildError> {
    moments(t, t, Duration::from_secs(60))?;
    let mut store = store(s, Duration::from_secs(60));
    if let Some(e) = at(&mut store, s, client, t, true).await {
        return Err(RebuildError::NothingAt { at: t, why: e.message });
    }
    Ok(Frame::from_store(&store, t))
}

/// Rebuild every moment into a recording at `out`; `progress(done, of)` after each. Moments
/// Prometheus had nothing for are recorded as an outage of the source; none at all is an error.
/// A server that does not answer the first moment stops the rebuild at once, with an error;
/// [`UNANSWERED_IN_A_ROW`] moments in a row later stop it with the moments recorded so far
/// (the summary's frames say how many; none answered at all is the error above).
pub async fn rebuild(
    s: &prometheus::Settings,
    client: &Client,
    moments: &[DateTime<Utc>],
    step: Duration,
    out: &Path,
    mut progress: impl FnMut(usize, usize),
) -> Result<Summary, RebuildError> {
    let mut store = store(s, step);
    let mut rec = Recorder::create(Settings {
        path: out.to_path_buf(),
        every: step,
        rotate_size: None,
        rotate_every: None,
        keep: None,
        sources: vec!["prometheus".into()],
    })?;
    let (mut good, mut first_error, mut silent) = (0usize, None, 0usize);
    for (i, &t) in moments.iter().enumerate() {
        // The span before the first moment Prometheus has, for the activity windows.
        match at(&mut store, s, client, t, good == 0).await {
            Some(e) if e.unanswered && (i == 0 || silent + 1 >= UNANSWERED_IN_A_ROW) => {
                if i == 0 {
                    return Err(RebuildError::NoAnswer(e.message));
                }
                break;
            }
            Some(e) => {
                silent = if e.unanswered { silent + 1 } else { 0 };
                first_error.get_or_insert(e.message);
            }
            None => {
                good += 1;
                silent = 0;
            }
        }
        rec.frame(&Frame::from_store(&store, t))?;
        progress(i + 1, moments.len());
    }
    let summary = rec.finish()?;
    if good == 0 {
        return Err(RebuildError::NothingInSpan(first_error.unwrap_or_default()));
    }
    Ok(summary)
}
