//! Who starts a new replicated group's first election (`Bootstrap`), over an in-memory mesh of
//! three voters in one process: the first voter leads in term 1 even when it starts after the
//! others, and without it the others elect a leader once they stop waiting for it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use openraft::error::InstallSnapshotError;
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use parking_lot::Mutex;

use super::support::*;
use crate::consensus::group::{Bootstrap, GroupOptions, GroupStart, RaftGroup, BOOTSTRAP_FALLBACK};
use crate::consensus::network::{unreachable_error, PeerTransport, RpcError, RpcFuture};
use crate::consensus::node_storage::NodeStorage;
use crate::consensus::pacer::Pacer;
use crate::consensus::types::{Command, GroupId, Node, NodeId, Raft, Response, TypeConfig};

const GROUP: GroupId = 11;
const VOTERS: [NodeId; 3] = [1, 2, 3];

/// Every started voter by node id; an RPC to one not started fails as unreachable, as over
/// gRPC to a node that does not run the group yet.
#[derive(Clone, Default)]
struct Mesh {
    nodes: Arc<Mutex<HashMap<NodeId, Raft>>>,
}

impl Mesh {
    /// Hands an RPC to `target`'s openraft, or fails as unreachable if it has not started.
    fn call<T, E, F, Fut>(&self, target: NodeId, rpc: F) -> RpcFuture<T, RpcError<E>>
    where
        T: Send + 'static,
        E: std::error::Error + Send + 'static,
        F: FnOnce(Raft) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<T, openraft::error::RaftError<NodeId, E>>> + Send,
    {
        let raft = self.nodes.lock().get(&target).cloned();
        Box::pin(async move {
            let raft = raft.ok_or_else(|| unreachable_error("not started"))?;
            rpc(raft)
                .await
                .map_err(|e| unreachable_error(e.to_string()))
        })
    }
}

impl PeerTransport for Mesh {
    fn append_entries(
        &self,
        _group: GroupId,
        target: NodeId,
        _node: Node,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> RpcFuture<AppendEntriesResponse<NodeId>, RpcError> {
        self.call(target, |raft| async move { raft.append_entries(rpc).await })
    }

    fn vote(
        &self,
        _group: GroupId,
        target: NodeId,
        _node: Node,
        rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> RpcFuture<VoteResponse<NodeId>, RpcError> {
        self.call(target, |raft| async move { raft.vote(rpc).await })
    }

    fn install_snapshot(
        &self,
        _group: GroupId,
        target: NodeId,
        _node: Node,
        rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> RpcFuture<InstallSnapshotResponse<NodeId>, RpcError<InstallSnapshotError>> {
        self.call(
            target,
            |raft| async move { raft.install_snapshot(rpc).await },
        )
    }
}

fn voters() -> BTreeMap<NodeId, Node> {
    VOTERS
        .iter()
        .map(|id| (*id, Node::new(format!("mesh-{id}"))))
        .collect()
}

async fn start_voter(
    mesh: &Mesh,
    storage: &NodeStorage,
    node: NodeId,
    bootstrap: Bootstrap,
) -> RaftGroup {
    let group = RaftGroup::start(GroupStart {
        group: GROUP,
        node,
        voters: voters(),
        storage: storage.clone(),
        transport: Arc::new(mesh.clone()),
        machine: Box::new(Counters::default()),
        options: GroupOptions::default(),
        bootstrap,
        pacer: Pacer::start(node),
    })
    .await
    .expect("voter starts");
    mesh.nodes.lock().insert(node, group.raft().clone());
    group
}

/// Proposes `command` on whichever of `groups` leads, again while leadership settles: two
/// voters that stop waiting for the first one at the same moment may both initialize, and
/// openraft lets the higher node id take over term 1 from a leader just elected, so the
/// leader a test saw first can be gone by the time it proposes.
async fn propose_on_the_leader(groups: &[&RaftGroup], command: Command) -> Response {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            for group in groups {
                let metrics = group.raft().metrics().borrow().clone();
                if metrics.current_leader == Some(metrics.id) {
                    if let Ok(response) = group.propose(command.clone()).await {
                        return response;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("a leader takes the proposal")
}

fn term(group: &RaftGroup) -> u64 {
    group.raft().metrics().borrow().current_term
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_voter_leads_in_term_one_though_it_starts_last() {
    let dirs: Vec<_> = VOTERS
        .iter()
        .map(|_| tempfile::tempdir().unwrap())
        .collect();
    let storages: Vec<_> = dirs.iter().map(|d| open_storage(d.path())).collect();
    let mesh = Mesh::default();
    // Voters 2 and 3 run before the first one; they stand for nothing on their own.
    let second = start_voter(&mesh, &storages[1], 2, Bootstrap::First(1)).await;
    let third = start_voter(&mesh, &storages[2], 3, Bootstrap::First(1)).await;
    let first = start_voter(&mesh, &storages[0], 1, Bootstrap::First(1)).await;

    let wait = Duration::from_secs(10);
    assert_eq!(first.wait_for_leader(wait).await.unwrap(), 1);
    assert_eq!(second.wait_for_leader(wait).await.unwrap(), 1);
    assert_eq!(third.wait_for_leader(wait).await.unwrap(), 1);
    // One election, won at once: nobody ran another next to it.
    assert_eq!(term(&first), 1);

    // The group works: the leader's proposal is committed and applied.
    let response = first.propose(increment("c")).await.unwrap();
    assert_eq!(value_of(&response), 1);
    assert_eq!(term(&first), 1);
    for group in [&first, &second, &third] {
        group.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_first_voter_the_others_elect_a_leader_after_the_fallback() {
    let dirs: Vec<_> = VOTERS
        .iter()
        .map(|_| tempfile::tempdir().unwrap())
        .collect();
    let storages: Vec<_> = dirs.iter().map(|d| open_storage(d.path())).collect();
    let mesh = Mesh::default();
    let started = tokio::time::Instant::now();
    let second = start_voter(&mesh, &storages[1], 2, Bootstrap::First(1)).await;
    let third = start_voter(&mesh, &storages[2], 3, Bootstrap::First(1)).await;

    let leader = second
        .wait_for_leader(BOOTSTRAP_FALLBACK + Duration::from_secs(10))
        .await
        .expect("the two running voters elect a leader");
    assert!(leader == 2 || leader == 3, "leader {leader}");
    let wait = Duration::from_secs(10);
    assert_eq!(third.wait_for_leader(wait).await.unwrap(), leader);
    // They waited for the first voter before initializing on their own.
    assert!(started.elapsed() >= BOOTSTRAP_FALLBACK);
    assert_eq!(second.voter_ids(), third.voter_ids());
    assert_eq!(second.voter_ids().len(), 3, "the first voter stays a voter");
    let response = propose_on_the_leader(&[&second, &third], increment("c")).await;
    assert_eq!(value_of(&response), 1);
    for group in [&second, &third] {
        group.shutdown().await.unwrap();
    }
}

/// A voter whose store was replaced (amnesiac, `amnesia.rs`) neither initializes the group nor
/// campaigns; the leader rebuilds it, and once it applied an entry of the leader's term it
/// leaves the register, durably, and may vote again (ADR 0015).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_amnesiac_voter_is_rebuilt_by_the_leader_and_only_then_votes_again() {
    let dirs: Vec<_> = VOTERS
        .iter()
        .map(|_| tempfile::tempdir().unwrap())
        .collect();
    crate::consensus::amnesia::Amnesia::load(dirs[0].path())
        .forget_everything("test: store replaced".into())
        .unwrap();
    let storages: Vec<_> = dirs.iter().map(|d| open_storage(d.path())).collect();
    let mesh = Mesh::default();
    // Voter 1 would initialize the group at once and lead in term 1 (the test above);
    // amnesiac, it waits to be told, and the others elect one of them after their fallback.
    let first = start_voter(&mesh, &storages[0], 1, Bootstrap::First(1)).await;
    assert!(first.signals().is_amnesiac());
    let second = start_voter(&mesh, &storages[1], 2, Bootstrap::First(1)).await;
    let third = start_voter(&mesh, &storages[2], 3, Bootstrap::First(1)).await;
    let wait = BOOTSTRAP_FALLBACK + Duration::from_secs(10);
    let leader = second.wait_for_leader(wait).await.unwrap();
    assert_ne!(leader, 1, "the amnesiac voter led");
    propose_on_the_leader(&[&second, &third], increment("c")).await;
    first
        .raft()
        .wait(Some(Duration::from_secs(10)))
        .metrics(|m| m.last_applied.is_some_and(|a| a.index >= 1), "rebuilt")
        .await
        .expect("the amnesiac voter is rebuilt from the leader");
    tokio::time::timeout(Duration::from_secs(10), async {
        while first.signals().is_amnesiac() || storages[0].amnesia.is_amnesiac(GROUP) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the rebuilt voter leaves the register");
    assert!(!crate::consensus::amnesia::Amnesia::load(dirs[0].path()).is_amnesiac(GROUP));
    for group in [&first, &second, &third] {
        group.shutdown().await.unwrap();
    }
}
