#!/usr/bin/env python3
"""Side-by-side measurements on the local stack; each row a ratio against what a user would
run instead, from the same run. Called by scripts/bench/run (which builds, starts the stack and
passes `scripts/stack info` as the environment); prints markdown.

Rows:
  setup       `shiqi-connect setup` vs baseline/setup (openssl, mariadb, kafka-acls, keytool, ssh)
  tunnel      `tunnel up` vs `ssh -N` from the same ssh_config: iperf3 both ways through one
              forward, added round trip (1-byte ping-pongs), peak RSS, CPU seconds per GiB
  kafka       Kafka's own producer and consumer perf tools through each tunnel

The tunnel rows need a forward with a plain TCP server behind it. A broker-only Kafka node (4) is
started so that both tunnels forward its advertised port, then stopped, and iperf3 (or the echo
server) takes its place on the server's 127.0.0.1 - the same kind of forward a broker gets.
"""

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STACK = os.path.join(REPO, "scripts", "stack")
INFO = dict(
    l.split("=", 1) for l in subprocess.run(
        [STACK, "info"], check=True, capture_output=True, text=True).stdout.splitlines() if "=" in l)
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
HOME = os.path.join(INFO["laptop_home"], "bench")
BENCH_PORT = 49094  # node 4's advertised port


def sh(*args, check=True, stdin=None, env=None):
    return subprocess.run(list(args), check=check, capture_output=True, text=True,
                          input=stdin, env=env)


def laptop(*args, env=(), check=True, stdin=None):
    cmd = [STACK, "exec", "laptop"]
    for k, v in env:
        cmd += ["--env", f"{k}={v}"]
    return sh(*cmd, "--", *args, check=check, stdin=stdin)


def server(*args, user=None, check=True):
    cmd = [STACK, "exec", "server"] + (["--user", user] if user else [])
    return sh(*cmd, "--", *args, check=check)


def timed(fn, runs=RUNS, before=None):
    """Median wall time of fn(i); before(i), if given, runs first and untimed."""
    out = []
    for i in range(runs):
        if before:
            before(i)
        t = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - t)
    return statistics.median(out), out


def ratio(ours, theirs, higher_is_better=False):
    r = ours / theirs if theirs else float("nan")
    return f"{(1 / r if not higher_is_better else r):.2f}×" if r == r else "n/a"


def setup_rows():
    laptop("mkdir", "-p", HOME)
    dest = INFO["ssh_destination"]
    env = [("SHIQI_HOME", HOME)]

    # A new profile each run, as the baseline makes new files each run: `--force` would also
    # revoke the replaced profile's certificate, one more agent request the baseline does not do.
    def fresh(i):
        laptop("rm", "-rf", os.path.join(HOME, "benchsetup"))

    def ours(i):
        laptop("shiqi-connect", "setup", "benchsetup", "--server", dest, "--yes", "-q", env=env)

    base_env = [
        ("CA_DIR", INFO["agent_state_dir"]), ("CRL_DIR", INFO["crl_dir"]),
        ("KAFKA_LIBS", INFO["kafka_libs"]), ("ADMIN_PROPERTIES", INFO["kafka_admin_properties"]),
        ("KCAT_ADMIN", INFO["kafka_admin_kcat_config"]), ("BOOTSTRAP", INFO["kafka_bootstrap"]),
        ("MYSQL_SOCKET", INFO["mysql_socket"]), ("MYSQL_ADMIN_USER", INFO["mysql_admin_user"]),
        ("MYSQL_PASSWORD_FILE", INFO["mysql_admin_password_file"]),
        ("AGENT_USER", INFO["server_user"]),
    ]
    baseline = os.path.join(REPO, "scripts", "bench", "baseline", "setup")

    def theirs(i):
        laptop(baseline, "benchbase", INFO["shell_destination"], os.path.join(HOME, "baseline"),
               env=base_env)

    fresh(0)
    ours(0)  # warm-up (and the first run's MySQL user and ACLs)
    theirs(0)
    t_ours, _ = timed(ours, before=fresh)
    t_base, _ = timed(theirs)
    return [
        "| setup | time (median of %d) | ratio |" % RUNS,
        "|---|---|---|",
        f"| by hand: `scripts/bench/baseline/setup` (openssl, mariadb, kafka-acls ×2, kcat, keytool over one ssh) | {t_base * 1000:.0f} ms | 1.00× |",
        f"| `shiqi-connect setup` (one `provision` request) | {t_ours * 1000:.0f} ms | {t_base / t_ours:.1f}× faster |",
    ]


def proc_stat(pid):
    """(utime+stime seconds, VmHWM KiB) of a laptop process (same pid namespace as us)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    hwm = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
    return cpu, hwm


def iperf(reverse):
    args = ["iperf3", "-c", "127.0.0.1", "-p", str(BENCH_PORT), "-t", "5", "-J"]
    if reverse:
        args.append("-R")
    out = laptop(*args).stdout
    doc = json.loads(out)
    end = doc["end"]
    bits = end["sum_received"]["bits_per_second"]
    moved = end["sum_received"]["bytes"]
    return bits / 1e6, moved


def pingpong(count=2000):
    code = (
        "import socket,time,statistics,sys\n"
        f"s=socket.create_connection(('127.0.0.1',{BENCH_PORT}))\n"
        "s.setsockopt(socket.IPPROTO_TCP,socket.TCP_NODELAY,1)\n"
        "r=[]\n"
        f"for i in range({count}):\n"
        "    t=time.perf_counter(); s.sendall(b'x'); s.recv(1); r.append(time.perf_counter()-t)\n"
        "print(statistics.median(r)*1e6)\n")
    return float(laptop("python3", "-c", code).stdout.strip())


def serve(kind):
    """Starts iperf3 -s or an echo server on the server's 127.0.0.1:BENCH_PORT; returns Popen."""
    if kind == "iperf":
        cmd = ["iperf3", "-s", "-B", "127.0.0.1", "-p", str(BENCH_PORT)]
    else:
        cmd = ["python3", "-c",
               "import socket\n"
               f"l=socket.create_server(('127.0.0.1',{BENCH_PORT}))\n"
               "while True:\n"
               "    c,_=l.accept(); c.setsockopt(socket.IPPROTO_TCP,socket.TCP_NODELAY,1)\n"
               "    while (b:=c.recv(65536)): c.sendall(b)\n"]
    p = subprocess.Popen([STACK, "exec", "server", "--"] + cmd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    time.sleep(1.0)
    return p


def stop(p):
    try:
        os.killpg(p.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    p.wait(timeout=10)


def measure_tunnel(label, pid_of):
    pid = pid_of()
    cpu0, _ = proc_stat(pid)
    up, moved_up = iperf(False)
    down, moved_down = iperf(True)
    cpu1, hwm = proc_stat(pid)
    gib = (moved_up + moved_down) / 2**30
    return {"up": up, "down": down, "cpu_per_gib": (cpu1 - cpu0) / gib if gib else 0,
            "rss": hwm / 1024}


def tunnel_rows():
    env = [("SHIQI_HOME", HOME)]
    name = "benchtun"
    dest = INFO["ssh_destination"]
    profile = os.path.join(HOME, name)
    cfg = os.path.join(profile, "ssh_config")
    results = {}
    for kind in ("openssh", "shiqi"):
        # Node 4 runs while the tunnel starts (so both forward its port), then makes room.
        sh(STACK, "kafka-node", "up", "4")
        try:
            if kind == "openssh":
                laptop("shiqi-connect", "setup", name, "--server", dest, "--yes", "--force",
                       "-q", env=env)
                laptop("ssh", "-fN", "-F", cfg, "shiqi-tunnel")
            else:
                laptop("shiqi-connect", "tunnel", "up", name, env=env)
        finally:
            sh(STACK, "kafka-node", "down", "4", "--purge")
        if kind == "shiqi":
            def pid_of():
                return int(open(os.path.join(profile, "tunnel.pid")).read().split()[0])
        else:
            def pid_of():
                out = sh("pgrep", "-f", f"ssh -fN -F {cfg} shiqi-tunnel").stdout.split()
                return int(out[0])
        try:
            samples = []
            srv = serve("iperf")
            try:
                for _ in range(max(1, RUNS // 2)):
                    samples.append(measure_tunnel(kind, pid_of))
            finally:
                stop(srv)
            echo = serve("echo")
            try:
                rtt = statistics.median(pingpong() for _ in range(3))
            finally:
                stop(echo)
            results[kind] = {
                "up": statistics.median(s["up"] for s in samples),
                "down": statistics.median(s["down"] for s in samples),
                "cpu_per_gib": statistics.median(s["cpu_per_gib"] for s in samples),
                "rss": max(s["rss"] for s in samples),
                "rtt": rtt,
            }
        finally:
            if kind == "shiqi":
                laptop("shiqi-connect", "tunnel", "down", name, env=env, check=False)
            else:
                laptop("ssh", "-F", cfg, "-O", "exit", "shiqi-tunnel", check=False)
    o, s = results["openssh"], results["shiqi"]
    return [
        "| tunnel (one forward, iperf3 5 s) | `ssh -N` (baseline) | `tunnel up` | ratio |",
        "|---|---|---|---|",
        f"| upload | {o['up']:.0f} Mbit/s | {s['up']:.0f} Mbit/s | {s['up'] / o['up']:.2f}× |",
        f"| download | {o['down']:.0f} Mbit/s | {s['down']:.0f} Mbit/s | {s['down'] / o['down']:.2f}× |",
        f"| round trip, 1-byte ping-pong (median) | {o['rtt']:.0f} µs | {s['rtt']:.0f} µs | {s['rtt'] / o['rtt']:.2f}× |",
        f"| peak RSS of the laptop process | {o['rss']:.1f} MB | {s['rss']:.1f} MB | {s['rss'] / o['rss']:.2f}× |",
        f"| CPU seconds per GiB moved | {o['cpu_per_gib']:.2f} s | {s['cpu_per_gib']:.2f} s | {s['cpu_per_gib'] / o['cpu_per_gib']:.2f}× |",
    ]


def kafka_rows():
    env = [("SHIQI_HOME", HOME)]
    name = "benchkafka"
    laptop("shiqi-connect", "setup", name, "--server", INFO["ssh_destination"], "--yes",
           "--force", "-q", env=env)
    profile = os.path.join(HOME, name)
    props = os.path.join(profile, "client.properties")
    topic = "app.bench"
    sh(STACK, "exec", "server", "--", "java", "-Xmx192m", "-cp", f"{INFO['kafka_libs']}/*",
       "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", INFO["kafka_bootstrap"],
       "--command-config", INFO["kafka_admin_properties"], "--create", "--if-not-exists",
       "--topic", topic, "--partitions", "3")
    java = ["java", "-Xmx256m", f"-Dlog4j2.configurationFile={REPO}/scripts/kafka/log4j2-tools.properties",
            "-cp", f"{INFO['kafka_libs']}/*"]
    records = 200_000

    def produce():
        out = laptop(*java, "org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
                     "--num-records", str(records), "--record-size", "512", "--throughput", "-1",
                     "--producer.config", props, "--producer-props", "acks=1",
                     "bootstrap.servers=localhost:19094").stdout
        last = [l for l in out.splitlines() if "records sent" in l][-1]
        return float(last.split("(")[1].split(" MB/sec")[0])

    def consume():
        out = laptop(*java, "org.apache.kafka.tools.ConsumerPerformance", "--topic", topic,
                     "--messages", str(records), "--bootstrap-server", "localhost:19094",
                     "--consumer.config", props, "--group", f"app.bench{time.time_ns()}",
                     "--hide-header").stdout
        return float(out.strip().splitlines()[-1].split(",")[3])

    results = {}
    cfg = os.path.join(profile, "ssh_config")
    for kind in ("openssh", "shiqi"):
        if kind == "shiqi":
            laptop("shiqi-connect", "tunnel", "up", name, env=env)
        else:
            laptop("ssh", "-fN", "-F", cfg, "shiqi-tunnel")
        try:
            p = statistics.median(produce() for _ in range(3))
            c = statistics.median(consume() for _ in range(3))
            results[kind] = (p, c)
        finally:
            if kind == "shiqi":
                laptop("shiqi-connect", "tunnel", "down", name, env=env, check=False)
            else:
                laptop("ssh", "-F", cfg, "-O", "exit", "shiqi-tunnel", check=False)
    (po, co), (ps, cs) = results["openssh"], results["shiqi"]
    return [
        f"| Kafka perf tools, {records:,} × 512 B, 3 partitions | `ssh -N` (baseline) | `tunnel up` | ratio |",
        "|---|---|---|---|",
        f"| producer (acks=1) | {po:.1f} MB/s | {ps:.1f} MB/s | {ps / po:.2f}× |",
        f"| consumer | {co:.1f} MB/s | {cs:.1f} MB/s | {cs / co:.2f}× |",
    ]


def main():
    which = sys.argv[1:] or ["setup", "tunnel", "kafka"]
    rows = []
    for w in which:
        rows += {"setup": setup_rows, "tunnel": tunnel_rows, "kafka": kafka_rows}[w]()
        rows.append("")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
