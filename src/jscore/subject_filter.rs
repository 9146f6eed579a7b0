//! Subject filters as consumers and retention use them: a set of NATS subject patterns
//! (`*` matches exactly one token, `>` one or more trailing tokens) matched against the
//! literal subjects stored in a stream, plus the pattern-against-pattern overlap test that
//! work-queue streams need to refuse two consumers that could receive the same message.
//!
//! Pure data; nothing here is replicated on its own (filters are part of consumer configs).

use crate::subject::pattern::{pattern_matches, patterns_overlap};

/// The subjects a consumer selects. Empty means "every subject in the stream", which is
/// what an absent `filter_subject`/`filter_subjects` (or a lone `>`) means on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SubjectFilter {
    patterns: Vec<String>,
}

impl SubjectFilter {
    /// Selects every subject.
    pub fn all() -> Self {
        Self::default()
    }

    /// Builds a filter from wire patterns. Empty strings are ignored, and a `>` anywhere
    /// makes the filter select everything (every stored subject has at least one token).
    pub fn new<I, S>(patterns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut collected = Vec::new();
        for pattern in patterns {
            let pattern = pattern.into();
            if pattern.is_empty() {
                continue;
            }
            if pattern == ">" {
                return Self::all();
            }
            if !collected.contains(&pattern) {
                collected.push(pattern);
            }
        }
        Self {
            patterns: collected,
        }
    }

    /// True if this filter selects every subject.
    pub fn is_all(&self) -> bool {
        self.patterns.is_empty()
    }

    /// The patterns, empty when the filter selects everything.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// True if the literal stored `subject` is selected.
    pub fn matches(&self, subject: &str) -> bool {
        self.is_all()
            || self
                .patterns
                .iter()
                .any(|pattern| pattern_matches(pattern.as_bytes(), subject.as_bytes()))
    }

    /// True if some literal subject could be selected by both filters.
    pub fn overlaps(&self, other: &SubjectFilter) -> bool {
        if self.is_all() || other.is_all() {
            return true;
        }
        self.patterns.iter().any(|mine| {
            other
                .patterns
                .iter()
                .any(|theirs| patterns_overlap(mine, theirs))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_full_wildcard_select_everything() {
        assert!(SubjectFilter::new(Vec::<String>::new()).is_all());
        assert!(SubjectFilter::new(["a.b", ">"]).is_all());
        assert!(SubjectFilter::new([""]).is_all());
        assert!(SubjectFilter::all().matches("anything.at.all"));
    }

    #[test]
    fn matches_with_nats_wildcard_rules() {
        let filter = SubjectFilter::new(["orders.*", "audit.>"]);
        assert!(filter.matches("orders.new"));
        assert!(!filter.matches("orders.new.eu"));
        assert!(!filter.matches("orders"));
        assert!(filter.matches("audit.a.b.c"));
        assert!(!filter.matches("audit"));
        assert!(!filter.matches("other"));
    }

    #[test]
    fn overlap_between_patterns() {
        assert!(patterns_overlap("a.*", "a.b"));
        assert!(patterns_overlap("a.>", "a.b.c"));
        assert!(patterns_overlap("*.b", "a.*"));
        assert!(patterns_overlap("a.b", "a.b"));
        assert!(!patterns_overlap("a.b", "a.c"));
        assert!(!patterns_overlap("a", "a.>"));
        assert!(!patterns_overlap("a.*", "a.b.c"));
        assert!(patterns_overlap("a.*.c", "a.>"));
        assert!(!SubjectFilter::new(["a.b"]).overlaps(&SubjectFilter::new(["a.c", "b.>"])));
        assert!(SubjectFilter::new(["a.b"]).overlaps(&SubjectFilter::all()));
    }
}
