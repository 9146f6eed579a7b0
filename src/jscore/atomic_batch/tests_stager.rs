//! The staging state machine against nats-server 2.15.1's observed answers (gaps, restarts,
//! commit forms, limits, abandonment).

use super::*;
use crate::jscore::stream::AppendError;

fn member(id: &str, seq: u64, commit: Commit) -> BatchMember {
    BatchMember {
        id: id.into(),
        seq,
        commit,
    }
}

fn limits() -> BatchLimits {
    BatchLimits {
        max_batches: 2,
        max_messages: 3,
        max_bytes: 100,
        idle_timeout_nanos: 10,
    }
}

fn stage(
    stager: &mut BatchStager<u32>,
    id: &str,
    seq: u64,
    commit: Commit,
    item: u32,
) -> StageOutcome<u32> {
    stager.stage(&member(id, seq, commit), item, 10, Ok(()), 0)
}

#[test]
fn a_batch_commits_all_its_members_in_order() {
    let mut stager = BatchStager::new(limits());
    assert_eq!(
        stage(&mut stager, "b", 1, Commit::No, 1),
        StageOutcome::Staged
    );
    assert_eq!(
        stage(&mut stager, "b", 2, Commit::No, 2),
        StageOutcome::Staged
    );
    assert_eq!(stager.staged_bytes(), 20);
    assert_eq!(
        stage(&mut stager, "b", 3, Commit::Including, 3),
        StageOutcome::Committed(CommittedBatch {
            id: "b".into(),
            members: vec![1, 2, 3]
        })
    );
    assert!(stager.is_empty());
    assert_eq!(stager.staged_bytes(), 0);
    // A one-message batch commits at once.
    assert!(matches!(
        stage(&mut stager, "c", 1, Commit::Including, 9),
        StageOutcome::Committed(batch) if batch.members == vec![9]
    ));
}

#[test]
fn end_of_batch_commits_without_its_own_message() {
    let mut stager = BatchStager::new(limits());
    stage(&mut stager, "b", 1, Commit::No, 1);
    assert!(matches!(
        stage(&mut stager, "b", 2, Commit::EndOfBatch, 2),
        StageOutcome::Committed(batch) if batch.members == vec![1]
    ));
    // An `eob` with nothing before it has nothing to commit.
    assert_eq!(
        stage(&mut stager, "c", 1, Commit::EndOfBatch, 1),
        StageOutcome::Refused(BatchError::Incomplete)
    );
    assert!(stager.is_empty());
}

#[test]
fn gaps_unknown_batches_and_restarts_drop_the_batch() {
    let mut stager = BatchStager::new(limits());
    assert_eq!(
        stage(&mut stager, "b", 2, Commit::No, 1),
        StageOutcome::Refused(BatchError::Incomplete)
    );
    assert_eq!(
        stage(&mut stager, "b", 0, Commit::No, 1),
        StageOutcome::Refused(BatchError::Incomplete)
    );
    stage(&mut stager, "b", 1, Commit::No, 1);
    assert_eq!(
        stage(&mut stager, "b", 3, Commit::No, 3),
        StageOutcome::Refused(BatchError::Incomplete)
    );
    // Gone: the next member is refused too, nothing is committed.
    assert_eq!(
        stage(&mut stager, "b", 2, Commit::Including, 2),
        StageOutcome::Refused(BatchError::Incomplete)
    );
    stage(&mut stager, "c", 1, Commit::No, 1);
    assert_eq!(
        stage(&mut stager, "c", 1, Commit::No, 1),
        StageOutcome::Refused(BatchError::Incomplete)
    );
    assert_eq!(
        stage(&mut stager, "c", 2, Commit::Including, 2),
        StageOutcome::Refused(BatchError::Incomplete)
    );
    assert!(stager.is_empty());
    assert_eq!(stager.staged_bytes(), 0);
}

#[test]
fn an_invalid_commit_drops_the_batch() {
    let mut stager = BatchStager::new(limits());
    stage(&mut stager, "b", 1, Commit::No, 1);
    assert_eq!(
        stage(&mut stager, "b", 2, Commit::Invalid, 2),
        StageOutcome::Refused(BatchError::InvalidCommit)
    );
    assert!(stager.is_empty());
}

#[test]
fn limits_bound_batches_members_and_bytes() {
    let mut stager = BatchStager::new(limits());
    stage(&mut stager, "a", 1, Commit::No, 1);
    stage(&mut stager, "b", 1, Commit::No, 1);
    assert_eq!(
        stage(&mut stager, "c", 1, Commit::Including, 1),
        StageOutcome::Refused(BatchError::TooManyInflight)
    );
    stage(&mut stager, "a", 2, Commit::No, 2);
    stage(&mut stager, "a", 3, Commit::No, 3);
    assert_eq!(
        stage(&mut stager, "a", 4, Commit::Including, 4),
        StageOutcome::Refused(BatchError::TooLarge { max: 3 })
    );
    // Bytes: 100 in all; "b" holds 10, a 95-byte member does not fit.
    let big = stager.stage(&member("b", 2, Commit::No), 2, 95, Ok(()), 0);
    assert_eq!(big, StageOutcome::Refused(BatchError::TooManyInflight));
    assert!(stager.is_empty());
    assert_eq!(stager.staged_bytes(), 0);
}

#[test]
fn a_refused_member_is_answered_at_the_commit() {
    let mut stager = BatchStager::new(limits());
    stage(&mut stager, "b", 1, Commit::No, 1);
    let refused = stager.stage(
        &member("b", 2, Commit::No),
        2,
        10,
        Err(AppendError::TtlDisabled.into()),
        0,
    );
    assert_eq!(refused, StageOutcome::Staged);
    assert_eq!(stager.staged_bytes(), 0);
    assert_eq!(
        stage(&mut stager, "b", 3, Commit::Including, 3),
        StageOutcome::Refused(BatchError::Member(AppendError::TtlDisabled))
    );
    assert!(stager.is_empty());
}

#[test]
fn idle_batches_are_abandoned() {
    let mut stager = BatchStager::new(limits());
    assert_eq!(stager.next_idle_deadline(), None);
    stager.stage(&member("a", 1, Commit::No), 1, 10, Ok(()), 0);
    stager.stage(&member("b", 1, Commit::No), 1, 10, Ok(()), 5);
    assert_eq!(stager.next_idle_deadline(), Some(10));
    assert!(stager.abandon_idle(9).is_empty());
    assert_eq!(stager.abandon_idle(10), vec!["a".to_string()]);
    assert_eq!(stager.next_idle_deadline(), Some(15));
    assert_eq!(
        stager.stage(&member("a", 2, Commit::Including), 2, 10, Ok(()), 11),
        StageOutcome::Refused(BatchError::Incomplete)
    );
    // Activity keeps a batch alive.
    stager.stage(&member("b", 2, Commit::No), 2, 10, Ok(()), 14);
    assert!(stager.abandon_idle(20).is_empty());
    assert_eq!(stager.abandon_idle(24), vec!["b".to_string()]);
    assert!(stager.is_empty());
    assert_eq!(stager.staged_bytes(), 0);
}
