#!/usr/bin/env bash
# Installs what the SMART framework needs to build, test and run on Debian 12
# with apt-get. Safe to run more than once. Needs root (or sudo).
#
#   ./deps.sh            build, unit and integration test dependencies
#   ./deps.sh --softroce also what the Soft-RoCE test tier boots (QEMU, a kernel)
set -euo pipefail

want_softroce=0
for arg in "$@"; do
  case "$arg" in
    --softroce) want_softroce=1 ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "deps.sh: unknown option '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

packages=(
  build-essential g++ cmake make pkg-config git
  rdma-core libibverbs-dev ibverbs-providers ibverbs-utils librdmacm-dev
  libboost-context-dev nlohmann-json3-dev libjemalloc-dev libnuma-dev libsodium-dev
  libgtest-dev libcli11-dev libbenchmark-dev libisal-dev ninja-build
  python3 python3-matplotlib doxygen
  # The membership: libcurl for its etcd client, and etcd itself, which its
  # tests start on a private port.
  libcurl4-openssl-dev etcd-server
  # The sanitizer stage (test/sanitize/run.sh): clang, its sanitizer
  # runtimes and libFuzzer.
  clang libclang-rt-14-dev libfuzzer-14-dev
)
# Go builds the linearizability checker (test/linearizability, go 1.19: Debian
# 12's golang-go); a toolchain already in /usr/local/go or on PATH will do.
if [[ ! -x /usr/local/go/bin/go ]] && ! command -v go >/dev/null; then
  packages+=(golang-go)
fi
if ((want_softroce)); then
  packages+=(qemu-system-x86 linux-image-amd64 busybox-static perftest iproute2 kmod cpio gzip)
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "deps.sh: run as root or install sudo" >&2; exit 1; }
  sudo=sudo
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "deps.sh: all ${#packages[@]} packages already installed"
  exit 0
fi
echo "deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
