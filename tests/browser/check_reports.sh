#!/usr/bin/env bash
# Opens wafersim's HTML reports and placement pictures in a real headless
# browser (Debian's chromium): no console errors, nothing fetched, and a
# screenshot that is not blank. Every kind of report: run (the quick start and
# Llama-3.1-8B on a full WSE-3), serve, capacity, sweep, and the placement
# picture of a full WSE-3. ctest runs it as browser.reports where chromium is
# installed (./quickstart.sh test installs it):
#
#   tests/browser/check_reports.sh WAFERSIM [OUT_DIR]
#
# Writes the reports and screenshots under OUT_DIR (default: a temporary
# folder) and prints their paths. Exit 0 all good, 1 a check failed, 2 no browser.
set -euo pipefail
B="$(realpath "$1")"
cd "$(dirname "$0")/../.."
. tests/browser/chromium.sh
out="${2:-$(mktemp -d)}"
mkdir -p "$out"
out="$(realpath "$out")"

# A small serving study: the tiny model on the small mesh beside a DGX H100.
cat >"$out/serving.yaml" <<'YAML'
name: browser-check-serving
hardware: small
model: tiny-llama
traffic:
  seed: 3
  arrivals: {process: poisson, rate: 40/s}
  requests: 200
  prompt_tokens: {uniform: [8, 60]}
  output_tokens: {uniform: [4, 30]}
deployment: {wafer: {max_batch: 8}}
compare_with: [dgx-h100]
slo: {ttft: 100 ms, tokens_per_s: 200}
YAML

files=()
quiet() { "$@" >"$out/last-command.log" 2>&1 || { echo "FAIL: $*"; cat "$out/last-command.log"; exit 1; }; }
quiet "$B" run scenarios/quickstart.yaml --report "$out/run-quickstart.html"
files+=("$out/run-quickstart.html")
quiet "$B" run scenarios/llama-3.1-8b-wse3.yaml --timing-only --report "$out/run-llama8b-wse3.html"
files+=("$out/run-llama8b-wse3.html")
quiet "$B" place scenarios/llama-3.1-8b-wse3.yaml --svg "$out/place-llama8b-wse3.svg"
files+=("$out/place-llama8b-wse3.svg")
quiet "$B" serve "$out/serving.yaml" --cache "$out/cache" --report "$out/serve.html"
files+=("$out/serve.html")
quiet "$B" capacity "$out/serving.yaml" --cache "$out/cache" --target-rate 100 --report "$out/capacity.html"
files+=("$out/capacity.html")
quiet "$B" sweep scenarios/quickstart.yaml --users 1,2 --precision bf16,fp32 --timing-only -j 2 --report "$out/sweep.html"
files+=("$out/sweep.html")

status=0
for f in "${files[@]}"; do
  shot="${f%.*}.png"
  log="${f%.*}.browser.log"
  # --enable-logging=stderr --v=0 prints the page's console messages.
  chromium_run --enable-logging=stderr --v=0 --window-size=1500,2400 --screenshot="$shot" \
    "file://$f" >"$log" 2>&1 || { echo "FAIL $f: the browser failed (log: $log)"; status=1; continue; }
  if grep -E 'CONSOLE|Uncaught|Failed to load resource|net::ERR' "$log" | grep -v 'dbus' >/dev/null; then
    echo "FAIL $f: console errors:"; grep -E 'CONSOLE|Uncaught|Failed to load|net::ERR' "$log"
    status=1
    continue
  fi
  # Not blank: the screenshot's decompressed pixel stream holds many values
  # (a blank page is a few).
  if ! python3 - "$shot" <<'PY'
import sys, zlib, struct
data = open(sys.argv[1], "rb").read()
at, idat = 8, b""
while at < len(data):
    n, kind = struct.unpack(">I4s", data[at:at + 8])
    if kind == b"IDAT":
        idat += data[at + 8:at + 8 + n]
    at += 12 + n
raw = zlib.decompress(idat)
distinct = len(set(raw[::7]))
print(f"  {sys.argv[1]}: {len(raw)} bytes of pixels, {distinct} distinct values")
sys.exit(0 if distinct > 32 else 1)
PY
  then
    echo "FAIL $f: the screenshot is blank"
    status=1
    continue
  fi
  echo "ok   $f ($(stat -c %s "$f") bytes) -> $shot"
done
exit $status
