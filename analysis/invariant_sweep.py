#!/usr/bin/env python3
"""Randomised check of laws every `run` result must obey, over every strategy.

Draws scenarios on the small test wafer (tiny models of every architecture,
every placement strategy and reduction scheme, 1 to 4 users with decode
batches and later arrivals, prompts in blocks, cached positions, speculative
decoding with a tiny draft, one or two wafers, dead cores and spare columns, changed hop latency, link width, reduce
cost, task cost, clock and SRAM, 16-bit fabric values, timing only or
functional) and runs each with `run --json`. A run must either finish or refuse
the scenario with an `error:` line (exit status 1), never crash, hang or report
an internal error. A finished run must obey (docs/validation.md, "Laws every
result obeys"):

- its links: the busiest link's load at most 1, its bytes at most the link's
  width times the run's cycles, and the total link bytes at least its bytes;
- its context: every position within the longest context it reports;
- its SRAM: the most used on a core at most a core's SRAM, the wafer's used at
  most its capacity, and the cores holding data at most the cores;
- its shares: core and SRAM utilisation within [0, 1], the critical path's
  shares summing to 1;
- its tokens: every token record's critical-path cycles summing to its
  latency (end - start), records within the run's cycles, and (without
  speculative decoding, whose records are the target's messages, a rejected
  proposal's position again in the next round) a user's records in position
  order, each decode token starting no earlier than the token before it
  ended;
- its rates: the per-user rate equal to the clock over the cycles per token,
  and TTFT, inter-token latency and total time equal to their cycles over the
  clock;
- its determinism: a second run with another host thread count gives the same
  JSON byte for byte;
- its replays: the run with every layer simulated (`--layer-replay off`) gives
  the same JSON byte for byte (layers and pipelines replayed are exact);
- its sweep: the case as the one point of a `sweep` gives the same figures;
- its written results: the HDF5 file of `run --out` holds the run's figures as
  `compare` reads them, and the resolved scenario written beside it gives the
  same result;
- its placement: `place --write-placement` and then `run --placement` with
  that file gives the same result (a placement file says all a run needs of
  its placement), the longest context aside but for whole-region (a
  strategy's is a re-plan's, a file's what its own cores hold);
- `validate`: it accepts the scenario exactly when `run` runs it.

Prints a line per failing case (its command and what broke; the scenario file
is kept beside --out) and a summary. Exit status 1 when any failed.

With --serve it draws serving studies instead (open-loop arrivals of every
process or closed-loop sessions, length distributions, replicas, batch limits,
prefill policies, routers, stage orders, SLOs, a serving stack) and runs
`serve --json`. A finished study must obey, for every system: served plus
rejected requests above 0; tokens generated at most those asked, and all of
them when nothing was rejected; goodput at most throughput; SLO attainment
and utilisation in [0, 1]; each latency's p50 <= p90 <= p99 <= max, its mean
at most its max and nothing negative; no request ending before its first
token; Little's law (L = lambda W) as the study computes both sides; and the
same study again when its step grid is read back from the cache.

Usage: analysis/invariant_sweep.py [--binary PATH] [--seed N] [--cases N] [--out DIR] [--serve]
"""
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile

from sweep_common import sweep_arguments, workload_extras

MODELS = ["tiny-llama", "tiny-gpt2", "tiny-mistral", "tiny-mixtral", "tiny-qwen3-moe",
          "tiny-qwen3"]
STRATEGIES = ["layer-rectangles", "serpentine", "short-path", "sram-balanced", "anneal",
              "whole-region", "whole-region"]
REDUCTIONS = ["chain", "tree", "two-level", "k-tree", "ring"]


def draw(rng: random.Random):
    """One case: the scenario's text and the `run` options."""
    model = rng.choice(MODELS)
    strategy = rng.choice(STRATEGIES)
    users = rng.choice([1, 1, 2, 3, 4])
    prompt = rng.choice([1, 2, 4, 7])
    workload = (f"  users: {users}\n  prompt_tokens: {prompt}\n"
                f"  generate_tokens: {rng.choice([1, 2, 3, 5])}\n  seed: {rng.randrange(100)}\n")
    workload += workload_extras(rng, users, prompt, 0.3, [3, 17, 64, 200], [1, 2, 3], 0.2,
                                0.000005, [0, 1, 3])
    speculative = ""
    if "decode_batch" not in workload and rng.random() < 0.15:
        speculative = (f"speculative_decoding:\n  draft_model: {rng.choice(MODELS)}\n"
                       f"  draft_tokens: {rng.choice([1, 2, 4])}\n"
                       f"  acceptance_rate: {rng.choice([0.3, 0.7, 1.0])}\n")
    placement = f"  strategy: {strategy}\n  reduction: {rng.choice(REDUCTIONS)}\n"
    if strategy == "whole-region":
        placement += f"  layer_groups: {rng.choice([1, 1, 2, 4])}\n"
    if strategy == "anneal":
        placement += f"  anneal:\n    iterations: {rng.choice([10, 200])}\n"
    sets = []
    hardware = {
        "hardware.router.hop_latency": lambda: f"{rng.choice([1, 2, 5])} cycles",
        "hardware.router.link_bandwidth": lambda: f"{rng.choice([16, 32, 64, 128])} bit/cycle",
        "hardware.router.reduce_hop_overhead": lambda: f"{rng.choice([0, 2, 7])} cycles",
        "hardware.core.task_overhead": lambda: f"{rng.choice([0, 20, 100])} cycles",
        "hardware.core.clock": lambda: rng.choice(["0.9 GHz", "1.1 GHz", "2 GHz"]),
        "hardware.core.sram": lambda: rng.choice(["32 KiB", "48 KiB", "96 KiB"]),
        "hardware.core.instruction_overhead": lambda: f"{rng.choice([0, 3, 27])} cycles",
        "hardware.mesh.width": lambda: str(rng.choice([24, 32, 40])),
        "hardware.mesh.height": lambda: str(rng.choice([24, 32, 48])),
    }
    for key, value in hardware.items():
        if rng.random() < 0.15:
            sets += ["--set", f"{key}={value()}"]
    if rng.random() < 0.15:
        sets += ["--set", f"hardware.defects.rate={rng.choice([0.001, 0.01])}",
                 "--set", f"hardware.defects.seed={rng.randrange(50)}"]
    functional = rng.random() < 0.3
    if not functional and strategy == "whole-region" and rng.random() < 0.2:
        sets += ["--set", "placement.fabric_bits=16"]
    options = ["--json", "--set", f"model.num_layers={rng.choice([2, 3, 4, 8])}"] + sets
    options.append("--functional" if functional else "--timing-only")
    if rng.random() < 0.2:
        options += ["--wafers", rng.choice(["2", "auto"])]
    scenario = (f"name: invariant-sweep\nhardware: small\nmodel: {model}\nprecision: "
                f"{rng.choice(['bf16', 'bf16', 'fp32', 'int8'])}\nwafers: 1\n"
                f"placement:\n{placement}workload:\n{workload}{speculative}")
    return scenario, options


def validate_options(options: list) -> list:
    """`run`'s options as `validate` takes them (it has no --json or --threads,
    and takes the mode as the scenario's outputs.functional)."""
    out = []
    for o in options:
        if o == "--json":
            continue
        if o in ("--functional", "--timing-only"):
            out += ["--set", f"outputs.functional={'true' if o == '--functional' else 'false'}"]
        else:
            out.append(o)
    return out


# The options that name the output and the mode, which `place` does not take.
MODE_OPTIONS = ("--json", "--functional", "--timing-only")


def place_options(options: list) -> list:
    """`run`'s options as `place` takes them (it has no --json and no mode)."""
    return [o for o in options if o not in MODE_OPTIONS]


def last_lines(stderr: str, n: int = 2) -> str:
    return " ".join(stderr.strip().splitlines()[-n:])


def rerun(command: list, label: str, bad: list):
    """Runs `command`: its output, or None with what went wrong added to `bad`."""
    p = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        bad.append(f"{label}: exit {p.returncode}: {last_lines(p.stderr)}")
        return None
    return p.stdout


def draw_serving(rng: random.Random):
    """One serving study (`serve`): traffic, deployment, SLO and serving stack."""
    lengths = lambda lo, hi: rng.choice([f"{rng.randint(lo, hi)}",
                                         f"{{uniform: [{lo}, {hi}]}}",
                                         f"{{lognormal: {{mean: {(lo + hi) // 2}, sigma: 0.6}}, "
                                         f"max: {hi}}}"])
    if rng.random() < 0.7:
        process = rng.choice(["poisson", "fixed", "gamma"])
        arrivals = f"{{process: {process}, rate: {rng.choice([5, 40, 400, 4000])}/s" + (
            f", cv: {rng.choice([0.5, 2])}}}" if process == "gamma" else "}")
        traffic = (f"  seed: {rng.randrange(100)}\n  arrivals: {arrivals}\n"
                   f"  requests: {rng.choice([1, 20, 150])}\n"
                   f"  prompt_tokens: {lengths(1, 60)}\n  output_tokens: {lengths(1, 30)}\n")
    else:
        traffic = (f"  seed: {rng.randrange(100)}\n  sessions: {rng.choice([1, 4, 12])}\n"
                   f"  turns: {rng.choice([1, 3])}\n  prompt_tokens: {lengths(1, 40)}\n"
                   f"  turn_prompt_tokens: {lengths(1, 10)}\n  output_tokens: {lengths(1, 20)}\n"
                   f"  think_time: {{mean: {rng.choice([1, 50])} ms}}\n")
    policy = rng.choice(["chunked", "prefill-first", "disaggregated"])
    deployment = (f"  wafer: {{replicas: {rng.choice([1, 2])}, max_batch: "
                  f"{rng.choice(['auto', 1, 4, 8])}, stage_order: {rng.choice(['fifo', 'decode-first'])}}}\n"
                  f"  router: {rng.choice(['least-loaded', 'round-robin'])}\n"
                  f"  prefill: {{policy: {policy}" +
                  (f", chunk_tokens: {rng.choice([8, 64, 512])}" if policy == "chunked" else "") +
                  "}\n")
    scenario = (f"name: invariant-serve\nhardware: small\nmodel: {rng.choice(MODELS)}\n"
                f"placement: {{strategy: {rng.choice(['layer-rectangles', 'whole-region'])}}}\n"
                f"traffic:\n{traffic}deployment:\n{deployment}"
                f"slo: {{ttft: {rng.choice([1, 20, 500])} ms, tokens_per_s: "
                f"{rng.choice([10, 1000, 100000])}}}\n"
                + (f"serving: {{round_trip: {rng.choice([1, 10])} ms, connection_setup: 5 ms}}\n"
                   if rng.random() < 0.5 else "") + "compare_with: [dgx-h100]\n")
    return scenario, ["--json", "--set", f"model.num_layers={rng.choice([2, 4])}"]


def broken_serving_laws(r: dict) -> list:
    """The laws a finished serving study breaks (empty: none)."""
    bad = []
    for s in r["systems"]:
        name = f"{s['system']} ({s.get('connection', '')})"
        if s["served"] + s["rejected"] <= 0:
            bad.append(f"{name}: no request served or rejected")
        if s["tokens_generated"] > s["tokens_asked"]:
            bad.append(f"{name}: more tokens generated than asked")
        if s["rejected"] == 0 and s["tokens_generated"] != s["tokens_asked"]:
            bad.append(f"{name}: nothing rejected, yet {s['tokens_generated']} of "
                       f"{s['tokens_asked']} tokens generated")
        if s["goodput_rps"] > s["throughput_rps"] * (1 + 1e-9):
            bad.append(f"{name}: goodput above throughput")
        for key in ("slo_attainment", "utilisation"):
            if not 0 <= s[key] <= 1 + 1e-9:
                bad.append(f"{name}: {key} {s[key]} outside [0, 1]")
        for fig in ("ttft_s", "tbt_s", "end_to_end_s", "queue_s", "tokens_per_s_per_user"):
            q = s.get(fig)
            if not q:
                continue
            order = [q["p50"], q["p90"], q["p99"], q["max"]]
            if any(a > b * (1 + 1e-12) + 1e-15 for a, b in zip(order, order[1:])):
                bad.append(f"{name}: {fig} percentiles out of order {order}")
            if q["mean"] > q["max"] * (1 + 1e-12) + 1e-15 or min(order) < 0:
                bad.append(f"{name}: {fig} mean {q['mean']} above max or a negative figure")
        if s.get("ttft_s") and s.get("end_to_end_s") and \
                s["end_to_end_s"]["max"] < s["ttft_s"]["max"] * (1 - 1e-12):
            bad.append(f"{name}: a request ended before its first token")
        if "littles_l" in s and not math.isclose(s["littles_l"], s["littles_lambda_w"],
                                                  rel_tol=1e-6, abs_tol=1e-12):
            bad.append(f"{name}: Little's law L = {s['littles_l']} but lambda W = "
                       f"{s['littles_lambda_w']}")
    return bad


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def broken_laws(r: dict) -> list:
    """The laws a finished run's result breaks (empty: none)."""
    bad = []
    cycles, clock = r["total_cycles"], r["clock_hz"]
    link = r.get("busiest_link")
    if link:
        if link["load"] > 1 + 1e-9:
            bad.append(f"busiest link load {link['load']} > 1")
        if link["bytes"] > r["link_bytes_per_cycle"] * cycles:
            bad.append(f"busiest link moved {link['bytes']} B in {cycles} cycles")
        if r["total_link_bytes"] < link["bytes"]:
            bad.append("total link bytes below the busiest link's")
    if r["sram_bytes_max_per_core"] > r["sram_bytes_per_core_capacity"]:
        bad.append(f"a core holds {r['sram_bytes_max_per_core']} B > its SRAM")
    if r["sram_bytes_used"] > r["sram_bytes_capacity"]:
        bad.append("SRAM used above capacity")
    if r["cores_with_sram"] > r["cores_total"] or r["cores_used"] > r["cores_total"]:
        bad.append("more cores used than the wafers have")
    for key in ("core_utilisation", "sram_utilisation"):
        if not 0 <= r[key] <= 1 + 1e-12:
            bad.append(f"{key} {r[key]} outside [0, 1]")
    shares = r.get("critical_path_share", {})
    if shares and not math.isclose(sum(shares.values()), 1.0, abs_tol=1e-9):
        bad.append(f"critical path shares sum to {sum(shares.values())}")
    last = {}
    # With speculative decoding a record is a target message: a round's
    # proposals are timed from when the draft made each, and a rejected
    # proposal's position comes again in the next round.
    speculative = bool(r.get("speculative_decoding"))
    for t in r["token_records"]:
        span = t["end_cycle"] - t["start_cycle"]
        if sum(t["critical_path_cycles"].values()) != span:
            bad.append(f"token user {t['user']} pos {t['position']}: breakdown "
                       f"{sum(t['critical_path_cycles'].values())} != latency {span}")
        if t["end_cycle"] > cycles or span <= 0:
            bad.append(f"token user {t['user']} pos {t['position']} outside the run")
        prev = last.get(t["user"])
        # A decode token reads the token before it, so it starts once that
        # one is out; prompt tokens are known and go in back to back.
        if prev is not None and not speculative and (
                t["position"] <= prev["position"] or
                (not t["prefill"] and t["start_cycle"] < prev["end_cycle"])):
            bad.append(f"user {t['user']}: pos {t['position']} started before pos "
                       f"{prev['position']} ended")
        last[t["user"]] = t
    positions = [t["position"] for t in r["token_records"]]
    if positions and max(positions) >= r["max_context_tokens"]:
        bad.append(f"position {max(positions)} past the longest context "
                   f"{r['max_context_tokens']}")
    if r["cycles_per_token"] > 0 and not close(r["decode_tokens_per_s_per_user"],
                                                clock / r["cycles_per_token"]):
        bad.append("per-user rate is not the clock over the cycles per token")
    for seconds, cyc in (("ttft_s", "ttft_cycles"), ("total_time_s", "total_cycles")):
        if not close(r[seconds], r[cyc] / clock):
            bad.append(f"{seconds} is not {cyc} over the clock")
    return bad


# The figures a sweep's point shares with `run --json` (docs/sweeps.md).
SWEPT_FIGURES = ["wafers_used", "users", "decode_tokens_per_s_per_user", "aggregate_tokens_per_s",
                 "ttft_s", "inter_token_latency_s", "max_context_tokens", "bottleneck"]


def other_ways_alike(binary: str, path: str, options: list, expected: str, run: dict) -> list:
    """The laws of a finished run (its JSON `expected`, read as `run`) that
    rerun it another way: every layer simulated, as a sweep's point, and its
    placement written to a file and read back."""
    bad = []
    off = rerun([binary, "run", path] + options + ["--layer-replay", "off"],
                "--layer-replay off", bad)
    if off is not None and off != expected:
        bad.append("--layer-replay off gives another result than the replayed run")
    # A sweep's point is the run with the point's overrides: the case as
    # the one point of a sweep over its own user count.
    sweep = rerun([binary, "sweep", path, "--users", str(run["users"])] + options, "sweep", bad)
    if sweep is not None:
        point = json.loads(sweep)["points"][0]
        differ = [k for k in SWEPT_FIGURES if point.get(k) != run.get(k)]
        if differ:
            bad.append("the sweep's point differs from the run: " +
                       ", ".join(f"{k} {point.get(k)} != {run.get(k)}" for k in differ[:3]))
    placement = path[:-len(".yaml")] + ".placement.yaml"
    if rerun([binary, "place", path] + place_options(options) + ["--write-placement", placement],
             "place --write-placement", bad) is None:
        return bad
    again = rerun([binary, "run", path] + options + ["--placement", placement],
                  "run --placement (its written placement)", bad)
    if again is not None:
        # A strategy's longest context is a re-plan's, its matrices on their
        # fewest rows; a file's is what its own segments hold to the byte
        # (docs/results-format.md): the two differ but for whole-region.
        one, two = dict(run), json.loads(again)
        if one.get("placement_strategy") != "whole-region":
            one.pop("max_context_tokens", None)
            two.pop("max_context_tokens", None)
        if one != two:
            keys = sorted(k for k in set(one) | set(two) if one.get(k) != two.get(k))
            bad.append("run --placement with its written placement gives another result: " +
                       ", ".join(keys[:6]))
        else:
            os.remove(placement)
    return bad


def written_alike(binary: str, h5: str, options: list, run: dict) -> list:
    """The laws of a run's written results (`run --out`; `run` its JSON):
    the HDF5 file holds the run's figures, as `compare` reads them, and the
    resolved scenario written beside it reproduces the run."""
    bad = []
    compared = rerun([binary, "compare", h5, h5, "--json"], "compare of its results file", bad)
    if compared is not None:
        for f in json.loads(compared)["figures"]:
            if f["name"] in run and f["a"] != run[f["name"]]:
                bad.append(f"its results file's {f['name']} {f['a']} != {run[f['name']]}")
    mode = [o for o in options if o in MODE_OPTIONS]
    again = rerun([binary, "run", h5 + ".scenario.yaml"] + mode, "its resolved scenario", bad)
    if again is not None:
        two = json.loads(again)
        differ = sorted(k for k in set(run) | set(two)
                        if k != "scenario_file" and run.get(k) != two.get(k))
        if differ:
            bad.append("its resolved scenario gives another result: " + ", ".join(differ[:6]))
    if not bad:
        for f in (h5, h5 + ".scenario.yaml"):
            os.remove(f)
    return bad


def main() -> int:
    p = sweep_arguments(__doc__.split("\n\n")[0])
    p.add_argument("--serve", action="store_true",
                   help="draw serving studies (traffic, deployment, SLO) and run `serve`")
    a = p.parse_args()
    out = a.out or tempfile.mkdtemp(prefix="invariant-sweep-")
    os.makedirs(out, exist_ok=True)
    rng = random.Random(a.seed)
    ran = refused = failed = 0
    for i in range(a.cases):
        scenario, options = draw_serving(rng) if a.serve else draw(rng)
        path = os.path.join(out, f"case-{a.seed}-{i}.yaml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(scenario)
        # A serving study's step grid is cached apart from the user's cache;
        # the second run reads it back, and must give the same study.
        command = ([a.binary, "serve", path, "--cache", os.path.join(out, "cache")] if a.serve
                   else [a.binary, "run", path]) + options
        first_threads = [] if a.serve else ["--threads", "1"]
        problems = []
        try:
            first = subprocess.run(command + first_threads, capture_output=True, text=True,
                                   timeout=600)
        except subprocess.TimeoutExpired:
            first, problems = None, ["ran over 600 s"]
        # `validate` runs the same checks as `run` before it simulates: it
        # must accept what runs and refuse what does not.
        if first is not None:
            check = [a.binary, "validate", path] + validate_options(options)
            v = subprocess.run(check, capture_output=True, text=True, timeout=600)
            if (v.returncode == 0) != (first.returncode == 0) or v.returncode not in (0, 1):
                problems.append(f"validate exits {v.returncode} where run exits "
                                f"{first.returncode}: {last_lines(v.stderr, 1)}")
        if first is not None and first.returncode != 0:
            lines = first.stderr.strip().splitlines()
            if (first.returncode == 1 and "internal error" not in first.stderr and lines and
                    "error:" in lines[-1] and not problems):
                refused += 1
                os.remove(path)
                print(f"\r{i + 1}/{a.cases} cases", end="", file=sys.stderr, flush=True)
                continue
            problems.append(f"exit {first.returncode}: {last_lines(first.stderr)}")
        elif first is not None:
            ran += 1
            result = None
            try:
                result = json.loads(first.stdout)
                problems += (broken_serving_laws if a.serve else broken_laws)(result)
            except (ValueError, KeyError) as e:
                problems.append(f"unreadable result: {e!r}")
            h5 = path[:-len(".yaml")] + ".h5"
            second = rerun(command + ([] if a.serve else ["--threads", "2", "--out", h5]),
                           "second run", problems)
            if second is not None and a.serve:
                one, two = json.loads(first.stdout), json.loads(second)
                one["calibration"] = two["calibration"] = ""  # computed, then read back
                if one != two:
                    problems.append("the study read from its cached grid differs")
            elif second is not None and second != first.stdout:
                problems.append("--threads 2 gives another result than --threads 1")
            if not a.serve and result is not None:
                problems += other_ways_alike(a.binary, path, options, first.stdout, result)
                if second is not None:
                    problems += written_alike(a.binary, h5, options, result)
        if problems:
            failed += 1
            print(f"FAILED case {i}: {' '.join(repr(c) if ' ' in c else c for c in command)}\n  " +
                  "\n  ".join(problems[:4]), flush=True)
        else:
            os.remove(path)
        print(f"\r{i + 1}/{a.cases} cases", end="", file=sys.stderr, flush=True)
    print("", file=sys.stderr)
    print(f"seed {a.seed}: {ran} ran, {refused} refused with an error, {failed} failed" +
          (f"; scenarios in {out}" if failed else ""))
    shutil.rmtree(os.path.join(out, "cache"), ignore_errors=True)
    if not os.listdir(out):
        os.rmdir(out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
