#!/usr/bin/env bash
# wafersim quick start on Debian 12.
#   ./quickstart.sh        install what is missing, build, run scenarios/quickstart.yaml
#   ./quickstart.sh test   install what is missing, build, run the whole test suite
# Idempotent: packages already present are not reinstalled; the build is incremental.
set -euo pipefail
cd "$(dirname "$0")"

mode="${1:-run}"
case "$mode" in run|test) ;; *) echo "usage: $0 [run|test]" >&2; exit 2 ;; esac

packages=(g++ cmake ninja-build pkg-config libsystemc-dev libboost-graph-dev libyaml-cpp-dev
          libhdf5-dev libgtest-dev libcli11-dev libfmt-dev nlohmann-json3-dev libssl-dev
          libicu-dev python3 python3-numpy libopenmpi-dev openmpi-bin)
# The test suite also opens the HTML reports and traces in a headless browser
# (tests/browser): Debian's chromium, and npm (Debian's, where the machine has
# none) for the trace viewer that tests/browser/package-lock.json pins.
if [ "$mode" = test ]; then
  packages+=(chromium)
  command -v npm >/dev/null || packages+=(npm)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "== installing: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ "$mode" = test ]; then
  mkdir -p build/browser
  if ! cmp -s tests/browser/package-lock.json build/browser/package-lock.json ||
     [ ! -f build/browser/node_modules/speedscope/dist/release/index.html ]; then
    echo "== installing the trace viewer for the browser checks (npm, build/browser)"
    cp tests/browser/package.json tests/browser/package-lock.json build/browser/
    npm ci --prefix build/browser --no-audit --no-fund --loglevel=error >/dev/null
  fi
fi

echo "== configuring and building (build/release)"
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"

if [ "$mode" = run ]; then
  echo "== running scenarios/quickstart.yaml"
  ./build/release/sim/wafersim run scenarios/quickstart.yaml
else
  echo "== running the test suite"
  ctest --preset release -j "$(nproc)"
fi
