#!/usr/bin/env bash
# Opens `wafersim run --trace` files in a real trace viewer, offline, and
# checks that each loaded: speedscope's Chrome trace-event importer in
# Debian's headless Chromium (Perfetto's UI is a web app with no offline
# package). speedscope comes from npm: ./quickstart.sh test installs the
# version tests/browser/package-lock.json pins into build/browser. ctest runs
# it as browser.traces where both are installed:
#
#   tests/browser/check_trace_in_speedscope.sh SPEEDSCOPE_DIR TRACE.json...
#
# Passes when speedscope shows one profile per pipeline stage of each trace
# (its title bar reads "wafer 0 (pid 2), layer 0 (tid 1) (1/N)" with N the
# trace's otherData.stages) and names the first stage's track; it prints
# where a screenshot of each view was saved (beside the trace).
set -euo pipefail
speedscope="$(realpath "$1")"
shift
cd "$(dirname "$0")/../.."
. tests/browser/chromium.sh
status=0
for trace in "$@"; do
  trace="$(realpath "$trace")"
  work="$(mktemp -d -p "$profile_root")"
  stages=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["otherData"]["stages"])' "$trace")
  # What speedscope's own command line does: the file, base64, into a script
  # the page loads (#localProfilePath).
  python3 - "$trace" "$work/profile.js" <<'PY'
import base64, json, os, sys
data = base64.b64encode(open(sys.argv[1], "rb").read()).decode()
open(sys.argv[2], "w").write("speedscope.loadFileFromBase64(%s, %s)" % (json.dumps(os.path.basename(sys.argv[1])), json.dumps(data)))
PY
  url="file://$speedscope/dist/release/index.html#localProfilePath=$work/profile.js"
  # A file speedscope cannot import raises a dialog that never closes: the
  # timeout ends that, and the check fails.
  chromium_run --allow-file-access-from-files --virtual-time-budget=20000 --dump-dom "$url" \
    2>/dev/null >"$work/dom.html" || true
  shot="${trace%.*}.speedscope.png"
  chromium_run --allow-file-access-from-files --virtual-time-budget=20000 --window-size=1600,1000 \
    --screenshot="$shot" "$url" >/dev/null 2>&1 || true
  if grep -q "(1/$stages)" "$work/dom.html" && grep -q "layer 0 (tid 1)" "$work/dom.html"; then
    echo "ok   speedscope loaded $trace ($(stat -c %s "$trace") bytes): $stages stage tracks -> $shot"
  else
    echo "FAIL speedscope did not show $stages stage tracks for $trace" >&2
    status=1
  fi
done
exit $status
