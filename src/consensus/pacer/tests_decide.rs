//! The pacer's per-replica decisions, on a simulated clock.

use rand::rngs::StdRng;
use rand::SeedableRng;

use super::*;

const ME: NodeId = 1;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn peer(id: NodeId, matched: Option<u64>, alive: bool) -> Peer {
    Peer { id, matched, alive }
}

fn leader_obs<'a>(now: Instant, last_log: u64, peers: &'a [Peer]) -> Observation<'a> {
    Observation {
        now,
        role: Role::Leader,
        term: 3,
        leader: Some(ME),
        leader_alive: true,
        leader_contact: None,
        last_log: Some(last_log),
        last_applied: Some(last_log),
        peers,
        since_quorum_ack: Some(ms(10)),
        lease_holds: true,
        may_elect: true,
    }
}

fn follower_obs(
    now: Instant,
    contact: Option<Instant>,
    leader_alive: bool,
) -> Observation<'static> {
    Observation {
        now,
        role: Role::Voter,
        term: 3,
        leader: Some(2),
        leader_alive,
        leader_contact: contact,
        last_log: Some(10),
        last_applied: Some(10),
        peers: &[],
        since_quorum_ack: None,
        lease_holds: false,
        may_elect: true,
    }
}

/// Steps `pace` every 10 ms from `from` until it returns something other than Nothing.
fn first_action(
    pace: &mut Pace,
    from: Instant,
    until: Duration,
    obs: impl Fn(Instant) -> Observation<'static>,
    rng: &mut StdRng,
) -> Option<(Duration, Action)> {
    let mut at = Duration::ZERO;
    while at <= until {
        let action = pace.step(&obs(from + at), ME, rng);
        if action != Action::Nothing {
            return Some((at, action));
        }
        at += ms(10);
    }
    None
}

#[test]
fn an_active_leader_heartbeats_every_period_and_a_single_voter_never() {
    let mut rng = StdRng::seed_from_u64(1);
    let t0 = Instant::now();
    // A follower behind keeps the group from going quiet; the log is still.
    let peers = [peer(2, Some(5), true), peer(3, Some(7), true)];
    let mut pace = Pace::new(t0, &mut rng);
    let mut beats = Vec::new();
    for i in 0..35u64 {
        let obs = leader_obs(t0 + ms(i * 10), 7, &peers);
        if pace.step(&obs, ME, &mut rng) == Action::Heartbeat {
            beats.push(i * 10);
        }
    }
    assert_eq!(beats, vec![0, 100, 200, 300]);

    let mut alone = Pace::new(t0, &mut rng);
    for i in 0..50u64 {
        let obs = leader_obs(t0 + ms(i * 10), i, &[]);
        assert_eq!(alone.step(&obs, ME, &mut rng), Action::Nothing);
    }
}

#[test]
fn a_growing_log_is_its_own_heartbeat_until_it_stops() {
    let mut rng = StdRng::seed_from_u64(11);
    let t0 = Instant::now();
    let peers = [peer(2, Some(5), true), peer(3, Some(7), true)];
    let mut pace = Pace::new(t0, &mut rng);
    let mut beats = Vec::new();
    // An entry every 50 ms (a pacer round) for a second, then none for 450 ms.
    for i in 0..145u64 {
        let last_log = 7 + (i / 5).min(20);
        let obs = leader_obs(t0 + ms(i * 10), last_log, &peers);
        if pace.step(&obs, ME, &mut rng) == Action::Heartbeat {
            beats.push(i * 10);
        }
    }
    // The first at the start (a leader's first round); after the last growth, at 1 s,
    // AFTER_GROWTH then every period.
    let after = 1000 + AFTER_GROWTH.as_millis() as u64;
    assert_eq!(beats, vec![0, after, after + 100, after + 200]);
}

#[test]
fn a_leader_goes_quiet_once_its_log_is_still_and_held_by_every_live_voter() {
    let mut rng = StdRng::seed_from_u64(2);
    let t0 = Instant::now();
    let run = |peers: &[Peer], applied: u64, rng: &mut StdRng| {
        let mut pace = Pace::new(t0, rng);
        let mut quiet_at = None;
        for i in 0..400u64 {
            let mut obs = leader_obs(t0 + ms(i * 10), 7, peers);
            obs.last_applied = Some(applied);
            if pace.step(&obs, ME, rng) == Action::Quiesce {
                quiet_at = Some(ms(i * 10));
                break;
            }
        }
        (quiet_at, pace)
    };
    let all = [peer(2, Some(7), true), peer(3, Some(7), true)];
    let (at, pace) = run(&all, 7, &mut rng);
    assert_eq!(at, Some(QUIET_AFTER));
    assert_eq!(pace.mode(), Mode::Quiet);
    assert_eq!(pace.quiet_with(), Some((3, ME)));

    // A live follower behind keeps it active (it is being caught up).
    assert_eq!(
        run(
            &[peer(2, Some(7), true), peer(3, Some(6), true)],
            7,
            &mut rng
        )
        .0,
        None
    );
    // An entry not yet applied keeps it active.
    assert_eq!(run(&all, 6, &mut rng).0, None);
    // A dead follower is not waited for while a quorum holds everything...
    let one_down = [peer(2, Some(7), true), peer(3, Some(2), false)];
    assert_eq!(run(&one_down, 7, &mut rng).0, Some(QUIET_AFTER));
    // ...but without a quorum nothing is committed for sure: stay active.
    let two_down = [peer(2, None, false), peer(3, Some(2), false)];
    assert_eq!(run(&two_down, 7, &mut rng).0, None);
    // A single voter goes quiet too.
    assert_eq!(run(&[], 7, &mut rng).0, Some(QUIET_AFTER));
}

#[test]
fn a_growing_log_restarts_the_quiet_countdown() {
    let mut rng = StdRng::seed_from_u64(3);
    let t0 = Instant::now();
    let peers = [peer(2, Some(8), true)];
    let before = [peer(2, Some(7), true)];
    let mut pace = Pace::new(t0, &mut rng);
    // One more entry just before the log was still for QUIET_AFTER.
    let grows_at = QUIET_AFTER.as_millis() as u64 / 10 - 5;
    for i in 0..grows_at {
        let obs = leader_obs(t0 + ms(i * 10), 7, &before);
        assert_ne!(pace.step(&obs, ME, &mut rng), Action::Quiesce);
    }
    // Quiet QUIET_AFTER after the new entry, not after the first.
    let mut quiet_at = None;
    for i in grows_at..grows_at + 500 {
        let obs = leader_obs(t0 + ms(i * 10), 8, &peers);
        if pace.step(&obs, ME, &mut rng) == Action::Quiesce {
            quiet_at = Some(ms(i * 10));
            break;
        }
    }
    assert_eq!(quiet_at, Some(ms(grows_at * 10) + QUIET_AFTER));
}

/// For 20 seeds: how long after its last contact with its leader an active follower stands
/// for election, the leader's node alive or dead; each within `least + ELECTION_TIMEOUT`.
fn assert_elects_after_contact(leader_alive: bool, least: Duration) {
    for seed in 0..20 {
        let mut rng = StdRng::seed_from_u64(seed);
        let t0 = Instant::now();
        let mut pace = Pace::new(t0, &mut rng);
        let heard = t0 + ms(100);
        let (at, action) = first_action(
            &mut pace,
            t0,
            ms(5_000),
            |now| follower_obs(now, Some(heard), leader_alive),
            &mut rng,
        )
        .expect("elects");
        assert_eq!(action, Action::Elect);
        let after_contact = at - ms(100);
        assert!(
            after_contact >= least + ELECTION_TIMEOUT.start,
            "{after_contact:?}"
        );
        assert!(
            after_contact <= least + ELECTION_TIMEOUT.end + ms(10),
            "{after_contact:?}"
        );
    }
}

#[test]
fn an_active_follower_elects_after_the_lease_and_a_timeout_without_its_leader() {
    // Its leader's node is dead: it goes by what it heard of the group last.
    assert_elects_after_contact(false, LEADER_LEASE);
}

#[test]
fn a_follower_whose_leader_node_answers_pings_waits_the_grace_longer() {
    assert_elects_after_contact(true, LEADER_LEASE + LIVE_LEADER_GRACE);
}

#[test]
fn a_follower_hearing_its_leader_never_elects() {
    let mut rng = StdRng::seed_from_u64(4);
    let t0 = Instant::now();
    let mut pace = Pace::new(t0, &mut rng);
    for i in 0..500u64 {
        let now = t0 + ms(i * 10);
        let obs = follower_obs(now, Some(now - ms(50)), true);
        assert_eq!(pace.step(&obs, ME, &mut rng), Action::Nothing);
    }
}

#[test]
fn a_voter_that_knows_no_leader_elects_after_the_lease_and_a_timeout_then_after_each_timeout() {
    let mut rng = StdRng::seed_from_u64(5);
    let t0 = Instant::now();
    let mut pace = Pace::new(t0, &mut rng);
    let leaderless = |now| Observation {
        leader: None,
        ..follower_obs(now, None, true)
    };
    let (first, action) = first_action(&mut pace, t0, ms(2_000), leaderless, &mut rng).unwrap();
    assert_eq!(action, Action::Elect);
    // The first time it gives a leader it has not heard yet the lease.
    let first_wait =
        (LEADER_LEASE + ELECTION_TIMEOUT.start)..=(LEADER_LEASE + ELECTION_TIMEOUT.end);
    assert!(first_wait.contains(&first), "{first:?}");
    let (again, _) = first_action(
        &mut pace,
        t0 + first + ms(10),
        ms(2_000),
        leaderless,
        &mut rng,
    )
    .unwrap();
    assert!(again + ms(10) >= ELECTION_TIMEOUT.start, "{again:?}");
    assert!(again <= ELECTION_TIMEOUT.end, "{again:?}");
    // A non-voter never elects.
    let mut learner = Pace::new(t0, &mut rng);
    let not_voting = |now| Observation {
        role: Role::NonVoter,
        ..leaderless(now)
    };
    assert_eq!(
        first_action(&mut learner, t0, ms(3_000), not_voting, &mut rng),
        None
    );
}

#[test]
fn a_vote_granted_restarts_the_election_timer() {
    let mut rng = StdRng::seed_from_u64(6);
    let t0 = Instant::now();
    let mut pace = Pace::new(t0, &mut rng);
    let at_term = |term: u64, now: Instant| Observation {
        leader: None,
        term,
        ..follower_obs(now, None, true)
    };
    // At 250 ms it grants a vote in term 4 (the term changes): its own election waits a full
    // timeout from there.
    for i in 0..25u64 {
        assert_eq!(
            pace.step(&at_term(3, t0 + ms(i * 10)), ME, &mut rng),
            Action::Nothing
        );
    }
    let (at, _) = first_action(
        &mut pace,
        t0 + ms(250),
        ms(2_000),
        |now| at_term(4, now),
        &mut rng,
    )
    .unwrap();
    assert!(at >= ELECTION_TIMEOUT.start, "{at:?}");
}

#[test]
fn a_follower_goes_quiet_only_for_its_leader_at_its_term() {
    let mut rng = StdRng::seed_from_u64(7);
    let t0 = Instant::now();
    let obs = follower_obs(t0, Some(t0), true);
    let mut pace = Pace::new(t0, &mut rng);
    assert!(!pace.leader_is_quiet(&obs, 3, 3), "not its leader");
    assert!(!pace.leader_is_quiet(&obs, 2, 2), "an older term");
    assert!(pace.leader_is_quiet(&obs, 2, 3));
    assert_eq!(pace.mode(), Mode::Quiet);
    assert_eq!(pace.quiet_with(), Some((3, 2)));
    // Quiet: never stepped into an election, however long.
    let later = follower_obs(t0 + ms(60_000), Some(t0), false);
    assert_eq!(pace.step(&later, ME, &mut rng), Action::Nothing);
}

#[test]
fn a_woken_follower_of_a_dead_leader_elects_within_the_jitter() {
    for seed in 0..20 {
        let mut rng = StdRng::seed_from_u64(seed);
        let t0 = Instant::now();
        let mut pace = Pace::new(t0, &mut rng);
        assert!(pace.leader_is_quiet(&follower_obs(t0, Some(t0), true), 2, 3));
        let woke = t0 + ms(60_000);
        pace.wake(woke, Wake::Event);
        assert_eq!(pace.mode(), Mode::Waking);
        let (at, action) = first_action(
            &mut pace,
            woke,
            ms(1_000),
            |now| follower_obs(now, Some(t0), false),
            &mut rng,
        )
        .unwrap();
        assert_eq!(action, Action::Elect);
        assert!(at <= ELECT_JITTER.end, "{at:?}");
    }
}

#[test]
fn a_woken_follower_of_a_live_leader_waits_for_it_from_the_wake() {
    let mut rng = StdRng::seed_from_u64(8);
    let t0 = Instant::now();
    let mut pace = Pace::new(t0, &mut rng);
    assert!(pace.leader_is_quiet(&follower_obs(t0, Some(t0), true), 2, 3));
    let woke = t0 + ms(60_000);
    pace.wake(woke, Wake::Event);
    // Its last contact is a minute old, yet it gives the leader (whose node is alive) a lease,
    // a timeout and the grace.
    let (at, _) = first_action(
        &mut pace,
        woke,
        ms(5_000),
        |now| follower_obs(now, Some(t0), true),
        &mut rng,
    )
    .unwrap();
    assert!(
        at >= LEADER_LEASE + ELECTION_TIMEOUT.start + LIVE_LEADER_GRACE,
        "{at:?}"
    );
    // Hearing the leader after the wake makes it active.
    let mut heard = Pace::new(t0, &mut rng);
    assert!(heard.leader_is_quiet(&follower_obs(t0, Some(t0), true), 2, 3));
    heard.wake(woke, Wake::Event);
    let obs = follower_obs(woke + ms(20), Some(woke + ms(10)), true);
    assert_eq!(heard.step(&obs, ME, &mut rng), Action::Nothing);
    assert_eq!(heard.mode(), Mode::Active);
}

#[test]
fn a_woken_leader_heartbeats_at_once_and_is_active_once_a_quorum_answered() {
    let mut rng = StdRng::seed_from_u64(9);
    let t0 = Instant::now();
    let peers = [peer(2, Some(7), true), peer(3, Some(7), true)];
    let mut pace = Pace::new(t0, &mut rng);
    let mut now = t0;
    while pace.step(&leader_obs(now, 7, &peers), ME, &mut rng) != Action::Quiesce {
        now += ms(10);
    }
    let woke = now + ms(30_000);
    pace.wake(woke, Wake::Event);
    let mut obs = leader_obs(woke, 7, &peers);
    obs.since_quorum_ack = Some(ms(32_000));
    assert_eq!(pace.step(&obs, ME, &mut rng), Action::Heartbeat);
    assert_eq!(pace.mode(), Mode::Waking);
    let mut acked = leader_obs(woke + ms(20), 7, &peers);
    acked.since_quorum_ack = Some(ms(5));
    pace.step(&acked, ME, &mut rng);
    assert_eq!(pace.mode(), Mode::Active);
}

#[test]
fn a_leader_woken_by_a_proposal_sends_no_heartbeat_beside_its_append() {
    let mut rng = StdRng::seed_from_u64(10);
    let t0 = Instant::now();
    let held = [peer(2, Some(7), true), peer(3, Some(7), true)];
    let run = |followers_get_it: bool, rng: &mut StdRng| {
        let mut pace = Pace::new(t0, rng);
        let mut now = t0;
        while pace.step(&leader_obs(now, 7, &held), ME, rng) != Action::Quiesce {
            now += ms(10);
        }
        let woke = now + ms(30_000);
        pace.wake(woke, Wake::Proposal);
        assert_eq!(pace.mode(), Mode::Waking);
        let matched = Some(if followers_get_it { 8 } else { 7 });
        let peers = [peer(2, matched, true), peer(3, matched, true)];
        let mut actions = Vec::new();
        for i in 0..40u64 {
            // The entry shows in the log at the wake's next round.
            let last_log = if i < 5 { 7 } else { 8 };
            let action = pace.step(&leader_obs(woke + ms(i * 10), last_log, &peers), ME, rng);
            if action != Action::Nothing {
                actions.push((i * 10, action));
            }
        }
        actions
    };
    // Held by both followers: quiet again, no heartbeat at all.
    let quiet = 50 + QUIET_AFTER.as_millis() as u64;
    assert_eq!(run(true, &mut rng), vec![(quiet, Action::Quiesce)]);
    // Not held yet: heartbeats from AFTER_GROWTH after the entry showed.
    let first = 50 + AFTER_GROWTH.as_millis() as u64;
    assert_eq!(
        run(false, &mut rng),
        vec![(first, Action::Heartbeat), (first + 100, Action::Heartbeat)]
    );
}

/// Steps `pace` every 10 ms over `span` from `from`; returns the times it elected.
fn elections(
    pace: &mut Pace,
    from: Instant,
    span: Duration,
    obs: impl Fn(Instant) -> Observation<'static>,
    rng: &mut StdRng,
) -> Vec<Instant> {
    let mut at = Duration::ZERO;
    let mut elected = Vec::new();
    while at <= span {
        if pace.step(&obs(from + at), ME, rng) == Action::Elect {
            elected.push(from + at);
        }
        at += ms(10);
    }
    elected
}

#[test]
fn elections_that_find_no_leader_back_off_and_a_leader_seen_ends_the_backoff() {
    let mut rng = StdRng::seed_from_u64(11);
    let t0 = Instant::now();
    let mut pace = Pace::new(t0, &mut rng);
    let leaderless = |now| Observation {
        leader: None,
        ..follower_obs(now, None, true)
    };
    let times = elections(&mut pace, t0, ms(20_000), leaderless, &mut rng);
    let gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps.len() >= 5, "{gaps:?}");
    // After the first election as before; then twice, four times, eight times as long, and
    // no longer after that.
    let timeout =
        |factor: u32| (ELECTION_TIMEOUT.start * factor)..=(ELECTION_TIMEOUT.end * factor + ms(10));
    for (i, factor) in [1, 2, 4, 8, 8].into_iter().enumerate() {
        assert!(timeout(factor).contains(&gaps[i]), "gap {i}: {gaps:?}");
    }
    // A leader is seen: the next failover elects after one timeout again.
    let last = *times.last().unwrap();
    let heard = last + ms(5_000);
    assert_eq!(
        pace.step(&follower_obs(heard, Some(heard), false), ME, &mut rng),
        Action::Nothing
    );
    let (after, action) = first_action(
        &mut pace,
        heard + ms(10),
        ms(5_000),
        |now| follower_obs(now, Some(heard), false),
        &mut rng,
    )
    .unwrap();
    assert_eq!(action, Action::Elect);
    let bound = LEADER_LEASE + ELECTION_TIMEOUT.end;
    assert!(after <= bound, "{after:?}");
}

#[test]
fn a_replica_due_to_elect_waits_while_the_node_has_no_budget_and_elects_when_it_has() {
    let mut rng = StdRng::seed_from_u64(12);
    let t0 = Instant::now();
    let mut pace = Pace::new(t0, &mut rng);
    pace.step(&follower_obs(t0, Some(t0), true), ME, &mut rng);
    pace.go_quiet(3, 2);
    // Woken because its leader's node died: due after a short jitter, but out of budget.
    let woke = t0 + ms(5_000);
    pace.wake(woke, Wake::Event);
    let no_budget = |now| Observation {
        may_elect: false,
        ..follower_obs(now, Some(t0), false)
    };
    assert_eq!(
        first_action(&mut pace, woke, ms(3_000), no_budget, &mut rng),
        None
    );
    // The budget is back: it elects at its first step.
    let later = woke + ms(3_010);
    assert_eq!(
        pace.step(&follower_obs(later, Some(t0), false), ME, &mut rng),
        Action::Elect
    );
}
