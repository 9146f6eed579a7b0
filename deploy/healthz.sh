#!/bin/bash
# Container health probe: GET /healthz on this node's monitoring port (default 8222) and succeed
# on an HTTP 200. The image is FROM scratch, with no curl or wget; bash's /dev/tcp is the whole
# HTTP client, and bash is the one extra program deploy/image.sh puts in the image.
#
#   jetraft-healthz [PORT]
set -u
exec 3<>"/dev/tcp/127.0.0.1/${1:-8222}" || exit 1
printf 'GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
# The listener is bound before the node is ready (it accepts, but answers only once the server
# runs): bound the wait for the status line.
IFS= read -r -t 5 status <&3 || exit 1
[[ $status == HTTP/1.[01]\ 200* ]]
