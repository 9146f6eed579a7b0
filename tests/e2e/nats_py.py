#!/usr/bin/env python3
"""End-to-end checks of a NATS-protocol server with the official nats-py client.

Normally run through tests/e2e/nats_py.sh, which starts the servers and sets:

  NATS_E2E_URL         nats://127.0.0.1:<port> of a server without auth (required)
  NATS_E2E_AUTH_URL    server started with --user/--pass (optional)
  NATS_E2E_USER, NATS_E2E_PASS
  NATS_E2E_TOKEN_URL   server started with --auth <token> (optional)
  NATS_E2E_TOKEN
  NATS_E2E_ONLY        run only the checks whose name contains this text

Prints one PASS/FAIL line per check, then "N passed, M failed"; exits 1 on any
failure. Every check is bounded by CHECK_TIMEOUT seconds.
"""

import asyncio
import os
import sys
import time

from e2e_runner import CheckFailed, run_checks

try:
    import nats
    import nats.errors
except ImportError:  # the wrapper checks this first; keep a clear message anyway
    print("SKIP: nats-py not installed (pip install nats-py)")
    sys.exit(2)

CHECK_TIMEOUT = 15.0

URL = os.environ.get("NATS_E2E_URL", "")
AUTH_URL = os.environ.get("NATS_E2E_AUTH_URL", "")
USER = os.environ.get("NATS_E2E_USER", "")
PASS = os.environ.get("NATS_E2E_PASS", "")
TOKEN_URL = os.environ.get("NATS_E2E_TOKEN_URL", "")
TOKEN = os.environ.get("NATS_E2E_TOKEN", "")

async_errors = []




def expect(cond, msg):
    if not cond:
        raise CheckFailed(msg)


async def _err_cb(e):
    async_errors.append(e)


async def connect(url=None, **kw):
    kw.setdefault("allow_reconnect", False)
    kw.setdefault("connect_timeout", 5)
    kw.setdefault("error_cb", _err_cb)
    return await nats.connect(url or URL, **kw)


async def sync(nc):
    """Barrier: everything this client wrote so far has been processed by the server.

    nats-py 2.16.0 quirk: flush() writes its PING straight to the socket while
    SUB/UNSUB/PUB sit in the client's pending buffer until the flusher task
    runs, so a single flush() can get its PONG before the server has seen an
    immediately preceding SUB (observed against nats-server 2.15.1). Waiting for
    the first PONG lets the flusher write the buffer; the second PING then
    queues behind it on the wire.
    """
    await nc.flush()
    await nc.flush()


async def collect(sub, n, timeout=5.0):
    """Read exactly n messages from a subscription (bounded)."""
    out = []
    for _ in range(n):
        out.append(await sub.next_msg(timeout=timeout))
    return out


async def expect_silence(sub, wait=0.3):
    """No further message arrives on sub within `wait` seconds."""
    try:
        m = await sub.next_msg(timeout=wait)
    except nats.errors.TimeoutError:
        return
    raise CheckFailed(f"unexpected message on {m.subject}: {m.data[:60]!r}")


CHECKS = []


def check(name):
    def deco(fn):
        CHECKS.append((name, fn))
        return fn

    return deco


# --------------------------------------------------------------- checks ----


@check("connect: INFO parsed, headers supported, max_payload advertised")
async def t_connect():
    nc = await connect()
    try:
        expect(nc.is_connected, "not connected")
        info = getattr(nc, "_server_info", {}) or {}
        expect(info.get("server_id"), f"INFO has no server_id: {info}")
        expect(info.get("headers") is True, f"INFO headers != true: {info.get('headers')}")
        expect(nc.max_payload >= 1024 * 1024, f"max_payload {nc.max_payload} < 1 MiB")
        expect(nc.client_id is not None, "no client_id in INFO")
    finally:
        await nc.close()
    expect(nc.is_closed, "close() did not close")


@check("pub/sub: 3 messages in order, exact payloads, subject and no reply")
async def t_pubsub():
    nc = await connect()
    try:
        sub = await nc.subscribe("py.basic")
        await sync(nc)
        for i in range(3):
            await nc.publish("py.basic", f"msg-{i}".encode())
        msgs = await collect(sub, 3)
        expect([m.data for m in msgs] == [b"msg-0", b"msg-1", b"msg-2"], f"got {[m.data for m in msgs]}")
        expect(all(m.subject == "py.basic" for m in msgs), "wrong subject")
        expect(all(not m.reply for m in msgs), "unexpected reply subject")
        await expect_silence(sub)
    finally:
        await nc.close()


@check("pub/sub across two connections with a callback subscriber")
async def t_pubsub_cb():
    got = []
    done = asyncio.Event()

    async def cb(m):
        got.append(m.data)
        if len(got) == 100:
            done.set()

    a = await connect()
    b = await connect()
    try:
        await a.subscribe("py.cb", cb=cb)
        await sync(a)
        for i in range(100):
            await b.publish("py.cb", str(i).encode())
        await sync(b)
        await asyncio.wait_for(done.wait(), 5)
        expect(got == [str(i).encode() for i in range(100)], "out of order or missing")
    finally:
        await a.close()
        await b.close()


@check("payload edge cases: empty, binary with CRLF/protocol text, 512 KiB")
async def t_payloads():
    nc = await connect()
    try:
        sub = await nc.subscribe("py.payload")
        await sync(nc)
        tricky = b"\r\nPUB fake 3\r\nabc\r\n\x00\xff MSG x 1 2\r\n"
        big = os.urandom(512 * 1024)
        for p in (b"", tricky, big):
            await nc.publish("py.payload", p)
        msgs = await collect(sub, 3)
        expect(msgs[0].data == b"", f"empty payload came back as {msgs[0].data[:20]!r}")
        expect(msgs[1].data == tricky, "binary/CRLF payload corrupted")
        expect(msgs[2].data == big, f"512 KiB payload corrupted (len {len(msgs[2].data)})")
    finally:
        await nc.close()


@check("wildcards: '*' matches one token, '>' one or more, neither matches the bare prefix")
async def t_wildcards():
    nc = await connect()
    try:
        star = await nc.subscribe("py.orders.*")
        gt = await nc.subscribe("py.orders.>")
        mid = await nc.subscribe("py.*.new")
        await sync(nc)
        for s in ("py.orders", "py.orders.new", "py.orders.eu.new", "py.orders.shipped", "py.other.new"):
            await nc.publish(s, s.encode())
        await sync(nc)
        star_got = sorted(m.subject for m in await collect(star, 2))
        gt_got = sorted(m.subject for m in await collect(gt, 3))
        mid_got = sorted(m.subject for m in await collect(mid, 2))
        expect(star_got == ["py.orders.new", "py.orders.shipped"], f"'*' got {star_got}")
        expect(gt_got == ["py.orders.eu.new", "py.orders.new", "py.orders.shipped"], f"'>' got {gt_got}")
        expect(mid_got == ["py.orders.new", "py.other.new"], f"'py.*.new' got {mid_got}")
        for s in (star, gt, mid):
            await expect_silence(s, 0.2)
    finally:
        await nc.close()


@check("queue group: 200 msgs split across 3 members, each exactly once; plain sub gets all")
async def t_queue():
    conns = [await connect() for _ in range(4)]
    counts = [[] for _ in range(3)]
    plain = []
    try:
        for i in range(3):
            async def cb(m, i=i):
                counts[i].append(m.data)

            await conns[i].subscribe("py.jobs", queue="workers", cb=cb)
            await sync(conns[i])

        async def pcb(m):
            plain.append(m.data)

        await conns[3].subscribe("py.jobs", cb=pcb)
        await sync(conns[3])
        pub = await connect()
        try:
            for n in range(200):
                await pub.publish("py.jobs", f"job-{n}".encode())
            await sync(pub)
        finally:
            await pub.close()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and (sum(map(len, counts)) < 200 or len(plain) < 200):
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.1)  # let any duplicate surface
        total = [d for c in counts for d in c]
        expect(len(total) == 200, f"queue members got {len(total)} in total ({[len(c) for c in counts]})")
        expect(len(set(total)) == 200, "duplicate deliveries inside the queue group")
        expect(all(len(c) > 0 for c in counts), f"a member got nothing: {[len(c) for c in counts]}")
        expect(len(plain) == 200, f"plain subscriber got {len(plain)}")
    finally:
        for c in conns:
            await c.close()


@check("request/reply: single request and 50 concurrent requests get their own answers")
async def t_request():
    srv = await connect()
    cli = await connect()
    try:
        async def responder(m):
            await m.respond(b"pong:" + m.data)

        await srv.subscribe("py.svc", cb=responder)
        await sync(srv)
        r = await cli.request("py.svc", b"ping", timeout=5)
        expect(r.data == b"pong:ping", f"reply {r.data!r}")
        rs = await asyncio.gather(*(cli.request("py.svc", str(i).encode(), timeout=5) for i in range(50)))
        expect([x.data for x in rs] == [b"pong:" + str(i).encode() for i in range(50)], "mixed-up replies")
    finally:
        await srv.close()
        await cli.close()


@check("request/reply with an explicit reply subject (old-style inbox)")
async def t_request_old_style():
    nc = await connect()
    try:
        async def responder(m):
            await m.respond(b"ok-" + m.data)

        await nc.subscribe("py.svc2", cb=responder)
        inbox = nc.new_inbox()
        isub = await nc.subscribe(inbox)
        await sync(nc)
        await nc.publish("py.svc2", b"x", reply=inbox)
        m = await isub.next_msg(timeout=5)
        expect(m.data == b"ok-x", f"got {m.data!r}")
        expect(m.subject == inbox, f"reply delivered on {m.subject}")
    finally:
        await nc.close()


@check("headers: multi-value and spaced values round-trip on publish and on request/reply")
async def t_headers():
    nc = await connect()
    try:
        sub = await nc.subscribe("py.hdr")
        await sync(nc)
        hdrs = {"X-Trace": "abc123", "X-Spaced": "two words", "Nats-Msg-Id": "id-1"}
        await nc.publish("py.hdr", b"body", headers=hdrs)
        await nc.publish("py.hdr", b"", headers={"X-Only": "headers"})
        m1, m2 = await collect(sub, 2)
        expect(m1.data == b"body", f"body {m1.data!r}")
        expect(m1.headers is not None, "headers missing")
        for k, v in hdrs.items():
            expect(m1.headers.get(k) == v, f"header {k}={m1.headers.get(k)!r}, want {v!r}")
        expect(m2.data == b"" and (m2.headers or {}).get("X-Only") == "headers", f"header-only msg: {m2.headers} {m2.data!r}")

        async def responder(m):
            echo = (m.headers or {}).get("X-Req", "missing")
            await nc.publish(m.reply, b"echo:" + m.data, headers={"X-Echo": echo})

        await nc.subscribe("py.hdr.svc", cb=responder)
        await sync(nc)
        r = await nc.request("py.hdr.svc", b"q", timeout=5, headers={"X-Req": "value-1"})
        expect(r.data == b"echo:q", f"reply {r.data!r}")
        expect((r.headers or {}).get("X-Echo") == "value-1", f"reply headers {r.headers}")
    finally:
        await nc.close()


@check("no responders: request to a subject without subscribers raises NoRespondersError fast")
async def t_no_responders():
    nc = await connect()
    try:
        t0 = time.monotonic()
        try:
            await nc.request("py.nobody.home", b"anyone?", timeout=3)
        except nats.errors.NoRespondersError:
            dt = time.monotonic() - t0
            expect(dt < 2.0, f"NoRespondersError only after {dt:.2f}s")
            return
        except nats.errors.TimeoutError:
            raise CheckFailed("got TimeoutError; the server sent no 503 no-responders status")
        raise CheckFailed("request unexpectedly got a reply")
    finally:
        await nc.close()


@check("unsubscribe removes interest: later request gets NoRespondersError")
async def t_unsubscribe():
    nc = await connect()
    other = await connect()
    try:
        sub = await nc.subscribe("py.unsub")
        await sync(nc)
        await other.publish("py.unsub", b"before")
        await sync(other)
        m = await sub.next_msg(timeout=5)
        expect(m.data == b"before", "message before unsubscribe missing")
        await sub.unsubscribe()
        await sync(nc)
        try:
            await other.request("py.unsub", b"after", timeout=3)
            raise CheckFailed("request after unsubscribe got a reply")
        except nats.errors.NoRespondersError:
            pass
        except nats.errors.TimeoutError:
            raise CheckFailed("server still routed to the unsubscribed sid (timeout, not no-responders)")
    finally:
        await nc.close()
        await other.close()


@check("auto-unsubscribe (UNSUB sid 3): server delivers 3 of 10, then interest is gone")
async def t_auto_unsub():
    nc = await connect()
    other = await connect()
    try:
        got = []

        async def cb(m):
            got.append(m.data)

        sub = await nc.subscribe("py.auto", cb=cb)
        await sub.unsubscribe(limit=3)  # sends UNSUB <sid> 3 to the server
        await sync(nc)
        for i in range(10):
            await other.publish("py.auto", str(i).encode())
        await sync(other)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and len(got) < 3:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)
        expect(got == [b"0", b"1", b"2"], f"got {got}")
        try:
            await other.request("py.auto", b"x", timeout=3)
            raise CheckFailed("subscription still answered after its limit")
        except nats.errors.NoRespondersError:
            pass
        except nats.errors.TimeoutError:
            raise CheckFailed("server kept interest after the UNSUB limit (timeout, not no-responders)")
    finally:
        await nc.close()
        await other.close()


@check("no_echo: a connection does not receive its own publishes; others do")
async def t_no_echo():
    a = await connect(no_echo=True)
    b = await connect()
    try:
        sa = await a.subscribe("py.echo")
        sb = await b.subscribe("py.echo")
        await sync(a)
        await sync(b)
        await a.publish("py.echo", b"from-a")
        await b.publish("py.echo", b"from-b")
        await sync(a)
        await sync(b)
        ma = await sa.next_msg(timeout=5)
        expect(ma.data == b"from-b", f"no_echo connection got {ma.data!r} first")
        await expect_silence(sa)
        got_b = sorted(m.data for m in await collect(sb, 2))
        expect(got_b == [b"from-a", b"from-b"], f"echo connection got {got_b}")
    finally:
        await a.close()
        await b.close()


@check("flush: PING/PONG round trips complete; after a flush barrier a fresh SUB is visible to others")
async def t_flush():
    a = await connect()
    b = await connect()
    try:
        for _ in range(5):
            await asyncio.wait_for(a.flush(timeout=2), 3)
        rtt = await a.rtt()
        expect(rtt < 1.0, f"rtt {rtt}s")
        sub = await a.subscribe("py.flush")
        await sync(a)  # after this the server must have registered the SUB
        await b.publish("py.flush", b"seen")
        await sync(b)
        m = await sub.next_msg(timeout=5)
        expect(m.data == b"seen", f"got {m.data!r}")
    finally:
        await a.close()
        await b.close()


@check("drain: pending messages are all handled, then the connection closes")
async def t_drain():
    a = await connect()
    b = await connect()
    handled = []
    try:
        async def slow(m):
            await asyncio.sleep(0.002)
            handled.append(m.data)

        await a.subscribe("py.drain", cb=slow)
        await sync(a)
        for i in range(200):
            await b.publish("py.drain", str(i).encode())
        await sync(b)
        # make sure everything reached a's socket before draining
        await sync(a)
        await asyncio.sleep(0)
        await asyncio.wait_for(a.drain(), 10)
        expect(a.is_closed, "connection not closed after drain()")
        expect(handled == [str(i).encode() for i in range(200)], f"handled {len(handled)}/200 before close")
    finally:
        if not a.is_closed:
            await a.close()
        await b.close()


@check("subscription drain: queued messages handled, sub stops, connection stays usable")
async def t_sub_drain():
    nc = await connect()
    other = await connect()
    try:
        got = []

        async def cb(m):
            await asyncio.sleep(0.005)
            got.append(m.data)

        sub = await nc.subscribe("py.subdrain", cb=cb)
        await sync(nc)
        for i in range(20):
            await other.publish("py.subdrain", str(i).encode())
        await sync(other)
        await sync(nc)
        await asyncio.wait_for(sub.drain(), 5)
        expect(got == [str(i).encode() for i in range(20)], f"handled {len(got)}/20 before drain returned")
        expect(nc.is_connected, "connection died after sub.drain()")
        try:
            await other.request("py.subdrain", b"x", timeout=3)
            raise CheckFailed("drained subscription still answered")
        except nats.errors.NoRespondersError:
            pass
        except nats.errors.TimeoutError:
            raise CheckFailed("server kept interest after sub.drain() (timeout, not no-responders)")
        s2 = await nc.subscribe("py.subdrain2")
        await sync(nc)
        await nc.publish("py.subdrain2", b"still-alive")
        m = await s2.next_msg(timeout=5)
        expect(m.data == b"still-alive", f"got {m.data!r}")
    finally:
        await nc.close()
        await other.close()


@check("auth: --user/--pass server accepts right credentials, rejects wrong ones")
async def t_auth_userpass():
    if not AUTH_URL:
        raise CheckFailed("NATS_E2E_AUTH_URL not set")
    nc = await connect(AUTH_URL, user=USER, password=PASS)
    try:
        sub = await nc.subscribe("py.auth")
        await sync(nc)
        await nc.publish("py.auth", b"ok")
        m = await sub.next_msg(timeout=5)
        expect(m.data == b"ok", f"got {m.data!r}")
    finally:
        await nc.close()
    for kw in ({"user": USER, "password": PASS + "-wrong"}, {}):
        try:
            bad = await connect(AUTH_URL, max_reconnect_attempts=0, **kw)
        except (nats.errors.Error, OSError, asyncio.TimeoutError):
            continue
        await bad.close()
        raise CheckFailed(f"connect succeeded with bad credentials {list(kw) or 'none'}")


@check("auth: --auth token server accepts the token, rejects a wrong one")
async def t_auth_token():
    if not TOKEN_URL:
        raise CheckFailed("NATS_E2E_TOKEN_URL not set")
    nc = await connect(TOKEN_URL, token=TOKEN)
    try:
        await sync(nc)
        expect(nc.is_connected, "not connected with token")
    finally:
        await nc.close()
    try:
        bad = await connect(TOKEN_URL, token=TOKEN + "-wrong", max_reconnect_attempts=0)
    except (nats.errors.Error, OSError, asyncio.TimeoutError):
        return
    await bad.close()
    raise CheckFailed("connect succeeded with a wrong token")


async def main():
    if not URL:
        print("FAIL: NATS_E2E_URL not set")
        print("0 passed, 1 failed")
        return 1
    passed, failed = await run_checks(CHECKS, CHECK_TIMEOUT)
    # async errors are informational: auth checks provoke some on purpose
    unexpected = [e for e in async_errors if "authorization" not in str(e).lower()]
    if unexpected:
        print(f"note: {len(unexpected)} async client error(s): {unexpected[:3]}")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
