#!/usr/bin/env bash
# site.yml for real on two podman containers, offline, twice (the second run must change nothing).
#
#   PT2PT_SPACK_ROOT=/path/to/spack PT2PT_SPACK_PACKAGES=/path/to/spack-packages \
#   PT2PT_SPACK_MIRROR=/path/to/source-mirror  [PT2PT_OSU_SRC=/path/to/osu-copy]  playbooks/tests/podman-site.sh
#
# What it does (root, podman; see playbooks/README.md "site.yml on two podman containers"):
#  1. a Debian 12 image with the build tools and Open MPI, made with debootstrap from the
#     mirror the host's apt uses (no container registry needed), kept as $PT2PT_PODMAN_IMAGE;
#  2. an offline bundle: tarballs of the given Spack and spack-packages trees, the source
#     mirror, and a wheelhouse (clingo, setuptools, the kit's dependencies) made with the
#     host's pip unless PT2PT_WHEELHOUSE names one; with PT2PT_OSU_SRC, an OSU Micro-Benchmarks
#     tarball added to (the bundle's copy of) the mirror, laid out as `spack mirror create` does;
#  3. two containers, `login` and `compute`, without network, sharing /apps (the "shared
#     filesystem") and seeing the bundle read-only at /srv/pt2pt-offline;
#  4. an inventory with ansible_connection containers.podman.podman, then site.yml twice;
#     fails unless both runs have failed=0 and the second has changed=0 on both hosts;
#  5. the probe (2 ranks, from the Spack view on /apps) on compute, osu_latency (2 ranks) on
#     compute when OSU was installed, SKaMPI on login,
#     `pt2pt --version` on login, `spack audit packages` of the kit's recipes on login;
#  6. removes the two containers it created (by ID) and its work directory
#     (PT2PT_PODMAN_KEEP=1 keeps both for a look).
#
# Without PT2PT_SPACK_ROOT it prints why and exits 0 (nothing to do): CI has no Spack copy.
# PT2PT_OSU_SRC (optional) is a public copy of the OSU Micro-Benchmarks source, whose release
# tarball (mvapich.cse.ohio-state.edu) may be out of reach: a git repository (bare or not,
# archived at PT2PT_OSU_REV, default HEAD), a source directory, or a release .tar.gz. Its version
# (AC_INIT in configure.ac, or PT2PT_OSU_VERSION) must be one the builtin recipe lists; it is
# required in the site's packages.yaml (`require: "@=<version>"`) and installed with the probe
# and SKaMPI. A copy without a generated `configure` is autoreconf'd on the host first. The
# archive is not the release's, so its checksum differs: it needs --no-checksum (the default
# here, PT2PT_SPACK_NO_CHECKSUM=1). Unset: OSU is concretized but not installed.
# Needs the containers.podman collection (ansible-galaxy collection install containers.podman,
# or ANSIBLE_COLLECTIONS_PATH pointing at a copy, e.g. from the `ansible` wheel on PyPI).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
say() { echo "podman-site: $*" >&2; }
die() { say "$*"; exit 2; }

if [ -z "${PT2PT_SPACK_ROOT:-}" ]; then
  say "SKIP: PT2PT_SPACK_ROOT is not set (a Spack source tree; also PT2PT_SPACK_PACKAGES, PT2PT_SPACK_MIRROR)"
  exit 0
fi
SPACK_ROOT_DIR=$PT2PT_SPACK_ROOT
PACKAGES_DIR=${PT2PT_SPACK_PACKAGES:?set PT2PT_SPACK_PACKAGES to a spack-packages tree}
MIRROR_DIR=${PT2PT_SPACK_MIRROR:?set PT2PT_SPACK_MIRROR to a Spack source mirror (compiler-wrapper, SKaMPI)}
MIRROR_DIR=${MIRROR_DIR#file://}
[ -x "$SPACK_ROOT_DIR/bin/spack" ] || die "$SPACK_ROOT_DIR/bin/spack not found (PT2PT_SPACK_ROOT)"
[ -d "$PACKAGES_DIR/repos/spack_repo/builtin" ] || die "$PACKAGES_DIR/repos/spack_repo/builtin not found (PT2PT_SPACK_PACKAGES)"
[ -d "$MIRROR_DIR" ] || die "$MIRROR_DIR is not a directory (PT2PT_SPACK_MIRROR)"
[ "$(id -u)" = 0 ] || die "run as root (podman containers as root, as in .ci/container-test.sh)"
command -v podman >/dev/null || die "podman not found: apt-get install podman runc debootstrap uidmap"

VENV=${PT2PT_VENV:-$REPO/.venv}
[ -x "$VENV/bin/ansible-playbook" ] || die "$VENV/bin/ansible-playbook not found: make venv"
"$VENV/bin/ansible-doc" -t connection containers.podman.podman >/dev/null 2>&1 ||
  die "the containers.podman collection is missing: ansible-galaxy collection install containers.podman (or set ANSIBLE_COLLECTIONS_PATH)"

IMAGE=${PT2PT_PODMAN_IMAGE:-localhost/pt2pt-site-node:bookworm-2}  # -2: python3-dev added
NO_CHECKSUM=${PT2PT_SPACK_NO_CHECKSUM:-1}   # a mirror with archives rebuilt from git tags
WORK=$(mktemp -d "${TMPDIR:-/tmp}/pt2pt-podman-site.XXXXXX")
TAG=$(basename "$WORK" | tr -dc 'a-zA-Z0-9' | tail -c 6)
OFFLINE=$WORK/offline        # -> /srv/pt2pt-offline in the containers (read-only)
APPS=$WORK/apps              # -> /apps in both containers (the shared filesystem)
mkdir -p "$OFFLINE/tarballs" "$APPS"

GLOBAL=(--cgroup-manager=cgroupfs)
command -v runc >/dev/null && GLOBAL+=(--runtime runc)
P() { podman "${GLOBAL[@]}" "$@"; }
nproc_max=$(ulimit -Hu); [ "$nproc_max" = unlimited ] || [ "$nproc_max" -ge 4096 ] && nproc_max=4096
nofile_max=$(ulimit -Hn); [ "$nofile_max" = unlimited ] || [ "$nofile_max" -ge 1024 ] && nofile_max=1024

CREATED=()
cleanup() {
  local rc=$?
  if [ "${PT2PT_PODMAN_KEEP:-0}" = 1 ]; then
    say "kept containers ${CREATED[*]:-none} and $WORK (PT2PT_PODMAN_KEEP=1)"
  else
    for id in "${CREATED[@]}"; do P rm -f -t 0 "$id" >/dev/null || say "could not remove container $id"; done
    rm -rf "$WORK"
  fi
  exit "$rc"
}
trap cleanup EXIT

# 1. The node image: Debian 12 with what site.yml's `packages` tasks name (already there, so
# those tasks run and change nothing offline), python3-apt for the apt module, Open MPI and
# the build tools Spack takes as externals.
PKGS=python3,python3-venv,python3-dev,python3-apt,python3-packaging,build-essential,gfortran,git,curl,unzip,xz-utils,bzip2,patch,file
PKGS=$PKGS,ca-certificates,openmpi-bin,libopenmpi-dev,bison,flex,autoconf,automake,libtool,m4
if ! P image exists "$IMAGE"; then
  command -v debootstrap >/dev/null || die "debootstrap not found: apt-get install debootstrap"
  mirror=$({ grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}'
             grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}'; } |
           awk '!/security/ {print; exit}' || true)
  [ -n "$mirror" ] || die "found no Debian mirror in the host's apt sources"
  say "building $IMAGE with debootstrap from $mirror (a few minutes)"
  debootstrap --variant=minbase --include="$PKGS" bookworm "$WORK/rootfs" "$mirror" >"$WORK/debootstrap.log" 2>&1 ||
    { tail -20 "$WORK/debootstrap.log" >&2; die "debootstrap failed"; }
  tar -C "$WORK/rootfs" -c . | P import -q - "$IMAGE" >/dev/null
  rm -rf "$WORK/rootfs"
fi

# 2. The offline bundle.
SPACK_VERSION=$(sed -nE 's/^__version__ = "([^"]+)".*/\1/p' "$SPACK_ROOT_DIR/lib/spack/spack/__init__.py" | head -1)
SPACK_VERSION=${SPACK_VERSION:-local}
tar -C "$SPACK_ROOT_DIR" --exclude=.git --transform "s,^\.,spack-$SPACK_VERSION," -czf \
  "$OFFLINE/tarballs/spack-$SPACK_VERSION.tar.gz" .
tar -C "$PACKAGES_DIR" --exclude=.git --transform "s,^\.,spack-packages-local," -czf \
  "$OFFLINE/tarballs/spack-packages-local.tar.gz" .
cp -a "$MIRROR_DIR" "$OFFLINE/spack-mirror"
if [ -n "${PT2PT_WHEELHOUSE:-}" ]; then
  cp -a "$PT2PT_WHEELHOUSE" "$OFFLINE/wheels"
else
  say "making a wheelhouse with the host's pip (PT2PT_WHEELHOUSE to reuse one)"
  mapfile -t deps < <("$VENV/bin/python" -c 'import tomllib; print(*tomllib.load(open("'"$REPO"'/pyproject.toml", "rb"))["project"]["dependencies"], sep="\n")')
  "$VENV/bin/pip" download -q -d "$OFFLINE/wheels" --only-binary=:all: --python-version 3.11 \
    --implementation cp --abi cp311 --abi abi3 --abi none \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
    "clingo==5.8.3" "setuptools==80.9.0" wheel "${deps[@]}"
fi

# The OSU tarball, as `spack mirror create` lays it out: stored as
# _source-cache/archive/<sha256[:2]>/<sha256>.tar.gz under the checksum the recipe gives for that
# version (the only path Spack 1.x fetches a checksummed version from; the archive is not those
# bytes, hence --no-checksum), and linked from <package>/<package>-<version>.tar.gz. One top
# directory. Spack's AutotoolsPackage runs the shipped `configure` (no autoreconf unless the
# recipe asks), so the builtin recipe is used unchanged.
OSU_VERSION=""
if [ -n "${PT2PT_OSU_SRC:-}" ]; then
  osu_src=$WORK/osu-src
  mkdir -p "$osu_src/tree"
  if [ -f "$PT2PT_OSU_SRC" ]; then
    tar -C "$osu_src/tree" --strip-components=1 -xzf "$PT2PT_OSU_SRC"
  elif git -C "$PT2PT_OSU_SRC" rev-parse --git-dir >/dev/null 2>&1; then
    osu_rev=$(git -C "$PT2PT_OSU_SRC" rev-parse --verify "${PT2PT_OSU_REV:-HEAD}^{commit}") ||
      die "no commit ${PT2PT_OSU_REV:-HEAD} in $PT2PT_OSU_SRC (PT2PT_OSU_REV)"
    git -C "$PT2PT_OSU_SRC" archive "$osu_rev" | tar -C "$osu_src/tree" -x
  elif [ -d "$PT2PT_OSU_SRC" ]; then
    cp -a "$PT2PT_OSU_SRC/." "$osu_src/tree"
  else
    die "$PT2PT_OSU_SRC is neither a tarball, a git repository nor a directory (PT2PT_OSU_SRC)"
  fi
  OSU_VERSION=${PT2PT_OSU_VERSION:-$(sed -nE 's/^AC_INIT\(\[[^]]*\], *\[([^]]+)\].*/\1/p' "$osu_src/tree/configure.ac" 2>/dev/null | head -1)}
  [ -n "$OSU_VERSION" ] || die "no AC_INIT version in $PT2PT_OSU_SRC/configure.ac: set PT2PT_OSU_VERSION"
  osu_recipe=$PACKAGES_DIR/repos/spack_repo/builtin/packages/osu_micro_benchmarks/package.py
  osu_sha=$(sed -nE "s/^ *version\(\"$OSU_VERSION\", *sha256=\"([0-9a-f]{64})\".*/\1/p" "$osu_recipe" | head -1)
  [ -n "$osu_sha" ] || die "OSU $OSU_VERSION is not a version of $osu_recipe (with its sha256 on the same line)"
  if [ ! -x "$osu_src/tree/configure" ]; then
    command -v autoreconf >/dev/null || die "$PT2PT_OSU_SRC has no configure: apt-get install autoconf automake libtool"
    say "OSU $OSU_VERSION: no configure in the copy, running autoreconf -fi"
    ( cd "$osu_src/tree" && autoreconf -fi ) >"$osu_src/autoreconf.log" 2>&1 ||
      { tail -20 "$osu_src/autoreconf.log" >&2; die "autoreconf failed"; }
  fi
  mv "$osu_src/tree" "$osu_src/osu-micro-benchmarks-$OSU_VERSION"
  osu_store=_source-cache/archive/${osu_sha:0:2}/$osu_sha.tar.gz
  mkdir -p "$OFFLINE/spack-mirror/$(dirname "$osu_store")" "$OFFLINE/spack-mirror/osu-micro-benchmarks"
  tar -C "$osu_src" -czf "$OFFLINE/spack-mirror/$osu_store" "osu-micro-benchmarks-$OSU_VERSION"
  ln -sfn "../$osu_store" "$OFFLINE/spack-mirror/osu-micro-benchmarks/osu-micro-benchmarks-$OSU_VERSION.tar.gz"
  rm -rf "$osu_src"
  say "OSU $OSU_VERSION from $PT2PT_OSU_SRC${osu_rev:+ at $osu_rev}: mirror $osu_store (the recipe's checksum), sha256 of the archive $(sha256sum "$OFFLINE/spack-mirror/$osu_store" | cut -c1-16)... (not the release's: --no-checksum)"
  [ "$NO_CHECKSUM" = 1 ] || say "warning: PT2PT_SPACK_NO_CHECKSUM=0, Spack will refuse the OSU archive (checksum)"
else
  say "OSU: PT2PT_OSU_SRC is not set (an OSU Micro-Benchmarks source copy): OSU is concretized, not installed"
fi

# 3. Two containers, no network, /apps shared.
for node in login compute; do
  id=$(P run -d --name "pt2pt-site-$node-$TAG" --hostname "$node" --network none \
         --ulimit "nofile=$nofile_max:$nofile_max" --ulimit "nproc=$nproc_max:$nproc_max" \
         -v "$OFFLINE:/srv/pt2pt-offline:ro" -v "$APPS:/apps" "$IMAGE" sleep infinity)
  CREATED+=("$id")
done
say "containers: pt2pt-site-login-$TAG pt2pt-site-compute-$TAG"

# 4. Inventory and the two runs.
ompi=$(P exec "pt2pt-site-login-$TAG" dpkg-query -W -f='${Version}' libopenmpi-dev | sed -E 's/^([0-9.]+).*/\1/')
cat >"$WORK/inventory.yml" <<EOF
all:
  vars:
    pt2pt_site_partition: debug
    pt2pt_site_account: ""
    pt2pt_site_launcher: mpirun
    spack_prefix: /apps/spack
    spack_version: "$SPACK_VERSION"
    spack_tarball_url: "file:///srv/pt2pt-offline/tarballs/spack-$SPACK_VERSION.tar.gz"
    spack_packages_version: local
    spack_packages_tarball_url: "file:///srv/pt2pt-offline/tarballs/spack-packages-local.tar.gz"
    spack_mirrors:
      - {name: pt2pt-local, url: "file:///srv/pt2pt-offline/spack-mirror", binary: false, source: true, signed: false}
    spack_pip_extra_args: [--no-index, --find-links, /srv/pt2pt-offline/wheels]
    spack_packages_config:
      openmpi:
        buildable: false
        externals: [{spec: "openmpi@$ompi fabrics=ucx,ofi,verbs,psm,psm2 schedulers=slurm,sge", prefix: /usr}]
      gmake: {buildable: false, externals: [{spec: gmake@4.3, prefix: /usr}]}
      bison: {externals: [{spec: bison@3.8.2, prefix: /usr}]}
      flex: {externals: [{spec: flex@2.6.4+lex, prefix: /usr}]}
      autoconf: {externals: [{spec: autoconf@2.71, prefix: /usr}]}
      automake: {externals: [{spec: automake@1.16.5, prefix: /usr}]}
      libtool: {externals: [{spec: libtool@2.4.7, prefix: /usr}]}
      m4: {externals: [{spec: m4@1.4.19, prefix: /usr}]}$( [ -n "$OSU_VERSION" ] && printf '\n      osu-micro-benchmarks: {require: "@=%s"}' "$OSU_VERSION")
    pt2pt_env_prefix: /apps/pt2pt-kit
    pt2pt_env_install_specs: $( [ -n "$OSU_VERSION" ] && echo '[pt2pt-probe, skampi, osu-micro-benchmarks]' ||
                                echo '[pt2pt-probe, skampi]   # no OSU source in the mirror' )
    pt2pt_env_install_args: $( [ "$NO_CHECKSUM" = 1 ] && echo '[--no-checksum]' || echo '[]' )
    pt2pt_kit_pip_extra_args: [--no-index, --find-links, /srv/pt2pt-offline/wheels]
  children:
    nodes:
      vars:
        ansible_connection: containers.podman.podman
        ansible_podman_extra_args: "${GLOBAL[*]}"
        ansible_python_interpreter: /usr/bin/python3
      children:
        login: {hosts: {login: {ansible_host: pt2pt-site-login-$TAG}}}
        compute: {hosts: {compute: {ansible_host: pt2pt-site-compute-$TAG}}}
EOF

run_site() {  # $1 = log file; prints the seconds it took
  local t0=$SECONDS
  ( cd "$REPO" && TMPDIR=$WORK ANSIBLE_NOCOLOR=1 ANSIBLE_LOCALHOST_WARNING=False \
      "$VENV/bin/ansible-playbook" -i "$WORK/inventory.yml" playbooks/site.yml -v ) >"$1" 2>&1 ||
    { tail -40 "$1" >&2; die "site.yml failed (log above; PT2PT_PODMAN_KEEP=1 keeps $WORK)"; }
  echo $((SECONDS - t0))
}
recap() { sed -n '/PLAY RECAP/,$p' "$1" | grep -E '^(login|compute) +:'; }

say "site.yml, first run"
t1=$(run_site "$WORK/run1.log")
recap "$WORK/run1.log" | sed 's/^/  run 1: /' >&2
say "site.yml, second run"
t2=$(run_site "$WORK/run2.log")
recap "$WORK/run2.log" | sed 's/^/  run 2: /' >&2
[ "$(recap "$WORK/run2.log" | wc -l)" = 2 ] || die "no recap for both hosts in the second run"
if recap "$WORK/run2.log" | grep -vE 'changed=0 .*failed=0'; then
  grep -E '^changed: ' "$WORK/run2.log" >&2 || true
  die "the second run changed something (above)"
fi
say "first run ${t1} s, second run ${t2} s, second run changed=0 on login and compute"

# 5. The installed tools. The probe runs on compute from the shared /apps view.
VIEW=/apps/pt2pt-kit/current/.spack-env/view
MPIRUN=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
        mpirun -np 2 --oversubscribe)
P exec "pt2pt-site-login-$TAG" pt2pt --version
P exec -w /tmp "pt2pt-site-compute-$TAG" "${MPIRUN[@]}" "$VIEW/bin/pt2pt-probe" --op pingpong \
  --sizes list:0,1K,64K --samples 20 --warmup 5 --seed 3 --output /tmp/pp >/dev/null
rows=$(P exec "pt2pt-site-compute-$TAG" sh -c 'wc -l < /tmp/pp.samples.csv')
[ "$rows" -ge 61 ] || die "the probe wrote $rows lines, expected a header and 65 samples"
say "probe on compute: /tmp/pp.samples.csv has $rows lines (header + 5 warm-up + 3 x 20)"
P exec "pt2pt-site-compute-$TAG" cat /etc/pt2pt/site.yaml >&2
if [ -n "$OSU_VERSION" ]; then
  # OSU 7.4's make install flattens c/mpi/pt2pt/standard/ into libexec/.../mpi/pt2pt/; 7.5 keeps it.
  osu_latency=$(P exec "pt2pt-site-compute-$TAG" sh -c "ls $VIEW/libexec/osu-micro-benchmarks/mpi/pt2pt/osu_latency \
    $VIEW/libexec/osu-micro-benchmarks/mpi/pt2pt/standard/osu_latency 2>/dev/null | head -1")
  [ -n "$osu_latency" ] || die "no osu_latency under $VIEW/libexec/osu-micro-benchmarks on compute"
  P exec -w /tmp "pt2pt-site-compute-$TAG" "${MPIRUN[@]}" "$osu_latency" -m 1:1024 >"$WORK/osu_latency.out"
  sed 's/^/  /' "$WORK/osu_latency.out" >&2
  rows=$(grep -cE '^[0-9]+[[:space:]]+[0-9.]+' "$WORK/osu_latency.out" || true)
  [ "$rows" -ge 11 ] || die "osu_latency printed $rows rows, expected 11 (1 B .. 1 KiB)"
  say "OSU $OSU_VERSION on compute: $osu_latency, $rows rows (1 B .. 1 KiB)"
fi
P exec -w /tmp "pt2pt-site-login-$TAG" sh -c "printf '%s\n' \
  'set_min_repetitions(8)' 'set_max_repetitions(16)' 'set_max_relative_standard_error(0.03)' \
  'set_skampi_buffer(16kb)' 'comm_pt2pt = comm2_max_latency_with_root()' \
  'begin measurement \"Pingpong_Send_Recv\"' \
  '   for count = 1 to 1024 step *4 do' \
  '      measure comm_pt2pt : Pingpong_Send_Recv(count, MPI_INT, 0, 1)' \
  '   od' 'end measurement' > small.ski"
P exec -w /tmp "pt2pt-site-login-$TAG" "${MPIRUN[@]}" "$VIEW/bin/skampi" -i small.ski -o small.sko >/dev/null
rows=$(P exec "pt2pt-site-login-$TAG" grep -c '^count=' /tmp/small.sko)
[ "$rows" -ge 6 ] || die "SKaMPI wrote $rows result rows, expected 6"
say "SKaMPI on login: $(P exec "pt2pt-site-login-$TAG" head -1 /tmp/small.sko), $rows Pingpong_Send_Recv rows"
# The kit's recipes as Spack's own CI audits builtin ones, with the Spack just deployed.
P exec "pt2pt-site-login-$TAG" bash -c '. /apps/spack/spack-env.sh &&
  spack -e /apps/pt2pt-kit/current audit packages pt2pt.pt2pt-probe pt2pt.skampi &&
  spack -e /apps/pt2pt-kit/current audit packages-https pt2pt.pt2pt-probe pt2pt.skampi' >&2
say "PASS: run 1 ${t1} s, run 2 ${t2} s (changed=0)"
