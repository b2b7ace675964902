#!/bin/sh
# Opens a `wafersim run --trace` file in a real trace viewer, offline, and
# checks that it loaded: speedscope's Chrome trace-event importer, in a
# headless Chromium. A manual check, not part of ctest (speedscope comes from
# npm, not Debian):
#
#   apt-get install chromium            # Debian 12
#   npm install --prefix DIR speedscope # any folder
#   tests/trace_viewer/check_in_speedscope.sh DIR/node_modules/speedscope trace.json
#
# Passes when speedscope shows one profile per pipeline stage of the trace
# (its title bar reads "wafer 0 (pid 2), layer 0 (tid 1) (1/N)" with N the
# trace's otherData.stages) and names the first stage's track; it prints
# where a screenshot of the view was saved.
set -eu
speedscope=$1
trace=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stages=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["otherData"]["stages"])' "$trace")
# What speedscope's own command line does: the file, base64, into a script
# the page loads (#localProfilePath).
python3 - "$trace" "$work/profile.js" <<'PY'
import base64, json, os, sys
data = base64.b64encode(open(sys.argv[1], "rb").read()).decode()
open(sys.argv[2], "w").write("speedscope.loadFileFromBase64(%s, %s)" % (json.dumps(os.path.basename(sys.argv[1])), json.dumps(data)))
PY
url="file://$(realpath "$speedscope")/dist/release/index.html#localProfilePath=$work/profile.js"
flags="--headless=new --no-sandbox --disable-gpu --allow-file-access-from-files --virtual-time-budget=20000"
# A file speedscope cannot import raises a dialog that never closes: the
# timeout ends that, and the check fails.
timeout 60 chromium $flags --dump-dom "$url" 2>/dev/null > "$work/dom.html" || true
shot=${TMPDIR:-/tmp}/wafersim-trace-speedscope.png
timeout 60 chromium $flags --window-size=1600,1000 --screenshot="$shot" "$url" > /dev/null 2>&1 || true
if grep -q "(1/$stages)" "$work/dom.html" && grep -q "layer 0 (tid 1)" "$work/dom.html"; then
  echo "speedscope loaded $trace: $stages stage tracks (screenshot: $shot)"
else
  echo "speedscope did not show $stages stage tracks for $trace" >&2
  exit 1
fi
