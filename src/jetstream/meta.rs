//! The meta group (group 0, every node a voter): which streams exist, their configuration,
//! creation time and the Raft group id each stream runs as. Every node's `JetStream`
//! reconciles the stream groups it runs against this state.
//!
//! Consumers are not meta state here: a consumer's definition and its ack state live in its
//! stream's group, so one snapshot holds both and they can never disagree (see
//! docs/adr/0001-consumers-in-the-stream-group.md).
//!
//! Keys in the group's sled space (append-only formats): `v2/s/<name>` → the stream's
//! `StoredAssignment` (with its replica nodes); `v1/s/<name>` → the same without replicas,
//! written before clustering (read as placed on the single node; rewritten as `v2` on the next
//! change); `v1/next` → the next group id to assign.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::meta_subjects::SubjectOwners;
use super::payload::{self, JsonValue, META_COMMAND_V1};
use crate::consensus::machine::ApplyPosition;
use crate::consensus::{
    Command, GroupId, GroupMachine, MachineError, MachineTxn, MachineView, Response,
};
use crate::consensus::{NodeId, SINGLE_NODE_ID};
use crate::jsapi::{ApiError, ErrorKind, StreamConfig};

pub const META_GROUP: GroupId = 0;
const STREAM_KEY_PREFIX_V1: &[u8] = b"v1/s/";
const STREAM_KEY_PREFIX: &[u8] = b"v2/s/";
const NEXT_GROUP_KEY: &[u8] = b"v1/next";
/// Stream groups are numbered from 1; 0 is the meta group.
const FIRST_STREAM_GROUP: GroupId = 1;

/// Meta commands. Append-only: never reorder or remove a variant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetaCommand {
    /// A stream on the single node ([`SINGLE_NODE_ID`]). No longer proposed: kept (with its
    /// tag) only to decode the logs of nodes that ran before one node proposed
    /// `CreateStreamOn` like a cluster does.
    CreateStream {
        config: JsonValue<StreamConfig>,
        created_nanos: i64,
    },
    UpdateStream {
        config: JsonValue<StreamConfig>,
    },
    DeleteStream {
        name: String,
    },
    /// A stream placed on `replicas` (node ids, in placement order).
    CreateStreamOn {
        config: JsonValue<StreamConfig>,
        created_nanos: i64,
        replicas: Vec<NodeId>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetaOutcome {
    /// `created` is false when an identical stream already existed.
    Created {
        group: GroupId,
        created: bool,
    },
    Updated {
        group: GroupId,
    },
    Deleted {
        group: GroupId,
    },
}

/// One stream as the meta group knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamAssignment {
    pub config: StreamConfig,
    pub created_nanos: i64,
    pub group: GroupId,
    /// The nodes hosting the stream's group (its voters).
    pub replicas: Vec<NodeId>,
}

/// `v1/s/<name>`: written before streams had replicas.
#[derive(Serialize, Deserialize)]
struct StoredAssignmentV1 {
    config: JsonValue<StreamConfig>,
    created_nanos: i64,
    group: GroupId,
}

/// `v2/s/<name>`.
#[derive(Serialize, Deserialize)]
struct StoredAssignment {
    config: JsonValue<StreamConfig>,
    created_nanos: i64,
    group: GroupId,
    replicas: Vec<NodeId>,
}

/// The meta state: identical on every node that applied the same entries.
#[derive(Debug, Default)]
pub struct MetaState {
    streams: BTreeMap<String, StreamAssignment>,
    next_group: GroupId,
    /// The subjects of `streams`, indexed for the overlap check; changed with them.
    subjects: SubjectOwners,
}

impl MetaState {
    pub fn streams(&self) -> &BTreeMap<String, StreamAssignment> {
        &self.streams
    }

    pub fn stream(&self, name: &str) -> Option<&StreamAssignment> {
        self.streams.get(name)
    }

    /// Applies one command; refusals are deterministic `ApiError`s.
    pub fn apply(&mut self, command: MetaCommand) -> Result<MetaOutcome, ApiError> {
        match command {
            MetaCommand::CreateStream {
                config: JsonValue(config),
                created_nanos,
            } => self.create(config, created_nanos, vec![SINGLE_NODE_ID]),
            MetaCommand::CreateStreamOn {
                config: JsonValue(config),
                created_nanos,
                replicas,
            } => self.create(config, created_nanos, replicas),
            MetaCommand::UpdateStream {
                config: JsonValue(config),
            } => {
                self.check_overlap(&config)?;
                let existing = self
                    .streams
                    .get_mut(&config.name)
                    .ok_or_else(|| ApiError::new(ErrorKind::StreamNotFound))?;
                self.subjects.set(&config.name, &config.subjects);
                existing.config = config;
                Ok(MetaOutcome::Updated {
                    group: existing.group,
                })
            }
            MetaCommand::DeleteStream { name } => {
                let removed = self
                    .streams
                    .remove(&name)
                    .ok_or_else(|| ApiError::new(ErrorKind::StreamNotFound))?;
                self.subjects.remove(&name);
                Ok(MetaOutcome::Deleted {
                    group: removed.group,
                })
            }
        }
    }

    fn create(
        &mut self,
        config: StreamConfig,
        created_nanos: i64,
        replicas: Vec<NodeId>,
    ) -> Result<MetaOutcome, ApiError> {
        if let Some(existing) = self.streams.get(&config.name) {
            if existing.config == config {
                return Ok(MetaOutcome::Created {
                    group: existing.group,
                    created: false,
                });
            }
            return Err(ApiError::new(ErrorKind::StreamNameExist));
        }
        self.check_overlap(&config)?;
        let group = self.next_group.max(FIRST_STREAM_GROUP);
        self.next_group = group + 1;
        self.insert(StreamAssignment {
            config,
            created_nanos,
            group,
            replicas,
        });
        Ok(MetaOutcome::Created {
            group,
            created: true,
        })
    }

    /// Adds (or replaces) a stream and its subjects in the index.
    fn insert(&mut self, assignment: StreamAssignment) {
        let name = assignment.config.name.clone();
        self.subjects.set(&name, &assignment.config.subjects);
        self.streams.insert(name, assignment);
    }

    /// Subjects may not overlap another stream's (nats-server err 10065). Asks the subject
    /// index rather than every stream (see `meta_subjects`).
    fn check_overlap(&self, config: &StreamConfig) -> Result<(), ApiError> {
        if self.subjects.overlaps(&config.subjects, &config.name) {
            return Err(ApiError::new(ErrorKind::StreamSubjectOverlap));
        }
        Ok(())
    }
}

/// Read access to the meta state, shared by the machine (writer) and the front. It outlives
/// the machine: a meta group restarted by the supervisor gets a machine writing to the same
/// view (`MetaMachine::for_view`), so readers and `applied` watchers carry on.
#[derive(Debug, Clone)]
pub struct MetaView {
    state: Arc<RwLock<MetaState>>,
    /// What every machine of this view announces applied indexes on.
    announce: Arc<watch::Sender<u64>>,
    applied: watch::Receiver<u64>,
    changed: Arc<Mutex<ChangedStreams>>,
}

/// The streams whose assignment may have changed since reconciliation last looked: the names
/// applied commands touched, or every stream after the state was (re)loaded. Lets a node
/// reconcile one create in O(1) rather than comparing every assignment (10,000 streams).
#[derive(Debug, Default)]
pub struct ChangedStreams {
    pub all: bool,
    pub names: BTreeSet<String>,
}

impl MetaView {
    pub fn read<R>(&self, f: impl FnOnce(&MetaState) -> R) -> R {
        f(&self.state.read())
    }

    /// The streams changed since the last call (and forgets them).
    pub fn take_changed(&self) -> ChangedStreams {
        std::mem::take(&mut self.changed.lock())
    }

    /// Changes whenever the meta machine applied an entry.
    pub fn applied(&self) -> watch::Receiver<u64> {
        self.applied.clone()
    }
}

/// The meta group's state machine.
pub struct MetaMachine {
    state: Arc<RwLock<MetaState>>,
    applied: Arc<watch::Sender<u64>>,
    changed: Arc<Mutex<ChangedStreams>>,
}

impl MetaMachine {
    pub fn new() -> (MetaMachine, MetaView) {
        let (sender, receiver) = watch::channel(0);
        let view = MetaView {
            state: Arc::new(RwLock::new(MetaState::default())),
            announce: Arc::new(sender),
            applied: receiver,
            changed: Arc::default(),
        };
        (MetaMachine::for_view(&view), view)
    }

    /// A machine writing to an existing view: the meta group restarted in place (its `load`
    /// replaces the view's state with what is stored).
    pub fn for_view(view: &MetaView) -> MetaMachine {
        MetaMachine {
            state: view.state.clone(),
            applied: view.announce.clone(),
            changed: view.changed.clone(),
        }
    }
}

impl GroupMachine for MetaMachine {
    fn load(&mut self, view: &MachineView) -> Result<(), MachineError> {
        let mut state = MetaState::default();
        // Assignments written before clustering (v1) first, so a v2 rewrite of one wins.
        let v1 = view.scan_prefix(STREAM_KEY_PREFIX_V1).map(|item| {
            let stored: StoredAssignmentV1 = payload::decode(&item?.1)
                .map_err(MachineError::undecodable_record("stream assignment"))?;
            Ok(StoredAssignment {
                config: stored.config,
                created_nanos: stored.created_nanos,
                group: stored.group,
                replicas: vec![SINGLE_NODE_ID],
            })
        });
        let v2 = view.scan_prefix(STREAM_KEY_PREFIX).map(|item| {
            payload::decode(&item?.1).map_err(MachineError::undecodable_record("stream assignment"))
        });
        for stored in v1.chain(v2) {
            let stored: StoredAssignment = stored?;
            state.insert(StreamAssignment {
                config: stored.config.0,
                created_nanos: stored.created_nanos,
                group: stored.group,
                replicas: stored.replicas,
            });
        }
        if let Some(next) = view.get(NEXT_GROUP_KEY)? {
            state.next_group = payload::decode(&next)
                .map_err(MachineError::undecodable_record("next group id"))?;
        }
        *self.state.write() = state;
        self.changed.lock().all = true;
        Ok(())
    }

    fn apply(
        &mut self,
        at: ApplyPosition,
        command: &Command,
        txn: &mut MachineTxn<'_>,
    ) -> Result<Response, MachineError> {
        let command: MetaCommand = payload::decode_command(META_COMMAND_V1, command)
            .map_err(MachineError::undecodable(at))?;
        let name = match &command {
            MetaCommand::CreateStream { config, .. }
            | MetaCommand::CreateStreamOn { config, .. }
            | MetaCommand::UpdateStream { config } => config.0.name.clone(),
            MetaCommand::DeleteStream { name } => name.clone(),
        };
        let mut state = self.state.write();
        let outcome = state.apply(command);
        if outcome.is_ok() {
            // Only the named stream (and the id counter) can have changed.
            match state.streams.get(&name) {
                Some(assignment) => {
                    let stored = StoredAssignment {
                        config: JsonValue(assignment.config.clone()),
                        created_nanos: assignment.created_nanos,
                        group: assignment.group,
                        replicas: assignment.replicas.clone(),
                    };
                    txn.insert(
                        stream_key(STREAM_KEY_PREFIX, &name),
                        payload::encode(&stored),
                    );
                }
                None => txn.remove(stream_key(STREAM_KEY_PREFIX, &name)),
            }
            txn.remove(stream_key(STREAM_KEY_PREFIX_V1, &name));
            txn.insert(NEXT_GROUP_KEY.to_vec(), payload::encode(&state.next_group));
        }
        drop(state);
        // Before the announce, so that a reconciliation it starts sees the name.
        self.changed.lock().names.insert(name);
        self.applied.send_replace(at.index);
        Ok(payload::response(&outcome))
    }
}

fn stream_key(prefix: &[u8], name: &str) -> Vec<u8> {
    let mut key = prefix.to_vec();
    key.extend_from_slice(name.as_bytes());
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(name: &str, subjects: &[&str]) -> StreamConfig {
        let mut config: StreamConfig = serde_json::from_value(serde_json::json!({
            "name": name, "subjects": subjects
        }))
        .unwrap();
        config.normalize();
        config
    }

    fn create(state: &mut MetaState, config: StreamConfig) -> Result<MetaOutcome, ApiError> {
        state.apply(MetaCommand::CreateStream {
            config: JsonValue(config),
            created_nanos: 1,
        })
    }

    #[test]
    fn a_machine_for_the_view_writes_to_it_after_the_first_is_gone() {
        let (first, view) = MetaMachine::new();
        let mut applied = view.applied();
        drop(first); // the group stopped
        let machine = MetaMachine::for_view(&view);
        create(&mut machine.state.write(), config("A", &["a"])).unwrap();
        machine.applied.send_replace(7);
        assert!(view.read(|state| state.stream("A").is_some()));
        assert!(applied
            .has_changed()
            .expect("the view's watchers still listen"));
        assert_eq!(*applied.borrow_and_update(), 7);
    }

    #[test]
    fn reconciliation_learns_which_streams_changed_and_everything_after_a_load() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::consensus::StateDb::open(dir.path()).unwrap();
        let store = MachineView::new(db, 0);
        let (mut machine, view) = MetaMachine::new();
        machine.load(&store).unwrap();
        assert!(view.take_changed().all, "a load changes everything");
        let after = view.take_changed();
        assert!(!after.all && after.names.is_empty(), "taken once");

        let mut txn = MachineTxn::new(&store);
        for (index, command) in [
            MetaCommand::CreateStream {
                config: JsonValue(config("A", &["a"])),
                created_nanos: 1,
            },
            MetaCommand::CreateStream {
                config: JsonValue(config("B", &["b"])),
                created_nanos: 1,
            },
            MetaCommand::DeleteStream { name: "A".into() },
        ]
        .iter()
        .enumerate()
        {
            let at = ApplyPosition {
                index: index as u64 + 1,
                position: 0,
            };
            let command = payload::command(META_COMMAND_V1, command);
            machine.apply(at, &command, &mut txn).unwrap();
        }
        let changed = view.take_changed();
        assert!(!changed.all);
        assert_eq!(
            changed.names.into_iter().collect::<Vec<_>>(),
            ["A", "B"],
            "the names the applied commands touched, each once"
        );
        assert!(view.take_changed().names.is_empty());
    }

    #[test]
    fn create_is_idempotent_and_refuses_a_different_config() {
        let mut state = MetaState::default();
        let orders = config("ORDERS", &["orders.*"]);
        assert_eq!(
            create(&mut state, orders.clone()),
            Ok(MetaOutcome::Created {
                group: 1,
                created: true
            })
        );
        assert_eq!(
            create(&mut state, orders),
            Ok(MetaOutcome::Created {
                group: 1,
                created: false
            })
        );
        let err = create(&mut state, config("ORDERS", &["other.*"])).unwrap_err();
        assert_eq!(err.err_code, 10058);
    }

    #[test]
    fn overlapping_subjects_are_refused_and_groups_are_never_reused() {
        let mut state = MetaState::default();
        create(&mut state, config("A", &["a.>"])).unwrap();
        let err = create(&mut state, config("B", &["a.b"])).unwrap_err();
        assert_eq!(err.err_code, 10065);
        state
            .apply(MetaCommand::DeleteStream { name: "A".into() })
            .unwrap();
        assert_eq!(
            create(&mut state, config("B", &["a.b"])),
            Ok(MetaOutcome::Created {
                group: 2,
                created: true
            })
        );
        let err = state
            .apply(MetaCommand::DeleteStream { name: "A".into() })
            .unwrap_err();
        assert_eq!(err.err_code, 10059);
    }

    /// The subject index answers exactly as comparing with every stream did, through creates,
    /// updates and deletes of random streams, and after a reload.
    #[test]
    fn the_subject_index_refuses_exactly_what_pairwise_comparison_refuses() {
        let mut rng = crate::subject::random_patterns::Rng(0x2545_f491_4f6c_dd1d);
        let mut state = MetaState::default();
        for _ in 0..3000 {
            let name = format!("S{}", rng.below(12));
            let subjects: Vec<String> = (0..1 + rng.below(3)).map(|_| rng.pattern()).collect();
            let subjects: Vec<&str> = subjects.iter().map(String::as_str).collect();
            let candidate = config(&name, &subjects);
            let pairwise = state.streams().values().any(|other| {
                other.config.name != name && other.config.subjects_overlap(&candidate)
            });
            let exists = state.stream(&name).is_some();
            let command = match rng.below(3) {
                0 if exists => MetaCommand::DeleteStream { name },
                1 if exists => MetaCommand::UpdateStream {
                    config: JsonValue(candidate),
                },
                _ if exists => continue,
                _ => MetaCommand::CreateStream {
                    config: JsonValue(candidate),
                    created_nanos: 1,
                },
            };
            let deleting = matches!(command, MetaCommand::DeleteStream { .. });
            let refused = state.apply(command).is_err_and(|e| e.err_code == 10065);
            assert_eq!(refused, pairwise && !deleting);
        }
        let mut reloaded = MetaState::default();
        for assignment in state.streams().values() {
            reloaded.insert(assignment.clone());
        }
        for _ in 0..300 {
            let candidate = config("NEW", &[&rng.pattern()]);
            assert_eq!(
                reloaded.check_overlap(&candidate).is_err(),
                state.check_overlap(&candidate).is_err()
            );
        }
    }
}
