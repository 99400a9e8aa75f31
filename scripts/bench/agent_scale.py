#!/usr/bin/env python3
"""Agent commands at 0 and at N certificates, and one `sign` against `openssl x509 -req`.

Usage: agent_scale.py AGENT_BIN [N] [RUNS]

Runs in a temporary state directory with no Kafka and no MySQL configured, so it measures the
agent itself: policy, signing, the inventory and the CRL. The big inventory is filled directly
with SQLite (N rows with random serials, one in ten revoked, a real certificate's DER in each),
which is what N signatures would leave, minus hours of waiting. Each figure is the median of
RUNS runs; peak RSS comes from GNU time. Prints markdown rows.
"""

import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time


def run(cmd, stdin=None):
    """(seconds, peak RSS in KiB, stdout) of one child."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = proc.communicate(stdin)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed: {err.decode(errors='replace')}")
    return elapsed, out


def run_rss(cmd, stdin=None):
    """(seconds, peak RSS KiB) of one run, the RSS from GNU time: a child forked from this
    Python process would inherit its high-water mark (Linux keeps it across exec)."""
    with tempfile.NamedTemporaryFile() as rss:
        start = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-q", "-f", "%M", "-o", rss.name] + cmd,
                              input=stdin, capture_output=True)
        elapsed = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit(f"bench: {' '.join(cmd)} failed: {proc.stderr.decode(errors='replace')}")
        return elapsed, int(open(rss.name).read().split()[-1])


def median(cmd_fn, runs):
    times, rss = [], []
    for i in range(runs):
        t, m = cmd_fn(i)
        times.append(t)
        rss.append(m)
    return statistics.median(times), statistics.median(rss)


def csr(work, name):
    key, req = os.path.join(work, f"{name}.key"), os.path.join(work, f"{name}.csr")
    subprocess.run(
        ["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-keyout", key, "-subj", f"/CN={name}", "-out", req],
        check=True, capture_output=True)
    with open(req, "rb") as f:
        return f.read(), req


def fill(state, der, n):
    db = sqlite3.connect(os.path.join(state, "inventory.sqlite"))
    now = int(time.time())
    rows = []
    for i in range(n):
        revoked = i % 10 == 0
        rows.append((
            "%032x" % random.randrange(1 << 124, 1 << 127), f"user{i % 5000}", "client", f"CN=user{i % 5000}",
            now - 86400, now + 30 * 86400, now - 3600,
            "revoked" if revoked else "valid", now - 60 if revoked else None,
            "superseded" if revoked else None, der))
    db.executemany(
        "INSERT INTO certs (serial, name, kind, subject, not_before, not_after, issued_at, "
        "status, revoked_at, reason, der) VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
    db.commit()
    serials = [r[0] for r in rows if r[7] == "valid"]
    db.close()
    return serials


def measure(agent, work, label, n, runs):
    state = os.path.join(work, label)
    os.makedirs(state)
    with open(os.path.join(state, "agent.toml"), "w") as f:
        f.write('[kafka]\nbootstrap = ""\n[mysql]\nhost = ""\n')
    base = [agent, "--state-dir", state]
    run(base + ["init"])
    req, _ = csr(work, f"{label}-bench")
    _, out = run(base + ["sign", "--name", f"{label}-bench", "--no-kafka"], req)
    # The certificate's DER, from the answer's PEM (for realistic row sizes).
    import base64
    import json
    pem = json.loads(out)["certificate_pem"]
    body = "".join(l for l in pem.splitlines() if "-----" not in l)
    der = base64.b64decode(body)
    serials = fill(state, der, n) if n else []
    run(base + ["crl"])  # the CRL the inventory implies, before timing
    rows = {}
    rows["sign"] = median(
        lambda i: run_rss(base + ["sign", "--name", f"{label}-bench", "--no-kafka"], req), runs)
    rows["list --name NAME"] = median(
        lambda i: run_rss(base + ["list", "--name", f"user{i}"]), runs)
    rows["list --json (all)"] = median(lambda i: run_rss(base + ["list", "--json"]), runs)
    victims = serials[:runs] if serials else []
    if not victims:
        for i in range(runs):
            _, out = run(base + ["sign", "--name", f"{label}-bench", "--no-kafka"], req)
            victims.append(json.loads(out)["serial"])
    rows["revoke SERIAL"] = median(
        lambda i: run_rss(base + ["revoke", victims[i], "--reason", "superseded"]), runs)
    rows["crl"] = median(lambda i: run_rss(base + ["crl"]), runs)
    return rows, state, req


def main():
    agent = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    with tempfile.TemporaryDirectory() as work:
        empty, state, req_path_src = measure(agent, work, "empty", 0, runs)
        full, full_state, _ = measure(agent, work, "full", n, runs)
        # The same rows as JSON from sqlite3 itself: what printing them costs at best.
        dump = ["sqlite3", "-json", os.path.join(full_state, "inventory.sqlite"),
                "SELECT serial, name, kind, subject, not_before, not_after, issued_at, status, "
                "revoked_at, reason FROM certs ORDER BY issued_at, serial"]
        sqlite_json = median(lambda i: run_rss(dump), runs) if shutil.which("sqlite3") else None
        # openssl x509 -req with the same CA, as a hand-run CA would sign.
        _, req_path = csr(work, "openssl-bench")
        ca_crt, ca_key = os.path.join(state, "ca.crt"), os.path.join(state, "ca.key")
        cert_out = os.path.join(work, "openssl.crt")
        openssl = median(lambda i: run_rss(
            ["openssl", "x509", "-req", "-in", req_path, "-CA", ca_crt, "-CAkey", ca_key,
             "-CAcreateserial", "-days", "30", "-sha256", "-out", cert_out]), runs)
    print(f"| agent command | 0 certs | {n:,} certs | ratio (time) | peak RSS 0 → {n:,} |")
    print("|---|---|---|---|---|")
    for cmd in empty:
        (t0, m0), (t1, m1) = empty[cmd], full[cmd]
        print(f"| `{cmd}` | {t0 * 1000:.0f} ms | {t1 * 1000:.0f} ms | {t1 / t0:.2f}× | "
              f"{m0 / 1024:.1f} → {m1 / 1024:.1f} MB |")
    (ts, ms), (to, mo) = empty["sign"], openssl
    print()
    print("| sign one CSR | time | peak RSS | ratio (time) |")
    print("|---|---|---|---|")
    print(f"| `openssl x509 -req` (baseline) | {to * 1000:.0f} ms | {mo / 1024:.1f} MB | 1.00× |")
    print(f"| `shiqi-ca-agent sign --no-kafka` | {ts * 1000:.0f} ms | {ms / 1024:.1f} MB | "
          f"{ts / to:.2f}× |")
    if sqlite_json:
        (tq, mq), (tl, ml) = sqlite_json, full["list --json (all)"]
        print()
        print(f"| {n:,} certificates as JSON | time | peak RSS | ratio (time) |")
        print("|---|---|---|---|")
        print(f"| `sqlite3 -json` of the same rows (baseline) | {tq * 1000:.0f} ms | "
              f"{mq / 1024:.1f} MB | 1.00× |")
        print(f"| `shiqi-ca-agent list --json` | {tl * 1000:.0f} ms | {ml / 1024:.1f} MB | "
              f"{tl / tq:.2f}× |")


if __name__ == "__main__":
    main()
