//! Random tokens: generated consumer names, flow-control subjects, advisory ids.

/// `n` random ASCII letters and digits.
pub fn random_token(n: usize) -> String {
    use rand::distr::{Alphanumeric, SampleString};
    Alphanumeric.sample_string(&mut rand::rng(), n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_tokens_are_alphanumeric() {
        let token = random_token(8);
        assert_eq!(token.len(), 8);
        assert!(token.bytes().all(|b| b.is_ascii_alphanumeric()));
    }
}
