# Sourced by the browser checks: how they start Debian's headless Chromium on
# a machine with no network beyond its package registries (no background
# connections, a fresh profile per start, root allowed).
browser="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$browser" ]; then
  echo "browser check: FAILED: no chromium on PATH (apt-get install chromium; ./quickstart.sh test installs it)" >&2
  exit 2
fi
profile_root="$(mktemp -d)"
trap 'rm -rf "$profile_root"' EXIT
chromium_run() {
  timeout 120 "$browser" --headless=new --no-sandbox --disable-gpu --hide-scrollbars \
    --disable-quic --no-first-run --disable-background-networking --disable-component-update \
    --disable-sync --user-data-dir="$(mktemp -d -p "$profile_root")" "$@"
}
