//! The link against a stand-in peer that answers `RaftLink` calls after a delay.

use std::net::SocketAddr;
use std::pin::Pin;

use futures::Stream;
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Endpoint;
use tonic::{Request, Response, Status, Streaming};

use super::*;
use crate::cluster::proto::cluster_server::{Cluster, ClusterServer};
use crate::cluster::proto::raft_reply;

/// Answers every call with its own payload after the delay its group id names, in
/// milliseconds (so answers come back in another order than the calls).
#[derive(Clone, Default)]
struct Echo;

type Answers = Pin<Box<dyn Stream<Item = Result<proto::RaftAnswers, Status>> + Send>>;

#[tonic::async_trait]
impl Cluster for Echo {
    async fn hello(
        &self,
        _: Request<proto::HelloRequest>,
    ) -> Result<Response<proto::HelloReply>, Status> {
        Err(Status::unimplemented("hello"))
    }
    async fn raft(
        &self,
        _: Request<proto::RaftRequest>,
    ) -> Result<Response<proto::RaftReply>, Status> {
        Err(Status::unimplemented("raft"))
    }
    async fn propose(
        &self,
        _: Request<proto::ProposeRequest>,
    ) -> Result<Response<proto::ProposeReply>, Status> {
        Err(Status::unimplemented("propose"))
    }
    async fn route(
        &self,
        _: Request<Streaming<proto::RouteBatch>>,
    ) -> Result<Response<proto::RouteClosed>, Status> {
        Err(Status::unimplemented("route"))
    }
    async fn elect(
        &self,
        _: Request<proto::ElectRequest>,
    ) -> Result<Response<proto::ElectReply>, Status> {
        Err(Status::unimplemented("elect"))
    }
    async fn ping(
        &self,
        _: Request<proto::PingRequest>,
    ) -> Result<Response<proto::PingReply>, Status> {
        Err(Status::unimplemented("ping"))
    }
    async fn applied(
        &self,
        _: Request<proto::AppliedRequest>,
    ) -> Result<Response<proto::AppliedReply>, Status> {
        Err(Status::unimplemented("applied"))
    }

    type RaftLinkStream = Answers;

    async fn raft_link(
        &self,
        request: Request<Streaming<proto::RaftCalls>>,
    ) -> Result<Response<Answers>, Status> {
        let mut calls = request.into_inner();
        let (answers, queued) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(Some(batch)) = calls.message().await {
                for call in batch.calls {
                    let answers = answers.clone();
                    tokio::spawn(async move {
                        let request = call.request.unwrap();
                        tokio::time::sleep(Duration::from_millis(request.group)).await;
                        let reply = proto::RaftReply {
                            result: Some(raft_reply::Result::Outcome(request.payload)),
                        };
                        let _ = answers.send(proto::RaftAnswer {
                            id: call.id,
                            reply: Some(reply),
                        });
                    });
                }
            }
        });
        let stream = futures::stream::unfold(queued, |mut queued| async move {
            let answer = queued.recv().await?;
            Some((
                Ok(proto::RaftAnswers {
                    answers: vec![answer],
                }),
                queued,
            ))
        });
        Ok(Response::new(Box::pin(stream)))
    }
}

/// Serves [`Echo`] on `listener` until `stop` is cancelled.
fn serve(listener: TcpListener, stop: CancellationToken) {
    tokio::spawn(async move {
        let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
        tonic::transport::Server::builder()
            .add_service(ClusterServer::new(Echo))
            .serve_with_incoming_shutdown(incoming, stop.cancelled_owned())
            .await
    });
}

/// A link to an [`Echo`] on a free port, and the token that stops both.
async fn link_to_echo() -> (Arc<RaftLink>, CancellationToken) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    serve(listener, stop.clone());
    let link = RaftLinks::new(stop.clone()).link(&addr.to_string(), client(addr));
    (link, stop)
}

fn client(addr: SocketAddr) -> ClusterClient<Channel> {
    let endpoint = Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_timeout(Duration::from_millis(500));
    ClusterClient::new(endpoint.connect_lazy())
}

fn request(delay_ms: u64, payload: &[u8]) -> proto::RaftRequest {
    proto::RaftRequest {
        group: delay_ms,
        from: 1,
        kind: proto::RaftKind::AppendEntries as i32,
        payload: payload.to_vec(),
    }
}

fn payload_of(reply: proto::RaftReply) -> Vec<u8> {
    match reply.result {
        Some(raft_reply::Result::Outcome(bytes)) => bytes,
        other => panic!("not an outcome: {other:?}"),
    }
}

#[tokio::test]
async fn calls_given_up_by_thousands_leave_the_stream_up() {
    let (link, stop) = link_to_echo().await;
    // Over h2's 1024 resets of its own: with a stream per call, the connection would close.
    let calls = (0..3000u32).map(|i| {
        let link = link.clone();
        async move {
            link.call(request(20, &i.to_be_bytes()), Duration::from_millis(1))
                .await
        }
    });
    let given_up = futures::future::join_all(calls).await;
    assert!(given_up
        .iter()
        .all(|r| *r == Err(LinkError::TimedOut(Duration::from_millis(1)))));
    // Their answers (after 20 ms) come before this one's (50 ms) and find nobody waiting.
    let reply = link
        .call(request(50, b"still up"), Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(payload_of(reply), b"still up");
    assert_eq!(link.streams_opened(), 1);
    assert!(link.shared.pending.lock().is_empty());
    stop.cancel();
}

#[tokio::test]
async fn each_caller_gets_its_own_answer_whatever_the_order() {
    let (link, stop) = link_to_echo().await;
    // The first calls answer last.
    let calls = (0..200u64).map(|i| {
        let link = link.clone();
        async move {
            let reply = link
                .call(request(200 - i, &i.to_be_bytes()), Duration::from_secs(10))
                .await;
            (i, reply.map(payload_of))
        }
    });
    for (i, payload) in futures::future::join_all(calls).await {
        assert_eq!(payload.unwrap(), i.to_be_bytes());
    }
    assert_eq!(link.streams_opened(), 1);
    stop.cancel();
}

#[tokio::test]
async fn a_peer_down_fails_calls_and_one_back_answers_them() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let stop = CancellationToken::new();
    let link = RaftLinks::new(stop.clone()).link(&addr.to_string(), client(addr));
    let down = link.call(request(0, b"x"), Duration::from_secs(10)).await;
    assert_eq!(down, Err(LinkError::Lost));
    // Calls during the backoff fail at once, not after their timeout.
    let during = link.call(request(0, b"x"), Duration::from_secs(10)).await;
    assert_eq!(during, Err(LinkError::Lost));

    let listener = TcpListener::bind(addr).await.unwrap();
    let peer = CancellationToken::new();
    serve(listener, peer.clone());
    let deadline = Instant::now() + Duration::from_secs(10);
    let reply = loop {
        match link.call(request(0, b"back"), Duration::from_secs(1)).await {
            Ok(reply) => break reply,
            // Failed at once during the backoff: poll again shortly.
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => panic!("the peer back was never reached: {e}"),
        }
    };
    assert_eq!(payload_of(reply), b"back");
    peer.cancel();
    stop.cancel();
}
