#!/usr/bin/env python3
"""Whether the messages of a run repeat themselves layer after layer.

Reads a `wafersim run --trace FILE` trace (docs/results-format.md, "Trace") and
asks, for each round of messages (the users' messages of one token position,
sent together), whether the pattern of their stage passes in layer L + 1 is the
pattern of layer L moved in time: the same messages in the same stages, each
pass entering and leaving at the same offsets from the first entry into the
layer. That is the necessary condition for replaying the whole pipeline of
several messages a layer at a time (docs/performance.md, "Several messages on
one region: do they repeat?"), the way sim/exec/layer_replay.hpp replays one
message's layers.

Prints one line per round: '=' where a layer repeats the one before it (the
cycles between their first entries after it), 'x' where it does not; then how
many layer passes lie in repeating layers, and the most a replay of them could
spare (every repeating layer's passes but one layer's per run of them).

Usage: analysis/trace_periods.py TRACE.json USERS
"""
import collections
import json
import re
import sys


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    path, users = sys.argv[1], int(sys.argv[2])
    with open(path, encoding="utf-8") as f:
        events = json.load(f)["traceEvents"]
    track = {(e["pid"], e["tid"]): e["args"]["name"]
             for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    # rounds[r][layer][(stage suffix, user slot)] = (enter, leave) cycles
    rounds = collections.defaultdict(lambda: collections.defaultdict(dict))
    for e in events:
        if e.get("ph") != "X" or e.get("cat") != "stage":
            continue
        m = re.match(r"layer (\d+)(.*)", track[(e["pid"], e["tid"])])
        if not m:
            continue  # the head
        a = e["args"]
        rounds[a["message"] // users][int(m.group(1))][(m.group(2), a["message"] % users)] = (
            a["enter_cycle"], a["leave_cycle"])
    passes = repeating = spared = 0
    for r, layers in sorted(rounds.items()):
        marks, prev, prev_first, run = [], None, 0, 0
        for layer in sorted(layers):
            d = layers[layer]
            first = min(v[0] for v in d.values())
            pattern = sorted((k, v[0] - first, v[1] - first) for k, v in d.items())
            passes += len(d)
            if prev is not None:
                same = pattern == prev
                marks.append(("=" if same else "x") + str(first - prev_first))
                if same:
                    repeating += len(d)
                    spared += len(d) if run > 0 else 0  # a run's first repeat is learned
                    run += 1
                else:
                    run = 0
            prev, prev_first = pattern, first
        print(f"round {r}: " + " ".join(marks))
    print(f"layer passes {passes}; in a layer that repeats the one before: {repeating}; "
          f"a replay could spare at most {spared} ({100.0 * spared / max(passes, 1):.0f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
