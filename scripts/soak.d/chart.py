#!/usr/bin/env python3
"""scripts/soak.d/chart.py SOAK.json OUT.svg — a soak over time: produce latency (p50 and p99
per ten seconds, each producer) above the daemon's RSS and open descriptors, with the renewals,
the broker restart, the cuts and the freeze marked. matplotlib (PyPI), from the venv scripts/soak
shares with scripts/bench/run."""

import json
import sys

import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402

data = json.load(open(sys.argv[1]))
t0 = data["started"]
series = data["series"]
colours = {"java": "#1565c0", "rdkafka": "#ef6c00"}
marks = {"restart": ("#8d6e63", "broker restart"), "cut": ("#c62828", "SSH cut"),
         "freeze": ("#6a1b9a", "daemon frozen")}

fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 6.5), sharex=True,
                                  gridspec_kw={"height_ratios": [3, 2]})
for name, rows in series["latency"].items():
    xs = [r[0] / 60 for r in rows]
    c = colours.get(name, None)
    top.plot(xs, [r[2] for r in rows], color=c, lw=1.2, label=f"{name} p99")
    top.plot(xs, [r[1] for r in rows], color=c, lw=0.8, ls="--", label=f"{name} p50")
top.set_yscale("log")
top.set_ylabel("produce latency, ms (log)")
top.set_title(f"Soak {data['profile']}: {data['minutes']:g} min through the local endpoint, "
              f"{data['rate']:g} records/s per producer")

for ax in (top, bottom):
    seen = set()
    for r in data["renewals"]:
        label = None if "renewal" in seen else "renewal"
        seen.add("renewal")
        ax.axvline((r["start"] - t0) / 60, color="#2e7d32", lw=1, ls=":", label=label)
    for e in data["disturbances"]:
        colour, text = marks[e["kind"]]
        label = None if e["kind"] in seen else text
        seen.add(e["kind"])
        end = e["recovered"] or e["end"]
        ax.axvspan((e["start"] - t0) / 60, max((end - t0) / 60, (e["start"] - t0) / 60 + 0.05),
                   color=colour, alpha=0.18, label=label)
    ax.spines[["top", "right"]].set_visible(False)
fails = series.get("mysql_failures", [])
if fails:
    top.plot([t / 60 for t in fails], [top.get_ylim()[1] * 0.8] * len(fails), "x", color="black",
             ms=4, label="MySQL failure")
top.legend(fontsize=7, ncol=3, loc="upper left")

d = series["daemon"]
xs = [r[0] / 60 for r in d]
(rss_line,) = bottom.plot(xs, [r[1] / 1024 for r in d], color="#00695c", lw=1.2, label="RSS (MB)")
bottom.set_ylabel("daemon RSS, MB")
bottom.set_ylim(bottom=0)
fd_axis = bottom.twinx()
(fd_line,) = fd_axis.plot(xs, [r[2] for r in d], color="#757575", lw=1, ls="--",
                          label="open descriptors")
fd_axis.set_ylabel("open descriptors")
fd_axis.set_ylim(bottom=0)
fd_axis.spines[["top"]].set_visible(False)
bottom.legend([rss_line, fd_line], [rss_line.get_label(), fd_line.get_label()], fontsize=7,
              loc="lower right")
bottom.set_xlabel("minutes since the producers started")
fig.tight_layout()
fig.savefig(sys.argv[2], metadata={"Date": None})
