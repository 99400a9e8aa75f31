#!/usr/bin/env python3
"""scripts/bench/chart.py TUNNEL.json OUT.svg — the tunnel rows of scripts/bench/run as one
picture: throughput per direction (quiet and with every core busy) and the added round trip,
ours against OpenSSH as users run it and OpenSSH on our cipher. matplotlib (PyPI), installed by
scripts/bench/run into a cache venv of its own."""

import json
import sys

import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402

data = json.load(open(sys.argv[1]))
m, ciphers = data["medians"], data["ciphers"]
kinds = [
    ("openssh", f"ssh -N ({ciphers['openssh']})", "#9e9e9e"),
    ("openssh_same", f"ssh -N -c {ciphers['openssh_same']}", "#616161"),
    ("shiqi", f"shiqi-connect tunnel ({ciphers['shiqi']})", "#1565c0"),
]
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2), gridspec_kw={"width_ratios": [3, 1]})
fields = [("up", "upload"), ("down", "download"), ("up_busy", "upload,\ncores busy"),
          ("down_busy", "download,\ncores busy")]
width = 0.26
for i, (kind, label, colour) in enumerate(kinds):
    xs = [j + (i - 1) * width for j in range(len(fields))]
    left.bar(xs, [m[kind][f] for f, _ in fields], width, label=label, color=colour)
    right.bar([(i - 1) * width], [m[kind]["rtt"]], width, color=colour)
left.set_xticks(range(len(fields)), [t for _, t in fields])
left.set_ylabel("Mbit/s (higher is better)")
left.set_title(f"Throughput through one forward (median of {data['rounds']} rounds)")
left.legend(fontsize=8, loc="lower left")
right.set_xticks([0], ["1-byte\nping-pong"])
right.set_ylabel("µs (lower is better)")
right.set_title("Added round trip")
for ax in (left, right):
    ax.spines[["top", "right"]].set_visible(False)
fig.tight_layout()
fig.savefig(sys.argv[2], metadata={"Date": None})
