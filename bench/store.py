"""The nats-py client of bench/store.sh, against any server.

  store.py gets --url URL --stream M --gets K [--seed S]
      K direct gets (`$JS.API.DIRECT.GET.<stream>`, `{"seq": n}`) of random sequences
      between the stream's first and last, one at a time, then one last-by-subject get
      (`js.store`); prints `gets K errors E p50_us P p99_us Q last_by_subject_us L`.

With `--streams K` (K > 1) the commands work on the K streams of `store.sh --streams K`:
stream i is `<prefix><i>` bound to `<subject>.<i>`, i zero-padded to as many digits as K has
(M0000..M0999 on js.store.0000..js.store.0999 for K = 1000): the subjects natscli v0.5.0's
`nats bench js pub ... --multisubject --multisubjectmax K` publishes message n on (n mod K,
`%0<len(str(K))>d`).

  store.py create --url URL --streams K [--replicas R] [--concurrency C] [--retry S]
      creates them (R replicas, default 1; file, `allow_direct`), at most C requests in
      flight; with --retry S a create that fails is sent again every 0.5 s until S s after
      the first (a new cluster's meta leader may not see its peers online yet: "no suitable
      peers for placement"); prints `created K errors E seconds T`.
  store.py wait --url URL --streams K --expect N [--timeout S] [--overlap S]
      until the K streams hold N messages together (`$JS.API.STREAM.LIST`, every page, every
      20 ms; `$JS.API.STREAM.INFO.<stream>` for K = 1); it may start before the server does
      (it connects again until it answers); prints `messages N streams K ready_at EPOCH` (the
      time.time() the reply that showed them arrived), exit 1 on timeout. With --overlap S
      another request starts whenever none has answered for S s (at most 8 in flight): an R3
      stream without a leader yet leaves a request unanswered until its 2 s timeout.
  store.py read --url URL --streams K [--size BYTES] [--concurrency C] [--timeout S]
      reads every stream from sequence 1, C streams at a time, each through an ephemeral pull
      consumer (ack none, pulls of up to 1000 messages and 4 MiB of BYTES-sized payloads),
      deleted after; prints
      `read N errors E seconds T msgs_per_s R`.
  store.py gets --url URL --streams K --gets G [--seed S]
      as above, each get on a random stream; the last-by-subject get on a random stream.
  store.py delete --url URL --streams K [--concurrency C]
      deletes them; prints `deleted K errors E seconds T`.

Bounded: every request has a timeout and every loop a deadline. Errors go to stderr.
"""

import argparse
import asyncio
import json
import random
import sys
import time

import nats


def log(*a):
    print(*a, file=sys.stderr, flush=True)


async def connect(url, report=True):
    """One connection, or an exception after two attempts: with max_reconnect_attempts=0
    nats-py would try forever. Never reconnected once it is up; errors in one line."""
    async def on_error(e):
        if report:
            log(f"nats: {e!r}")

    return await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=1,
                              reconnect_time_wait=0.02, connect_timeout=2, error_cb=on_error)


def names(prefix, subject, count):
    """(stream, subject) of each of the K streams, as natscli numbers its subjects."""
    if count == 1:
        return [(prefix, subject)]
    width = len(str(count))
    return [(f"{prefix}{i:0{width}d}", f"{subject}.{i:0{width}d}") for i in range(count)]


async def api(nc, subject, body=None, timeout=10):
    """A JetStream API request: the decoded reply, or an exception with its error."""
    reply = await nc.request(subject, json.dumps(body).encode() if body is not None else b"",
                             timeout=timeout)
    data = json.loads(reply.data)
    if "error" in data:
        raise RuntimeError(f"{subject}: {data['error']}")
    return data


async def bounded(items, concurrency, work):
    """work(item) for every item, at most `concurrency` at a time; the number that failed."""
    sem = asyncio.Semaphore(concurrency)
    errors = 0

    async def one(item):
        nonlocal errors
        async with sem:
            try:
                await work(item)
            except Exception as e:  # noqa: BLE001 - counted and reported, the rest go on
                errors += 1
                if errors <= 3:
                    log(f"{item[0]}: {e!r}")

    await asyncio.gather(*(one(i) for i in items))
    return errors


async def stream_states(nc, timeout=5):
    """{name: state} of every stream, through every page of $JS.API.STREAM.LIST."""
    states, offset = {}, 0
    while True:
        page = await api(nc, "$JS.API.STREAM.LIST", {"offset": offset}, timeout=timeout)
        streams = page.get("streams") or []
        for s in streams:
            states[s["config"]["name"]] = s["state"]
        offset += len(streams)
        if not streams or offset >= page.get("total", 0):
            return states


# ------------------------------------------------------------------- commands --
async def create(nc, args, targets):
    retry_until = time.monotonic() + args.retry

    async def add(target):
        name, subject = target
        while True:
            try:
                await api(nc, f"$JS.API.STREAM.CREATE.{name}", {
                    "name": name, "subjects": [subject], "storage": "file",
                    "num_replicas": args.replicas, "retention": "limits", "discard": "old",
                    "allow_direct": True,
                })
                return
            except Exception:  # noqa: BLE001 - the same config again is no error
                if time.monotonic() >= retry_until:
                    raise
                await asyncio.sleep(0.5)

    started = time.perf_counter()
    errors = await bounded(targets, args.concurrency, add)
    print(f"created {len(targets)} errors {errors} seconds {time.perf_counter() - started:.2f}")
    return 1 if errors else 0


async def wait(args, targets):
    """Its own connection, made again until the server answers: it may start before it.

    One request at a time, 20 ms apart; with --overlap S (S > 0) another one starts whenever
    none has answered for S s (at most 8 in flight): a stream without a leader yet (R3, after a
    restart) leaves a request unanswered until its timeout, which would otherwise be the
    resolution of the time measured."""
    wanted = {name for name, _ in targets}
    deadline = time.monotonic() + args.timeout
    nc, seen, ready_at = None, (0, 0), None

    async def attempt(nc):
        nonlocal seen, ready_at
        if len(targets) == 1:
            name = targets[0][0]
            states = {name: (await api(nc, f"$JS.API.STREAM.INFO.{name}", timeout=2))["state"]}
        else:
            states = await stream_states(nc, timeout=2)
        ours = [s["messages"] for n, s in states.items() if n in wanted]
        seen = (sum(ours), len(ours))
        if seen == (args.expect, len(targets)) and ready_at is None:
            ready_at = time.time()

    async def quiet(nc):
        try:
            await attempt(nc)
        except Exception:  # noqa: BLE001 - not up yet, or not every stream yet
            pass

    in_flight = set()
    try:
        while time.monotonic() < deadline and ready_at is None:
            try:
                if nc is None or not nc.is_connected:
                    nc = await connect(args.url, report=False)
                if args.overlap > 0:
                    in_flight = {t for t in in_flight if not t.done()}
                    if len(in_flight) < 8:
                        in_flight.add(asyncio.create_task(quiet(nc)))
                    await asyncio.wait(in_flight, timeout=args.overlap,
                                       return_when=asyncio.FIRST_COMPLETED)
                else:
                    await attempt(nc)
            except Exception:  # noqa: BLE001 - not up yet, or not every stream yet
                if nc is not None and not nc.is_connected:
                    nc = None
            if ready_at is None:
                await asyncio.sleep(0.02)
    finally:
        for t in in_flight:
            t.cancel()
        if nc is not None and nc.is_connected:
            await nc.close()
    if ready_at is not None:
        print(f"messages {seen[0]} streams {seen[1]} ready_at {ready_at:.3f}")
        return 0
    log(f"timeout after {args.timeout} s: {seen[0]} messages in {seen[1]} streams,"
        f" expected {args.expect} in {len(targets)}")
    return 1


async def read(nc, args, targets):
    """Pull every message of every stream once, each stream through its own inbox."""
    deadline = time.monotonic() + args.timeout
    most = max(1, min(1000, (4 << 20) // max(1, args.size)))  # a pull's messages, and bytes
    total = 0

    async def read_one(target):
        nonlocal total
        name, _ = target
        info = await api(nc, f"$JS.API.CONSUMER.CREATE.{name}", {
            "stream_name": name,
            "config": {"ack_policy": "none", "deliver_policy": "all", "mem_storage": True,
                       "inactive_threshold": 60_000_000_000},
        })
        consumer, pending = info["name"], info["num_pending"]
        pull = [0, 0, asyncio.Event(), None]  # delivered, asked, done, the status that ended it

        async def on_msg(msg):
            # a delivered message keeps its own subject; only a status has no $JS.ACK reply
            status = msg.headers.get("Status") if msg.headers else None
            if status is None:
                pull[0] += 1
                if pull[0] >= pull[1]:
                    pull[2].set()
            else:  # 408: the pull expired, pull again; 409 and others end the stream
                pull[3] = status
                pull[2].set()

        inbox = nc.new_inbox()
        # what is in flight is bounded by the pull, not by the subscription
        sub = await nc.subscribe(inbox, cb=on_msg, pending_msgs_limit=-1, pending_bytes_limit=-1)
        got = 0
        try:
            while got < pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{got}/{pending} read")
                pull[:] = [0, min(most, pending - got), asyncio.Event(), None]
                await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{name}.{consumer}",
                                 json.dumps({"batch": pull[1], "expires": 5_000_000_000}).encode(),
                                 reply=inbox)
                await asyncio.wait_for(pull[2].wait(), timeout=min(left, 30))
                got += pull[0]
                if pull[3] not in (None, "408"):
                    raise RuntimeError(f"pull status {pull[3]} after {got}/{pending}")
        finally:
            total += got
            await sub.unsubscribe()
            try:
                await api(nc, f"$JS.API.CONSUMER.DELETE.{name}.{consumer}")
            except Exception:  # noqa: BLE001 - it goes away on its own after 60 s idle
                pass

    started = time.perf_counter()
    errors = await bounded(targets, args.concurrency, read_one)
    seconds = time.perf_counter() - started
    print(f"read {total} errors {errors} seconds {seconds:.2f} msgs_per_s {total / seconds:.0f}")
    return 1 if errors else 0


async def gets(nc, args, targets):
    if len(targets) == 1:
        reply = await nc.request(f"$JS.API.STREAM.INFO.{targets[0][0]}", b"", timeout=10)
        states = {targets[0][0]: json.loads(reply.data)["state"]}
    else:
        states = await stream_states(nc, timeout=10)
    bounds = [(n, s, states[n]["first_seq"], states[n]["last_seq"]) for n, s in targets]
    rng = random.Random(args.seed)
    latencies, errors = [], 0
    for _ in range(args.gets):
        # one stream: the same sequences as before --streams existed
        stream, _, first, last = bounds[rng.randrange(len(bounds))] if len(bounds) > 1 else bounds[0]
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
    stream, subject, _, _ = bounds[rng.randrange(len(bounds))] if len(bounds) > 1 else bounds[0]
    started = time.perf_counter()
    await nc.request(
        f"$JS.API.DIRECT.GET.{stream}", json.dumps({"last_by_subj": subject}).encode(), timeout=5
    )
    last_by_subject = (time.perf_counter() - started) * 1e6
    pct = lambda p: latencies[min(len(latencies) - 1, int(len(latencies) * p))]  # noqa: E731
    print(
        f"gets {args.gets} errors {errors} p50_us {pct(0.5):.0f} p99_us {pct(0.99):.0f}"
        f" last_by_subject_us {last_by_subject:.0f}"
    )
    return 0


async def delete(nc, args, targets):
    async def rm(target):
        # a big stream's files go before the reply: as long as `nats stream rm` may take
        await api(nc, f"$JS.API.STREAM.DELETE.{target[0]}", timeout=240)

    started = time.perf_counter()
    errors = await bounded(targets, args.concurrency, rm)
    print(f"deleted {len(targets)} errors {errors} seconds {time.perf_counter() - started:.2f}")
    return 1 if errors else 0


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["create", "wait", "read", "gets", "delete"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--stream", default="M", help="the stream, or the prefix of K streams")
    parser.add_argument("--subject", default="js.store")
    parser.add_argument("--streams", type=int, default=1)
    parser.add_argument("--replicas", type=int, default=1, help="create: the streams' replicas")
    parser.add_argument("--gets", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--expect", type=int, default=0)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--retry", type=float, default=0,
                        help="create: send a failed create again until this many s")
    parser.add_argument("--overlap", type=float, default=0,
                        help="wait: another request when none answered for this many s")
    args = parser.parse_args()
    targets = names(args.stream, args.subject, args.streams)
    if args.command == "wait":
        return await wait(args, targets)
    nc = await connect(args.url)
    try:
        command = {"create": create, "read": read, "gets": gets, "delete": delete}[args.command]
        return await command(nc, args, targets)
    finally:
        await nc.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
