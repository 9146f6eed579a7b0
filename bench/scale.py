#!/usr/bin/env python3
"""The client of bench/scale.sh (nats-py): many streams on one server or cluster.

    scale.py run --url URL --pids n1:PID[,n2:PID,...] --streams N --replicas R
                 --out FILE [--prefix S] [--create-limit 900] [--create-timeout 10]
                 [--stall 60] [--retry-pause 1] [--max-rss-mb 12000] [--settle 5]
                 [--idle 20] [--publish-limit 600] [--publish-timeout 5]
    scale.py table --labels KEY=NAME,... FILE...

`run` does, with one connection to URL, one step after the other:
  1. create streams PREFIX00001.. one at a time (`$JS.API.STREAM.CREATE.<name>`,
     file storage, limits retention, R replicas, subjects `<name>.>`), each
     request bounded by --create-timeout; a failed create is counted and sent
     again (same stream) after --retry-pause s; it stops early when
     --create-limit seconds have passed, when no create succeeded for --stall
     s, when a server process is gone, or when the servers' summed RSS exceeds
     --max-rss-mb (so that a server that grows without bound cannot take the
     machine with it);
  2. asks `$JS.API.INFO` how many streams the account holds;
  3. waits --settle s, then samples utime+stime (/proc/PID/stat) of every
     server process, sleeps --idle s, samples again: idle CPU as % of one core,
     all processes together; RSS (VmRSS of /proc/PID/status) per process right
     after the creates and at the end of the idle window;
  4. publishes one 16-byte message to `<name>.scale` of every stream that was
     created, one after the other, each waiting for its PubAck (--publish-timeout);
     every stream gets its one attempt unless --publish-limit s pass first.
Progress goes to stderr; the results go to FILE as one JSON object.

`table` prints the side-by-side markdown table of the result files (every file
is one scenario on one server: its "server" is "ref", "refsync" or "jr").
"""

import argparse
import asyncio
import json
import os
import sys
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ----------------------------------------------------------------- /proc --
def cpu_ticks(pid):
    """utime + stime of PID in clock ticks; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    # the command name (field 2) may hold spaces: count fields after its ')'
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of the whole line


def rss_mb(pid):
    """VmRSS of PID in MB (1 MB = 2^20 bytes); None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            st = f.read()
    except OSError:
        return False
    return st[st.rindex(")") + 2:].split()[0] not in ("Z", "X")


# ---------------------------------------------------------------- errors --
def reply_error(data):
    """The error of a JetStream API reply (None if it succeeded)."""
    try:
        d = json.loads(data)
    except ValueError:
        return f"unparsable reply: {data[:80]!r}"
    err = d.get("error")
    if err:
        return f"{err.get('code', '?')}/{err.get('err_code', '?')}: {err.get('description', '')}"
    return None


def exc_text(e):
    name = type(e).__name__
    if "Timeout" in name:
        return "timeout (no reply)"
    if "NoResponders" in name:
        return "no responders"
    return f"{name}: {e}"


def count(d, key):
    d[key] = d.get(key, 0) + 1


def pct(sorted_vals, p):
    if not sorted_vals:
        return None
    return sorted_vals[min(len(sorted_vals) - 1, int(len(sorted_vals) * p))]


# ------------------------------------------------------------------- run --
async def run(a):
    import nats  # only `run` needs nats-py

    pids = {}
    for item in a.pids.split(","):
        name, pid = item.split(":")
        pids[name] = int(pid)
    res = {"server": a.server, "scenario": a.scenario, "replicas": a.replicas, "target": a.streams,
           "nodes": list(pids), "created": 0, "create_attempts": 0, "create_errors": 0,
           "create_error_kinds": {}, "first_error": "", "first_error_at": None,
           "create_stop": "", "create_s": None, "create_ms_p50": None, "create_ms_p99": None,
           "create_ms_max": None, "create_retried_streams": 0, "js_info_streams": None,
           "rss_after_create_mb": {}, "rss_mb": {}, "idle_s": a.idle, "idle_cpu_pct": None,
           "idle_cpu_pct_per_node": {}, "publish_attempts": 0, "publish_ok": 0,
           "publish_failed": 0, "publish_error_kinds": {}, "publish_s": None, "publish_stop": "",
           "publish_ms_p50": None, "publish_ms_max": None, "dead_nodes": []}

    def dead():
        return [n for n, p in pids.items() if not alive(p)]

    def total_rss():
        return sum(rss_mb(p) or 0.0 for p in pids.values())

    nc = await nats.connect(servers=[a.url], connect_timeout=5, max_reconnect_attempts=3,
                            reconnect_time_wait=1)
    names = [f"{a.prefix}{i:05d}" for i in range(1, a.streams + 1)]
    created = []
    lat = []
    retried = 0
    err = None
    t0 = time.monotonic()
    last_success = t0
    next_report = t0 + 10
    stop = ""
    for i, name in enumerate(names):
        tries = 0
        while not stop:
            now = time.monotonic()
            if now - t0 > a.create_limit:
                stop = f"time limit of {a.create_limit:.0f} s reached with {len(created)} created"
                break
            if now - last_success > a.stall:
                stop = (f"no create succeeded for {a.stall:.0f} s ({len(created)} created); "
                        f"last error: {err}")
                break
            if (res["create_attempts"] % 50 == 0) or tries:
                gone = dead()
                if gone:
                    stop = f"server process gone: {','.join(gone)} ({len(created)} created)"
                    break
                mem = total_rss()
                if mem > a.max_rss_mb:
                    stop = (f"servers' RSS {mem:.0f} MB above the cap of {a.max_rss_mb:.0f} MB "
                            f"({len(created)} created)")
                    break
            if now >= next_report:
                next_report = now + 10
                log(f"    {a.server} {a.scenario}: {len(created)} created after {now - t0:.0f} s,"
                    f" {res['create_errors']} errors, RSS {total_rss():.0f} MB")
            cfg = {"name": name, "subjects": [f"{name}.>"], "storage": "file",
                   "retention": "limits", "num_replicas": a.replicas}
            res["create_attempts"] += 1
            tries += 1
            sent = time.monotonic()
            try:
                msg = await nc.request(f"$JS.API.STREAM.CREATE.{name}", json.dumps(cfg).encode(),
                                       timeout=a.create_timeout)
                err = reply_error(msg.data)
            except Exception as e:  # timeout, no responders, connection lost
                err = exc_text(e)
            if err is None:
                lat.append(time.monotonic() - sent)
                created.append(name)
                last_success = time.monotonic()
                retried += tries > 1
                break
            res["create_errors"] += 1
            count(res["create_error_kinds"], err)
            if not res["first_error"]:
                res["first_error"] = err
                res["first_error_at"] = i + 1
                log(f"    {a.server} {a.scenario}: first error at create #{i + 1} after "
                    f"{time.monotonic() - t0:.1f} s: {err}")
            # the same stream again after a pause: a transient error (no meta leader, a
            # timeout) must not end the run, a lasting one ends it through --stall
            await asyncio.sleep(a.retry_pause)
        if stop:
            break
    res["create_stop"] = stop
    res["create_retried_streams"] = retried
    res["create_s"] = round(time.monotonic() - t0, 3)
    res["created"] = len(created)
    lat.sort()
    if lat:
        res["create_ms_p50"] = round(pct(lat, 0.5) * 1000, 2)
        res["create_ms_p99"] = round(pct(lat, 0.99) * 1000, 2)
        res["create_ms_max"] = round(lat[-1] * 1000, 2)
    log(f"    {a.server} {a.scenario}: {len(created)}/{a.streams} created in {res['create_s']} s,"
        f" {res['create_errors']} errors{'; stopped: ' + res['create_stop'] if res['create_stop'] else ''}")
    res["rss_after_create_mb"] = {n: rss_mb(p) for n, p in pids.items()}

    try:
        msg = await nc.request("$JS.API.INFO", b"", timeout=10)
        res["js_info_streams"] = json.loads(msg.data).get("streams")
    except Exception as e:
        log(f"    $JS.API.INFO: {exc_text(e)}")

    # idle: nothing from this client while the window runs
    await asyncio.sleep(a.settle)
    before = {n: cpu_ticks(p) for n, p in pids.items()}
    t_idle = time.monotonic()
    await asyncio.sleep(a.idle)
    after = {n: cpu_ticks(p) for n, p in pids.items()}
    secs = time.monotonic() - t_idle
    res["idle_s"] = round(secs, 2)
    res["rss_mb"] = {n: rss_mb(p) for n, p in pids.items()}
    if all(before[n] is not None and after[n] is not None for n in pids):
        per = {n: 100.0 * (after[n] - before[n]) / CLK_TCK / secs for n in pids}
        res["idle_cpu_pct_per_node"] = {n: round(v, 2) for n, v in per.items()}
        res["idle_cpu_pct"] = round(sum(per.values()), 2)
    log(f"    {a.server} {a.scenario}: idle CPU {res['idle_cpu_pct']} % of a core over {secs:.1f} s,"
        f" RSS MB {', '.join(f'{n} {v:.0f}' if v else f'{n} gone' for n, v in res['rss_mb'].items())}")

    publat = []
    t0 = time.monotonic()
    for i, name in enumerate(created):
        if time.monotonic() - t0 > a.publish_limit:
            res["publish_stop"] = f"time limit of {a.publish_limit} s reached after {i} publishes"
            break
        res["publish_attempts"] += 1
        sent = time.monotonic()
        try:
            msg = await nc.request(f"{name}.scale", b"scale-bench-msg!", timeout=a.publish_timeout)
            err = reply_error(msg.data)
        except Exception as e:
            err = exc_text(e)
        publat.append(time.monotonic() - sent)
        if err is None:
            res["publish_ok"] += 1
            continue
        res["publish_failed"] += 1
        count(res["publish_error_kinds"], err)
    res["publish_s"] = round(time.monotonic() - t0, 3)
    publat.sort()
    if publat:
        res["publish_ms_p50"] = round(pct(publat, 0.5) * 1000, 2)
        res["publish_ms_max"] = round(publat[-1] * 1000, 2)
    log(f"    {a.server} {a.scenario}: {res['publish_ok']}/{len(created)} publishes acked in"
        f" {res['publish_s']} s, {res['publish_failed']} failed"
        f"{'; stopped: ' + res['publish_stop'] if res['publish_stop'] else ''}")
    res["dead_nodes"] = dead()
    try:
        await nc.close()
    except Exception:
        pass
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    return 0


# ----------------------------------------------------------------- table --
def fmt(v, digits=1):
    return "n/a" if v is None else f"{v:,.{digits}f}"


def cells(r):
    """The table cells of one result (None: the server did not run)."""
    if r is None:
        return ["not run"] * 6
    target = r["target"]
    per = r["create_s"] / r["created"] * 1000 if r["created"] else None
    created = f"{r['created']:,} / {target:,}"
    if r["create_errors"]:
        created += f", {r['create_errors']:,} errors"
    if r.get("create_retried_streams"):
        created += f" ({r['create_retried_streams']:,} created on a retry)"
    if r["create_stop"]:
        created += " (stopped)"
    rss = [v for v in r["rss_mb"].values()]
    if any(v is None for v in rss):
        rss_cell = " / ".join("gone" if v is None else f"{v:,.0f}" for v in rss)
    elif len(rss) == 1:
        rss_cell = f"{rss[0]:,.0f}"
    elif round(min(rss)) == round(max(rss)):
        rss_cell = f"{rss[0]:,.0f} each"
    else:
        rss_cell = f"{min(rss):,.0f}–{max(rss):,.0f}"
    pub = f"{fmt(r['publish_s'], 2)} s"
    pub_n = f"{r['publish_ok']:,} / {r['created']:,} acked"
    if r["publish_failed"]:
        pub_n += f", {r['publish_failed']:,} failed"
    if r["publish_stop"]:
        pub_n += " (stopped)"
    return [f"{fmt(r['create_s'], 2 if r['create_s'] < 10 else 1)} s / {fmt(per, 1)} ms", created, rss_cell,
            fmt(r["idle_cpu_pct"], 1), pub, pub_n]


ROW_LABELS = ["create: total / per stream", "streams created / asked, errors",
              "RSS per node after the idle window (MB)", "idle CPU, all nodes (% of one core)",
              "one publish (PubAck) to each stream: total", "publishes acked / streams"]


def table(a):
    results = {}
    order = []
    for path in a.files:
        with open(path) as f:
            r = json.load(f)
        if r["scenario"] not in order:
            order.append(r["scenario"])
        results[(r["scenario"], r["server"])] = r
    labels = [kv.split("=", 1) for kv in a.labels.split(",")]
    print("| scenario | | " + " | ".join(label for _, label in labels) + " |")
    print("|---|---|" + "---:|" * len(labels))
    for sc in order:
        per = [results.get((sc, key)) for key, _ in labels]
        any_r = next(r for r in per if r)
        reps = any_r["replicas"]
        title = f"{any_r['target']:,} R{reps} streams, {len(any_r['nodes'])} node{'s' if len(any_r['nodes']) > 1 else ''}"
        for k, (label, *row) in enumerate(zip(ROW_LABELS, *(cells(r) for r in per))):
            print(f"| {title if k == 0 else ''} | {label} | " + " | ".join(row) + " |")
    print()
    print("Details:")
    print()
    for sc in order:
        for key, label in labels:
            r = results.get((sc, key))
            if r is None:
                continue
            line = (f"- {sc} {label}: {r['create_attempts']:,} create requests; successful create latency p50 {fmt(r['create_ms_p50'])} ms, "
                    f"p99 {fmt(r['create_ms_p99'])} ms, max {fmt(r['create_ms_max'])} ms; "
                    f"$JS.API.INFO streams {r['js_info_streams']}; RSS right after the creates "
                    + ", ".join(f"{n} {fmt(v, 0)}" for n, v in r["rss_after_create_mb"].items())
                    + " MB; idle CPU per node "
                    + ", ".join(f"{n} {v}" for n, v in r["idle_cpu_pct_per_node"].items())
                    + f" % over {r['idle_s']} s; publish p50 {fmt(r['publish_ms_p50'], 2)} ms, "
                    f"max {fmt(r['publish_ms_max'], 1)} ms")
            if r["create_stop"]:
                line += f"; creates stopped: {r['create_stop']}"
            if r["create_error_kinds"]:
                line += "; create errors: " + "; ".join(
                    f"{n}× {e}" for e, n in sorted(r["create_error_kinds"].items(), key=lambda x: -x[1]))
                line += f" (first at create #{r['first_error_at']})"
            if r["publish_error_kinds"]:
                line += "; publish errors: " + "; ".join(
                    f"{n}× {e}" for e, n in sorted(r["publish_error_kinds"].items(), key=lambda x: -x[1]))
            if r["publish_stop"]:
                line += f"; publishes stopped: {r['publish_stop']}"
            if r["dead_nodes"]:
                line += f"; SERVER PROCESS GONE: {', '.join(r['dead_nodes'])}"
            print(line)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--url", required=True)
    r.add_argument("--pids", required=True, help="node:pid,... of the server processes")
    r.add_argument("--server", required=True, help="ref, refsync or jr (recorded in the result)")
    r.add_argument("--scenario", required=True)
    r.add_argument("--streams", type=int, required=True)
    r.add_argument("--replicas", type=int, required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--prefix", default="S")
    r.add_argument("--create-limit", type=float, default=900)
    r.add_argument("--create-timeout", type=float, default=10)
    r.add_argument("--stall", type=float, default=60)
    r.add_argument("--retry-pause", type=float, default=1.0)
    r.add_argument("--max-rss-mb", type=float, default=12000)
    r.add_argument("--settle", type=float, default=5)
    r.add_argument("--idle", type=float, default=20)
    r.add_argument("--publish-limit", type=float, default=600)
    r.add_argument("--publish-timeout", type=float, default=5)
    t = sub.add_parser("table")
    t.add_argument("--labels", default="ref=nats-server,refsync=nats-server sync_interval=always,jr=jetraft",
                   help="KEY=NAME,...: the columns, in order")
    t.add_argument("files", nargs="+")
    a = ap.parse_args()
    if a.cmd == "run":
        return asyncio.run(run(a))
    return table(a)


if __name__ == "__main__":
    sys.exit(main())
