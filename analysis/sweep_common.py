"""What the randomised sweeps (replay_sweep.py, invariant_sweep.py) share:
their common options and the workload lines they draw."""
import argparse
import os
import random


def sweep_arguments(description: str) -> argparse.ArgumentParser:
    """The options every sweep takes: the binary, the seed, the number of
    cases and where failing scenarios are kept."""
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--binary", default=os.path.join(here, "..", "build", "release", "sim",
                                                    "wafersim"))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--cases", type=int, default=100)
    p.add_argument("--out", default=None, help="where failing scenarios are kept")
    return p


def workload_extras(rng: random.Random, users: int, prompt: int, batch_p: float,
                    cached: list, blocks: list, arrival_p: float, arrival_step_s: float,
                    arrival_steps: list) -> str:
    """More `workload:` lines, each drawn with its chance: a decode batch (a
    divisor of the users), cached positions, prompt blocks, and later
    arrivals (user u at u x step x a drawn multiple). The draws' order is
    fixed, so a seed gives the same cases whichever sweep asks."""
    text = ""
    if users > 1 and rng.random() < batch_p:
        sizes = [b for b in range(1, users + 1) if users % b == 0]
        text += f"  decode_batch: {rng.choice(sizes)}\n"
    if rng.random() < 0.3:
        text += f"  cached_tokens: {rng.choice(cached)}\n"
    if prompt > 1 and rng.random() < 0.3:
        text += f"  prefill_block: {rng.choice(blocks)}\n"
    if users > 1 and rng.random() < arrival_p:
        arrivals = [arrival_step_s * u * rng.choice(arrival_steps) for u in range(users)]
        text += "  arrivals_s: [" + ", ".join(f"{a:g}" for a in arrivals) + "]\n"
    return text
