#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages larder needs to build and test.
# Idempotent and non-interactive: installs only what is missing (and runs
# apt-get update only then). Runs apt-get as root, or through sudo otherwise.
#
#   scripts/install-deps.sh            install what is missing
#   scripts/install-deps.sh --check    only list what is missing (exit 1 if any)
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config ccache git
  # libraries
  librocksdb-dev libuv1-dev node-llhttp nlohmann-json3-dev catch2
  libxxhash-dev libtomlplusplus-dev libspdlog-dev libfmt-dev
  libcli11-dev prometheus-cpp-dev
  # fuzzing (bench/fuzz.sh; a short run is part of scripts/test.sh)
  clang libclang-rt-14-dev
  # tests, tools and end-to-end clients (chromium: the CORS tests in a real browser)
  python3 python3-numpy nodejs npm curl ca-certificates chromium
)

check_only=0
case "${1:-}" in
  --check) check_only=1 ;;
  "") ;;
  -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "install-deps.sh: unknown argument: $1 (try --help)" >&2; exit 2 ;;
esac

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "install-deps.sh: dpkg-query not found: this script supports Debian and Ubuntu only." >&2
  echo "Install the equivalents of: ${packages[*]}" >&2
  exit 1
fi

missing=()
for pkg in "${packages[@]}"; do
  # Node.js may come from elsewhere (e.g. NodeSource's nodejs, which bundles
  # npm and conflicts with Debian's npm package): a working command is enough.
  if [[ "$pkg" == nodejs ]] && command -v node >/dev/null 2>&1; then continue; fi
  if [[ "$pkg" == npm ]] && command -v npm >/dev/null 2>&1; then continue; fi
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "installed" ]]; then
    missing+=("$pkg")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps.sh: all ${#packages[@]} packages are installed."
  exit 0
fi

echo "install-deps.sh: missing: ${missing[*]}"
if [[ $check_only -eq 1 ]]; then
  exit 1
fi

if [[ $(id -u) -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "install-deps.sh: not root and sudo is not available; run as root." >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
echo "install-deps.sh: apt-get update"
${as_root[@]+"${as_root[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get update -q
echo "install-deps.sh: installing: ${missing[*]}"
${as_root[@]+"${as_root[@]}"} env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "install-deps.sh: done."
