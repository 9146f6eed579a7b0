"""Publishes N messages with a `Nats-TTL` header into stream TTL (created with
allow_msg_ttl, file storage, R1), keeping a window of unacknowledged publishes so no
server's ingest queue overflows; prints `published <n> in <s> s ... started_at <epoch>`.
With --only-wait SECS, waits until the stream is empty and prints `empty_at <epoch>`.
Used by bench/ttl.sh, which measures the server between the two.

    python3 bench/ttl.py --url nats://127.0.0.1:PORT --msgs 1000000 --ttl 60
    python3 bench/ttl.py --url nats://127.0.0.1:PORT --only-wait --wait 300
"""

import argparse
import asyncio
import json
import time

import nats


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--msgs", type=int, default=1_000_000)
    parser.add_argument("--ttl", default="60")
    parser.add_argument("--window", type=int, default=2000)
    parser.add_argument("--wait", type=float, default=0)
    parser.add_argument("--only-wait", action="store_true")
    args = parser.parse_args()
    nc = await nats.connect(args.url, pending_size=64 * 1024 * 1024)
    if args.only_wait:
        await wait_empty(nc, args.wait)
        await nc.close()
        return
    create = {"name": "TTL", "subjects": ["ttl.>"], "storage": "file", "num_replicas": 1,
              "allow_msg_ttl": True}
    reply = await nc.request("$JS.API.STREAM.CREATE.TTL", json.dumps(create).encode(), timeout=10)
    assert "error" not in json.loads(reply.data), reply.data
    window = asyncio.Semaphore(args.window)
    acked = 0
    failed = 0
    done = asyncio.Event()

    async def on_ack(msg):
        nonlocal acked, failed
        acked += 1
        if b"error" in msg.data:
            failed += 1
        window.release()
        if acked == args.msgs:
            done.set()

    inbox = nc.new_inbox()
    await nc.subscribe(inbox + ".*", cb=on_ack)
    headers = {"Nats-TTL": args.ttl}
    payload = b"x" * 16
    start = time.monotonic()
    for i in range(args.msgs):
        await window.acquire()
        await nc.publish(f"ttl.{i % 1000}", payload, reply=f"{inbox}.{i}", headers=headers)
    await asyncio.wait_for(done.wait(), timeout=300)
    print(f"published {args.msgs} in {time.monotonic() - start:.1f} s ({failed} refused)"
          f" started_at {time.time() - (time.monotonic() - start):.1f}", flush=True)
    await nc.close()


async def wait_empty(nc, secs):
    """Waits until stream TTL holds no message; prints the wall-clock time it was seen empty."""
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        reply = await nc.request("$JS.API.STREAM.INFO.TTL", b"", timeout=10)
        if json.loads(reply.data)["state"]["messages"] == 0:
            print(f"empty_at {time.time():.1f}", flush=True)
            return
        await asyncio.sleep(0.2)
    print("not empty before the wait ended", flush=True)


asyncio.run(main())
