#!/usr/bin/env python3
"""Message schedules at scale (ADR 0023): stores N `@at` schedules (a subject each, as
`Nats-Rollup: sub` needs) all due at one instant on an R1 file stream, then reports the
publish rate, the server's RSS before and after storing them, and how long after the due
instant the last of the N produced messages was stored.

Usage (a server already running with JetStream on PORT, process id PID):
    target/release/jetraft -p 29200 --jetstream --store_dir /tmp/s &
    python3 bench/schedules.py 29200 $! 20000
    nats-server -js -p 29201 -sd /tmp/n &
    python3 bench/schedules.py 29201 $! 20000
Needs nats-py. Bounded: every request has a timeout, the due time is fixed in advance.
"""
import asyncio, json, sys, time, datetime
import nats
PORT=int(sys.argv[1]); PID=int(sys.argv[2]); N=int(sys.argv[3])
def rss(pid):
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1])//1024
async def main():
    nc = await nats.connect(f"nats://127.0.0.1:{PORT}")
    r = await nc.request("$JS.API.STREAM.CREATE.B", json.dumps({"name":"B","subjects":["s.>","t.>"],"allow_msg_schedules":True,"storage":"file","num_replicas":1}).encode(), timeout=5)
    assert b"error" not in r.data, r.data
    await asyncio.sleep(0.5)
    before = rss(PID)
    due_epoch = int(time.time()) + 1 + max(5, N // 2000)
    due = datetime.datetime.fromtimestamp(due_epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    t0 = time.time()
    for start in range(0, N, 500):
        futs = [nc.request(f"s.{i}", b"x"*16, timeout=10, headers={"Nats-Schedule":"@at "+due,"Nats-Schedule-Target":f"t.{i%100}"}) for i in range(start, min(N, start+500))]
        for r in await asyncio.gather(*futs):
            assert b"error" not in r.data, r.data
    stored_in = time.time() - t0
    after = rss(PID)
    assert time.time() < due_epoch, "publishing took past the due time"
    give_up = due_epoch + 120
    while True:
        assert time.time() < give_up, "the schedules did not all fire within 120 s"
        info = json.loads((await nc.request("$JS.API.STREAM.INFO.B", b"{}", timeout=30)).data)
        st = info["state"]
        if st["last_seq"] >= 2*N and st["messages"] == N:
            break
        await asyncio.sleep(0.02)
    done = time.time() - due_epoch
    print(f"N={N} publish {stored_in:.2f}s ({N/stored_in:.0f}/s); RSS {before} -> {after} MB; all fired {done:.2f}s after the due time; RSS then {rss(PID)} MB")
    await nc.close()
asyncio.run(main())
