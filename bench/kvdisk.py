"""Disk kept by a KV-like stream (one revision per key) whose keys are updated at different
rates (ADR 0029): every round one cold key written once and 20 revisions spread over 200 hot
keys, 16 KiB each, published 200 at a time; then, 5 s later, the size of the directory given.

    python3 bench/kvdisk.py URL DIR ROUNDS

URL: a server with JetStream (jetraft or nats-server); DIR: its store directory, or for
jetraft its `state/files` (the segment files alone). Prints what was written, what is live
and the directory's size in MB (`du -sm`).
"""
import asyncio
import subprocess
import sys

import nats

SIZE = 16 << 10
PER_ROUND = 21
HOT_KEYS = 200


async def main(url: str, directory: str, rounds: int) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="KVDISK", subjects=["kv.>"], max_msgs_per_subject=1)
    body = b"x" * SIZE
    total = rounds * PER_ROUND
    pending = []
    for i in range(1, total + 1):
        if i % PER_ROUND == 1:
            subject = f"kv.cold.{i // PER_ROUND}"
        else:
            subject = f"kv.hot.{i % HOT_KEYS}"
        pending.append(js.publish(subject, body))
        if len(pending) == 200:
            await asyncio.gather(*pending)
            pending = []
    if pending:
        await asyncio.gather(*pending)
    info = await js.stream_info("KVDISK")
    await asyncio.sleep(5)
    du = subprocess.run(["du", "-sm", directory], capture_output=True, text=True, check=True)
    live = info.state.messages
    print(
        f"written {total * SIZE >> 20} MiB, live {live} messages ({live * SIZE >> 20} MiB), "
        f"directory {du.stdout.split()[0]} MB"
    )
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
