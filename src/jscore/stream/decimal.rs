//! Arbitrary-precision signed integers for counter streams (ADR-49): nats-server keeps a
//! counter as a Go `big.Int`, written in decimal, so a counter goes past 64 bits and a
//! client can add `99999999999999999999999`. Only what a counter needs: parse what Go's
//! `SetString(text, 10)` accepts, add, subtract, and print as `big.Int.String` does.
//!
//! The magnitude is kept in base-10⁹ limbs, least significant first, so printing and
//! parsing are plain digit work; there are never leading zero limbs and zero has no sign.

use std::cmp::Ordering;
use std::fmt;

const BASE: u64 = 1_000_000_000;
const LIMB_DIGITS: usize = 9;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BigInt {
    negative: bool,
    /// Base-10⁹ limbs, least significant first; empty for zero.
    limbs: Vec<u32>,
}

impl BigInt {
    /// What Go's `big.Int.SetString(text, 10)` accepts: an optional `+` or `-`, then one or
    /// more decimal digits (leading zeros allowed), nothing else.
    pub fn parse(text: &[u8]) -> Option<BigInt> {
        let (negative, digits) = match text.split_first() {
            Some((b'-', rest)) => (true, rest),
            Some((b'+', rest)) => (false, rest),
            _ => (false, text),
        };
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let mut limbs: Vec<u32> = digits
            .rchunks(LIMB_DIGITS)
            .map(|chunk| {
                chunk
                    .iter()
                    .fold(0u32, |limb, digit| limb * 10 + u32::from(digit - b'0'))
            })
            .collect();
        trim(&mut limbs);
        let negative = negative && !limbs.is_empty();
        Some(BigInt { negative, limbs })
    }

    /// `self + other`.
    pub fn add(&self, other: &BigInt) -> BigInt {
        if self.negative == other.negative {
            return BigInt {
                negative: self.negative,
                limbs: add_magnitudes(&self.limbs, &other.limbs),
            };
        }
        // Opposite signs: the larger magnitude keeps its sign.
        let (larger, smaller) = match compare_magnitudes(&self.limbs, &other.limbs) {
            Ordering::Equal => return BigInt::default(),
            Ordering::Greater => (self, other),
            Ordering::Less => (other, self),
        };
        BigInt {
            negative: larger.negative,
            limbs: sub_magnitudes(&larger.limbs, &smaller.limbs),
        }
    }

    /// `self - other`.
    pub fn sub(&self, other: &BigInt) -> BigInt {
        let negated = BigInt {
            negative: !other.negative && !other.limbs.is_empty(),
            limbs: other.limbs.clone(),
        };
        self.add(&negated)
    }
}

impl fmt::Display for BigInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some((most, rest)) = self.limbs.split_last() else {
            return f.write_str("0");
        };
        if self.negative {
            f.write_str("-")?;
        }
        write!(f, "{most}")?;
        for limb in rest.iter().rev() {
            write!(f, "{limb:09}")?;
        }
        Ok(())
    }
}

fn trim(limbs: &mut Vec<u32>) {
    while limbs.last() == Some(&0) {
        limbs.pop();
    }
}

fn compare_magnitudes(a: &[u32], b: &[u32]) -> Ordering {
    a.len()
        .cmp(&b.len())
        .then_with(|| a.iter().rev().cmp(b.iter().rev()))
}

fn add_magnitudes(a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut sum = Vec::with_capacity(a.len().max(b.len()) + 1);
    let mut carry = 0u64;
    for i in 0..a.len().max(b.len()) {
        let total = u64::from(*a.get(i).unwrap_or(&0)) + u64::from(*b.get(i).unwrap_or(&0)) + carry;
        sum.push((total % BASE) as u32);
        carry = total / BASE;
    }
    if carry > 0 {
        sum.push(carry as u32);
    }
    sum
}

/// `larger - smaller`, for `larger` ≥ `smaller` in magnitude.
fn sub_magnitudes(larger: &[u32], smaller: &[u32]) -> Vec<u32> {
    let mut difference = Vec::with_capacity(larger.len());
    let mut borrow = 0i64;
    for (i, limb) in larger.iter().enumerate() {
        let mut value = i64::from(*limb) - i64::from(*smaller.get(i).unwrap_or(&0)) - borrow;
        borrow = 0;
        if value < 0 {
            value += BASE as i64;
            borrow = 1;
        }
        difference.push(value as u32);
    }
    trim(&mut difference);
    difference
}

#[cfg(test)]
mod tests {
    use super::*;

    fn big(text: &str) -> BigInt {
        BigInt::parse(text.as_bytes()).unwrap()
    }

    #[test]
    fn parses_what_go_accepts_and_prints_canonically() {
        for (text, printed) in [
            ("0", "0"),
            ("-0", "0"),
            ("+0", "0"),
            ("007", "7"),
            ("+5", "5"),
            ("-20", "-20"),
            ("1000000000", "1000000000"),
            ("-000000000123456789012", "-123456789012"),
            (
                "123456789012345678901234567890",
                "123456789012345678901234567890",
            ),
        ] {
            assert_eq!(big(text).to_string(), printed, "{text}");
        }
        for bad in [
            "", "+", "-", "1.5", "1e3", " 1", "1 ", "0x10", "--1", "1_000",
        ] {
            assert_eq!(BigInt::parse(bad.as_bytes()), None, "{bad:?}");
        }
    }

    #[test]
    fn adds_and_subtracts_across_signs_and_limbs() {
        for (a, b, sum) in [
            ("1", "2", "3"),
            ("999999999", "1", "1000000000"),
            ("1000000000", "-1", "999999999"),
            ("-5", "3", "-2"),
            ("5", "-5", "0"),
            ("-5", "-5", "-10"),
            ("3", "-5", "-2"),
            ("9223372036854775807", "1", "9223372036854775808"),
            (
                "-99999999999999999999999999",
                "100000000000000000000000000",
                "1",
            ),
        ] {
            assert_eq!(big(a).add(&big(b)).to_string(), sum, "{a} + {b}");
            assert_eq!(
                big(sum).sub(&big(b)).to_string(),
                big(a).to_string(),
                "{sum} - {b}"
            );
        }
        assert_eq!(big("7").sub(&big("0")).to_string(), "7");
        assert_eq!(big("0").sub(&big("7")).to_string(), "-7");
    }
}
