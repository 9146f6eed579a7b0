"""Random reads of a big stream for bench/store.sh, through nats-py against any server.

  store.py --url URL --stream M --gets K [--seed S]
      K direct gets (`$JS.API.DIRECT.GET.<stream>`, `{"seq": n}`) of random sequences
      between the stream's first and last, one at a time, then one last-by-subject get;
      prints `gets K errors E p50_us P p99_us Q last_by_subject_us L`.

Bounded: every request has a timeout.
"""

import argparse
import asyncio
import json
import random
import sys
import time

import nats


async def stream_bounds(nc, stream):
    reply = await nc.request(f"$JS.API.STREAM.INFO.{stream}", b"", timeout=10)
    state = json.loads(reply.data)["state"]
    return state["first_seq"], state["last_seq"]


async def direct_gets(nc, stream, count, seed):
    first, last = await stream_bounds(nc, stream)
    rng = random.Random(seed)
    latencies, errors = [], 0
    for _ in range(count):
        seq = rng.randint(first, last)
        started = time.perf_counter()
        try:
            msg = await nc.request(
                f"$JS.API.DIRECT.GET.{stream}", json.dumps({"seq": seq}).encode(), timeout=5
            )
            if msg.headers is None or msg.headers.get("Nats-Sequence") != str(seq):
                errors += 1
        except Exception:  # noqa: BLE001 - any failure counts, the run goes on
            errors += 1
        latencies.append((time.perf_counter() - started) * 1e6)
    latencies.sort()
    started = time.perf_counter()
    await nc.request(
        f"$JS.API.DIRECT.GET.{stream}", json.dumps({"last_by_subj": "js.store"}).encode(), timeout=5
    )
    last_by_subject = (time.perf_counter() - started) * 1e6
    pct = lambda p: latencies[min(len(latencies) - 1, int(len(latencies) * p))]  # noqa: E731
    print(
        f"gets {count} errors {errors} p50_us {pct(0.5):.0f} p99_us {pct(0.99):.0f}"
        f" last_by_subject_us {last_by_subject:.0f}"
    )


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--stream", default="M")
    parser.add_argument("--gets", type=int, required=True)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    nc = await nats.connect(args.url, max_reconnect_attempts=0)
    try:
        await direct_gets(nc, args.stream, args.gets, args.seed)
    finally:
        await nc.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
