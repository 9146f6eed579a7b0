//! Random subscription subjects for property tests of the overlap algebra: deterministic
//! (a failure reproduces from its seed), from a small alphabet so that patterns collide often.

/// A xorshift generator.
pub struct Rng(pub u64);

impl Rng {
    pub fn below(&mut self, bound: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % bound as u64) as usize
    }

    /// A valid subscription subject of 1-4 tokens, with `*` anywhere, `>` only last, and `*a`
    /// / `b>` as the literal tokens they are.
    pub fn pattern(&mut self) -> String {
        const TOKENS: [&str; 7] = ["a", "b", "c", "*", "*", "*a", "b>"];
        let length = 1 + self.below(4);
        let mut tokens: Vec<&str> = (0..length)
            .map(|_| TOKENS[self.below(TOKENS.len())])
            .collect();
        if self.below(4) == 0 {
            *tokens.last_mut().expect("at least one token") = ">";
        }
        tokens.join(".")
    }
}
