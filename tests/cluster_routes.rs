//! Core NATS across nodes: in-process nodes joined by the gRPC route (`cluster::route`), with
//! real clients connected to different nodes.
//!
//! Each node gets a tonic server with a test-only `Cluster` service whose `route` is
//! `Routes::serve_inbound`; the other RPCs are not needed here. Interest propagates
//! asynchronously, so every test first waits (bounded) until it has arrived.

mod common;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{connect, wait_until, within};
use futures::{FutureExt, StreamExt};
use jetraft::cluster::proto;
use jetraft::cluster::proto::cluster_server::{Cluster, ClusterServer};
use jetraft::cluster::route::Routes;
use jetraft::node::RunningNode;
use jetraft::server::dispatch;
use jetraft::server::message::Message;
use jetraft::server::subscription::InternalSubscriber;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

struct TestCluster {
    routes: Arc<Routes>,
}

#[tonic::async_trait]
impl Cluster for TestCluster {
    async fn hello(
        &self,
        _: Request<proto::HelloRequest>,
    ) -> Result<Response<proto::HelloReply>, Status> {
        Err(Status::unimplemented("test cluster"))
    }

    async fn raft(
        &self,
        _: Request<proto::RaftRequest>,
    ) -> Result<Response<proto::RaftReply>, Status> {
        Err(Status::unimplemented("test cluster"))
    }

    async fn propose(
        &self,
        _: Request<proto::ProposeRequest>,
    ) -> Result<Response<proto::ProposeReply>, Status> {
        Err(Status::unimplemented("test cluster"))
    }

    async fn elect(
        &self,
        _: Request<proto::ElectRequest>,
    ) -> Result<Response<proto::ElectReply>, Status> {
        Err(Status::unimplemented("test cluster"))
    }

    async fn ping(
        &self,
        _: Request<proto::PingRequest>,
    ) -> Result<Response<proto::PingReply>, Status> {
        Err(Status::unimplemented("test cluster"))
    }

    async fn applied(
        &self,
        _: Request<proto::AppliedRequest>,
    ) -> Result<Response<proto::AppliedReply>, Status> {
        Err(Status::unimplemented("test cluster"))
    }

    type RaftLinkStream = futures::stream::Empty<Result<proto::RaftAnswers, Status>>;

    async fn raft_link(
        &self,
        _: Request<tonic::Streaming<proto::RaftCalls>>,
    ) -> Result<Response<Self::RaftLinkStream>, Status> {
        Err(Status::unimplemented("test cluster"))
    }

    async fn route(
        &self,
        request: Request<tonic::Streaming<proto::RouteBatch>>,
    ) -> Result<Response<proto::RouteClosed>, Status> {
        self.routes
            .serve_inbound(request.into_inner())
            .await
            .map(Response::new)
    }
}

struct Node {
    id: u64,
    server: RunningNode,
    routes: Arc<Routes>,
    grpc_addr: SocketAddr,
    grpc_stop: CancellationToken,
}

impl Node {
    async fn start(id: u64) -> Node {
        let server = common::start_default().await;
        let routes = Routes::new(server.shared().clone(), id);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind grpc");
        let grpc_addr = listener.local_addr().unwrap();
        let grpc_stop = CancellationToken::new();
        let service = ClusterServer::new(TestCluster {
            routes: routes.clone(),
        })
        .max_decoding_message_size(routes.max_batch_size());
        let stop = grpc_stop.clone();
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(
                    tonic::transport::server::TcpIncoming::from(listener),
                    stop.cancelled_owned(),
                )
                .await
                .expect("grpc server");
        });
        Node {
            id,
            server,
            routes,
            grpc_addr,
            grpc_stop,
        }
    }

    fn client_to(&self) -> proto::cluster_client::ClusterClient<tonic::transport::Channel> {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", self.grpc_addr))
            .unwrap()
            .connect_lazy();
        proto::cluster_client::ClusterClient::new(channel)
    }

    async fn stop(self) {
        self.server.shutdown().await;
        self.grpc_stop.cancel();
    }
}

/// `n` nodes, every pair routed both ways.
async fn cluster(n: u64) -> Vec<Node> {
    let mut nodes = Vec::new();
    for id in 1..=n {
        nodes.push(Node::start(id).await);
    }
    for a in &nodes {
        for b in &nodes {
            if a.id != b.id {
                a.routes.add_peer(b.id, b.client_to());
            }
        }
    }
    for a in &nodes {
        for b in &nodes {
            if a.id != b.id {
                wait_until("routes connected", || {
                    a.routes.is_connected(b.id) && b.routes.has_inbound(a.id)
                })
                .await;
            }
        }
    }
    nodes
}

/// Publishes `probe` on `subject` through `client` until `received` says it arrived.
async fn publish_until(
    client: &async_nats::Client,
    subject: &str,
    mut received: impl FnMut() -> bool,
) {
    within("interest to propagate", async {
        loop {
            client
                .publish(subject.to_owned(), Bytes::from_static(b"probe"))
                .await
                .unwrap();
            client.flush().await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
            if received() {
                return;
            }
        }
    })
    .await;
}

/// Takes messages off `sub` until the payload `end`, skipping probes.
async fn collect_until_end(sub: &mut async_nats::Subscriber) -> Vec<String> {
    let mut got = Vec::new();
    within("messages to arrive", async {
        loop {
            let msg = sub.next().await.expect("subscription open");
            let payload = String::from_utf8_lossy(&msg.payload).into_owned();
            match payload.as_str() {
                "probe" => {}
                "end" => return,
                _ => got.push(payload),
            }
        }
    })
    .await;
    got
}

/// Everything already received on `sub`, without waiting. Unconstrained: tokio's
/// cooperative budget would otherwise report a ready channel as pending after ~128 items.
async fn drain_ready(sub: &mut async_nats::Subscriber) -> Vec<String> {
    tokio::task::unconstrained(async {
        let mut got = Vec::new();
        while let Some(Some(msg)) = sub.next().now_or_never() {
            got.push(String::from_utf8_lossy(&msg.payload).into_owned());
        }
        got
    })
    .await
}

#[tokio::test]
async fn pub_sub_across_nodes_delivers_one_copy_per_subscription() {
    let nodes = cluster(2).await;
    let publisher = connect(&nodes[0].server).await;
    let subscriber = connect(&nodes[1].server).await;
    // Overlapping subscriptions on the receiving node: one frame crosses the route, and each
    // subscription still gets exactly one copy.
    let mut subs = Vec::new();
    for subject in ["p.x", "p.*", "p.>"] {
        subs.push(subscriber.subscribe(subject).await.unwrap());
    }
    subscriber.flush().await.unwrap();
    wait_until("interest on node 1", || {
        nodes[0].routes.remote_interest_count(2) == 3
    })
    .await;

    let expected: Vec<String> = (0..100).map(|i| format!("m{i}")).collect();
    for payload in &expected {
        publisher
            .publish("p.x", Bytes::from(payload.clone()))
            .await
            .unwrap();
    }
    publisher.publish("p.x", "end".into()).await.unwrap();
    publisher.flush().await.unwrap();
    for sub in &mut subs {
        assert_eq!(collect_until_end(sub).await, expected);
    }
    for node in nodes {
        node.stop().await;
    }
}

#[tokio::test]
async fn a_queue_group_spread_over_two_nodes_gets_each_message_once() {
    let nodes = cluster(3).await;
    let members = [
        connect(&nodes[0].server).await,
        connect(&nodes[1].server).await,
    ];
    let mut jobs = Vec::new();
    let mut fences = Vec::new();
    for member in &members {
        jobs.push(
            member
                .queue_subscribe("jobs", "workers".into())
                .await
                .unwrap(),
        );
        fences.push(member.subscribe("fence").await.unwrap());
        member.flush().await.unwrap();
    }
    let publisher = connect(&nodes[2].server).await;
    wait_until("both members known on node 3", || {
        nodes[2].routes.remote_interest_count(1) == 2
            && nodes[2].routes.remote_interest_count(2) == 2
    })
    .await;

    for i in 0..200 {
        publisher
            .publish("jobs", Bytes::from(format!("j{i}")))
            .await
            .unwrap();
    }
    // Each route is one FIFO and each client connection too: once a member sees the fence,
    // every job routed to it is already in its subscription.
    publisher.publish("fence", "end".into()).await.unwrap();
    publisher.flush().await.unwrap();
    let mut all = Vec::new();
    let mut per_member = Vec::new();
    for (jobs, fence) in jobs.iter_mut().zip(&mut fences) {
        within("the fence", fence.next()).await.unwrap();
        let got = drain_ready(jobs).await;
        per_member.push(got.len());
        all.extend(got);
    }
    let distinct: HashSet<_> = all.iter().cloned().collect();
    assert_eq!(all.len(), 200, "per member: {per_member:?}");
    assert_eq!(distinct.len(), 200);
    assert!(per_member.iter().all(|&n| n > 0), "{per_member:?}");
    for node in nodes {
        node.stop().await;
    }
}

#[tokio::test]
async fn request_reply_across_nodes() {
    let nodes = cluster(2).await;
    let responder = connect(&nodes[1].server).await;
    let mut service = responder.subscribe("svc").await.unwrap();
    responder.flush().await.unwrap();
    let replier = responder.clone();
    tokio::spawn(async move {
        while let Some(request) = service.next().await {
            if let Some(reply) = request.reply {
                let mut answer = b"re:".to_vec();
                answer.extend_from_slice(&request.payload);
                replier.publish(reply, answer.into()).await.unwrap();
            }
        }
    });
    let requester = connect(&nodes[0].server).await;
    wait_until("svc known on node 1", || {
        nodes[0].routes.remote_interest_count(2) >= 1
    })
    .await;
    for i in 0..20 {
        let answer = within(
            "the reply",
            requester.request("svc", Bytes::from(format!("q{i}"))),
        )
        .await
        .expect("a reply from the other node");
        assert_eq!(&answer.payload[..], format!("re:q{i}").as_bytes());
    }
    for node in nodes {
        node.stop().await;
    }
}

#[tokio::test]
async fn unsubscribe_stops_forwarding() {
    let nodes = cluster(2).await;
    let publisher = connect(&nodes[0].server).await;
    let subscriber = connect(&nodes[1].server).await;
    let mut sub = subscriber.subscribe("u").await.unwrap();
    subscriber.flush().await.unwrap();
    wait_until("interest on node 1", || {
        nodes[0].routes.remote_interest_count(2) == 1
    })
    .await;
    publisher.publish("u", "one".into()).await.unwrap();
    publisher.flush().await.unwrap();
    let first = within("the first message", sub.next()).await.unwrap();
    assert_eq!(&first.payload[..], b"one");

    sub.unsubscribe().await.unwrap();
    subscriber.flush().await.unwrap();
    wait_until("interest gone from node 1", || {
        nodes[0].routes.remote_interest_count(2) == 0
            && nodes[0].server.shared().router.remote_subscription_count() == 0
    })
    .await;
    // Nobody matches any more: a request gets no-responders instead of being forwarded.
    let answer = within("no responders", publisher.request("u", "anyone?".into())).await;
    assert!(
        matches!(
            answer.map_err(|e| e.kind()),
            Err(async_nats::RequestErrorKind::NoResponders)
        ),
        "expected no responders"
    );
    for node in nodes {
        node.stop().await;
    }
}

#[tokio::test]
async fn a_nodes_interest_disappears_when_its_route_ends() {
    let mut nodes = cluster(2).await;
    let subscriber = connect(&nodes[1].server).await;
    let _sub = subscriber.subscribe("gone").await.unwrap();
    subscriber.flush().await.unwrap();
    wait_until("interest on node 1", || {
        nodes[0].routes.remote_interest_count(2) == 1
    })
    .await;
    assert_eq!(nodes[0].server.shared().router.subscription_count(), 0);

    let second = nodes.pop().unwrap();
    second.stop().await;
    let first = &nodes[0];
    wait_until("node 2's interest removed", || {
        first.routes.remote_interest_count(2) == 0
            && first.server.shared().router.remote_subscription_count() == 0
    })
    .await;
    let requester = connect(&first.server).await;
    let answer = within("no responders", requester.request("gone", "?".into())).await;
    assert!(matches!(
        answer.map_err(|e| e.kind()),
        Err(async_nats::RequestErrorKind::NoResponders)
    ));
    nodes.pop().unwrap().stop().await;
}

/// A TCP proxy whose connections can be cut (both sockets dropped), as a network fault would.
struct Proxy {
    addr: SocketAddr,
    pipes: Arc<parking_lot::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    accepted: Arc<std::sync::atomic::AtomicUsize>,
}

impl Proxy {
    async fn start(target: SocketAddr) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let pipes = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (task_pipes, task_accepted) = (pipes.clone(), accepted.clone());
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                task_accepted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let pipe = tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                task_pipes.lock().push(pipe);
            }
        });
        Proxy {
            addr,
            pipes,
            accepted,
        }
    }

    fn cut(&self) {
        for pipe in self.pipes.lock().drain(..) {
            pipe.abort();
        }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[tokio::test]
async fn a_route_reconnects_and_resends_its_interest() {
    let nodes = [Node::start(1).await, Node::start(2).await];
    // Node 2 reaches node 1 through a proxy that can cut the connection.
    let proxy = Proxy::start(nodes[0].grpc_addr).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", proxy.addr))
        .unwrap()
        .connect_lazy();
    nodes[1]
        .routes
        .add_peer(1, proto::cluster_client::ClusterClient::new(channel));
    nodes[0].routes.add_peer(2, nodes[1].client_to());

    let subscriber = connect(&nodes[1].server).await;
    let mut before = subscriber.subscribe("before").await.unwrap();
    subscriber.flush().await.unwrap();
    wait_until("interest on node 1", || {
        nodes[0].routes.remote_interest_count(2) == 1
    })
    .await;

    proxy.cut();
    // Interest made while the route is down (or just back) arrives too: in the snapshot of
    // the new stream, or as a change after it.
    let mut during = subscriber.subscribe("during").await.unwrap();
    subscriber.flush().await.unwrap();
    wait_until("a new stream with both interests", || {
        proxy.accepted() >= 2 && nodes[0].routes.remote_interest_count(2) == 2
    })
    .await;

    let publisher = connect(&nodes[0].server).await;
    for (subject, sub) in [("before", &mut before), ("during", &mut during)] {
        publisher.publish(subject, "back".into()).await.unwrap();
        publisher.flush().await.unwrap();
        let msg = within("the message", sub.next()).await.unwrap();
        assert_eq!(&msg.payload[..], b"back");
    }
    for node in nodes {
        node.stop().await;
    }
}

#[derive(Debug, Default)]
struct Collect(parking_lot::Mutex<Vec<Message>>);

impl InternalSubscriber for Collect {
    fn receive(&self, msg: &Message) -> bool {
        self.0.lock().push(msg.clone());
        true
    }
}

#[tokio::test]
async fn server_subscriptions_and_server_publishes_cross_nodes() {
    let nodes = cluster(2).await;
    // An internal subscription on node 1 (as JetStream makes) receives a publish on node 2.
    let collect = Arc::new(Collect::default());
    let internal =
        nodes[0]
            .server
            .shared()
            .router
            .subscribe_internal("int.x", Some("api"), collect.clone());
    wait_until("internal interest on node 2", || {
        nodes[1].routes.remote_interest_count(1) == 1
    })
    .await;
    let client = connect(&nodes[1].server).await;
    client.publish("int.x", "hi".into()).await.unwrap();
    client.flush().await.unwrap();
    wait_until("internal delivery", || collect.0.lock().len() == 1).await;

    // A server-originated message on node 2 (dispatch::publish) reaches a client on node 1.
    let receiver = connect(&nodes[0].server).await;
    let mut sub = receiver.subscribe("srv").await.unwrap();
    receiver.flush().await.unwrap();
    wait_until("client interest on node 2", || {
        nodes[1].routes.remote_interest_count(1) == 2
    })
    .await;
    let delivered = dispatch::publish(
        &nodes[1].server.shared().router,
        &Message::new(Bytes::from_static(b"srv"), Bytes::from_static(b"from 2")),
    );
    assert!(delivered, "a remote match counts as delivered");
    let msg = within("the server message", sub.next()).await.unwrap();
    assert_eq!(&msg.payload[..], b"from 2");

    nodes[0].server.shared().router.unsubscribe(&internal);
    wait_until("internal interest gone", || {
        nodes[1].routes.remote_interest_count(1) == 1
    })
    .await;
    for node in nodes {
        node.stop().await;
    }
}

#[tokio::test]
async fn probes_reach_a_late_subscriber() {
    // Interest that appears after the routes are up propagates without any further action.
    let nodes = cluster(2).await;
    let publisher = connect(&nodes[0].server).await;
    let subscriber = connect(&nodes[1].server).await;
    let mut sub = subscriber.subscribe("late").await.unwrap();
    subscriber.flush().await.unwrap();
    let seen = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = seen.clone();
    let watcher = tokio::spawn(async move {
        sub.next().await;
        flag.store(true, std::sync::atomic::Ordering::Release);
    });
    publish_until(&publisher, "late", || {
        seen.load(std::sync::atomic::Ordering::Acquire)
    })
    .await;
    watcher.await.unwrap();
    for node in nodes {
        node.stop().await;
    }
}

#[tokio::test]
async fn a_peer_sees_shared_interest_once_until_the_last_subscription_goes() {
    let nodes = cluster(2).await;
    let (one, two) = (
        connect(&nodes[1].server).await,
        connect(&nodes[1].server).await,
    );
    let mut first = one.subscribe("shared").await.unwrap();
    let mut second = two.subscribe("shared").await.unwrap();
    one.flush().await.unwrap();
    two.flush().await.unwrap();
    wait_until("both subscriptions on node 2", || {
        nodes[1].server.shared().router.subscription_count() == 2
    })
    .await;
    wait_until("one interest on node 1", || {
        nodes[0].routes.remote_interest_count(2) == 1
    })
    .await;

    first.unsubscribe().await.unwrap();
    one.flush().await.unwrap();
    wait_until("one subscription left on node 2", || {
        nodes[1].server.shared().router.subscription_count() == 1
    })
    .await;
    // The remaining subscription still gets messages from node 1.
    let publisher = connect(&nodes[0].server).await;
    publisher.publish("shared", "still".into()).await.unwrap();
    publisher.flush().await.unwrap();
    let msg = within("the message", second.next()).await.unwrap();
    assert_eq!(&msg.payload[..], b"still");
    assert_eq!(nodes[0].routes.remote_interest_count(2), 1);

    second.unsubscribe().await.unwrap();
    two.flush().await.unwrap();
    wait_until("interest gone from node 1", || {
        nodes[0].routes.remote_interest_count(2) == 0
    })
    .await;
    for node in nodes {
        node.stop().await;
    }
}

#[tokio::test]
async fn messages_at_the_payload_limit_cross_the_route() {
    let nodes = cluster(2).await;
    let publisher = connect(&nodes[0].server).await;
    let subscriber = connect(&nodes[1].server).await;
    let mut sub = subscriber.subscribe("big").await.unwrap();
    subscriber.flush().await.unwrap();
    wait_until("interest on node 1", || {
        nodes[0].routes.remote_interest_count(2) == 1
    })
    .await;
    let max = publisher.server_info().max_payload;
    for i in 0..5u8 {
        publisher
            .publish("big", Bytes::from(vec![i; max]))
            .await
            .unwrap();
    }
    publisher.flush().await.unwrap();
    for i in 0..5u8 {
        let msg = within("a big message", sub.next()).await.unwrap();
        assert_eq!(msg.payload.len(), max);
        assert!(msg.payload.iter().all(|&b| b == i));
    }
    assert_eq!(nodes[0].routes.stats(2).unwrap_or_default().dropped, 0);
    for node in nodes {
        node.stop().await;
    }
}
