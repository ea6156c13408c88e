//! The Kubernetes client's answers under a cap: a layer on the client's service passes each
//! response body through as it arrives and ends it with an error, before the client decodes
//! it, once it passes what a real answer takes. An answer (a list page, a discovery document,
//! an object) may have at most `ANSWER_BYTES`, weigh at most `ANSWER_COST` decoded
//! (`weigh`), and hold at most the `limit` of items it was asked for; a watch stream is
//! endless by design, so each of its events (one line) is held to `EVENT_BYTES` and
//! `EVENT_COST` instead. What is read is held against the sources' memory budget while it is
//! read, as the other sources' answers are.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use tower_layer::Layer;
use tower_service::Service;

use super::weigh::Weigh;
use crate::budget::{Budget, Hold};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The most bytes of one answer: a page of `watch::PAGE` real objects is a few megabytes (a
/// node with its managed fields and 50 images about 30 KB).
pub const ANSWER_BYTES: usize = 16 << 20;
/// The most one answer may weigh decoded: a page of real nodes weighs about 20 MB.
pub const ANSWER_COST: u64 = 48 << 20;
/// The most bytes of one watch event: one object (etcd keeps at most 1.5 MiB of one).
pub const EVENT_BYTES: usize = 8 << 20;
/// The most one watch event may weigh decoded.
pub const EVENT_COST: u64 = 32 << 20;

/// Why an answer was cut short.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("an answer passed {} (the most tessera reads of one)", crate::units::size(*.0 as u64))]
    Bytes(usize),
    #[error("an answer would take more than {} decoded (the most tessera decodes of one)", crate::units::size(*.0))]
    Cost(u64),
    #[error("a page asked for {0} items and sent more")]
    Items(u64),
    #[error("a watch event passed {} (the most tessera reads of one)", crate::units::size(*.0 as u64))]
    EventBytes(usize),
    #[error("a watch event would take more than {} decoded (the most tessera decodes of one)", crate::units::size(*.0))]
    EventCost(u64),
    #[error("{0}")]
    Budget(#[from] crate::budget::Exhausted),
}

/// The layer: every response body of the service it wraps is capped.
#[derive(Debug, Clone)]
pub struct CapLayer {
    budget: Budget,
}

impl CapLayer {
    pub fn new(budget: Budget) -> Self {
        Self { budget }
    }
}

impl<S> Layer<S> for CapLayer {
    type Service = Capping<S>;
    fn layer(&self, inner: S) -> Capping<S> {
        Capping { inner, budget: self.budget.clone() }
    }
}

#[derive(Debug, Clone)]
pub struct Capping<S> {
    inner: S,
    budget: Budget,
}

/// Whether a request watches, and the `limit` of items it asked for.
fn shape(query: Option<&str>) -> (bool, Option<u64>) {
    let mut watch = false;
    let mut limit = None;
    for (k, v) in query.unwrap_or_default().split('&').filter_map(|kv| kv.split_once('=')) {
        match k {
            "watch" => watch = v == "true" || v == "1",
            "limit" => limit = v.parse().ok().filter(|&n| n > 0),
            _ => {}
        }
    }
    (watch, limit)
}

impl<S, ReqB, B> Service<Request<ReqB>> for Capping<S>
where
    S: Service<Request<ReqB>, Response = Response<B>>,
    S::Future: Send + 'static,
{
    type Response = Response<Capped<B>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqB>) -> Self::Future {
        let (watch, limit) = shape(req.uri().query());
        let budget = self.budget.clone();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let res = fut.await?;
            Ok(res.map(|inner| Capped::new(inner, budget.hold(), watch, limit)))
        })
    }
}

/// A response body passed through under the caps.
pub struct Capped<B> {
    inner: B,
    held: Hold,
    watch: bool,
    limit: Option<u64>,
    /// Bytes of the answer, or of the watch event under way.
    read: usize,
    weigh: Weigh,
    failed: bool,
}

impl<B> Capped<B> {
    fn new(inner: B, held: Hold, watch: bool, limit: Option<u64>) -> Self {
        Self { inner, held, watch, limit, read: 0, weigh: Weigh::new(), failed: false }
    }

    /// Take `data` in; the reason to stop, if it passes a cap.
    fn take(&mut self, data: &[u8]) -> Result<(), Refused> {
        if !self.watch {
            return self.piece(data);
        }
        let mut rest = data;
        while let Some(at) = rest.iter().position(|&b| b == b'\n') {
            self.piece(&rest[..at])?;
            // One event ends: the client has decoded it, or will before it reads on.
            self.held.shrink(self.held.bytes());
            self.read = 0;
            self.weigh = Weigh::new();
            rest = &rest[at + 1..];
        }
        self.piece(rest)
    }

    fn piece(&mut self, data: &[u8]) -> Result<(), Refused> {
        self.read = self.read.saturating_add(data.len());
        let (bytes, cost) = if self.watch { (EVENT_BYTES, EVENT_COST) } else { (ANSWER_BYTES, ANSWER_COST) };
        if self.read > bytes {
            return Err(if self.watch { Refused::EventBytes(bytes) } else { Refused::Bytes(bytes) });
        }
        self.held.grow(data.len())?;
        self.weigh.feed(data);
        if self.weigh.cost > cost {
            return Err(if self.watch { Refused::EventCost(cost) } else { Refused::Cost(cost) });
        }
        match self.limit {
            Some(limit) if !self.watch && self.weigh.items > limit => Err(Refused::Items(limit)),
            _ => Ok(()),
        }
    }
}

impl<B> Body for Capped<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if this.failed {
            return Poll::Ready(None);
        }
        let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(Some(Ok(frame))) => frame,
        };
        if let Some(data) = frame.data_ref()
            && let Err(why) = this.take(data)
        {
            this.failed = true;
            this.held.shrink(this.held.bytes());
            return Poll::Ready(Some(Err(Box::new(why))));
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capped(watch: bool, limit: Option<u64>) -> Capped<()> {
        Capped::new((), Budget::new(64 << 20).hold(), watch, limit)
    }

    #[test]
    fn requests_are_told_apart_by_their_query() {
        assert_eq!(shape(Some("limit=200&watch=false")), (false, Some(200)));
        assert_eq!(shape(Some("watch=true&resourceVersion=5&allowWatchBookmarks=true")), (true, None));
        assert_eq!(shape(Some("watch=1&limit=x")), (true, None));
        assert_eq!(shape(None), (false, None));
    }

    #[test]
    fn an_answer_is_capped_by_bytes_cost_and_items() {
        let mut c = capped(false, None);
        let mb = vec![b' '; 1 << 20];
        let e = (0..20).try_for_each(|_| c.take(&mb));
        assert_eq!(e, Err(Refused::Bytes(ANSWER_BYTES)));
        let mut c = capped(false, None);
        let e = (0..100_000).try_for_each(|_| c.take(b"[{},{},{},{}]"));
        assert_eq!(e, Err(Refused::Cost(ANSWER_COST)));
        let mut c = capped(false, Some(2));
        assert!(c.take(br#"{"items":[{},{}"#).is_ok());
        assert_eq!(c.take(br#",{}]}"#), Err(Refused::Items(2)));
        let mut c = capped(false, Some(500));
        assert!(c.take(br#"{"items":[{},{}]}"#).is_ok());
    }

    #[test]
    fn a_watch_is_capped_an_event_at_a_time() {
        let mut c = capped(true, Some(1));
        let event =
            format!("{{\"type\":\"ADDED\",\"object\":{{\"items\":[{{}},{{}}],\"x\":\"{}\"}}}}\n", "y".repeat(1 << 20));
        // Far more than an answer in all, each event well under the cap; no item limit.
        assert!((0..40).try_for_each(|_| c.take(event.as_bytes())).is_ok());
        assert_eq!(c.held.bytes(), 0, "nothing is held between events");
        let e = (0..9).try_for_each(|_| c.take(&event.as_bytes()[..event.len() - 1]));
        assert_eq!(e, Err(Refused::EventBytes(EVENT_BYTES)));
    }

    #[test]
    fn what_is_read_is_held_against_the_budget() {
        let budget = Budget::new(3 << 20);
        let mut c = Capped::new((), budget.hold(), false, None);
        let mb = vec![b' '; 1 << 20];
        let e = (0..4).try_for_each(|_| c.take(&mb));
        assert!(matches!(e, Err(Refused::Budget(_))), "{e:?}");
        drop(c);
        assert_eq!(budget.used(), 0);
    }
}
