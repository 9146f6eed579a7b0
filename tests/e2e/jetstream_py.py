#!/usr/bin/env python3
"""End-to-end JetStream checks with the official nats-py client.

Normally run through tests/e2e/jetstream_py.sh, which starts the server with
`-js -sd <tmpdir>` and sets:

  NATS_E2E_URL    nats://127.0.0.1:<port> of a JetStream-enabled server (required)
  NATS_E2E_ONLY   run only the checks whose name contains this text

Each check uses its own stream, so one failure does not cascade. Prints one
PASS/FAIL line per check, then "N passed, M failed"; exits 1 on any failure.
Every check is bounded by CHECK_TIMEOUT seconds.
"""

import asyncio
import os
import sys
import time

from e2e_runner import CheckFailed, run_checks

try:
    import nats
    import nats.errors
    import nats.js.api as api
    import nats.js.errors as jserr
except ImportError:  # the wrapper checks this first; keep a clear message anyway
    print("SKIP: nats-py not installed (pip install nats-py)")
    sys.exit(2)

CHECK_TIMEOUT = 20.0
URL = os.environ.get("NATS_E2E_URL", "")

async_errors = []




def expect(cond, msg):
    if not cond:
        raise CheckFailed(msg)


async def _err_cb(e):
    async_errors.append(e)


async def connect():
    nc = await nats.connect(URL, allow_reconnect=False, connect_timeout=5, error_cb=_err_cb)
    return nc, nc.jetstream(timeout=5)


async def poll(fn, cond, what, secs=5.0):
    """Call async fn() until cond(result) holds (bounded); returns the last result."""
    deadline = time.monotonic() + secs
    while True:
        r = await fn()
        if cond(r):
            return r
        if time.monotonic() > deadline:
            raise CheckFailed(f"{what} (last: {r})")
        await asyncio.sleep(0.05)


def seqs(ci):
    """Compact view of a ConsumerInfo for failure messages."""
    return (
        f"delivered={ci.delivered.stream_seq if ci.delivered else None}"
        f" ack_floor=({ci.ack_floor.consumer_seq if ci.ack_floor else None},"
        f"{ci.ack_floor.stream_seq if ci.ack_floor else None})"
        f" num_ack_pending={ci.num_ack_pending} num_pending={ci.num_pending}"
        f" num_redelivered={ci.num_redelivered}"
    )


CHECKS = []


def check(name):
    def deco(fn):
        CHECKS.append((name, fn))
        return fn

    return deco


# --------------------------------------------------------------- checks ----


@check("account_info: JetStream enabled, reports limits and usage")
async def t_account_info():
    nc, js = await connect()
    try:
        ai = await js._jsm.account_info()
        expect(ai.limits is not None, f"no limits in account info: {ai}")
        expect(ai.streams is not None and ai.streams >= 0, f"streams={ai.streams}")
    finally:
        await nc.close()


@check("add_stream: StreamInfo echoes config (file, limits), empty state; re-adding same config is idempotent")
async def t_add_stream():
    nc, js = await connect()
    try:
        si = await js.add_stream(name="PY_ADD", subjects=["pyadd.*"], storage="file", retention="limits")
        expect(si.config.name == "PY_ADD", f"config.name={si.config.name}")
        expect(si.config.subjects == ["pyadd.*"], f"config.subjects={si.config.subjects}")
        expect(si.config.storage == api.StorageType.FILE, f"storage={si.config.storage}")
        expect(si.config.retention == api.RetentionPolicy.LIMITS, f"retention={si.config.retention}")
        expect(si.state.messages == 0 and si.state.last_seq == 0, f"state={si.state}")
        si2 = await js.add_stream(name="PY_ADD", subjects=["pyadd.*"], storage="file", retention="limits")
        expect(si2.config.name == "PY_ADD", "second identical add_stream failed")
        try:
            await js.add_stream(name="PY_ADD", subjects=["pyadd.other"], storage="file")
            raise CheckFailed("add_stream with a different config for an existing name succeeded")
        except jserr.BadRequestError as e:
            expect(e.err_code == 10058, f"err_code {e.err_code} (want 10058 stream name already in use)")
        await js.delete_stream("PY_ADD")
    finally:
        await nc.close()


@check("publish: PubAck stream + seq 1,2,3; stream_info messages 3, first_seq 1, last_seq 3")
async def t_publish():
    nc, js = await connect()
    try:
        await js.add_stream(name="PY_PUB", subjects=["pypub.*"], storage="file")
        acks = [await js.publish("pypub.new", f"order-{i}".encode()) for i in range(1, 4)]
        expect([a.stream for a in acks] == ["PY_PUB"] * 3, f"PubAck streams {[a.stream for a in acks]}")
        expect([a.seq for a in acks] == [1, 2, 3], f"PubAck seqs {[a.seq for a in acks]}")
        expect(not any(a.duplicate for a in acks), "fresh publishes flagged duplicate")
        si = await js.stream_info("PY_PUB")
        st = si.state
        expect((st.messages, st.first_seq, st.last_seq) == (3, 1, 3), f"state={st}")
        expect(st.bytes > 0, f"state.bytes={st.bytes}")
        expect(st.consumer_count == 0, f"consumer_count={st.consumer_count}")
        await js.delete_stream("PY_PUB")
    finally:
        await nc.close()


@check("publish to a subject no stream captures: NoStreamResponseError")
async def t_publish_no_stream():
    nc, js = await connect()
    try:
        try:
            await js.publish("pynostream.x", b"x", timeout=3)
        except jserr.NoStreamResponseError:
            return
        except nats.errors.TimeoutError:
            raise CheckFailed("timed out instead of an immediate no-responders status")
        raise CheckFailed("publish without a stream got a PubAck")
    finally:
        await nc.close()


@check("pull_subscribe(durable) + fetch(2) + ack: metadata, num_ack_pending, ack_floor, num_pending")
async def t_pull_fetch_ack():
    nc, js = await connect()
    try:
        await js.add_stream(name="PY_PULL", subjects=["pypull.*"], storage="file")
        for i in range(1, 4):
            await js.publish("pypull.new", f"order-{i}".encode())
        sub = await js.pull_subscribe("pypull.*", durable="py-proc", stream="PY_PULL")
        ci = await js.consumer_info("PY_PULL", "py-proc")
        expect(ci.config.durable_name == "py-proc", f"durable_name={ci.config.durable_name}")
        expect(ci.config.ack_policy == api.AckPolicy.EXPLICIT, f"ack_policy={ci.config.ack_policy}")
        expect(ci.num_pending == 3 and ci.num_ack_pending == 0, f"fresh consumer: {seqs(ci)}")
        msgs = await sub.fetch(2, timeout=5)
        expect([m.data for m in msgs] == [b"order-1", b"order-2"], f"fetched {[m.data for m in msgs]}")
        md = [m.metadata for m in msgs]
        expect([x.sequence.stream for x in md] == [1, 2], f"stream seqs {[x.sequence.stream for x in md]}")
        expect([x.sequence.consumer for x in md] == [1, 2], f"consumer seqs {[x.sequence.consumer for x in md]}")
        expect([x.num_delivered for x in md] == [1, 1], f"num_delivered {[x.num_delivered for x in md]}")
        expect(md[0].stream == "PY_PULL" and md[0].consumer == "py-proc", f"metadata {md[0]}")
        expect(md[1].num_pending == 1, f"metadata.num_pending of last fetched = {md[1].num_pending}, want 1")
        ci = await js.consumer_info("PY_PULL", "py-proc")
        expect(ci.num_ack_pending == 2, f"before ack: {seqs(ci)}, want num_ack_pending 2")
        expect(ci.delivered.stream_seq == 2 and ci.delivered.consumer_seq == 2, f"before ack: {seqs(ci)}")
        expect(ci.ack_floor.stream_seq == 0, f"before ack: {seqs(ci)}, want ack_floor 0")
        for m in msgs:
            await m.ack()
        ci = await poll(
            lambda: js.consumer_info("PY_PULL", "py-proc"),
            lambda c: c.num_ack_pending == 0,
            "num_ack_pending never reached 0 after acks",
        )
        expect(ci.ack_floor.stream_seq == 2 and ci.ack_floor.consumer_seq == 2, f"after ack: {seqs(ci)}")
        expect(ci.num_pending == 1, f"after ack: {seqs(ci)}, want num_pending 1")
        si = await js.stream_info("PY_PULL")
        expect(si.state.messages == 3, f"limits stream lost messages on ack: {si.state}")
        expect(si.state.consumer_count == 1, f"consumer_count={si.state.consumer_count}")
        # a second pull_subscribe with the same durable binds to the existing consumer
        sub2 = await js.pull_subscribe("pypull.*", durable="py-proc", stream="PY_PULL")
        (m3,) = await sub2.fetch(1, timeout=5)
        expect(m3.data == b"order-3" and m3.metadata.sequence.stream == 3, f"resumed at {m3.data!r}")
        await m3.ack()
        await js.delete_stream("PY_PULL")
    finally:
        await nc.close()


@check("fetch on a drained consumer raises a TimeoutError after the fetch timeout")
async def t_fetch_empty():
    nc, js = await connect()
    try:
        await js.add_stream(name="PY_EMPTY", subjects=["pyempty.*"], storage="file")
        sub = await js.pull_subscribe("pyempty.*", durable="py-empty", stream="PY_EMPTY")
        for batch in (1, 5):
            t0 = time.monotonic()
            try:
                got = await sub.fetch(batch, timeout=1)
                raise CheckFailed(f"fetch({batch}) on an empty stream returned {len(got)} msg(s)")
            # nats-py signals a fetch that got nothing with nats.errors.TimeoutError or, when
            # its deadline runs out between the no-wait probe and the lingering request, a
            # bare asyncio.TimeoutError (the former is a subclass of the latter).
            except asyncio.TimeoutError:
                dt = time.monotonic() - t0
                expect(dt < 4, f"fetch({batch}) timeout took {dt:.2f}s")
        await js.delete_stream("PY_EMPTY")
    finally:
        await nc.close()


@check("nak -> immediate redelivery: same stream seq, num_delivered 2, num_redelivered 1")
async def t_nak():
    nc, js = await connect()
    try:
        await js.add_stream(name="PY_NAK", subjects=["pynak.*"], storage="file")
        await js.publish("pynak.new", b"nak-me")
        sub = await js.pull_subscribe("pynak.*", durable="py-nak", stream="PY_NAK")
        (m1,) = await sub.fetch(1, timeout=5)
        expect(m1.data == b"nak-me" and m1.metadata.num_delivered == 1, f"first delivery {m1.metadata}")
        await m1.nak()
        t0 = time.monotonic()
        (m2,) = await sub.fetch(1, timeout=5)
        dt = time.monotonic() - t0
        expect(m2.data == b"nak-me", f"redelivered {m2.data!r}")
        expect(m2.metadata.sequence.stream == 1, f"redelivered stream seq {m2.metadata.sequence.stream}")
        expect(m2.metadata.sequence.consumer == 2, f"redelivered consumer seq {m2.metadata.sequence.consumer}")
        expect(m2.metadata.num_delivered == 2, f"num_delivered {m2.metadata.num_delivered}")
        expect(dt < 3, f"redelivery after nak took {dt:.2f}s (ack_wait is 30 s; nak must be immediate)")
        ci = await js.consumer_info("PY_NAK", "py-nak")
        expect(ci.num_redelivered == 1 and ci.num_ack_pending == 1, f"after redelivery: {seqs(ci)}")
        await m2.ack()
        ci = await poll(
            lambda: js.consumer_info("PY_NAK", "py-nak"),
            lambda c: c.num_ack_pending == 0,
            "ack after nak not applied",
        )
        expect(ci.ack_floor.stream_seq == 1, f"after ack: {seqs(ci)}")
        await js.delete_stream("PY_NAK")
    finally:
        await nc.close()


@check("ack_wait expiry: an unacked message is redelivered after ack_wait (1 s)")
async def t_ack_wait():
    nc, js = await connect()
    try:
        await js.add_stream(name="PY_AW", subjects=["pyaw.*"], storage="file")
        await js.publish("pyaw.new", b"slow")
        sub = await js.pull_subscribe(
            "pyaw.*", durable="py-aw", stream="PY_AW", config=api.ConsumerConfig(ack_wait=1.0)
        )
        ci = await js.consumer_info("PY_AW", "py-aw")
        expect(abs((ci.config.ack_wait or 0) - 1.0) < 0.01, f"ack_wait={ci.config.ack_wait}")
        t0 = time.monotonic()
        (m1,) = await sub.fetch(1, timeout=5)
        (m2,) = await sub.fetch(1, timeout=5)  # waits for the redelivery
        dt = time.monotonic() - t0
        expect(m2.data == b"slow" and m2.metadata.num_delivered == 2, f"second delivery {m2.metadata}")
        expect(0.7 <= dt < 4, f"redelivered after {dt:.2f}s (ack_wait 1 s)")
        await m2.ack()
        await js.delete_stream("PY_AW")
    finally:
        await nc.close()


@check("ack_sync (double ack): the server confirms the ack")
async def t_ack_sync():
    nc, js = await connect()
    try:
        await js.add_stream(name="PY_AS", subjects=["pyas.*"], storage="file")
        await js.publish("pyas.new", b"confirm-me")
        sub = await js.pull_subscribe("pyas.*", durable="py-as", stream="PY_AS")
        (m,) = await sub.fetch(1, timeout=5)
        await m.ack_sync(timeout=3)
        ci = await js.consumer_info("PY_AS", "py-as")  # no polling: the ack was confirmed
        expect(ci.num_ack_pending == 0 and ci.ack_floor.stream_seq == 1, f"after ack_sync: {seqs(ci)}")
        await js.delete_stream("PY_AS")
    finally:
        await nc.close()


@check("dedup: same Nats-Msg-Id -> PubAck duplicate=true with the original seq; stream keeps one copy")
async def t_dedup():
    nc, js = await connect()
    try:
        await js.add_stream(name="PY_DUP", subjects=["pydup.*"], storage="file")
        a1 = await js.publish("pydup.new", b"first", headers={"Nats-Msg-Id": "order-1234"})
        a2 = await js.publish("pydup.new", b"second", headers={"Nats-Msg-Id": "order-1234"})
        a3 = await js.publish("pydup.new", b"third", headers={"Nats-Msg-Id": "order-5678"})
        expect(a1.seq == 1 and not a1.duplicate, f"first publish {a1}")
        expect(a2.duplicate is True, f"second publish duplicate={a2.duplicate!r}, want True")
        expect(a2.seq == 1, f"duplicate PubAck seq {a2.seq}, want 1 (the original)")
        expect(a3.seq == 2 and not a3.duplicate, f"new id {a3}")
        si = await js.stream_info("PY_DUP")
        expect(si.state.messages == 2 and si.state.last_seq == 2, f"state={si.state}")
        m = await js.get_msg("PY_DUP", 1)
        expect(m.data == b"first", f"stored copy is {m.data!r}")
        await js.delete_stream("PY_DUP")
    finally:
        await nc.close()


@check("get_msg: by seq returns subject, data, headers, seq; missing seq -> NotFoundError 10037")
async def t_get_msg():
    nc, js = await connect()
    try:
        await js.add_stream(name="PY_GET", subjects=["pyget.*"], storage="file")
        await js.publish("pyget.a", b"alpha")
        await js.publish("pyget.b", b"beta", headers={"X-Trace": "t-1"})
        m = await js.get_msg("PY_GET", 2)
        expect(m.subject == "pyget.b", f"subject {m.subject}")
        expect(m.data == b"beta", f"data {m.data!r}")
        expect(m.seq == 2, f"seq {m.seq}")
        expect((m.headers or {}).get("X-Trace") == "t-1", f"headers {m.headers}")
        m1 = await js.get_msg("PY_GET", 1)
        expect(m1.data == b"alpha" and m1.subject == "pyget.a", f"seq 1: {m1.subject} {m1.data!r}")
        last = await js.get_last_msg("PY_GET", "pyget.a")
        expect(last.seq == 1 and last.data == b"alpha", f"get_last_msg: seq {last.seq} {last.data!r}")
        try:
            await js.get_msg("PY_GET", 99)
            raise CheckFailed("get_msg of a missing seq succeeded")
        except jserr.NotFoundError as e:
            expect(e.err_code == 10037, f"err_code {e.err_code} (want 10037 no message found)")
        await js.delete_stream("PY_GET")
    finally:
        await nc.close()


@check("consumer_info of a missing consumer -> NotFoundError 10014")
async def t_missing_consumer():
    nc, js = await connect()
    try:
        await js.add_stream(name="PY_NOCONS", subjects=["pynocons.*"], storage="file")
        try:
            await js.consumer_info("PY_NOCONS", "nobody")
            raise CheckFailed("consumer_info of a missing consumer succeeded")
        except jserr.NotFoundError as e:
            expect(e.err_code == 10014, f"err_code {e.err_code} (want 10014 consumer not found)")
        await js.delete_stream("PY_NOCONS")
    finally:
        await nc.close()


@check("delete_stream: True; then stream_info -> NotFoundError 10059 and publish -> NoStreamResponseError")
async def t_delete_stream():
    nc, js = await connect()
    try:
        await js.add_stream(name="PY_DEL", subjects=["pydel.*"], storage="file")
        await js.publish("pydel.x", b"x")
        await js.pull_subscribe("pydel.*", durable="py-del", stream="PY_DEL")
        ok = await js.delete_stream("PY_DEL")
        expect(ok is True, f"delete_stream returned {ok!r}")
        try:
            await js.stream_info("PY_DEL")
            raise CheckFailed("stream_info after delete succeeded")
        except jserr.NotFoundError as e:
            expect(e.err_code == 10059, f"err_code {e.err_code} (want 10059 stream not found)")
        try:
            await js.publish("pydel.x", b"y", timeout=3)
            raise CheckFailed("publish after delete got a PubAck")
        except jserr.NoStreamResponseError:
            pass
        names = await js._jsm.streams_info()
        expect("PY_DEL" not in [s.config.name for s in names], "deleted stream still listed")
    finally:
        await nc.close()


@check("work-queue retention: acked message is removed from the stream")
async def t_work_queue():
    nc, js = await connect()
    try:
        await js.add_stream(name="PY_WQ", subjects=["pywq.*"], storage="file", retention="workqueue")
        await js.publish("pywq.job", b"job-1")
        sub = await js.pull_subscribe("pywq.*", durable="py-wq", stream="PY_WQ")
        (m,) = await sub.fetch(1, timeout=5)
        expect((await js.stream_info("PY_WQ")).state.messages == 1, "message gone before the ack")
        await m.ack()
        si = await poll(
            lambda: js.stream_info("PY_WQ"),
            lambda s: s.state.messages == 0,
            "acked work-queue message still in the stream",
        )
        expect(si.state.first_seq == 2 and si.state.last_seq == 1, f"state={si.state}")
        await js.delete_stream("PY_WQ")
    finally:
        await nc.close()



@check("key-value: put twice, get latest and by revision (direct get), delete -> KeyNotFoundError")
async def t_key_value():
    nc, js = await connect()
    try:
        kv = await js.create_key_value(bucket="PYKV", history=3)
        first = await kv.put("k", b"v1")
        await kv.put("k", b"v2")
        entry = await kv.get("k")
        expect((entry.value, entry.revision) == (b"v2", first + 1), f"entry={entry}")
        expect((await kv.get("k", revision=first)).value == b"v1", "revision 1 is not v1")
        await kv.delete("k")
        try:
            await kv.get("k")
            expect(False, "a deleted key still reads")
        except jserr.KeyNotFoundError:
            pass
        await js.delete_key_value("PYKV")
    finally:
        await nc.close()


@check("key-value per-key TTL and limit markers: create(msg_ttl=1) expires, a watcher sees the marker as a PURGE")
async def t_key_value_ttl():
    nc, js = await connect()
    try:
        kv = await js.create_key_value(bucket="PYTTL", limit_marker_ttl=2)
        status = await kv.status()
        expect(status.marker_ttl == 2, f"marker_ttl={status.marker_ttl}")
        watcher = await kv.watch("k")
        await kv.create("k", b"v", msg_ttl=1)
        ops = []
        deadline = time.monotonic() + 10
        while "PURGE" not in ops and time.monotonic() < deadline:
            try:
                entry = await watcher.updates(timeout=1)
            except asyncio.TimeoutError:
                continue
            if entry is not None:
                ops.append(entry.operation or "PUT")
        expect(ops[:1] == ["PUT"] and "PURGE" in ops, f"watched operations {ops}")
        # nats-py's get() reads the marker itself as an entry; once the marker's own TTL
        # (2 s) has passed, the key is gone.
        async def gone():
            try:
                await kv.get("k")
                return False
            except jserr.KeyNotFoundError:
                return True

        await poll(gone, bool, "the marker to expire", secs=10)
        await watcher.stop()
        await js.delete_key_value("PYTTL")
    finally:
        await nc.close()


async def main():
    if not URL:
        print("FAIL: NATS_E2E_URL not set")
        print("0 passed, 1 failed")
        return 1
    passed, failed = await run_checks(CHECKS, CHECK_TIMEOUT)
    if async_errors:
        print(f"note: {len(async_errors)} async client error(s): {async_errors[:3]}")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
