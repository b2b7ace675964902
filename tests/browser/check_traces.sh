#!/usr/bin/env bash
# Writes the traces of the quick start and of Llama-3.1-8B on a full WSE-3
# (`wafersim run --trace`) and opens each in speedscope
# (check_trace_in_speedscope.sh). ctest runs it as browser.traces:
#
#   tests/browser/check_traces.sh WAFERSIM SPEEDSCOPE_DIR [OUT_DIR]
set -euo pipefail
B="$(realpath "$1")"
speedscope="$2"
out="${3:-$(mktemp -d)}"
mkdir -p "$out"
cd "$(dirname "$0")/../.."
"$B" run scenarios/quickstart.yaml --trace "$out/trace-quickstart.json" >"$out/run.log" 2>&1 ||
  { cat "$out/run.log"; exit 1; }
"$B" run scenarios/llama-3.1-8b-wse3.yaml --timing-only --trace "$out/trace-llama8b-wse3.json" \
  >"$out/run.log" 2>&1 || { cat "$out/run.log"; exit 1; }
exec tests/browser/check_trace_in_speedscope.sh "$speedscope" "$out/trace-quickstart.json" \
  "$out/trace-llama8b-wse3.json"
