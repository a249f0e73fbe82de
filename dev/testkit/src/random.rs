//! A small seeded generator (splitmix64) for the random choices of a test run: the same seed
//! gives the same choices, so a failing run is repeated by its seed.

/// The generator.
#[derive(Clone, Debug)]
pub struct Random(u64);

impl Random {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Random {
        Random(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A number in `low..=high`.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next_u64() % (high - low + 1)
    }

    /// An index below `len` (which must not be 0).
    pub fn index(&mut self, len: usize) -> usize {
        self.between(0, len as u64 - 1) as usize
    }

    /// `true` with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// `true` in `percent` of the calls.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.between(0, 99) < percent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_choices_within_their_bounds() {
        let (mut a, mut b) = (Random::new(7), Random::new(7));
        for _ in 0..1000 {
            let n = a.between(3, 9);
            assert_eq!(n, b.between(3, 9));
            assert!((3..=9).contains(&n));
            let u = a.unit();
            assert_eq!(u.to_bits(), b.unit().to_bits());
            assert!((0.0..1.0).contains(&u));
            assert!(a.index(4) < 4);
            b.index(4);
        }
        assert_ne!(Random::new(1).next_u64(), Random::new(2).next_u64());
        let mut r = Random::new(3);
        assert!(!(0..100).any(|_| r.percent(0)));
        assert!((0..100).all(|_| r.percent(100)));
    }
}
