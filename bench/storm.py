#!/usr/bin/env python3
"""The client of bench/storm.sh (nats-py).

    storm.py create --url URL --streams N [--limit S]
    storm.py publish --url URL --streams N --limit S

`create` creates R3 streams P00000.. one at a time (`$JS.API.STREAM.CREATE.<name>`, file
storage, subjects `<name>.>`), each request bounded by 10 s and sent again after 1 s until it
succeeds, for at most --limit s (default 900). `publish` sends a 16-byte request to
`<name>.x` of every stream in turn, each attempt bounded by 2 s and retried after 50 ms until
acknowledged, for at most --limit s in all (a stream whose time ran out is named on stderr,
the first ten). Each prints one line of results.
"""

import argparse
import asyncio
import json
import sys
import time

import nats


async def create(nc, n, limit):
    start = time.monotonic()
    created = errors = 0
    for i in range(n):
        name = f"P{i:05}"
        body = json.dumps({"name": name, "subjects": [f"{name}.>"], "storage": "file",
                           "num_replicas": 3}).encode()
        while time.monotonic() - start < limit:
            try:
                reply = await nc.request(f"$JS.API.STREAM.CREATE.{name}", body, timeout=10)
                if b'"error"' not in reply.data:
                    created += 1
                    break
            except Exception:  # timeouts and no responders: retried
                pass
            errors += 1
            await asyncio.sleep(1)
    took = time.monotonic() - start
    print(f"created {created}/{n} in {took:.1f} s, {errors} failed requests")


async def publish(nc, n, limit):
    start = time.monotonic()
    acked = failed = 0
    latencies = []
    unacked = []
    for i in range(n):
        done = False
        while not done and time.monotonic() - start < limit:
            sent = time.perf_counter()
            try:
                await nc.request(f"P{i:05}.x", b"0123456789abcdef", timeout=2)
            except Exception:  # no responders (no leader serves) or a timeout: retried
                failed += 1
                await asyncio.sleep(0.05)
                continue
            latencies.append(time.perf_counter() - sent)
            acked += 1
            done = True
        if not done:
            unacked.append(f"P{i:05}")
    took = time.monotonic() - start
    latencies.sort()
    p50 = latencies[len(latencies) // 2] * 1000 if latencies else 0
    print(f"acked {acked}/{n} in {took:.1f} s, {failed} failed attempts, p50 {p50:.1f} ms")
    if unacked:
        shown = " ".join(unacked[:10]) + (" ..." if len(unacked) > 10 else "")
        print(f"not acknowledged: {shown}", file=sys.stderr)


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["create", "publish"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--streams", type=int, required=True)
    parser.add_argument("--limit", type=float, default=900)
    args = parser.parse_args()
    nc = await nats.connect(args.url, max_reconnect_attempts=-1)
    try:
        if args.mode == "create":
            await create(nc, args.streams, args.limit)
        else:
            await publish(nc, args.streams, args.limit)
    finally:
        await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
