#!/usr/bin/env python3
"""Generates the delivery traces in traces/, in mahimahi's format: one line per 1500-byte
delivery opportunity, the millisecond at which it occurs; the file repeats, its last line
being its period. Deterministic (fixed seeds): running it again gives the same files.

    scripts/generate-traces.py [DIRECTORY]   (default: traces/ next to this script's parent)
"""
import math
import os
import random
import sys

PACKET_BITS = 1500 * 8


def opportunities(rate_at, period_ms):
    """Milliseconds of opportunities for a capacity in bit/s given per millisecond."""
    credit = 0.0
    lines = []
    for ms in range(1, period_ms + 1):
        credit += max(0.0, rate_at(ms)) / 1000 / PACKET_BITS
        while credit >= 1:
            lines.append(ms)
            credit -= 1
    if not lines or lines[-1] != period_ms:
        lines.append(period_ms)  # the period ends on an opportunity
    return lines


def smooth_noise(rng, period_ms, step_ms, spread):
    """A random walk sampled every step, linearly interpolated: slow fluctuation around 1."""
    points = [1.0]
    for _ in range(period_ms // step_ms + 1):
        points.append(min(1 + spread, max(1 - spread, points[-1] + rng.uniform(-spread / 3, spread / 3))))
    points[-1] = points[0]  # seamless when the trace repeats

    def at(ms):
        position = ms / step_ms
        index = int(position)
        fraction = position - index
        return points[index] * (1 - fraction) + points[min(index + 1, len(points) - 1)] * fraction
    return at


def lte_steady():
    """A good LTE cell: about 12 Mbit/s, drifting by up to 15% over seconds. 30 s."""
    noise = smooth_noise(random.Random(1), 30_000, 1000, 0.15)
    return opportunities(lambda ms: 12e6 * noise(ms), 30_000)


def fading():
    """A link fading in and out: 1 to 20 Mbit/s on a 20 s cycle, with some noise. 40 s."""
    noise = smooth_noise(random.Random(2), 40_000, 500, 0.2)
    return opportunities(lambda ms: (1e6 + 19e6 * (0.5 + 0.5 * math.sin(2 * math.pi * ms / 20_000))) * noise(ms), 40_000)


def commuter_train():
    """Cellular on a train: about 8 Mbit/s with wide swings, and tunnels where nothing gets
    through (12-15 s, 31-36 s, 50-51.5 s), capacity fading over a second before and after. 60 s."""
    noise = smooth_noise(random.Random(3), 60_000, 250, 0.5)
    tunnels = [(12_000, 15_000), (31_000, 36_000), (50_000, 51_500)]

    def rate(ms):
        factor = 1.0
        for start, end in tunnels:
            if start <= ms < end:
                return 0.0
            if start - 1000 <= ms < start:
                factor = min(factor, (start - ms) / 1000)
            if end <= ms < end + 1000:
                factor = min(factor, (ms - end) / 1000)
        return 8e6 * noise(ms) * factor
    return opportunities(rate, 60_000)


def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "traces"))
    os.makedirs(directory, exist_ok=True)
    for name, make in [("lte-steady", lte_steady), ("fading", fading), ("commuter-train", commuter_train)]:
        lines = make()
        path = os.path.join(directory, name + ".trace")
        with open(path, "w") as handle:
            handle.write("\n".join(str(ms) for ms in lines) + "\n")
        period = lines[-1]
        print(f"{path}: {len(lines)} opportunities over {period / 1000:g} s, mean {len(lines) * PACKET_BITS / (period / 1000) / 1e6:.2f} Mbit/s")


if __name__ == "__main__":
    main()
