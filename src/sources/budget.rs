//! The memory budget of the sources together: every byte of a response (HTTP) or of a
//! command's output (Slurm) is held against one budget while it is read, so N misbehaving
//! peers cannot take more than the budget however many there are. A read that would pass it
//! fails at once, saying so, and gives its bytes back; the others go on.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The default budget (`[sources] memory_budget`): two responses at the per-response cap.
pub const DEFAULT: usize = 512 * 1024 * 1024;

/// A budget of bytes shared by clones.
#[derive(Debug, Clone)]
pub struct Budget {
    sem: Arc<Semaphore>,
    total: usize,
    used: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

/// Bytes held against a budget; given back when dropped.
#[derive(Debug)]
pub struct Hold {
    budget: Budget,
    permit: Option<OwnedSemaphorePermit>,
    bytes: usize,
}

/// Taking more would pass the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the sources' memory budget ({}) is in use by reads in flight ([sources] memory_budget)", crate::record::session::size(*.0 as u64))]
pub struct Exhausted(pub usize);

static GLOBAL: Mutex<Option<Budget>> = Mutex::new(None);

impl Budget {
    pub fn new(total: usize) -> Self {
        let total = total.clamp(1, Semaphore::MAX_PERMITS);
        Budget {
            sem: Arc::new(Semaphore::new(total)),
            total,
            used: Arc::new(AtomicUsize::new(0)),
            peak: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The process's budget: the configured one, else the default.
    pub fn global() -> Budget {
        let mut g = GLOBAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        g.get_or_insert_with(|| Budget::new(DEFAULT)).clone()
    }

    /// Set the process's budget (at start, from the config). Clients made before keep theirs.
    pub fn configure(total: usize) {
        let mut g = GLOBAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if g.as_ref().is_none_or(|b| b.total != total) {
            *g = Some(Budget::new(total));
        }
    }

    pub fn total(&self) -> usize {
        self.total
    }

    /// The most bytes held at once so far.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// Bytes held now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Nothing held yet.
    pub fn hold(&self) -> Hold {
        Hold { budget: self.clone(), permit: None, bytes: 0 }
    }
}

impl Hold {
    /// Hold `n` more bytes, or fail without waiting.
    pub fn grow(&mut self, n: usize) -> Result<(), Exhausted> {
        if n == 0 {
            return Ok(());
        }
        let Ok(k) = u32::try_from(n) else { return Err(Exhausted(self.budget.total)) };
        let more = self.budget.sem.clone().try_acquire_many_owned(k).map_err(|_| Exhausted(self.budget.total))?;
        match &mut self.permit {
            Some(p) => p.merge(more),
            None => self.permit = Some(more),
        }
        self.bytes += n;
        let used = self.budget.used.fetch_add(n, Ordering::Relaxed) + n;
        self.budget.peak.fetch_max(used, Ordering::Relaxed);
        Ok(())
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_add_up_to_the_budget_and_give_it_back() {
        let b = Budget::new(100);
        let mut a = b.hold();
        let mut c = b.hold();
        assert!(a.grow(60).is_ok());
        assert!(c.grow(30).is_ok());
        assert_eq!(c.grow(11), Err(Exhausted(100)), "90 + 11 passes 100");
        assert!(c.grow(10).is_ok());
        assert_eq!((b.used(), b.peak()), (100, 100));
        drop(a);
        assert_eq!(b.used(), 40);
        let mut d = b.hold();
        assert!(d.grow(60).is_ok(), "a dropped hold gives its bytes back");
        assert!(Exhausted(512 << 20).to_string().contains("512.0 MiB"), "{}", Exhausted(512 << 20));
    }
}
