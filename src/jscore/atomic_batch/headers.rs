//! A batch member's headers: `Nats-Batch-Id` (at most 64 bytes), `Nats-Batch-Sequence`
//! (from 1) and `Nats-Batch-Commit` (`1`: commit with this message; `eob`: commit without
//! it, 2.14), read as nats-server reads them (values trimmed; an empty value is absent).

use crate::wire::headers::lookup;

use super::error::BatchError;

pub const BATCH_ID: &str = "Nats-Batch-Id";
pub const BATCH_SEQUENCE: &str = "Nats-Batch-Sequence";
pub const BATCH_COMMIT: &str = "Nats-Batch-Commit";
/// nats-server's longest batch id.
pub const MAX_BATCH_ID_LEN: usize = 64;

/// What `Nats-Batch-Commit` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// Absent or empty: the batch goes on.
    No,
    /// `1`: the batch ends with this message and is stored.
    Including,
    /// `eob`: the batch ends before this message, which is not stored.
    EndOfBatch,
    /// Anything else (10200).
    Invalid,
}

/// A batch member's batch headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchMember {
    pub id: String,
    pub seq: u64,
    pub commit: Commit,
}

fn value<'a>(block: &'a [u8], name: &str) -> Option<&'a [u8]> {
    lookup(block, name)
        .map(<[u8]>::trim_ascii_end)
        .filter(|value| !value.is_empty())
}

/// The batch id, if the message is a batch member.
pub fn batch_id(block: &[u8]) -> Option<&[u8]> {
    value(block, BATCH_ID)
}

/// The batch headers of a member (a message whose [`batch_id`] is set), or the refusal
/// nats-server answers: 10179 for a long id, 10175 for a missing or unreadable sequence.
pub fn parse_member(block: &[u8]) -> Result<BatchMember, BatchError> {
    let id = batch_id(block).ok_or(BatchError::Incomplete)?;
    if id.len() > MAX_BATCH_ID_LEN {
        return Err(BatchError::InvalidId);
    }
    let seq = value(block, BATCH_SEQUENCE)
        .and_then(|seq| std::str::from_utf8(seq).ok()?.parse::<u64>().ok())
        .ok_or(BatchError::MissingSeq)?;
    let commit = match value(block, BATCH_COMMIT) {
        None => Commit::No,
        Some(b"1") => Commit::Including,
        Some(b"eob") => Commit::EndOfBatch,
        Some(_) => Commit::Invalid,
    };
    Ok(BatchMember {
        id: String::from_utf8_lossy(id).into_owned(),
        seq,
        commit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(headers: &[(&str, &str)]) -> Vec<u8> {
        let mut out = String::from("NATS/1.0\r\n");
        for (name, value) in headers {
            out += &format!("{name}: {value}\r\n");
        }
        (out + "\r\n").into_bytes()
    }

    #[test]
    fn members_parse_as_nats_server_reads_them() {
        let member = parse_member(&block(&[(BATCH_ID, "b"), (BATCH_SEQUENCE, "3")])).unwrap();
        assert_eq!((member.id.as_str(), member.seq), ("b", 3));
        assert_eq!(member.commit, Commit::No);
        for (commit, expected) in [
            ("1", Commit::Including),
            ("eob", Commit::EndOfBatch),
            ("yes", Commit::Invalid),
            ("0", Commit::Invalid),
            ("", Commit::No),
        ] {
            let headers = [
                (BATCH_ID, "b"),
                (BATCH_SEQUENCE, "1"),
                (BATCH_COMMIT, commit),
            ];
            assert_eq!(parse_member(&block(&headers)).unwrap().commit, expected);
        }
    }

    #[test]
    fn bad_ids_and_sequences_are_refused() {
        let long = "A".repeat(65);
        let ok = "A".repeat(64);
        assert!(parse_member(&block(&[(BATCH_ID, &ok), (BATCH_SEQUENCE, "1")])).is_ok());
        assert_eq!(
            parse_member(&block(&[(BATCH_ID, &long), (BATCH_SEQUENCE, "1")])),
            Err(BatchError::InvalidId)
        );
        for seq in [None, Some("x"), Some("-1"), Some("")] {
            let mut headers = vec![(BATCH_ID, "b")];
            headers.extend(seq.map(|seq| (BATCH_SEQUENCE, seq)));
            assert_eq!(parse_member(&block(&headers)), Err(BatchError::MissingSeq));
        }
        assert_eq!(batch_id(&block(&[(BATCH_ID, "")])), None);
        let codes = [
            (BatchError::InvalidId, 10179),
            (BatchError::MissingSeq, 10175),
            (BatchError::Incomplete, 10176),
            (BatchError::UnsupportedHeader("X"), 10177),
            (BatchError::TooLarge { max: 1000 }, 10199),
            (BatchError::InvalidCommit, 10200),
            (BatchError::DuplicateMsgId, 10201),
        ];
        for (error, code) in codes {
            let api = error.to_api_error();
            assert_eq!((api.code, api.err_code), (400, code), "{error}");
            assert_eq!(api.description, error.to_string());
        }
        let api = BatchError::TooManyInflight.to_api_error();
        assert_eq!((api.code, api.err_code), (429, 10210));
    }
}
