#!/usr/bin/env python3
"""Time to the first delivery of a new push consumer (issue 19), against jetraft and
nats-server alike. For each of --runs rounds, on a stream holding one message: create a
push consumer on a fresh deliver subject (`$JS.API.CONSUMER.CREATE`), then subscribe to
that subject, as async-nats and nats-py do (create first, subscribe after); the time is
from the create request to the first message. Every wait is bounded (--timeout).

    first_push.py --server nats://127.0.0.1:4222 [--runs 100] [--timeout 5]

Prints one JSON line: {"runs", "p50_ms", "p99_ms", "max_ms", "timeouts"}.
"""

import argparse
import asyncio
import json
import time

import nats


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", default="nats://127.0.0.1:4222")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=5.0)
    args = parser.parse_args()
    nc = await nats.connect(args.server)
    stream = "FIRSTPUSH"
    await nc.request(f"$JS.API.STREAM.DELETE.{stream}", b"", timeout=args.timeout)
    create = {"name": stream, "subjects": ["firstpush.>"], "storage": "file", "num_replicas": 1}
    reply = await nc.request(f"$JS.API.STREAM.CREATE.{stream}", json.dumps(create).encode(),
                             timeout=args.timeout)
    assert "error" not in json.loads(reply.data), reply.data
    reply = await nc.request("firstpush.a", b"hello", timeout=args.timeout)
    assert "error" not in json.loads(reply.data), reply.data
    times, timeouts = [], 0
    for run in range(args.runs):
        deliver = f"firstpush_deliver.{run}.{time.time_ns()}"
        name = f"c{run}"
        body = {"stream_name": stream, "config": {
            "name": name, "deliver_subject": deliver, "ack_policy": "none",
            "deliver_policy": "all", "inactive_threshold": 10_000_000_000}}
        got = asyncio.get_running_loop().create_future()

        async def on_msg(msg, got=got):
            if not got.done() and not msg.headers:
                got.set_result(time.perf_counter())

        start = time.perf_counter()
        reply = await nc.request(f"$JS.API.CONSUMER.CREATE.{stream}.{name}",
                                 json.dumps(body).encode(), timeout=args.timeout)
        assert "error" not in json.loads(reply.data), reply.data
        sub = await nc.subscribe(deliver, cb=on_msg)
        try:
            arrived = await asyncio.wait_for(got, args.timeout)
            times.append((arrived - start) * 1000)
        except asyncio.TimeoutError:
            timeouts += 1
        await sub.unsubscribe()
        await nc.request(f"$JS.API.CONSUMER.DELETE.{stream}.{name}", b"", timeout=args.timeout)
    await nc.request(f"$JS.API.STREAM.DELETE.{stream}", b"", timeout=args.timeout)
    await nc.close()
    times.sort()
    pick = lambda q: round(times[min(len(times) - 1, int(q * len(times)))], 2) if times else None
    print(json.dumps({"runs": args.runs, "p50_ms": pick(0.5), "p99_ms": pick(0.99),
                      "max_ms": round(times[-1], 2) if times else None, "timeouts": timeouts}))


asyncio.run(main())
