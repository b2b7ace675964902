#!/usr/bin/env bash
# Opens wafersim's HTML reports and placement pictures in a real headless
# browser (Debian's `chromium`): no console errors, nothing fetched, and a
# screenshot that is not blank. Not part of ctest (the suite checks the same
# files structurally, see tests/analysis/html_report_test.cpp) because the
# browser is a large install; run it by hand or in CI where chromium is:
#
#   tests/browser/check_reports.sh [BUILD_DIR] [--serve]
#
# Writes the reports and screenshots under $OUT (default: a temporary folder)
# and prints their paths. Exit 0 all good, 1 a check failed, 2 no browser.
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build/release}"
serve=0
[ "${2:-}" = --serve ] && serve=1
browser="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$browser" ]; then
  echo "check_reports: FAILED: no chromium on PATH (apt-get install chromium)" >&2
  exit 2
fi
B="$build/sim/wafersim"
out="${OUT:-$(mktemp -d)}"
mkdir -p "$out"

files=()
"$B" run scenarios/quickstart.yaml --report "$out/run-quickstart.html" >/dev/null
files+=("$out/run-quickstart.html")
"$B" run scenarios/llama-3.1-8b-wse3.yaml --timing-only --report "$out/run-llama8b-wse3.html" >/dev/null
files+=("$out/run-llama8b-wse3.html")
"$B" place scenarios/llama-3.1-8b-wse3.yaml --svg "$out/place-llama8b-wse3.svg" >/dev/null
files+=("$out/place-llama8b-wse3.svg")
if [ "$serve" = 1 ]; then
  "$B" serve scenarios/llama-3.1-8b-serving-wse3.yaml --report "$out/serve.html" >/dev/null
  files+=("$out/serve.html")
fi

status=0
for f in "${files[@]}"; do
  shot="${f%.*}.png"
  log="${f%.*}.browser.log"
  # --enable-logging=stderr --v=0 prints the page's console messages.
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --enable-logging=stderr --v=0 --window-size=1500,2400 --screenshot="$shot" \
    "file://$(realpath "$f")" >"$log" 2>&1 || { echo "FAIL $f: the browser failed"; status=1; continue; }
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
