"""Atomic batch publish (ADR-50) throughput: one client sends BATCHES batches of SIZE
members (SIZE-1 publishes without a reply, then the commit as a request) into stream B
(allow_atomic, file storage, R1), one batch after the other, and prints the batches/s,
messages/s and the commit round trip's p50/p99. bench/README.md says how to run it
against each server.

    python3 bench/batch.py --url nats://127.0.0.1:PORT --batches 200 --size 100
"""

import argparse
import asyncio
import json
import time

import nats


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--size", type=int, default=100)
    args = parser.parse_args()
    nc = await nats.connect(args.url, pending_size=64 * 1024 * 1024)
    body = {"name": "B", "subjects": ["b.>"], "allow_atomic": True, "storage": "file"}
    created = await nc.request("$JS.API.STREAM.CREATE.B", json.dumps(body).encode(), timeout=10)
    assert "error" not in json.loads(created.data), created.data
    payload = b"x" * 128
    commits = []
    start = time.perf_counter()
    for batch in range(args.batches):
        batch_id = f"b{batch}"
        for seq in range(1, args.size):
            headers = {"Nats-Batch-Id": batch_id, "Nats-Batch-Sequence": str(seq)}
            await nc.publish(f"b.{seq % 10}", payload, headers=headers)
        headers = {
            "Nats-Batch-Id": batch_id,
            "Nats-Batch-Sequence": str(args.size),
            "Nats-Batch-Commit": "1",
        }
        sent = time.perf_counter()
        reply = await nc.request("b.commit", payload, headers=headers, timeout=10)
        commits.append(time.perf_counter() - sent)
        ack = json.loads(reply.data)
        assert ack.get("count") == args.size, ack
    elapsed = time.perf_counter() - start
    commits.sort()
    p50 = commits[len(commits) // 2] * 1e3
    p99 = commits[min(len(commits) - 1, len(commits) * 99 // 100)] * 1e3
    msgs = args.batches * args.size
    print(
        f"batches {args.batches} x {args.size}: {args.batches / elapsed:.0f} batches/s, "
        f"{msgs / elapsed:.0f} msgs/s, commit p50 {p50:.1f} ms p99 {p99:.1f} ms"
    )
    await nc.close()


asyncio.run(main())
