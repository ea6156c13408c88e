//! Go's `math/rand` (v1 `rngSource`, an additive lagged Fibonacci generator) ported bit for
//! bit: the paper's simulator shuffles the pods, draws the inflation and ranks the nodes with
//! it, so the same seed gives the same experiment here.

use super::cooked::COOKED;

const LEN: usize = 607;
const TAP: usize = 273;
const M31: i64 = (1 << 31) - 1;
const MASK63: u64 = (1 << 63) - 1;

/// Go's `seedrand`: x = 48271·x mod (2³¹ − 1), by Schrage's method.
fn seedrand(x: i32) -> i32 {
    let (hi, lo) = (x / 44488, x % 44488);
    let mut x = 48271 * lo - 3399 * hi;
    if x < 0 {
        x += M31 as i32;
    }
    x
}

/// The generator's state, as `rand.Seed(seed)` leaves it.
#[derive(Clone)]
pub struct GoRand {
    tap: usize,
    feed: usize,
    vec: Box<[u64; LEN]>,
}

impl std::fmt::Debug for GoRand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GoRand {{ tap: {}, feed: {} }}", self.tap, self.feed)
    }
}

impl GoRand {
    pub fn new(seed: i64) -> Self {
        let mut s = seed % M31;
        if s < 0 {
            s += M31;
        }
        if s == 0 {
            s = 89_482_311;
        }
        let mut x = s as i32;
        let mut vec = Box::new([0u64; LEN]);
        for i in -20i32..LEN as i32 {
            x = seedrand(x);
            if i >= 0 {
                let mut u = (i64::from(x) << 40) as u64;
                x = seedrand(x);
                u ^= (i64::from(x) << 20) as u64;
                x = seedrand(x);
                u ^= x as u64;
                u ^= COOKED[i as usize];
                vec[i as usize] = u & MASK63;
            }
        }
        Self { tap: 0, feed: LEN - TAP, vec }
    }

    pub fn int63(&mut self) -> u64 {
        self.tap = if self.tap == 0 { LEN - 1 } else { self.tap - 1 };
        self.feed = if self.feed == 0 { LEN - 1 } else { self.feed - 1 };
        let x = self.vec[self.feed].wrapping_add(self.vec[self.tap]) & MASK63;
        self.vec[self.feed] = x;
        x
    }

    fn int31(&mut self) -> u32 {
        (self.int63() >> 32) as u32
    }

    fn uint32(&mut self) -> u32 {
        (self.int63() >> 31) as u32
    }

    /// `Intn(n)` (`Int31n`) for 0 < n < 2³¹: uniform in 0..n.
    pub fn intn(&mut self, n: u32) -> u32 {
        let n = n.max(1);
        if n & (n - 1) == 0 {
            return self.int31() & (n - 1);
        }
        let max = (1u32 << 31) - 1 - ((1u32 << 31) % n);
        let mut v = self.int31();
        while v > max {
            v = self.int31();
        }
        v % n
    }

    /// The unexported `int31n` (Lemire's method) that `Shuffle` uses.
    fn int31n_lemire(&mut self, n: u32) -> u32 {
        let mut prod = u64::from(self.uint32()) * u64::from(n);
        let mut low = prod as u32;
        if low < n {
            let thresh = n.wrapping_neg() % n;
            while low < thresh {
                prod = u64::from(self.uint32()) * u64::from(n);
                low = prod as u32;
            }
        }
        (prod >> 32) as u32
    }

    /// `Shuffle` over a slice (fewer than 2³¹ elements).
    pub fn shuffle<T>(&mut self, a: &mut [T]) {
        for i in (1..a.len()).rev() {
            let j = self.int31n_lemire(i as u32 + 1) as usize;
            a.swap(i, j);
        }
    }

    /// `Perm(n)`: a permutation of 0..n.
    pub fn perm(&mut self, n: usize) -> Vec<u32> {
        let mut m = vec![0u32; n];
        for i in 0..n {
            let j = self.intn(i as u32 + 1) as usize;
            m[i] = m[j];
            m[j] = i as u32;
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_one_gives_gos_int63s() {
        let mut r = GoRand::new(1);
        let v: Vec<u64> = (0..3).map(|_| r.int63()).collect();
        assert_eq!(v, [5577006791947779410, 8674665223082153551, 6129484611666145821]);
    }

    #[test]
    fn seed_one_gives_gos_intn() {
        let mut r = GoRand::new(1);
        let v: Vec<u32> = (0..10).map(|_| r.intn(100)).collect();
        assert_eq!(v, [81, 87, 47, 59, 81, 18, 25, 40, 56, 0]);
    }

    #[test]
    fn seed_forty_two_first_int_and_a_zero_seed() {
        assert_eq!(GoRand::new(42).int63(), 3440579354231278675);
        // Seed 0 and seed 2³¹−1 both mean 89482311.
        assert_eq!(GoRand::new(0).int63(), GoRand::new(89_482_311).int63());
        assert_eq!(GoRand::new(M31).int63(), GoRand::new(89_482_311).int63());
    }

    #[test]
    fn perm_and_shuffle_are_permutations() {
        let mut r = GoRand::new(7);
        let mut p = r.perm(50);
        p.sort_unstable();
        assert_eq!(p, (0..50).collect::<Vec<u32>>());
        let mut a: Vec<u32> = (0..50).collect();
        r.shuffle(&mut a);
        assert_ne!(a, (0..50).collect::<Vec<u32>>());
        a.sort_unstable();
        assert_eq!(a, (0..50).collect::<Vec<u32>>());
    }
}
