#!/usr/bin/env python3
"""Randomised check that replayed layers give exactly the simulated results.

Draws scenarios on the small test wafer (tiny models of every architecture the
replays serve, 4 to 24 layers, 1 to 4 layer groups, every reduction scheme,
1 to 6 users, prompts of 1 to 4 tokens in blocks, cached positions, decode
batches, later arrivals, two wafers, 16-bit fabric values, a cost per vector
instruction, 1 to 3 host threads, timing only or functional) and runs each
twice: `--layer-replay always` (or `auto` with --mode auto) and
`--layer-replay off`. Their `run --json`
must be the same byte for byte (docs/validation.md, "Replayed layers are
exact"); where the scenario cannot run, both must refuse it with the same
message. The cases are drawn from the seed, so a failure can be run again.

Prints a line per failing case (its command and workload; the scenario file is
kept beside --out) and a summary: cases run, cases where the whole pipeline of
several messages was replayed, failures. Exit status 1 when any failed.

Usage: analysis/replay_sweep.py [--binary PATH] [--seed N] [--cases N]
                                [--pipelined] [--out DIR] [--mode always|auto]
  --pipelined: draw only several users and 16 to 24 layers, where the
  pipeline replay (sim/exec/pipeline_replay.hpp) has the most to do.
  --mode auto: the replayed run as users run it (the default mode replays
  where host time says it pays, so fewer layers than always).
"""
import os
import random
import subprocess
import sys
import tempfile

from sweep_common import sweep_arguments, workload_extras

MODELS = ["tiny-llama", "tiny-gpt2", "tiny-mistral", "tiny-mixtral", "tiny-qwen3-moe",
          "tiny-qwen3"]
REDUCTIONS = ["chain", "tree", "two-level", "two-level", "ring", "k-tree"]


def draw(rng: random.Random, pipelined: bool):
    """One case: the scenario's text and the `run` options."""
    model = rng.choice(MODELS)
    layers = rng.choice([16, 20, 24] if pipelined else [4, 6, 8, 12, 16])
    groups = min(layers, rng.choice([1, 2, 2, 3] if pipelined else [1, 1, 1, 2, 2, 4]))
    reduction = rng.choice(REDUCTIONS)
    users = rng.choice([2, 3, 4, 5] if pipelined else [1, 2, 3, 4, 4, 6])
    prompt = rng.choice([1, 1, 1, 2, 4])
    workload = (f"  users: {users}\n  prompt_tokens: {prompt}\n"
                f"  generate_tokens: {rng.choice([2, 3, 5])}\n")
    workload += workload_extras(rng, users, prompt, 0.2, [10, 33, 64], [1, 2], 0.15, 0.00001,
                                [0, 1, 2])
    functional = rng.random() < 0.3
    options = ["--json", "--set", f"model.num_layers={layers}", "--layer-groups", str(groups),
               "--reduction", reduction]
    if reduction == "k-tree":
        options += ["--set", f"placement.reduction_groups={rng.choice([1, 2])}"]
    options.append("--functional" if functional else "--timing-only")
    if rng.random() < 0.2:
        options += ["--wafers", "2"]
    if rng.random() < 0.2:
        options += ["--threads", str(rng.choice([1, 2, 3]))]
    if not functional and rng.random() < 0.15:
        options += ["--set", "placement.fabric_bits=16"]
    if rng.random() < 0.15:
        options += ["--set", f"hardware.core.instruction_overhead={rng.choice([3, 27])} cycles"]
    scenario = (f"name: replay-sweep\nhardware: small\nmodel: {model}\nprecision: bf16\n"
                "wafers: 1\nplacement:\n  strategy: whole-region\n  layer_groups: 1\n"
                f"workload:\n{workload}")
    return scenario, options, workload


def main() -> int:
    p = sweep_arguments(__doc__.split("\n\n")[0])
    p.add_argument("--pipelined", action="store_true")
    p.add_argument("--mode", choices=("always", "auto"), default="always",
                   help="the replayed run's --layer-replay: always (wherever it can) or auto "
                        "(the default, where host time says it pays)")
    a = p.parse_args()
    out = a.out or tempfile.mkdtemp(prefix="replay-sweep-")
    os.makedirs(out, exist_ok=True)
    rng = random.Random(a.seed)
    ran = pipelined = refused = failed = 0
    for i in range(a.cases):
        scenario, options, workload = draw(rng, a.pipelined)
        path = os.path.join(out, f"case-{a.seed}-{i}.yaml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(scenario)
        command = [a.binary, "run", path] + options
        runs = []
        for mode in (a.mode, "off"):
            runs.append(subprocess.run(command + ["--layer-replay", mode], capture_output=True,
                                       text=True, timeout=900))
        replayed, simulated = runs
        if replayed.returncode != 0 or simulated.returncode != 0:
            # A refusal (a scenario that does not fit) is the same error
            # either way; an internal error is never one.
            same_refusal = ("internal error" not in replayed.stderr + simulated.stderr and
                            replayed.returncode == simulated.returncode and
                            replayed.stderr.strip().splitlines()[-1:] ==
                            simulated.stderr.strip().splitlines()[-1:])
            if same_refusal:
                refused += 1
                os.remove(path)
                continue
            ok = False
        else:
            ran += 1
            pipelined += "in flight together" in replayed.stderr
            ok = replayed.stdout == simulated.stdout
        if ok:
            os.remove(path)
        else:
            failed += 1
            errors = [line for r in runs for line in r.stderr.splitlines() if "error" in line]
            print(f"FAILED case {i}: {' '.join(repr(c) if ' ' in c else c for c in command)} (exit {replayed.returncode} replayed, "
                  f"{simulated.returncode} simulated)\n{workload}" + "\n".join(errors[:2]),
                  flush=True)
        print(f"\r{i + 1}/{a.cases} cases", end="", file=sys.stderr, flush=True)
    print("", file=sys.stderr)
    print(f"seed {a.seed}: {ran} ran ({pipelined} with the pipeline replayed), {refused} refused "
          f"alike, {failed} failed" + (f"; scenarios in {out}" if failed else ""))
    if not os.listdir(out):
        os.rmdir(out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
