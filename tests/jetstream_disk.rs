//! A stream's disk comes back (issue 16, ADR 0022): its messages live in segment files of
//! 8 MiB under `state/files/<group>/` on every replica; a purge gives back every segment it
//! emptied, a max_msgs limit the segments behind the first kept message, and a delete the
//! whole directory, within seconds, on every node, while what is kept stays readable.

mod common;

use std::path::Path;

use async_nats::jetstream::{self, stream};
use common::fixture::{on_r1_and_r3, JsFixture};
use common::{wait_until, within};

on_r1_and_r3!(limits_purge_and_delete_give_the_disk_back);

/// 1,500 messages of 16 KiB: 24 MiB, three segments and more.
const MESSAGES: u64 = 1_500;
const SIZE: usize = 16 << 10;
const SEGMENT: u64 = 8 << 20;

/// Bytes of the segment files of file streams under node `i`'s store, and how many group
/// directories hold them.
fn segment_usage(fx: &JsFixture, i: usize) -> (u64, usize) {
    let root = fx.store_dir(i).join("state/files");
    let Ok(groups) = std::fs::read_dir(&root) else {
        return (0, 0);
    };
    let mut bytes = 0;
    let mut dirs = 0;
    for group in groups.flatten() {
        dirs += 1;
        bytes += dir_bytes(&group.path());
    }
    (bytes, dirs)
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|entry| entry.metadata().ok())
                .map(|meta| meta.len())
                .sum()
        })
        .unwrap_or(0)
}

async fn publish(js: &jetstream::Context, from: u64, to: u64) {
    for chunk in (from..=to).collect::<Vec<_>>().chunks(200) {
        let mut acks = Vec::new();
        for &i in chunk {
            let mut body = format!("{i:06}").into_bytes();
            body.resize(SIZE, b'x');
            let ack = within("publish", js.publish("disk.a", body.into()))
                .await
                .unwrap();
            acks.push(ack);
        }
        for ack in acks {
            within("PubAck", std::future::IntoFuture::into_future(ack))
                .await
                .unwrap();
        }
    }
}

async fn limits_purge_and_delete_give_the_disk_back(fx: JsFixture) {
    let js = fx.js().await;
    let nodes = fx.topology().nodes();
    let stream = fx
        .create_stream(
            &js,
            stream::Config {
                name: "DISK".into(),
                subjects: vec!["disk.*".into()],
                max_messages: (MESSAGES / 3) as i64,
                ..Default::default()
            },
        )
        .await;
    publish(&js, 1, MESSAGES).await;
    fx.wait_until_replicas_count("DISK", MESSAGES / 3).await;
    // max_msgs keeps the newest third (8 MiB): the segments wholly behind it go.
    let kept = (MESSAGES / 3) * SIZE as u64;
    for i in 0..nodes {
        wait_until("the limit's segments go", || {
            let (bytes, dirs) = segment_usage(&fx, i);
            dirs == 1 && bytes >= kept && bytes <= kept + 2 * SEGMENT
        })
        .await;
    }
    let first = MESSAGES - MESSAGES / 3 + 1;
    let message = stream.get_raw_message(first).await.unwrap();
    assert!(message
        .payload
        .starts_with(format!("{first:06}").as_bytes()));

    // A purge empties every segment.
    stream.purge().await.unwrap();
    for i in 0..nodes {
        wait_until("the purged segments go", || segment_usage(&fx, i) == (0, 1)).await;
    }
    publish(&js, MESSAGES + 1, MESSAGES + 10).await;
    fx.wait_until_replicas_count("DISK", 10).await;
    let last = stream.get_raw_message(MESSAGES + 10).await.unwrap();
    assert!(last
        .payload
        .starts_with(format!("{:06}", MESSAGES + 10).as_bytes()));

    // A delete takes the group's directory.
    js.delete_stream("DISK").await.unwrap();
    for i in 0..nodes {
        wait_until("the deleted stream's files go", || {
            segment_usage(&fx, i) == (0, 0)
        })
        .await;
    }
    fx.shutdown().await;
}
