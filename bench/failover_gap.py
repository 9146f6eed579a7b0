#!/usr/bin/env python3
"""Failover gap of an R3 stream: time from `kill -9` of the stream leader to the
next successful PubAck. Used by bench/cluster.sh; works against jetraft and
nats-server alike.

    failover_gap.py --servers URL[,URL] --stream NAME --subject SUBJ --kill-pid PID
                    [--warmup-s 1.0] [--after 50] [--attempt-timeout 0.25]
                    [--retry-every 0.02] [--max-gap 30] [--deadline 90]

One client, connected to the given servers (survivors only: the caller passes
nodes other than the leader, so the client itself never has to reconnect),
publishes synchronously: message i carries `Nats-Msg-Id: fo-<i>` and is retried
(same id) every --retry-every seconds after an error or a timeout of
--attempt-timeout seconds until it is acked. After --warmup-s seconds of steady
publishing the script sends SIGKILL to --kill-pid (the stream leader, found by
the caller) and keeps going. The gap is the time from the kill to the first
PubAck of an attempt *sent after* the kill. It then publishes --after more
messages and checks the stream: it must hold exactly the acked messages (one
per id, deduplicated by Nats-Msg-Id) with last_seq = their number.

Prints the progress to stderr and one JSON line to stdout:
    {"ok": bool, "gap_s": float|null, "failed_attempts": int, "errors": {...},
     "acked": int, "stream_messages": int, "stream_last_seq": int,
     "new_leader": str, "pre_kill_p50_ms": float, "error": str}
Exit code 0 if ok.
"""

import argparse
import asyncio
import json
import os
import signal
import sys
import time

import nats


def log(*a):
    print(*a, file=sys.stderr, flush=True)


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--servers", required=True)
    ap.add_argument("--stream", required=True)
    ap.add_argument("--subject", required=True)
    ap.add_argument("--kill-pid", type=int, required=True)
    ap.add_argument("--warmup-s", type=float, default=1.0)
    ap.add_argument("--after", type=int, default=50)
    ap.add_argument("--attempt-timeout", type=float, default=0.25)
    ap.add_argument("--retry-every", type=float, default=0.02)
    ap.add_argument("--max-gap", type=float, default=30.0)
    ap.add_argument("--deadline", type=float, default=90.0)
    a = ap.parse_args()

    res = {"ok": False, "gap_s": None, "failed_attempts": 0, "errors": {}, "acked": 0,
           "stream_messages": None, "stream_last_seq": None, "new_leader": "",
           "pre_kill_p50_ms": None, "error": ""}
    start = time.monotonic()

    def over():
        return time.monotonic() - start > a.deadline

    nc = await nats.connect(servers=a.servers.split(","), dont_randomize=True,
                            connect_timeout=2, reconnect_time_wait=0.1,
                            max_reconnect_attempts=-1, allow_reconnect=True)
    js = nc.jetstream(timeout=a.attempt_timeout)
    payload = b"x" * 128
    seqs = {}
    lat = []
    t_kill = None
    gap = None
    i = 0
    after_left = a.after
    try:
        while True:
            if over():
                res["error"] = f"deadline of {a.deadline}s reached"
                break
            i += 1
            mid = f"fo-{i}"
            while True:
                if over():
                    break
                # kill the leader once the warmup has run (between two publishes)
                if t_kill is None and time.monotonic() - start >= a.warmup_s:
                    os.kill(a.kill_pid, signal.SIGKILL)
                    t_kill = time.monotonic()
                    log(f"killed pid {a.kill_pid} after {i - 1} acked publishes")
                sent = time.monotonic()
                try:
                    ack = await js.publish(a.subject, payload, headers={"Nats-Msg-Id": mid})
                except Exception as e:  # timeout, no responders, 503, reconnecting...
                    res["failed_attempts"] += 1
                    k = type(e).__name__
                    res["errors"][k] = res["errors"].get(k, 0) + 1
                    if t_kill is not None and gap is None and time.monotonic() - t_kill > a.max_gap:
                        res["error"] = f"no PubAck within {a.max_gap}s of the kill"
                        raise TimeoutError(res["error"])
                    await asyncio.sleep(a.retry_every)
                    continue
                now = time.monotonic()
                if t_kill is None:
                    lat.append(now - sent)
                if t_kill is not None and gap is None and sent >= t_kill:
                    gap = now - t_kill
                    log(f"first PubAck after the kill: {gap:.3f}s (seq {ack.seq}, {res['failed_attempts']} failed attempts)")
                if mid in seqs and seqs[mid] != ack.seq:
                    res["error"] = f"{mid} acked with seq {seqs[mid]} and {ack.seq}"
                seqs[mid] = ack.seq
                break
            if gap is not None:
                after_left -= 1
                if after_left <= 0:
                    break
    except TimeoutError:
        pass
    res["acked"] = len(seqs)
    res["gap_s"] = gap
    if lat:
        lat.sort()
        res["pre_kill_p50_ms"] = round(lat[len(lat) // 2] * 1000, 3)
    # the stream holds exactly the acked messages, each once
    info_err = ""
    for _ in range(50):
        try:
            si = await js.stream_info(a.stream)
            res["stream_messages"] = si.state.messages
            res["stream_last_seq"] = si.state.last_seq
            if si.cluster is not None and si.cluster.leader:
                res["new_leader"] = si.cluster.leader
            info_err = ""
            break
        except Exception as e:
            info_err = f"stream info: {type(e).__name__}: {e}"
            await asyncio.sleep(0.2)
    res["error"] = res["error"] or info_err
    try:
        await nc.close()
    except Exception:
        pass
    distinct = sorted(set(seqs.values()))
    if gap is not None and not res["error"].startswith("deadline"):
        if len(distinct) != len(seqs):
            res["error"] = res["error"] or "two ids share a sequence"
        elif res["stream_messages"] != len(seqs) or res["stream_last_seq"] != len(seqs) \
                or distinct != list(range(1, len(seqs) + 1)):
            res["error"] = res["error"] or (
                f"stream holds {res['stream_messages']} msgs (last_seq {res['stream_last_seq']}), "
                f"{len(seqs)} acked ids")
    res["ok"] = gap is not None and not res["error"]
    if gap is None and not res["error"]:
        res["error"] = "no PubAck after the kill"
    print(json.dumps(res), flush=True)
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
