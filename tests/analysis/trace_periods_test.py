#!/usr/bin/env python3
"""analysis/trace_periods.py on a made-up trace whose answers are known.

Two users, two layers and the head. Round 1 is round 0 moved 100 cycles on;
in round 2 the second user's passes come one cycle later than that, so it
does not repeat round 1. Within every round, layer 1 is layer 0 moved 10
cycles on.
"""
import json
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "analysis", "trace_periods.py")


def trace():
    tracks = ["layer 0", "layer 1", "head"]
    events = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": t, "args": {"name": name}}
              for t, name in enumerate(tracks)]
    for r in range(3):
        for user in range(2):
            start = 100 * r + 5 * user + (1 if r == 2 and user == 1 else 0)
            for t, length in enumerate([10, 10, 5]):
                events.append({"ph": "X", "cat": "stage", "pid": 1, "tid": t,
                               "args": {"message": 2 * r + user, "enter_cycle": start,
                                        "leave_cycle": start + length}})
                start += length
    return {"traceEvents": events}


def run(path, *args):
    out = subprocess.run([sys.executable, SCRIPT, path, "2", *args], check=True,
                         capture_output=True, text=True).stdout
    return out.strip().splitlines()


def main() -> int:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(trace(), f)
        rounds = run(path, "--rounds")
        layers = run(path)
    failures = []

    def expect(line, text):
        if text not in line:
            failures.append(f"expected {text!r} in {line!r}")

    expect(rounds[1], "100 cycles after the round before; passes at the same offsets as there: "
                      "6 of 6")
    expect(rounds[2], "passes at the same offsets as there: 3 of 6 (entries moved 0 to 1 cycles)")
    expect(rounds[-1], "rounds that repeat the one before: 1 of 2")
    for r in range(3):
        expect(layers[r], f"round {r}: =10")
    # Each round's layer 1 repeats its layer 0 (2 passes a round); a run's
    # first repeat is learned, so none could be spared.
    expect(layers[-1], "layer passes 12; in a layer that repeats the one before: 6; "
                       "a replay could spare at most 0 (0%)")
    for f in failures:
        print(f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
