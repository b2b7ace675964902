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

With --groups G (the run's layer groups), it asks instead what a replay of one
group's region could spare while messages elsewhere are simulated (docs/
performance.md, "A replay of one group's region: what it could spare"). Such a
replay must stop whenever a message enters or leaves the region, so for each
group it cuts time at those entries and exits into windows in which the same
messages are inside. In each window it takes the message whose second layer
start inside the window comes first (the replay learns one layer's period, from
a checkpoint at a layer start to the next) and counts the layer passes of every
message inside that start on or after that second start and end inside the
window. That is an upper bound: it asks no pattern to repeat, and lets a group's
first layer (whose first stage takes its input from elsewhere) repeat too.

With --rounds, it asks whether a whole round repeats the round before it: every
stage pass of the round's messages, the head's too, entering and leaving at the
same offsets from the round's first entry as the same user's pass in the same
stage one round earlier. That is the condition for replaying a round at a time
(across the head and the host), where the layers' convoy does not repeat
(docs/performance.md, "Do whole rounds repeat?").

Usage: analysis/trace_periods.py TRACE.json USERS [--groups G | --rounds]
"""
import collections
import json
import re
import sys


def main() -> int:
    args = sys.argv[1:]
    groups = 0
    by_rounds = False
    if len(args) == 4 and args[2] == "--groups":
        groups = int(args[3])
        args = args[:2]
    elif len(args) == 3 and args[2] == "--rounds":
        by_rounds = True
        args = args[:2]
    if len(args) != 2 or groups < 0:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    path, users = args[0], int(args[1])
    with open(path, encoding="utf-8") as f:
        events = json.load(f)["traceEvents"]
    track = {(e["pid"], e["tid"]): e["args"]["name"]
             for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    if groups:
        return region_windows(events, track, groups)
    if by_rounds:
        return whole_rounds(events, track, users)
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


def whole_rounds(events, track, users: int) -> int:
    """The --rounds check: whether each round repeats the one before it."""
    # rounds[r][(stage track, user slot)] = (enter, leave) cycles
    rounds = collections.defaultdict(dict)
    for e in events:
        if e.get("ph") != "X" or e.get("cat") != "stage":
            continue
        a = e["args"]
        rounds[a["message"] // users][(track[(e["pid"], e["tid"])], a["message"] % users)] = (
            a["enter_cycle"], a["leave_cycle"])
    prev = None
    repeats = 0
    for r, d in sorted(rounds.items()):
        first = min(v[0] for v in d.values())
        offsets = {k: (v[0] - first, v[1] - first) for k, v in d.items()}
        line = f"round {r}: {len(d)} stage passes, first entry at cycle {first}"
        if prev is not None:
            prev_first, prev_offsets = prev
            shared = [k for k in offsets if k in prev_offsets]
            same = sum(1 for k in shared if offsets[k] == prev_offsets[k])
            moved = [offsets[k][0] - prev_offsets[k][0] for k in shared]
            line += (f"; {first - prev_first} cycles after the round before; passes at the same "
                     f"offsets as there: {same} of {len(d)}")
            if moved:
                line += f" (entries moved {min(moved)} to {max(moved)} cycles)"
            if same == len(d) == len(prev_offsets):
                repeats += 1
        print(line)
        prev = (first, offsets)
    print(f"rounds that repeat the one before: {repeats} of {max(len(rounds) - 1, 0)}")
    return 0


def region_windows(events, track, groups: int) -> int:
    """The --groups bound: layer passes a replay of one group's region could spare."""
    # passes[message][layer] = (enter, leave) cycles over the layer's stages
    passes = collections.defaultdict(dict)
    for e in events:
        if e.get("ph") != "X" or e.get("cat") != "stage":
            continue
        m = re.match(r"layer (\d+)", track[(e["pid"], e["tid"])])
        if not m:
            continue
        a, layer = e["args"], int(m.group(1))
        enter, leave = passes[a["message"]].get(layer, (a["enter_cycle"], a["leave_cycle"]))
        passes[a["message"]][layer] = (min(enter, a["enter_cycle"]), max(leave, a["leave_cycle"]))
    layers = 1 + max(layer for p in passes.values() for layer in p)
    per_group = -(-layers // groups)
    total = sum(len(p) for p in passes.values())
    spared = windows = 0
    for g in range(groups):
        own = range(g * per_group, min(layers, (g + 1) * per_group))
        # each message's stay in the region, and its layer passes there
        stays = {}
        for msg, p in passes.items():
            mine = sorted(p[layer] for layer in own if layer in p)
            if mine:
                stays[msg] = (mine[0][0], mine[-1][1], mine)
        cuts = sorted({t for enter, leave, _ in stays.values() for t in (enter, leave)})
        for a, b in zip(cuts, cuts[1:]):
            inside = [mine for enter, leave, mine in stays.values() if enter <= a and leave >= b]
            if not inside:
                continue
            windows += 1
            starts = [[enter for enter, _ in mine if a <= enter < b] for mine in inside]
            seconds = [s[1] for s in starts if len(s) >= 2]
            if not seconds:
                continue
            begin = min(seconds)
            spared += sum(1 for mine in inside for enter, leave in mine
                          if enter >= begin and leave <= b)
    print(f"{groups} groups of {per_group} layers; layer passes {total}; windows with messages "
          f"inside {windows}; a region replay could spare at most {spared} "
          f"({100.0 * spared / max(total, 1):.0f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
