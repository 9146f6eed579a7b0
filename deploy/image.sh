#!/usr/bin/env bash
# Builds the container image jetraft:latest without pulling anything: no base image, no registry.
# The image is FROM scratch and holds
#   /usr/local/bin/jetraft          the stripped release binary of this tree
#   the shared libraries `ldd` lists for it, at the same paths (glibc, libgcc_s, the loader)
#   /bin/bash + its libraries and /usr/local/bin/jetraft-healthz (deploy/healthz.sh): the
#                                   health probe; a scratch image has no curl or wget
#   /data                           the store (a volume)
# It is put together as a file tree on the host and handed to `docker import`, which needs no
# builder (neither BuildKit nor the legacy one) and works with any Docker engine on Linux.
#
#   deploy/image.sh                              # cargo build --release, then the image
#   IMAGE=jetraft:test deploy/image.sh           # another tag
#   JETRAFT_BIN=path/to/jetraft deploy/image.sh  # package that binary instead of building
#
# Machines that can pull may use deploy/Dockerfile instead (a multi-stage build from the
# official Rust image); this script is the path that works everywhere.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${IMAGE:-jetraft:latest}
DOCKER=${DOCKER:-docker}

if ! "$DOCKER" info >/dev/null 2>&1; then
    echo "image.sh: no Docker engine answers ('$DOCKER info' failed): start dockerd first" >&2
    exit 1
fi

if [[ -n ${JETRAFT_BIN:-} ]]; then
    bin=$JETRAFT_BIN
else
    cargo build --release --bin jetraft
    bin=${CARGO_TARGET_DIR:-target}/release/jetraft
fi
[[ -x $bin ]] || { echo "image.sh: $bin is not an executable" >&2; exit 1; }

ctx=$(mktemp -d "${TMPDIR:-/tmp}/jetraft-image.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
root=$ctx/root
mkdir -p "$root/usr/local/bin" "$root/bin" "$root/data" "$root/tmp"
chmod 1777 "$root/tmp"

# add_libs FILE: copy the shared libraries FILE loads to the same paths under $root. ldd prints
# "name => /path (addr)" for libraries and "/path (addr)" for the loader; the vdso has no path.
# A static binary ("not a dynamic executable") needs none.
add_libs() {
    local lib
    while read -r lib; do
        [[ -e $root$lib ]] && continue
        mkdir -p "$root$(dirname "$lib")"
        cp -L "$lib" "$root$lib" # -L: the file itself where the path is a symlink
    done < <(ldd "$1" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' || true)
}

cp "$bin" "$root/usr/local/bin/jetraft"
if command -v strip >/dev/null 2>&1; then
    strip "$root/usr/local/bin/jetraft"
else
    echo "image.sh: no 'strip' (binutils): the binary goes in with its debug info" >&2
fi
add_libs "$root/usr/local/bin/jetraft"

bash_bin=$(command -v bash)
cp -L "$bash_bin" "$root/bin/bash"
add_libs "$root/bin/bash"
install -m 0755 deploy/healthz.sh "$root/usr/local/bin/jetraft-healthz"

version=$("$bin" --version 2>/dev/null | head -n 1 || true)
revision=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
# Owned by root in the image whoever runs this; one layer. The changes are Dockerfile lines.
tar -C "$root" --owner=0 --group=0 --numeric-owner -cf - . |
    "$DOCKER" import \
        --change 'ENTRYPOINT ["/usr/local/bin/jetraft"]' \
        --change 'CMD ["-js", "-sd", "/data"]' \
        --change 'EXPOSE 4222 6222 8222' \
        --change 'VOLUME /data' \
        --change 'WORKDIR /data' \
        --change "LABEL org.opencontainers.image.title=jetraft org.opencontainers.image.revision=$revision" \
        --message "deploy/image.sh: ${version:-jetraft} ($revision)" \
        - "$IMAGE" >/dev/null

size=$("$DOCKER" image inspect --format '{{.Size}}' "$IMAGE")
echo "built $IMAGE from $bin (${version:-jetraft}, $revision): $((size / 1024 / 1024)) MiB"
