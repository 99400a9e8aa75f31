#!/usr/bin/env python3
"""Side-by-side measurements on the local stack; each row a ratio against what a user would
run instead, from the same run. Called by scripts/bench/run (which builds, starts the stack and
passes `scripts/stack info` as the environment); prints markdown.

Rows:
  setup       `shiqi-connect setup` vs baseline/setup (openssl, mariadb, kafka-acls, keytool, ssh)
  tunnel      `tunnel up` vs `ssh -N` from the same ssh_config: iperf3 both ways through one
              forward, added round trip (1-byte ping-pongs), peak RSS, CPU seconds per GiB
  kafka       Kafka's own producer and consumer perf tools through `ssh -N`, our tunnel forwarding
              the brokers (direct) and our local endpoint: throughput both ways, produce latency
  mysql       PyMySQL the same three ways: login time, `SELECT 1` round trip, 1 MiB results

The tunnel rows need a forward with a plain TCP server behind it. A broker-only Kafka node (4) is
started so that both tunnels forward its advertised port, then stopped, and iperf3 (or the echo
server) takes its place on the server's 127.0.0.1 - the same kind of forward a broker gets.
"""

import hashlib
import json
import os
import re
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
IPERF_SECONDS = 4
CACHE = os.environ.get("SHIQI_CACHE", "/var/cache/shiqi")
LAT_RATE, LAT_SECONDS = 500, 20


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
        ("MYSQL_SOCKET", INFO["mysql_socket"]),
        ("AGENT_USER", INFO["server_user"]),
    ]
    baseline = os.path.join(REPO, "scripts", "bench", "baseline", "setup")

    def theirs(i):
        laptop(baseline, "benchbase", INFO["shell_destination"], os.path.join(HOME, "baseline"),
               env=base_env)

    fresh(0)
    ours(0)  # warm-up (and the first run's MySQL user and ACLs)
    theirs(0)
    t_ours, t_base = [], []
    for i in range(RUNS):
        # The order alternates, so a change in the machine's load falls on both alike.
        for which in (("ours", "theirs") if i % 2 == 0 else ("theirs", "ours")):
            if which == "ours":
                fresh(i)
                t_ours.append(timed(ours, runs=1)[0])
            else:
                t_base.append(timed(theirs, runs=1)[0])
    t_ours, t_base = statistics.median(t_ours), statistics.median(t_base)
    return [
        "| setup | time (median of %d) | ratio |" % RUNS,
        "|---|---|---|",
        f"| by hand: `scripts/bench/baseline/setup` (openssl, mariadb, kafka-acls ×2, kcat, keytool over one ssh) | {t_base * 1000:.0f} ms | 1.00× |",
        f"| `shiqi-connect setup` (one `provision` request) | {t_ours * 1000:.0f} ms | {t_base / t_ours:.1f}× faster |",
    ]


def rss_split(pid):
    """(anonymous, file-backed) resident KiB of a process now: the file-backed part is mapped
    program code and libraries (page cache, shared and clean), the anonymous part its data."""
    got = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("RssAnon:", "RssFile:")):
                got[line.split(":")[0]] = int(line.split()[1])
    return got.get("RssAnon", 0), got.get("RssFile", 0)


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


def iperf(reverse, port):
    args = ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(IPERF_SECONDS), "-J"]
    if reverse:
        args.append("-R")
    out = laptop(*args).stdout
    doc = json.loads(out)
    end = doc["end"]
    bits = end["sum_received"]["bits_per_second"]
    moved = end["sum_received"]["bytes"]
    return bits / 1e6, moved


def pingpong(port, count=2000):
    code = (
        "import socket,time,statistics,sys\n"
        f"s=socket.create_connection(('127.0.0.1',{port}))\n"
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


def hogs():
    """One busy loop per core at normal priority: the "other load" of a laptop that is also
    compiling, indexing or running a browser. Returns the processes (stop with unhog)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(os.cpu_count() or 1)]


def unhog(procs):
    for p in procs:
        p.kill()
        p.wait()


def openssh_config(cfg, alt_port, extra=(), suffix=".bench"):
    """The profile's ssh_config with its forwards replaced by one: 127.0.0.1:alt_port to the
    bench forward's target. Everything else (keys, host key checks; no cipher is set, so
    OpenSSH's default) is the profile's, so OpenSSH moves bytes exactly as a user's `ssh -N`
    would, while the built-in tunnel holds the profile's own ports and all run at once. `extra`
    lines go into the Host block (a cipher, no control socket of its own)."""
    out, target = [], None
    for line in open(cfg).read().splitlines():
        words = line.split()
        if words[:1] == ["LocalForward"]:
            if words[1].endswith(f":{BENCH_PORT}"):
                target = words[2]
            continue
        out.append(line)
    if target is None:
        sys.exit(f"bench: {cfg} has no forward for port {BENCH_PORT}")
    at = next(i for i, l in enumerate(out) if l.startswith("Host ")) + 1
    out[at:at] = [f"    LocalForward 127.0.0.1:{alt_port} {target}"] + [f"    {l}" for l in extra]
    path = cfg + suffix
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return path


def negotiated_cipher(profile):
    """The cipher our tunnel's key exchange chose, from its log (ssh::Client::kex_done)."""
    log = open(os.path.join(profile, "tunnel.log")).read()
    found = re.findall(r"cipher (\S+), key exchange", log)
    if not found:
        sys.exit(f"bench: {profile}/tunnel.log names no negotiated cipher")
    return found[-1]


def tunnel_rows():
    """Three tunnels run at once: the built-in one on the profile's ports, OpenSSH as a user
    runs it (its default cipher) and OpenSSH told to use the cipher ours negotiated, each on
    one other local port to the same target. Each round measures them in turn, the order
    rotating, so a change in the machine's load falls on all alike. Quiet, then with every
    core busy."""
    env = [("SHIQI_HOME", HOME)]
    name = "benchtun"
    dest = INFO["ssh_destination"]
    profile = os.path.join(HOME, name)
    cfg = os.path.join(profile, "ssh_config")
    alt = BENCH_PORT + 100
    # Node 4 runs while the profile is made and the tunnel starts (so both forward its
    # advertised port), then makes room for iperf3 and the echo server.
    sh(STACK, "kafka-node", "up", "4")
    try:
        laptop("shiqi-connect", "setup", name, "--server", dest, "--yes", "--force", "-q", env=env)
        laptop("shiqi-connect", "tunnel", "up", name, env=env)
    finally:
        sh(STACK, "kafka-node", "down", "4", "--purge")
    ssh_cfg = openssh_config(cfg, alt)
    ours = negotiated_cipher(profile)
    # Its own connection (no control socket), or it would ride the first one's, cipher and all.
    same_cfg = openssh_config(cfg, alt + 1, [f"Ciphers {ours}", "ControlMaster no",
                                             "ControlPath none"], ".bench-same")
    default = next(l.split()[1].split(",")[0] for l in laptop(
        "ssh", "-G", "-F", ssh_cfg, "shiqi-tunnel").stdout.splitlines()
        if l.startswith("ciphers "))
    ports = {"openssh": alt, "openssh_same": alt + 1, "shiqi": BENCH_PORT}
    pids = {}
    try:
        for c in (ssh_cfg, same_cfg):
            laptop("ssh", "-fN", "-F", c, "shiqi-tunnel")
        pids["shiqi"] = int(open(os.path.join(profile, "tunnel.pid")).read().split()[0])
        pids["openssh"] = int(sh("pgrep", "-f", f"ssh -fN -F {ssh_cfg} shiqi-tunnel").stdout.split()[0])
        pids["openssh_same"] = int(sh("pgrep", "-f", f"ssh -fN -F {same_cfg} shiqi-tunnel").stdout.split()[0])
        samples = {k: {"up": [], "down": [], "up_busy": [], "down_busy": [], "cpu_per_gib": [],
                       "rtt": []} for k in ports}
        rounds = max(RUNS, 5)
        srv = serve("iperf")
        try:
            kinds = list(ports)
            for r in range(rounds):
                order = kinds[r % 3:] + kinds[:r % 3]
                for kind in order:
                    cpu0, _ = proc_stat(pids[kind])
                    up, moved_up = iperf(False, ports[kind])
                    down, moved_down = iperf(True, ports[kind])
                    cpu1, _ = proc_stat(pids[kind])
                    gib = (moved_up + moved_down) / 2**30
                    samples[kind]["up"].append(up)
                    samples[kind]["down"].append(down)
                    samples[kind]["cpu_per_gib"].append((cpu1 - cpu0) / gib)
                busy = hogs()
                try:
                    for kind in order:
                        samples[kind]["up_busy"].append(iperf(False, ports[kind])[0])
                        samples[kind]["down_busy"].append(iperf(True, ports[kind])[0])
                finally:
                    unhog(busy)
        finally:
            stop(srv)
        echo = serve("echo")
        try:
            for r in range(rounds):
                for kind in kinds[r % 3:] + kinds[:r % 3]:
                    samples[kind]["rtt"].append(pingpong(ports[kind]))
        finally:
            stop(echo)
        rss = {k: proc_stat(pid)[1] / 1024 for k, pid in pids.items()}
        split = {k: [v / 1024 for v in rss_split(pid)] for k, pid in pids.items()}
    finally:
        laptop("shiqi-connect", "tunnel", "down", name, env=env, check=False)
        laptop("ssh", "-F", ssh_cfg, "-O", "exit", "shiqi-tunnel", check=False)
        if "openssh_same" in pids:
            try:
                os.kill(pids["openssh_same"], signal.SIGTERM)
            except ProcessLookupError:
                pass
    m = {k: {f: statistics.median(v) for f, v in fields.items()} for k, fields in samples.items()}
    o, e, s = m["openssh"], m["openssh_same"], m["shiqi"]
    if os.environ.get("BENCH_JSON"):
        with open(os.environ["BENCH_JSON"], "w") as f:
            json.dump({"rounds": rounds, "ciphers": {"openssh": default, "openssh_same": ours,
                                                     "shiqi": ours},
                       "medians": m, "samples": samples, "rss_mb": rss,
                       "rss_anon_file_mb": split}, f, indent=1)

    def row(label, field, unit, fmt="{:.0f}"):
        return (f"| {label} | {fmt.format(o[field])} {unit} | {fmt.format(e[field])} {unit} | "
                f"{fmt.format(s[field])} {unit} | {s[field] / o[field]:.2f}× | "
                f"{s[field] / e[field]:.2f}× |")

    return [
        f"| tunnel (one forward, iperf3 {IPERF_SECONDS} s, median of {rounds} rotating rounds)"
        f" | `ssh -N` as users run it ({default}, the baseline) | `ssh -N -c {ours}`"
        f" | `tunnel up` ({ours}) | ÷ `ssh -N` | ÷ same cipher |",
        "|---|---|---|---|---|---|",
        row("upload", "up", "Mbit/s"),
        row("download", "down", "Mbit/s"),
        row(f"upload, {os.cpu_count()} cores busy", "up_busy", "Mbit/s"),
        row(f"download, {os.cpu_count()} cores busy", "down_busy", "Mbit/s"),
        row("round trip, 1-byte ping-pong (median)", "rtt", "µs"),
        f"| peak RSS of the laptop process | {rss['openssh']:.1f} MB | {rss['openssh_same']:.1f} MB"
        f" | {rss['shiqi']:.1f} MB | {rss['shiqi'] / rss['openssh']:.2f}× |"
        f" {rss['shiqi'] / rss['openssh_same']:.2f}× |",
        "| of which, at the end: data (anonymous) + program code and libraries (file-backed) | "
        + " | ".join(f"{split[k][0]:.1f} + {split[k][1]:.1f} MB" for k in ("openssh", "openssh_same", "shiqi"))
        + f" | {split['shiqi'][0] / split['openssh'][0]:.2f}× data |"
        f" {split['shiqi'][0] / split['openssh_same'][0]:.2f}× data |",
        row("CPU seconds per GiB moved (quiet)", "cpu_per_gib", "s", "{:.2f}"),
    ]


def kafka_rows():
    """Kafka's perf tools three ways, alternating: OpenSSH forwarding the brokers' ports (the
    client does TLS), our tunnel doing the same (direct), and our local endpoint (the client
    speaks plaintext to 127.0.0.1, the tunnel does TLS). Goal: local >= 0.9x direct."""
    env = [("SHIQI_HOME", HOME)]
    direct, local, local_port = "benchkafka", "benchlocal", 19700
    laptop("shiqi-connect", "setup", direct, "--server", INFO["ssh_destination"], "--yes",
           "--force", "-q", "--endpoint", "direct", env=env)
    laptop("shiqi-connect", "setup", local, "--server", INFO["ssh_destination"], "--yes",
           "--force", "-q", "--endpoint", "local", "--endpoint-port", str(local_port), env=env)
    props = {
        "openssh": (os.path.join(HOME, direct, "client.properties"), "localhost:19094"),
        "direct": (os.path.join(HOME, direct, "client.properties"), "localhost:19094"),
        "local": (os.path.join(HOME, local, "client.properties"), f"127.0.0.1:{local_port}"),
    }
    topic = "app.bench"
    sh(STACK, "exec", "server", "--", "java", "-Xmx192m", "-cp", f"{INFO['kafka_libs']}/*",
       "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", INFO["kafka_bootstrap"],
       "--command-config", INFO["kafka_admin_properties"], "--create", "--if-not-exists",
       "--topic", topic, "--partitions", "3")
    java = ["java", "-Xmx256m", f"-Dlog4j2.configurationFile={REPO}/scripts/kafka/log4j2-tools.properties",
            "-cp", f"{INFO['kafka_libs']}/*"]
    records = 100_000

    def produce(kind):
        config, bootstrap = props[kind]
        out = laptop(*java, "org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
                     "--num-records", str(records), "--record-size", "1024", "--throughput", "-1",
                     "--producer.config", config, "--producer-props", "acks=1",
                     f"bootstrap.servers={bootstrap}").stdout
        last = [l for l in out.splitlines() if "records sent" in l][-1]
        return float(last.split("(")[1].split(" MB/sec")[0])

    # Fixed-rate produce latency as the Kafka proxies publish it (Kroxylicious: +0.17 ms mean,
    # +1.08 ms p99 for a pass-through proxy): 1 KiB records at LAT_RATE/s, acks=all, in µs.
    classes = java_classes("ProduceLatency.java")

    def latency(kind):
        config, bootstrap = props[kind]
        out = laptop("java", "-Xmx256m", "-cp", f"{classes}:{INFO['kafka_libs']}/*",
                     f"-Dlog4j2.configurationFile={REPO}/scripts/kafka/log4j2-tools.properties",
                     "ProduceLatency", config, bootstrap, topic, str(LAT_RATE), "1024",
                     str(LAT_SECONDS)).stdout
        r = json.loads(out.strip().splitlines()[-1])
        if r["failed"] or r["acked"] != r["sent"]:
            sys.exit(f"bench: {kind}: {r['failed']} of {r['sent']} records failed")
        return r

    def consume(kind):
        config, bootstrap = props[kind]
        out = laptop(*java, "org.apache.kafka.tools.ConsumerPerformance", "--topic", topic,
                     "--messages", str(records), "--bootstrap-server", bootstrap,
                     "--consumer.config", config, "--group", f"app.bench{time.time_ns()}",
                     "--hide-header").stdout
        return float(out.strip().splitlines()[-1].split(",")[3])

    cfg = os.path.join(HOME, direct, "ssh_config")
    kinds = ["openssh", "direct", "local"]
    results = {k: ([], [], []) for k in kinds}
    # OpenSSH and the direct tunnel take the same ports, so every kind takes its turn: one
    # round each, the order rotating.
    for r in range(RUNS):
        for kind in kinds[r % 3:] + kinds[:r % 3]:
            if kind == "openssh":
                laptop("ssh", "-fN", "-F", cfg, "shiqi-tunnel")
            else:
                laptop("shiqi-connect", "tunnel", "up", direct if kind == "direct" else local,
                       env=env)
            try:
                results[kind][0].append(produce(kind))
                results[kind][1].append(consume(kind))
                results[kind][2].append(latency(kind))
            finally:
                if kind == "openssh":
                    laptop("ssh", "-F", cfg, "-O", "exit", "shiqi-tunnel", check=False)
                else:
                    laptop("shiqi-connect", "tunnel", "down",
                           direct if kind == "direct" else local, env=env, check=False)
    med = {k: (statistics.median(v[0]), statistics.median(v[1])) for k, v in results.items()}
    (po, co), (pd, cd), (pl, cl) = med["openssh"], med["direct"], med["local"]

    def lat(kind, field):
        return statistics.median(r[field] for r in results[kind][2]) / 1000

    rows = [
        f"| Kafka perf tools, {records:,} × 1 KiB, 3 partitions, median of {RUNS} rotating rounds"
        " | `ssh -N` (baseline) | `tunnel up`, direct | `tunnel up`, local endpoint"
        " | direct ÷ ssh | local ÷ direct |",
        "|---|---|---|---|---|---|",
        f"| producer (acks=1) | {po:.1f} MB/s | {pd:.1f} MB/s | {pl:.1f} MB/s | {pd / po:.2f}× | {pl / pd:.2f}× |",
        f"| consumer | {co:.1f} MB/s | {cd:.1f} MB/s | {cl:.1f} MB/s | {cd / co:.2f}× | {cl / cd:.2f}× |",
        "",
        f"| Produce latency, 1 KiB at {LAT_RATE}/s for {LAT_SECONDS} s, acks=all, from each record's due"
        f" time (lower is better), median of {RUNS} rounds | `ssh -N` (baseline) | `tunnel up`, direct"
        " | `tunnel up`, local endpoint | direct − ssh | local − direct |",
        "|---|---|---|---|---|---|",
    ]
    for label, field in (("mean", "mean_us"), ("p50", "p50_us"), ("p99", "p99_us"),
                         ("p99.9", "p999_us")):
        o, d, l = lat("openssh", field), lat("direct", field), lat("local", field)
        rows.append(f"| {label} | {o:.2f} ms | {d:.2f} ms | {l:.2f} ms | {d - o:+.2f} ms | {l - d:+.2f} ms |")
    return rows


def java_classes(source):
    """scripts/bench/SOURCE compiled against the stack's Kafka jars, in the cache (world-readable:
    the laptop's user runs it), again only when the source or the jars change."""
    src = os.path.join(REPO, "scripts", "bench", source)
    libs = INFO["kafka_libs"]
    digest = hashlib.sha256(open(src, "rb").read() + "\n".join(sorted(os.listdir(libs))).encode())
    out = os.path.join(CACHE, "bench-java", digest.hexdigest()[:16])
    if not os.path.exists(os.path.join(out, source.replace(".java", ".class"))):
        os.makedirs(out, exist_ok=True)
        sh("javac", "-nowarn", "-d", out, "-cp", f"{libs}/*", src)
        sh("chmod", "-R", "a+rX", os.path.join(CACHE, "bench-java"))
    return out


MYSQL_CLIENT = r'''
import json, os, ssl as _ssl, sys, time, pymysql
port, user, tls_dir = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ssl = None
if tls_dir != "-":
    ssl = {"ca": os.path.join(tls_dir, "ca.crt"), "cert": os.path.join(tls_dir, "client.crt"),
           "key": os.path.join(tls_dir, "client.key"), "check_hostname": False}
def login():
    return pymysql.connect(host="127.0.0.1", port=port, user=user, ssl=ssl)
logins = []
for _ in range(20):
    t = time.perf_counter(); c = login(); c.cursor().execute("SELECT CURRENT_USER()"); c.close()
    logins.append(time.perf_counter() - t)
c = login(); cur = c.cursor()
for _ in range(200): cur.execute("SELECT 1")
t = time.perf_counter()
for _ in range(2000): cur.execute("SELECT 1"); cur.fetchall()
rtt = (time.perf_counter() - t) / 2000
cur.execute("SELECT REPEAT('x', 1048576)"); t = time.perf_counter()
for _ in range(20): cur.execute("SELECT REPEAT('x', 1048576)"); cur.fetchall()
mbps = 20 / (time.perf_counter() - t)
logins.sort()
print(json.dumps({"login": logins[len(logins) // 2], "rtt": rtt, "mbps": mbps}))
'''


def mysql_rows():
    """MySQL through the tunnel three ways, alternating: OpenSSH forwarding MySQL (the client
    does TLS with the certificate), our tunnel doing the same (direct), and our local endpoint
    (PyMySQL with no TLS settings; the tunnel does TLS). Per way: a login (connect, TLS,
    `SELECT CURRENT_USER()`, close; median of 20), the round trip of `SELECT 1` on an open
    connection (mean of 2,000), and 1 MiB results (20)."""
    env = [("SHIQI_HOME", HOME)]
    direct, local = "benchmydirect", "benchmylocal"
    for name, mode in ((direct, ["direct"]), (local, ["local", "--endpoint-port", "19750"])):
        laptop("shiqi-connect", "setup", name, "--server", INFO["ssh_destination"], "--yes",
               "--force", "-q", "--endpoint", *mode, env=env)
    cfg = os.path.join(HOME, direct, "ssh_config")
    kinds = ["openssh", "direct", "local"]
    results = {k: {"login": [], "rtt": [], "mbps": []} for k in kinds}
    for r in range(RUNS):
        for kind in kinds[r % 3:] + kinds[:r % 3]:
            name = local if kind == "local" else direct
            if kind == "openssh":
                laptop("ssh", "-fN", "-F", cfg, "shiqi-tunnel")
            else:
                laptop("shiqi-connect", "tunnel", "up", name, env=env)
            try:
                tls = "-" if kind == "local" else os.path.join(HOME, name)
                out = laptop(INFO["python"], "-c", MYSQL_CLIENT, "3306", name, tls).stdout
                for k, v in json.loads(out).items():
                    results[kind][k].append(v)
            finally:
                if kind == "openssh":
                    laptop("ssh", "-F", cfg, "-O", "exit", "shiqi-tunnel", check=False)
                else:
                    laptop("shiqi-connect", "tunnel", "down", name, env=env, check=False)
    med = {k: {m: statistics.median(v) for m, v in vals.items()} for k, vals in results.items()}
    o, d, l = med["openssh"], med["direct"], med["local"]
    return [
        f"| MySQL (PyMySQL), median of {RUNS} rotating rounds | `ssh -N`, client TLS (baseline)"
        " | `tunnel up`, direct (client TLS) | `tunnel up`, local endpoint (no client TLS)"
        " | direct ÷ ssh | local ÷ direct |",
        "|---|---|---|---|---|---|",
        f"| login: connect, TLS, `CURRENT_USER()` (lower is better) | {o['login'] * 1e3:.1f} ms"
        f" | {d['login'] * 1e3:.1f} ms | {l['login'] * 1e3:.1f} ms"
        f" | {d['login'] / o['login']:.2f}× | {l['login'] / d['login']:.2f}× |",
        f"| `SELECT 1` round trip (lower is better) | {o['rtt'] * 1e6:.0f} µs"
        f" | {d['rtt'] * 1e6:.0f} µs | {l['rtt'] * 1e6:.0f} µs"
        f" | {d['rtt'] / o['rtt']:.2f}× | {l['rtt'] / d['rtt']:.2f}× |",
        f"| 1 MiB results | {o['mbps']:.1f} MiB/s | {d['mbps']:.1f} MiB/s | {l['mbps']:.1f} MiB/s"
        f" | {d['mbps'] / o['mbps']:.2f}× | {l['mbps'] / d['mbps']:.2f}× |",
    ]


def main():
    which = sys.argv[1:] or ["setup", "tunnel", "kafka", "mysql"]
    rows = []
    for w in which:
        rows += {"setup": setup_rows, "tunnel": tunnel_rows, "kafka": kafka_rows,
                 "mysql": mysql_rows}[w]()
        rows.append("")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
