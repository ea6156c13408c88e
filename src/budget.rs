//! The memory budget of the sources together: the memory a response (HTTP) or a command's
//! output (Slurm) takes while it is read is held against one budget, so N misbehaving peers
//! cannot take more than the budget however many there are. A read that would pass it fails
//! at once, saying so, and gives its bytes back; the others go on. Reads are kept in chunks
//! (`Chunks`) whose whole capacity is held, never reallocated: what is held is the memory
//! taken, not only the bytes read (a buffer grown by doubling took up to twice its length).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The default budget (`[sources] memory_budget`): 192 MiB, so that no flood takes the
/// process past 256 MB (244 MiB). What is held is what the reads take, so under any flood (six
/// endless scrape targets, an endless `squeue`) `tessera snapshot` takes the budget plus its
/// own: about 19 MiB in a debug build, and about 10 MiB more for six connections' buffers;
/// measured 221 MiB and 209 MiB (docs/reliability.md), 23 MiB under the ceiling. One answer
/// may take nearly all of it: 192 MiB is 60 times a 10,000-job `squeue`, and a Prometheus
/// answer for some 35,000 GPUs (about 5 KB a GPU); past that the budget is to be raised.
pub const DEFAULT: usize = 192 * 1024 * 1024;

/// The largest chunk of a read: a read's chunks start at `FIRST_CHUNK` and double up to it,
/// so a small answer takes little, and the last chunk, partly filled, is at most this much
/// more than the bytes read.
pub const CHUNK: usize = 1 << 20;
const FIRST_CHUNK: usize = 64 << 10;

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
#[error("the sources' memory budget ({}) is in use by reads in flight ([sources] memory_budget)", crate::units::size(*.0 as u64))]
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

    /// Give `n` of the bytes held back (at most all of them).
    pub fn shrink(&mut self, n: usize) {
        let n = n.min(self.bytes);
        if n == 0 {
            return;
        }
        if n == self.bytes {
            self.permit = None;
        } else if let Some(p) = &mut self.permit {
            // `n` is below the permit's count, which fits a u32 (it was acquired as one).
            drop(p.split(n));
        }
        self.bytes -= n;
        self.budget.used.fetch_sub(n, Ordering::Relaxed);
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// Bytes read under a budget, in chunks (64 KiB doubling to `CHUNK`) whose whole capacity is
/// held: nothing is reallocated while reading, so the memory a read takes is what it holds.
#[derive(Debug)]
pub struct Chunks {
    held: Hold,
    chunks: Vec<Vec<u8>>,
    len: usize,
}

impl Chunks {
    pub fn new(budget: &Budget) -> Self {
        Chunks { held: budget.hold(), chunks: Vec::new(), len: 0 }
    }

    /// Append `bytes`, holding a new chunk each time the last is full; fails without taking
    /// more when the budget has no room for the next chunk.
    pub fn extend(&mut self, mut bytes: &[u8]) -> Result<(), Exhausted> {
        while !bytes.is_empty() {
            let room = self.chunks.last().map_or(0, |c| c.capacity() - c.len());
            if room == 0 {
                let size = self.held.bytes().clamp(FIRST_CHUNK, CHUNK);
                self.held.grow(size)?;
                self.chunks.push(Vec::with_capacity(size));
                continue;
            }
            let (now, rest) = bytes.split_at(room.min(bytes.len()));
            if let Some(c) = self.chunks.last_mut() {
                c.extend_from_slice(now);
            }
            self.len += now.len();
            bytes = rest;
        }
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes held now: the chunks' capacity.
    pub fn held(&self) -> usize {
        self.held.bytes()
    }

    /// The bytes in one buffer of exactly their length. Its memory is held as it is written,
    /// and each chunk is given back once copied, so the join takes at most one chunk more
    /// than the bytes; it fails, giving everything back, if the budget has no room for that.
    pub fn join(mut self) -> Result<Vec<u8>, Exhausted> {
        if self.chunks.len() == 1 && self.chunks[0].len() == self.chunks[0].capacity() {
            return Ok(self.chunks.remove(0));
        }
        let mut out = Vec::with_capacity(self.len);
        for c in std::mem::take(&mut self.chunks) {
            self.held.grow(c.len())?;
            out.extend_from_slice(&c);
            let given = c.capacity();
            drop(c);
            self.held.shrink(given);
        }
        Ok(out)
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
        d.shrink(15);
        assert_eq!((d.bytes(), b.used()), (45, 85));
        assert!(c.grow(15).is_ok(), "a shrunk hold gives those bytes back");
        d.shrink(1000);
        assert_eq!((d.bytes(), b.used()), (0, 55));
    }

    /// What a read holds is at least the memory its chunks take, and at most one chunk more
    /// than it read; the join holds what it writes and gives each chunk back once copied.
    #[test]
    fn a_read_holds_the_memory_it_takes() {
        let b = Budget::new(64 << 20);
        let mut r = Chunks::new(&b);
        let piece: Vec<u8> = (0..70_001u32).map(|i| i as u8).collect();
        let mut want = Vec::new();
        for _ in 0..60 {
            r.extend(&piece).unwrap_or_else(|e| panic!("{e}"));
            want.extend_from_slice(&piece);
            let taken: usize = r.chunks.iter().map(Vec::capacity).sum();
            assert_eq!(r.held(), taken);
            assert!(r.held() >= r.len() && r.held() - r.len() <= CHUNK, "{} held for {}", r.held(), r.len());
            assert_eq!(b.used(), r.held());
        }
        let held = r.held();
        let out = r.join().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out, want);
        assert_eq!(out.capacity(), out.len(), "the joined buffer is exactly the bytes");
        assert!(b.peak() <= held + CHUNK, "the join took {} over {held}", b.peak() - held);
        assert_eq!(b.used(), 0);
        // A small answer takes a small chunk.
        let mut small = Chunks::new(&b);
        small.extend(b"# HELP\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(small.held(), 64 << 10);
        assert_eq!(small.join().ok(), Some(b"# HELP\n".to_vec()));
    }

    /// A read past the budget fails at the chunk that would pass it, and gives back all.
    #[test]
    fn a_read_past_the_budget_fails_and_gives_back_all() {
        let b = Budget::new(3 << 20);
        let mut r = Chunks::new(&b);
        let mb = vec![7u8; 1 << 20];
        let e = (0..8).try_for_each(|_| r.extend(&mb));
        assert_eq!(e, Err(Exhausted(3 << 20)));
        assert!(r.held() <= 3 << 20 && b.peak() <= 3 << 20, "{}", b.peak());
        drop(r);
        assert_eq!(b.used(), 0);
    }
}
