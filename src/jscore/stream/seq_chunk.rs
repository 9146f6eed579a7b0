//! One chunk of a chunked `SeqSet` (`seq_set.rs`): the sequences of 4096 consecutive stream
//! sequences that the set holds, as a sorted list of 12-bit offsets while it is short (2
//! bytes each) or a 4096-bit bitmap (512 bytes) once a list would be larger, with the
//! iterators and counts the set needs. Not replicated by itself (part of `StreamState`).

use super::chunk_key::SeqChunks;

const WORDS: usize = SeqChunks::WORDS;

/// Longest list: 256 offsets take 512 bytes, a bitmap's size, so a list is only used while
/// it is smaller.
const LIST_MAX: usize = 256;
/// A bitmap holding fewer than this turns back into a list.
const BITS_MIN: usize = LIST_MAX / 2;
#[derive(Clone)]
pub(super) enum Chunk {
    /// Bit `offset % 64` of word `offset / 64`; `count` bits are set.
    Bits {
        words: Box<[u64; WORDS]>,
        count: u16,
    },
    /// Ascending, at most `LIST_MAX`.
    List(Vec<u16>),
}

/// Word index of `offset` in a bitmap, and the mask of it and the bits below it.
fn bit(offset: u16) -> (usize, u64, u64) {
    let mask = 1u64 << (offset % 64);
    (usize::from(offset / 64), mask, mask | (mask - 1))
}

/// The set bits of one bitmap word as offsets: lowest first, highest from the back.
struct WordBits {
    base: u16,
    bits: u64,
}

impl Iterator for WordBits {
    type Item = u16;

    fn next(&mut self) -> Option<u16> {
        let low = self.bits.trailing_zeros() as u16;
        (self.bits != 0).then(|| {
            self.bits &= self.bits - 1;
            self.base + low
        })
    }
}

impl DoubleEndedIterator for WordBits {
    fn next_back(&mut self) -> Option<u16> {
        let high = 63u16.checked_sub(self.bits.leading_zeros() as u16)?;
        self.bits &= !(1 << high);
        Some(self.base + high)
    }
}

/// One of two iterators (a chunk's bitmap or list; a set's chunks or flat deque).
pub(super) enum Either<A, B> {
    A(A),
    B(B),
}

impl<A: Iterator, B: Iterator<Item = A::Item>> Iterator for Either<A, B> {
    type Item = A::Item;

    fn next(&mut self) -> Option<A::Item> {
        match self {
            Either::A(a) => a.next(),
            Either::B(b) => b.next(),
        }
    }
}

impl<A: DoubleEndedIterator, B: DoubleEndedIterator<Item = A::Item>> DoubleEndedIterator
    for Either<A, B>
{
    fn next_back(&mut self) -> Option<A::Item> {
        match self {
            Either::A(a) => a.next_back(),
            Either::B(b) => b.next_back(),
        }
    }
}

impl Chunk {
    pub(super) fn len(&self) -> usize {
        match self {
            Chunk::Bits { count, .. } => usize::from(*count),
            Chunk::List(list) => list.len(),
        }
    }

    pub(super) fn iter(&self) -> impl DoubleEndedIterator<Item = u16> + '_ {
        match self {
            Chunk::Bits { words, .. } => {
                Either::A(words.iter().enumerate().flat_map(|(i, &w)| WordBits {
                    base: i as u16 * 64,
                    bits: w,
                }))
            }
            Chunk::List(list) => Either::B(list.iter().copied()),
        }
    }

    pub(super) fn insert(&mut self, offset: u16) -> bool {
        let (word, mask, _) = bit(offset);
        match self {
            Chunk::Bits { words, count } => {
                let new = words[word] & mask == 0;
                words[word] |= mask;
                *count += u16::from(new);
                new
            }
            Chunk::List(list) => {
                let at = match list.last() {
                    Some(&last) if last >= offset => match list.binary_search(&offset) {
                        Ok(_) => return false,
                        Err(at) => at,
                    },
                    _ => list.len(),
                };
                if list.len() < LIST_MAX {
                    list.insert(at, offset);
                    return true;
                }
                let mut words = Box::new([0u64; WORDS]);
                for &o in list.iter() {
                    words[usize::from(o / 64)] |= 1 << (o % 64);
                }
                let count = list.len() as u16;
                *self = Chunk::Bits { words, count };
                self.insert(offset)
            }
        }
    }

    pub(super) fn remove(&mut self, offset: u16) -> bool {
        match self {
            Chunk::Bits { words, count } => {
                let (word, mask, _) = bit(offset);
                if words[word] & mask == 0 {
                    return false;
                }
                words[word] &= !mask;
                *count -= 1;
                if usize::from(*count) < BITS_MIN {
                    *self = Chunk::List(self.iter().collect());
                }
            }
            Chunk::List(list) => {
                let Ok(at) = list.binary_search(&offset) else {
                    return false;
                };
                list.remove(at);
                if list.capacity() >= 2 * list.len() + 16 {
                    list.shrink_to_fit();
                }
            }
        }
        true
    }

    /// The highest offset at or below `offset`.
    pub(super) fn last_at_or_below(&self, offset: u16) -> Option<u16> {
        match self {
            Chunk::Bits { words, .. } => {
                let (at, _, up_to) = bit(offset);
                (0..=at).rev().find_map(|i| {
                    let bits = if i == at { words[i] & up_to } else { words[i] };
                    let base = i as u16 * 64;
                    WordBits { base, bits }.next_back()
                })
            }
            Chunk::List(list) => {
                let below = list.partition_point(|&o| o <= offset);
                below.checked_sub(1).map(|i| list[i])
            }
        }
    }

    /// How many offsets are greater than `offset`.
    pub(super) fn count_above(&self, offset: u16) -> usize {
        match self {
            Chunk::Bits { words, .. } => {
                let (at, _, up_to) = bit(offset);
                let whole: u32 = words[at + 1..].iter().map(|w| w.count_ones()).sum();
                (whole + (words[at] & !up_to).count_ones()) as usize
            }
            Chunk::List(list) => list.len() - list.partition_point(|&o| o <= offset),
        }
    }
}
