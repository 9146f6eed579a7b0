#!/usr/bin/env bash
# A three-node jetraft cluster as local processes on loopback (what docker-compose.yml runs in
# containers). Clients: nats://127.0.0.1:4222,127.0.0.1:4223,127.0.0.1:4224; monitoring on
# 8222-8224; data under ${DATA:-./jetraft-cluster}. Ctrl-C stops all three.
#
#   deploy/local-cluster.sh                       # uses target/release/jetraft
#   JETRAFT=target/debug/jetraft deploy/local-cluster.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${JETRAFT:-target/release/jetraft}
data=${DATA:-./jetraft-cluster}
routes="nats-route://127.0.0.1:6222,nats-route://127.0.0.1:6223,nats-route://127.0.0.1:6224"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait' EXIT INT TERM
for i in 0 1 2; do
  "$bin" -a 127.0.0.1 -p $((4222 + i)) -m $((8222 + i)) -js -sd "$data/n$((i + 1))" \
    -n "n$((i + 1))" --cluster_name jetraft --cluster "nats://127.0.0.1:$((6222 + i))" \
    --routes "$routes" &
  pids+=($!)
done
wait
