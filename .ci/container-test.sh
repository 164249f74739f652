#!/usr/bin/env bash
# Build the Containerfile and run the test suite inside it, with podman or docker.
#
# Where no container registry is reachable (this is common on clusters and in our CI), the
# debian:bookworm-slim base image is made from Debian's own packages with debootstrap, using
# the mirror the host's apt already uses. On hosts whose podman needs it (hybrid cgroups, low
# ulimits) the runtime settings from the kit's CI notes are applied.
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGE=${PT2PT_TEST_IMAGE:-pt2pt-kit-test}
BASE=debian:bookworm-slim
SHARED=$(cd .. && pwd)/shared

if command -v podman >/dev/null; then ENGINE=podman
elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then ENGINE=docker
else echo "container-test: neither podman nor a running docker engine was found; install podman (apt-get install podman runc)" >&2; exit 2; fi

RUN_OPTS=() BUILD_OPTS=()
if [ "$ENGINE" = podman ]; then
  GLOBAL=(--cgroup-manager=cgroupfs)
  command -v runc >/dev/null && GLOBAL+=(--runtime runc)
  # Never above this shell's hard limits: podman cannot raise them (setrlimit: not permitted).
  nproc=$(ulimit -Hu); [ "$nproc" = unlimited ] || [ "$nproc" -ge 4096 ] && nproc=4096
  nofile=$(ulimit -Hn); [ "$nofile" = unlimited ] || [ "$nofile" -ge 1024 ] && nofile=1024
  LIMITS=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
  RUN_OPTS+=("${LIMITS[@]}")
  BUILD_OPTS+=(--pull=never "${LIMITS[@]}" --network host)
  # pip inside the build must trust the same CA bundle as the host (proxies with their own CA).
  # Mounted beside the image's own bundle (not over it: ca-certificates' postinst rewrites that).
  if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    BUILD_OPTS+=(-v /etc/ssl/certs/ca-certificates.crt:/run/host-ca.crt:ro --build-arg PIP_CERT=/run/host-ca.crt)
  fi
  for v in PIP_INDEX_URL PIP_EXTRA_INDEX_URL; do [ -n "${!v:-}" ] && BUILD_OPTS+=(--build-arg "$v=${!v}"); done
  E() { podman "${GLOBAL[@]}" "$@"; }
else
  E() { docker "$@"; }
fi

apt_mirror() {
  # The first Debian archive the host's apt uses (deb822 or one-line format).
  { grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}'
    grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}'; } | awk '!/security/ {print; exit}' || true
}

if ! E image exists "$BASE" 2>/dev/null && ! E image inspect "$BASE" >/dev/null 2>&1; then
  if ! timeout 60 "$ENGINE" pull -q "$BASE" >/dev/null 2>&1; then
    command -v debootstrap >/dev/null || { echo "container-test: cannot pull $BASE and debootstrap is missing (apt-get install debootstrap)" >&2; exit 2; }
    mirror=$(apt_mirror)
    [ -n "$mirror" ] || { echo "container-test: cannot pull $BASE and found no Debian mirror in /etc/apt sources" >&2; exit 2; }
    rootfs=$(mktemp -d /tmp/pt2pt-rootfs.XXXXXX)
    trap 'rm -rf "$rootfs"' EXIT
    echo "container-test: building $BASE with debootstrap from $mirror"
    debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/dev/null
    tar -C "$rootfs" -c . | E import - "$BASE" >/dev/null
  fi
fi

echo "container-test: building $IMAGE with $ENGINE"
E build "${BUILD_OPTS[@]}" -t "$IMAGE" -f Containerfile .
MOUNT=()
[ -d "$SHARED" ] && MOUNT=(-v "$SHARED:/opt/shared:ro")
echo "container-test: running the tests in $IMAGE"
E run --rm --network none "${RUN_OPTS[@]}" "${MOUNT[@]}" "$IMAGE" "$@"
