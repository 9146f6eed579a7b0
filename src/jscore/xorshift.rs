//! A seeded xorshift generator for the model-based tests of the pure state machines: a
//! failure reproduces from its seed, and no test depends on an outside crate for it.

pub(crate) struct XorShift(pub u64);

impl XorShift {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number below `bound` (not 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}
