"""scripts/soak.d/soak.py — the soak's driver, started by scripts/soak (which checks the stack,
compiles Soak.java and finds a Python with matplotlib). It runs as root on the host and drives
the stack through `scripts/stack`, as tests/e2e does:

1. the multi-host shape (`kafka-shape hosts`), a profile of its own (`soak-XXXXXX`) set up with
   the local endpoint (and `--lifetime` when setup offers it), a topic with one partition led by
   each broker (replicas 3, min.insync.replicas 2), `tunnel up`;
2. on the laptop, through the endpoint: an idempotent Java producer and an idempotent librdkafka
   producer at a steady rate, a Java consumer in a KIP-848 group (`group.protocol=consumer`) and a
   librdkafka consumer in a classic group, a MySQL session (one query a second) and a fresh MySQL
   login every 10 s (scripts/soak.d/{Soak.java,rdkafka_client.py,mysql_client.py});
3. meanwhile: the daemon renews on its own; one broker is stopped and started; the tunnel's SSH
   connection is cut (its sshd processes on the server killed); the daemon is frozen (SIGSTOP,
   a laptop's sleep) — each one moved off any renewal that is due around it;
4. the report: records produced / acknowledged / consumed, lost and duplicated, client errors by
   kind, produce latency p50/p99 per minute and around each renewal, MySQL failures inside and
   outside the disturbance windows, renewals, the daemon's RSS and descriptors; as a table on
   stdout, OUT/soak.json and OUT/soak.svg. Exit 1 when a criterion fails (each printed with its
   threshold), 2 when the soak could not run.

Every client writes one line per event on its stdout (the format is in Soak.java); this driver
reads those files as they grow.
"""

import argparse
import collections
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.join(REPO, "scripts", "soak.d")
STACK = os.path.join(REPO, "scripts", "stack")

# The criteria (issue 44's "Done when"), shown next to every verdict.
P99_RATIO_MAX = 2.0         # produce p99 around a renewal / p99 of the two minutes either side
P99_FLOOR_MS = 5.0          # a baseline under this counts as this (2x of 2 ms is noise)
RSS_GROWTH_MAX = 0.10       # the daemon's RSS, from minute 10 (see daemon_figures) to the end
FD_GROWTH_MAX = 10          # the daemon's open descriptors, same span
RECOVERY_MAX_S = 120        # a cut or a freeze: the MySQL session queries again within this
# MySQL failures a disturbance may cause (the session's in-flight query and its reconnects while
# the tunnel comes back; the 10-second logins), per window.
CUT_FAILURES_MAX = 10
FREEZE_FAILURES_EXTRA = 6   # + 2 per 10 s frozen (both threads time out every 10 s)
# Window edges: a disturbance's window runs from its start to the first good MySQL query after
# it ends (or, for a broker, to `kafka-node up` returning), plus these seconds.
MYSQL_GRACE_S = 5
KAFKA_GRACE_S = 30
RENEWAL_BEFORE_S, RENEWAL_AFTER_S = 5, 30
BASELINE_S = 120            # the renewal's baseline: this long on either side of its window


# ---------------------------------------------------------------------------------------------
# The stack
# ---------------------------------------------------------------------------------------------

def run(*args, check=True, stdin=None, timeout=600):
    return subprocess.run(list(args), check=check, capture_output=True, text=True, input=stdin,
                          timeout=timeout)


def stack(*args, check=True, timeout=600):
    return run(STACK, *args, check=check, timeout=timeout)


def laptop(*args, env=(), check=True):
    cmd = [STACK, "exec", "laptop"]
    for k, v in env:
        cmd += ["--env", f"{k}={v}"]
    return run(*cmd, "--", *args, check=check)


def server(*args, check=True):
    return run(STACK, "exec", "server", "--", *args, check=check)


def info():
    out = stack("info").stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def die(msg, status=2):
    print(f"scripts/soak: {msg}", file=sys.stderr)
    sys.exit(status)


def log(msg):
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def parse_duration(text):
    m = re.fullmatch(r"(\d+)([smhd])", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"`{text}`: a number and s, m, h or d (10m, 2h)")
    return int(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def parse_time(text):
    """RFC 3339 (`2026-12-07T11:02:47.789505195Z`, any fraction) to epoch seconds."""
    import datetime
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", text)
    if not m:
        return None
    base = datetime.datetime.fromisoformat(m.group(1) + ("+00:00" if m.group(3) == "Z" else m.group(3)))
    return base.timestamp() + float("0." + (m.group(2) or "0"))


# ---------------------------------------------------------------------------------------------
# Numbers
# ---------------------------------------------------------------------------------------------

def percentile(values, q):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, max(0, math.ceil(q / 100 * len(v)) - 1))]


def ms(us):
    return None if us is None else round(us / 1000, 1)


def in_any(t, windows):
    return any(a <= t <= b for a, b in windows)


# ---------------------------------------------------------------------------------------------
# The clients' output
# ---------------------------------------------------------------------------------------------

class Client:
    """One client process on the laptop, its stdout and stderr in OUT/raw/."""

    def __init__(self, name, kind, raw_dir, argv):
        self.name, self.kind = name, kind
        self.out_path = os.path.join(raw_dir, f"{name}.out")
        self.err_path = os.path.join(raw_dir, f"{name}.err")
        self.stopped = False
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            # `scripts/stack exec` ends in exec: this pid becomes the client's own.
            self.proc = subprocess.Popen([STACK, "exec", "laptop", "--", *argv], stdout=out,
                                         stderr=err, stdin=subprocess.DEVNULL)

    def stop(self):
        self.stopped = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def died(self):
        """Whether it ended before the soak asked it to (a producer ends by itself when done)."""
        code = self.proc.poll()
        if code is None or self.stopped:
            return False
        return not (self.kind == "producer" and code == 0)

    def lines(self):
        try:
            with open(self.out_path, errors="replace") as f:
                for raw in f:
                    if raw.endswith("\n"):
                        yield raw.split()
        except FileNotFoundError:
            return


def read_producer(client):
    acked, failed, events, done = [], [], [], None
    for p in client.lines():
        if p[0] == "A" and len(p) >= 6:
            acked.append((int(p[1]), int(p[2]) / 1000, int(p[3]), int(p[4]), int(p[5])))
        elif p[0] == "F" and len(p) >= 5:
            failed.append((int(p[1]), int(p[2]) / 1000, int(p[3]), p[4]))
        elif p[0] in ("E", "R") and len(p) >= 3:
            events.append((p[0], int(p[1]) / 1000, p[2], " ".join(p[3:])))
        elif p[0] == "D" and len(p) >= 3:
            done = int(p[2])
    return {"acked": acked, "failed": failed, "events": events, "sent": done}


def read_consumer(client):
    records, events, groups = [], [], []
    for p in client.lines():
        if p[0] == "C" and len(p) >= 5:
            records.append((int(p[1]) / 1000, p[2], int(p[3]), int(p[4])))
        elif p[0] in ("E", "R") and len(p) >= 3:
            events.append((p[0], int(p[1]) / 1000, p[2], " ".join(p[3:])))
        elif p[0] == "G" and len(p) >= 4:
            groups.append((int(p[1]) / 1000, p[2], int(p[3])))
    return {"records": records, "events": events, "groups": groups}


def read_mysql(client):
    queries, logins, connections = [], [], []
    for p in client.lines():
        if p[0] in ("Q", "L") and len(p) >= 4:
            row = (int(p[1]) / 1000, p[2] == "ok", int(p[3]), p[4] if len(p) > 4 else "",
                   " ".join(p[5:]))
            (queries if p[0] == "Q" else logins).append(row)
        elif p[0] == "K" and len(p) >= 3:
            connections.append((int(p[1]) / 1000, p[2]))
    return {"queries": queries, "logins": logins, "connections": connections}


def log_kinds(path):
    """The clients' own log lines by kind: librdkafka's facility (`%3|…|FAIL|…`), log4j's level
    and logger (`[…] WARN … (org.apache.kafka.clients.NetworkClient)`)."""
    kinds = collections.Counter()
    try:
        lines = open(path, errors="replace").read().splitlines()
    except FileNotFoundError:
        return {}
    for line in lines:
        m = re.match(r"%(\d)\|[\d.]+\|([A-Z_]+)\|", line)
        if m:
            kinds[f"rdkafka level {m.group(1)} {m.group(2)}"] += 1
            continue
        m = re.match(r"\[[^\]]+\] (WARN|ERROR) .*\(([\w.$]+)\)\s*$", line)
        if m:
            kinds[f"{m.group(1)} {m.group(2).rsplit('.', 1)[-1]}"] += 1
    return dict(kinds.most_common())


# ---------------------------------------------------------------------------------------------
# The soak
# ---------------------------------------------------------------------------------------------

class Soak:
    def __init__(self, args):
        self.args = args
        self.info = info()
        self.name = args.name or "soak-%06x" % (int.from_bytes(os.urandom(3), "big"))
        self.home = os.path.join(self.info["laptop_home"], "soak", self.name)
        self.profile = os.path.join(self.home, self.name)
        self.topic = f"app.{self.name}.soak"
        self.out = os.path.abspath(args.out)
        self.raw = os.path.join(self.out, "raw")
        self.clients = {}
        self.events = []          # disturbances: {kind, start, end, recovered, detail}
        self.samples = []         # (t, rss_kb, fds) of the daemon
        self.states = []          # (t, phase) changes
        self.pid = None
        self.pids_seen = set()
        self.lifetime_supported = False
        self.cert = {}
        self.first_due = self.period = None
        self.status_end = None
        self.t0 = self.t_end = None
        self.stop_flag = threading.Event()
        self.cleanup = []
        self.notes = []

    # --- the stack ---------------------------------------------------------------------------

    def connect(self, *args, check=True):
        return laptop("shiqi-connect", *args, env=[("SHIQI_HOME", self.home)], check=check)

    def admin_tool(self, cls, *args, check=True):
        libs = self.info["kafka_libs"]
        return server("java", "-Xmx128m", "-XX:TieredStopAtLevel=1",
                      f"-Dlog4j2.configurationFile={REPO}/scripts/kafka/log4j2-tools.properties",
                      "-cp", f"{libs}/*", cls, "--bootstrap-server", self.info["kafka_bootstrap"],
                      "--command-config", self.info["kafka_admin_properties"], *args, check=check)

    def state(self):
        try:
            with open(os.path.join(self.profile, "tunnel.state.json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def prepare(self):
        a = self.args
        shape = self.info.get("kafka_shape", "localhost")
        if shape != "hosts":
            log("the multi-host shape: scripts/stack kafka-shape hosts")
            stack("kafka-shape", "hosts")
            self.cleanup.append(("the Kafka shape back to " + shape,
                                 lambda: stack("kafka-shape", shape, check=False)))
        laptop("mkdir", "-p", self.home)
        self.cleanup.append(("remove " + self.home, lambda: None if a.keep else
                             shutil.rmtree(self.home, ignore_errors=True)))
        help_text = laptop("shiqi-connect", "setup", "--help").stdout
        self.lifetime_supported = "--lifetime" in help_text
        extra = ["--endpoint", "local", "--endpoint-port", str(a.endpoint_port)]
        if self.lifetime_supported:
            extra += ["--lifetime", a.lifetime_text]
        else:
            msg = (f"WARNING: `shiqi-connect setup --help` lists no --lifetime: the certificate "
                   f"gets the agent's default lifetime and NO renewal will happen in this soak "
                   f"(asked for {a.lifetime_text})")
            log(msg)
            self.notes.append(msg)
        log(f"setup {self.name} ({' '.join(extra)})")
        out = self.connect("setup", self.name, "--server", self.info["ssh_destination"], "--yes",
                           *extra, check=False)
        if out.returncode != 0:
            die(f"setup failed:\n{out.stdout}{out.stderr}")
        self.cleanup.append(("revoke " + self.name, self.revoke))
        with open(os.path.join(self.profile, "profile.json")) as f:
            cert = json.load(f)["certificate"]
        nb, na = parse_time(cert["not_before"]), parse_time(cert["not_after"])
        self.cert = {"serial": cert.get("serial"), "not_before": nb, "not_after": na,
                     "lifetime_s": na - nb}
        setup_done = time.time()

        log(f"topic {self.topic}: a partition led by each broker, replicas 3, min.insync 2")
        self.admin_tool("org.apache.kafka.tools.TopicCommand", "--create", "--topic", self.topic,
                        "--replica-assignment", "1:2:3,2:3:1,3:1:2",
                        "--config", "min.insync.replicas=2")
        self.cleanup.append(("delete the topic", lambda: self.admin_tool(
            "org.apache.kafka.tools.TopicCommand", "--delete", "--topic", self.topic,
            check=False)))

        log(f"tunnel up {self.name}")
        self.cleanup.append(("tunnel down", lambda: self.connect("tunnel", "down", self.name,
                                                                  check=False)))
        out = self.connect("tunnel", "up", self.name, check=False)
        if out.returncode != 0:
            die(f"tunnel up failed:\n{out.stdout}{out.stderr}")
        status = self.status()
        if not status or status.get("ok") is not True:
            die(f"tunnel status is not ok after up:\n{json.dumps(status, indent=2)}")
        self.pid = status["tunnel"]["pid"]
        self.pids_seen.add(self.pid)
        self.status_start = status
        # Never leave the daemon stopped, whatever ends the soak during a freeze.
        self.cleanup.append(("wake the daemon", lambda: os.kill(self.pid, signal.SIGCONT)))
        self.setup_done = setup_done
        log(f"certificate valid {fmt_duration(self.cert['lifetime_s'])} (not_before to not_after)")

    def status(self):
        out = self.connect("--json", "tunnel", "status", self.name, check=False)
        try:
            return json.loads(out.stdout)
        except ValueError:
            return None

    def revoke(self):
        if self.args.keep:
            return
        self.connect("tunnel", "down", self.name, check=False)
        self.connect("revoke", self.name, "--server", self.info["ssh_destination"], "--yes",
                     check=False)

    # --- clients -----------------------------------------------------------------------------

    def start_clients(self):
        a, libs, py = self.args, self.info["kafka_libs"], self.info["python"]
        props = os.path.join(self.profile, "client.properties")
        conf = os.path.join(self.profile, "librdkafka.conf")
        java = ["java", "-Xmx128m", "-XX:TieredStopAtLevel=1",
                f"-Dlog4j2.configurationFile={REPO}/scripts/kafka/log4j2-tools.properties",
                "-cp", f"{a.classes}:{libs}/*", "Soak"]
        rdk = [py, os.path.join(HERE, "rdkafka_client.py")]
        group = f"app.{self.name}"
        specs = [
            ("java-kip848", "consumer", java + ["consume", props, self.topic, f"{group}.kip848",
                                                "consumer"]),
            ("rdkafka-classic", "consumer", rdk + ["consume", conf, self.topic,
                                                   f"{group}.classic", "classic"]),
            ("mysql", "mysql", [py, os.path.join(HERE, "mysql_client.py"), "127.0.0.1",
                                self.mysql_port(), self.name]),
        ]
        for name, kind, argv in specs:
            self.clients[name] = Client(name, kind, self.raw, argv)
        # Producers last, so that the run's clock starts with them.
        seconds = str(int(a.minutes * 60))
        self.t0 = time.time()
        self.t_end = self.t0 + a.minutes * 60
        for name, argv in [
            ("java", java + ["produce", props, self.topic, "java", str(a.rate), seconds,
                             str(a.size)]),
            ("rdkafka", rdk + ["produce", conf, self.topic, "rdkafka", str(a.rate), seconds,
                               str(a.size)]),
        ]:
            self.clients[name] = Client(name, "producer", self.raw, argv)
        self.cleanup.append(("stop the clients", self.stop_clients))

    def mysql_port(self):
        text = open(os.path.join(self.profile, "my.cnf")).read()
        m = re.search(r"^port=(\d+)", text, re.M)
        return m.group(1) if m else "3306"

    def stop_clients(self, kinds=("consumer", "mysql", "producer")):
        for c in self.clients.values():
            if c.kind in kinds:
                c.stop()
        for c in self.clients.values():
            if c.kind in kinds:
                c.wait(40)

    # --- watching ----------------------------------------------------------------------------

    def sample(self):
        """The daemon's RSS and descriptors (/proc: the laptop is a network namespace only)."""
        st = self.state()
        if st and st.get("pid") and st["pid"] != self.pid:
            self.notes.append(f"the daemon's pid changed: {self.pid} -> {st['pid']}")
            self.pid = st["pid"]
            self.pids_seen.add(self.pid)
        try:
            status = open(f"/proc/{self.pid}/status").read()
            rss = int(re.search(r"^VmRSS:\s+(\d+)", status, re.M).group(1))
            fds = len(os.listdir(f"/proc/{self.pid}/fd"))
            self.samples.append((time.time(), rss, fds))
        except (OSError, AttributeError):
            pass

    def watch_state(self):
        last = None
        while not self.stop_flag.is_set():
            st = self.state()
            due = (st or {}).get("renewal", {}).get("due")
            if self.first_due is None and due:
                # The daemon's own schedule, for the certificate setup signed: the renewals the
                # soak should see follow from it.
                self.first_due = parse_time(due)
                self.period = max(60.0, self.first_due - self.setup_done)
                log(f"the daemon renews at {time.strftime('%H:%M:%S', time.localtime(self.first_due))}"
                    f", every ~{fmt_duration(self.period)}")
            phase = st.get("phase") if st else "gone"
            if phase != last:
                self.states.append((time.time(), phase))
                last = phase
            self.stop_flag.wait(0.5)

    def next_due(self):
        st = self.state()
        due = st and st.get("renewal", {}).get("due")
        return parse_time(due) if due else None

    def first_good_query_after(self, t, limit):
        """When the MySQL session next answered after t (None if not by t + limit)."""
        deadline = time.time() + limit
        while time.time() < deadline:
            for row in read_mysql(self.clients["mysql"])["queries"]:
                if row[0] >= t and row[1]:
                    return row[0] + row[2] / 1e6
            time.sleep(1)
        return None

    # --- disturbances ------------------------------------------------------------------------

    def plan(self):
        a = self.args
        full = a.minutes >= 20
        cuts = a.cuts if a.cuts is not None else (2 if full else 1)
        restarts = a.restarts if a.restarts is not None else 1
        freeze = a.freeze_secs if a.freeze_secs is not None else (60 if full else 0)
        kinds = ["restart"] * restarts + ["cut"] * cuts + (["freeze"] if freeze else [])
        # Spread over the run, in an order that separates the cuts: restart, cut, freeze, cut…
        order = []
        while kinds:
            for k in ("restart", "cut", "freeze"):
                if k in kinds:
                    order.append(k)
                    kinds.remove(k)
        n = len(order)
        return [(a.minutes * 60 * (i + 1) / (n + 1), k) for i, k in enumerate(order)], freeze

    def disturb(self):
        plan, freeze = self.plan()
        for offset, kind in plan:
            if self.stop_flag.wait(max(0, self.t0 + offset - time.time())):
                return
            # Not within a renewal: wait for it to pass, unless the run is nearly over.
            said = False
            while time.time() < self.t_end - 90:
                due = self.next_due()
                done = renewals_from_log(self.profile)[0]
                now = time.time()
                # A freeze lasts longer: the renewal must not fall due while the daemon sleeps.
                ahead = 60 + (freeze if kind == "freeze" else 0)
                near_due = due is not None and due - ahead <= now <= due + 45
                just_done = bool(done) and now <= done[-1]["end"] + 45
                if not (near_due or just_done):
                    break
                if not said:
                    log(f"{kind}: waiting for a renewal to pass")
                    said = True
                if self.stop_flag.wait(5):
                    return
            if time.time() > self.t_end - 45:
                self.notes.append(f"{kind} not done: too close to the end of the run")
                continue
            try:
                getattr(self, f"do_{kind}")(freeze)
            except (subprocess.SubprocessError, OSError) as e:
                detail = getattr(e, "stderr", None) or e
                self.notes.append(f"{kind} failed: {str(detail).strip()[-300:]}")
                log(self.notes[-1])

    def do_restart(self, _freeze):
        n = str(self.args.broker)
        start = time.time()
        log(f"disturbance: Kafka node {n} down")
        stack("kafka-node", "down", n)
        self.stop_flag.wait(20)
        log(f"disturbance: Kafka node {n} up")
        out = stack("kafka-node", "up", n, check=False)
        end = time.time()
        self.events.append({"kind": "restart", "start": start, "end": end, "recovered": end,
                            "detail": f"broker {n} stopped {end - start:.0f} s",
                            "ok": out.returncode == 0})
        if out.returncode != 0:
            self.notes.append(f"kafka-node up {n} failed: {out.stderr.strip()[-300:]}")

    def do_cut(self, _freeze):
        user = self.info["server_user"]
        found = server("pgrep", "-f", f"sshd: {user}", check=False).stdout.split()
        start = time.time()
        if not found:
            self.notes.append("cut: no sshd process serves the tunnel")
            return
        log(f"disturbance: cut the SSH connection (kill -KILL sshd {' '.join(found)})")
        server("kill", "-KILL", *found, check=False)
        back = self.first_good_query_after(start + 0.5, RECOVERY_MAX_S)
        self.events.append({"kind": "cut", "start": start, "end": start,
                            "recovered": back, "detail": f"sshd {' '.join(found)} killed",
                            "ok": back is not None})
        log(f"  the MySQL session answered again after "
            f"{'%.1f s' % (back - start) if back else 'NOT within %d s' % RECOVERY_MAX_S}")

    def do_freeze(self, freeze):
        pid = self.pid
        start = time.time()
        log(f"disturbance: freeze the daemon (kill -STOP {pid}) for {freeze} s")
        os.kill(pid, signal.SIGSTOP)
        try:
            self.stop_flag.wait(freeze)
        finally:
            os.kill(pid, signal.SIGCONT)
        end = time.time()
        back = self.first_good_query_after(end, RECOVERY_MAX_S)
        self.events.append({"kind": "freeze", "start": start, "end": end, "recovered": back,
                            "detail": f"SIGSTOP {freeze} s", "ok": back is not None})
        log(f"  SIGCONT; the MySQL session answered again after "
            f"{'%.1f s' % (back - end) if back else 'NOT within %d s' % RECOVERY_MAX_S}")

    # --- the run -----------------------------------------------------------------------------

    def progress(self, minute):
        parts = []
        for name in ("java", "rdkafka"):
            acked = read_producer(self.clients[name])["acked"]
            recent = [r[2] for r in acked if r[1] >= self.t0 + (minute - 1) * 60]
            parts.append(f"{name} {len(acked)} acked (p99 {ms(percentile(recent, 99))} ms)")
        for name in ("java-kip848", "rdkafka-classic"):
            parts.append(f"{name} {len(read_consumer(self.clients[name])['records'])}")
        my = read_mysql(self.clients["mysql"])
        parts.append(f"mysql fail {sum(1 for r in my['queries'] + my['logins'] if not r[1])}")
        if self.samples:
            parts.append(f"daemon {self.samples[-1][1] // 1024} MB {self.samples[-1][2]} fds")
        parts.append(f"renewals {len(renewals_from_log(self.profile)[0])}")
        log(f"minute {minute}: " + ", ".join(parts))

    def run(self):
        a = self.args
        os.makedirs(self.raw, exist_ok=True)
        for f in os.listdir(self.raw):
            os.remove(os.path.join(self.raw, f))
        try:
            self.prepare()
            self.sample()
            self.start_clients()
            log(f"running {a.minutes:g} min: {a.rate:g} records/s per producer, "
                f"plan {', '.join(f'{k} at {o / 60:.1f} min' for o, k in self.plan()[0])}")
            watcher = threading.Thread(target=self.watch_state, daemon=True)
            watcher.start()
            disturber = threading.Thread(target=self.disturb, daemon=True)
            disturber.start()
            minute = 0
            while time.time() < self.t_end:
                self.sample()
                if int((time.time() - self.t0) // 60) > minute:
                    minute += 1
                    self.progress(minute)
                for c in self.clients.values():
                    if c.died() and not getattr(c, "reported", False):
                        c.reported = True
                        self.notes.append(f"client {c.name} exited early (status {c.proc.returncode})")
                        log(self.notes[-1])
                time.sleep(5)
            disturber.join(timeout=RECOVERY_MAX_S + 60)
            log("the producers finish (flush)")
            for c in self.clients.values():
                if c.kind == "producer":
                    c.wait(180)
            self.sample()
            self.catch_up()
            self.stop_flag.set()
            self.stop_clients(("consumer", "mysql"))
            self.sample()
            self.status_end = self.status()
            shutil.copy(os.path.join(self.profile, "tunnel.log"), os.path.join(self.raw, "tunnel.log"))
            return self.report()
        finally:
            self.stop_flag.set()
            for what, action in reversed(self.cleanup):
                try:
                    action()
                except Exception as e:  # noqa: BLE001 — clean up the rest regardless
                    log(f"cleanup: {what}: {e}")

    def catch_up(self):
        """Until both groups have read every acknowledged record (3 minutes at most)."""
        want = set()
        for name in ("java", "rdkafka"):
            want |= {f"{name}:{r[0]}" for r in read_producer(self.clients[name])["acked"]}
        deadline = time.time() + 180
        while time.time() < deadline:
            missing = {}
            for name in ("java-kip848", "rdkafka-classic"):
                seen = {r[1] for r in read_consumer(self.clients[name])["records"]}
                missing[name] = len(want - seen)
            if not any(missing.values()):
                return
            time.sleep(2)
        log(f"the consumers had not read everything after 3 minutes: missing {missing}")

    # --- the report --------------------------------------------------------------------------

    def report(self):
        a, t0 = self.args, self.t0
        producers = {n: read_producer(self.clients[n]) for n in ("java", "rdkafka")}
        consumers = {n: read_consumer(self.clients[n]) for n in ("java-kip848", "rdkafka-classic")}
        my = read_mysql(self.clients["mysql"])
        renewals, renewal_failures = renewals_from_log(self.profile)
        criteria = []

        def criterion(name, value, threshold, ok, judged=True):
            criteria.append({"name": name, "value": value, "threshold": threshold,
                             "ok": bool(ok) if judged else None})

        # Windows: when each disturbance was felt.
        kafka_windows, mysql_windows = [], []
        for e in self.events:
            end = e["recovered"] or (e["end"] + RECOVERY_MAX_S)
            e["kafka_window"] = [e["start"] - 2, end + KAFKA_GRACE_S]
            kafka_windows.append(e["kafka_window"])
            if e["kind"] in ("cut", "freeze"):
                e["mysql_window"] = [e["start"] - 1, end + MYSQL_GRACE_S]
                mysql_windows.append(e["mysql_window"])
        renewal_windows = [[r["start"] - RENEWAL_BEFORE_S, r["end"] + RENEWAL_AFTER_S]
                           for r in renewals]

        for e in self.events:
            e["produce_max_ms"] = {
                n: ms(max((x[2] for x in p["acked"] if in_any(x[1], [e["kafka_window"]])), default=None))
                for n, p in producers.items()}

        # Records: produced, acknowledged, consumed, lost, duplicated.
        records = {}
        positions = collections.defaultdict(set)   # key -> {(partition, offset)} as read
        for c in consumers.values():
            for _t, key, part, off in c["records"]:
                positions[key].add((part, off))
        for pname, p in producers.items():
            acked = {r[0] for r in p["acked"]}
            row = {"sent": p["sent"], "acknowledged": len(acked), "failed": len(p["failed"]),
                   "consumed": {}, "lost": {}, "redelivered": {}}
            for cname, c in consumers.items():
                keys = [k for _t, k, _p, _o in c["records"] if k.startswith(pname + ":")]
                seqs = {int(k.split(":", 1)[1]) for k in keys}
                row["consumed"][cname] = len(seqs)
                row["lost"][cname] = len(acked - seqs)
                row["redelivered"][cname] = len(keys) - len(seqs)
            dups = [k for k, pos in positions.items() if k.startswith(pname + ":") and len(pos) > 1]
            row["duplicates"] = len(dups)
            row["duplicate_examples"] = sorted(dups)[:5]
            row["lost_examples"] = sorted(acked - {int(k.split(":", 1)[1]) for k in positions
                                                   if k.startswith(pname + ":")})[:5]
            records[pname] = row
            lost = max(row["lost"].values()) if row["lost"] else 0
            criterion(f"{pname}: records lost (acknowledged, never read by a group)", lost, "= 0",
                      lost == 0)
            criterion(f"{pname}: duplicates (one record at two offsets)", row["duplicates"], "= 0",
                      row["duplicates"] == 0)
            criterion(f"{pname}: deliveries failed", row["failed"], "= 0", row["failed"] == 0)

        # Errors by kind, and client restarts (a client made again, or a process that died).
        errors, restarts = {}, 0
        for name, data in list(producers.items()) + list(consumers.items()):
            kinds = collections.Counter(e[2] for e in data["events"] if e[0] == "E")
            kinds.update(f"delivery {f[3]}" for f in data.get("failed", []))
            restarts += sum(1 for e in data["events"] if e[0] == "R")
            errors[name] = {"errors": dict(kinds.most_common()),
                            "log": log_kinds(self.clients[name].err_path)}
        died = [n for n, c in self.clients.items() if c.died()]
        restarts += len(died)
        criterion("client restarts (made again after a fatal error, or died)", restarts, "= 0",
                  restarts == 0)

        # Latency: per minute, per renewal.
        minutes = int(math.ceil(a.minutes))
        per_minute = {}
        for pname, p in producers.items():
            rows = []
            for m in range(minutes):
                lat = [r[2] for r in p["acked"] if t0 + m * 60 <= r[1] < t0 + (m + 1) * 60]
                span = (t0 + m * 60, t0 + (m + 1) * 60)
                marks = [e["kind"] for e in self.events
                         if e["kafka_window"][0] < span[1] and e["kafka_window"][1] > span[0]]
                marks += ["renewal" for w in renewal_windows if w[0] < span[1] and w[1] > span[0]]
                if m == 0:
                    marks.append("warm-up")  # connections, metadata, the JIT: never judged
                rows.append({"minute": m + 1, "count": len(lat), "p50_ms": ms(percentile(lat, 50)),
                             "p99_ms": ms(percentile(lat, 99)), "max_ms": ms(max(lat) if lat else None),
                             "events": sorted(set(marks))})
            per_minute[pname] = rows
        quiet_p99 = {}
        for pname, rows in per_minute.items():
            quiet = [r["p99_ms"] for r in rows if not r["events"] and r["p99_ms"] is not None]
            quiet_p99[pname] = percentile(quiet, 50)
        around = []
        for r, w in zip(renewals, renewal_windows):
            disturbed = [e["kind"] for e in self.events
                         if e["kafka_window"][0] < w[1] and e["kafka_window"][1] > w[0]]
            row = {"at": r["start"], "took_s": round(r["end"] - r["start"], 1),
                   "what": r["what"], "disturbed_by": disturbed, "producers": {}}
            for pname, p in producers.items():
                inside = [x[2] for x in p["acked"] if w[0] <= x[1] <= w[1]]
                base_windows = [(w[0] - BASELINE_S, w[0]), (w[1], w[1] + BASELINE_S)]
                base = [x[2] for x in p["acked"] if in_any(x[1], base_windows)
                        and x[1] >= t0 + 60 and not in_any(x[1], kafka_windows)
                        and not in_any(x[1], [v for v in renewal_windows if v is not w])]
                p99_in, p99_base = ms(percentile(inside, 99)), ms(percentile(base, 99))
                if p99_base is None or len(base) < 100:
                    p99_base = quiet_p99.get(pname)
                ratio = None
                if p99_in is not None and p99_base is not None:
                    ratio = round(p99_in / max(p99_base, P99_FLOOR_MS), 2)
                row["producers"][pname] = {"p99_ms": p99_in, "baseline_p99_ms": p99_base,
                                           "ratio": ratio, "samples": len(inside)}
                label = (f"{pname}: p99 around the renewal at +{(r['start'] - t0) / 60:.1f} min / "
                         f"p99 of the minutes either side")
                criterion(label, ratio, f"<= {P99_RATIO_MAX:g} (baseline floor {P99_FLOOR_MS:g} ms)",
                          ratio is not None and ratio <= P99_RATIO_MAX, judged=not disturbed)
            around.append(row)

        # Renewals: as many as the daemon's schedule fits between setup and now, less what a
        # freeze may have delayed (a renewal takes a second or two, and each restarts the clock).
        if self.period is None:
            self.period = self.cert["lifetime_s"] * 2 / 3
        span = time.time() - self.setup_done
        slack = (self.plan()[1] or 0) + 10
        need = int((span - slack) / (self.period + 2))
        if self.lifetime_supported and self.cert["lifetime_s"] < 86400:
            criterion(f"renewals (one every ~{fmt_duration(self.period)} over "
                      f"{fmt_duration(span)} since setup)", len(renewals), f">= {need}",
                      len(renewals) >= need)
        else:
            criterion("renewals", len(renewals), "not judged: setup has no --lifetime", True,
                      judged=False)
        criterion("renewal attempts that failed", len(renewal_failures), "(reported)", True,
                  judged=False)

        # MySQL.
        fails = [("query", r) for r in my["queries"] if not r[1]] + \
                [("login", r) for r in my["logins"] if not r[1]]
        outside = [(k, r) for k, r in fails if not in_any(r[0], mysql_windows)]
        criterion("MySQL failures outside the cut/freeze windows", len(outside), "= 0", not outside)
        mysql_by_window = []
        for e in self.events:
            if "mysql_window" not in e:
                continue
            n = sum(1 for _k, r in fails if e["mysql_window"][0] <= r[0] <= e["mysql_window"][1])
            bound = CUT_FAILURES_MAX if e["kind"] == "cut" else \
                FREEZE_FAILURES_EXTRA + 2 * math.ceil((e["end"] - e["start"]) / 10)
            e["mysql_failures"] = n
            mysql_by_window.append({"kind": e["kind"], "at_min": round((e["start"] - t0) / 60, 1),
                                    "failures": n, "bound": bound})
            criterion(f"MySQL failures in the {e['kind']} at +{(e['start'] - t0) / 60:.1f} min", n,
                      f"<= {bound}", n <= bound)
            criterion(f"the {e['kind']} at +{(e['start'] - t0) / 60:.1f} min: MySQL answers again",
                      None if not e["recovered"] else round(e["recovered"] - e["end"], 1),
                      f"within {RECOVERY_MAX_S} s", e["recovered"] is not None)
        for e in self.events:
            if e["kind"] == "restart":
                criterion(f"broker restart at +{(e['start'] - t0) / 60:.1f} min", e["detail"],
                          "kafka-node up succeeds", e["ok"])
        planned = collections.Counter(k for _o, k in self.plan()[0])
        done = collections.Counter(e["kind"] for e in self.events)
        criterion("disturbances done as planned", dict(done), dict(planned), done == planned)

        # What `tunnel status` says at the end (a real login through every forward).
        end = self.status_end or {}
        criterion("tunnel status at the end", end.get("ok"), "ok: true", end.get("ok") is True)

        # The daemon.
        daemon = self.daemon_figures(renewals)
        criterion("the daemon lived through the soak (one pid)", sorted(self.pids_seen), "one pid",
                  len(self.pids_seen) == 1)
        if daemon.get("rss_growth") is not None:
            criterion(f"daemon RSS growth from +{daemon['ref_min']:g} min to the end",
                      f"{daemon['rss_growth'] * 100:+.1f}%", f"< {RSS_GROWTH_MAX * 100:g}%",
                      daemon["rss_growth"] < RSS_GROWTH_MAX)
            criterion(f"daemon open descriptors growth from +{daemon['ref_min']:g} min to the end",
                      daemon["fd_growth"], f"<= {FD_GROWTH_MAX}", daemon["fd_growth"] <= FD_GROWTH_MAX)

        result = {
            "profile": self.name, "topic": self.topic, "minutes": a.minutes, "rate": a.rate,
            "size": a.size, "started": t0, "ended": time.time(),
            "lifetime": {"asked": a.lifetime_text, "setup_offers_it": self.lifetime_supported,
                         "certificate_s": self.cert["lifetime_s"]},
            "records": records, "errors": errors, "client_restarts": restarts, "clients_died": died,
            "latency_per_minute": per_minute, "quiet_minute_p99_ms": quiet_p99,
            "renewals": [{**r, "at_min": round((r["start"] - t0) / 60, 2)} for r in renewals],
            "renewal_failures": renewal_failures, "around_renewals": around,
            "disturbances": self.events, "mysql": {
                "queries": len(my["queries"]),
                "queries_failed": sum(1 for r in my["queries"] if not r[1]),
                "logins": len(my["logins"]),
                "logins_failed": sum(1 for r in my["logins"] if not r[1]),
                "session_connections": len(my["connections"]),
                "failures_by_kind": dict(collections.Counter(r[3] for _k, r in fails)),
                "by_window": mysql_by_window,
                "outside_windows": [{"what": k, "at": r[0], "kind": r[3], "text": r[4]}
                                    for k, r in outside],
                "query_p99_ms": ms(percentile([r[2] for r in my["queries"] if r[1]], 99)),
                "login_p99_ms": ms(percentile([r[2] for r in my["logins"] if r[1]], 99)),
            },
            "status_end_renewal": ((self.status_end or {}).get("tunnel") or {}).get("renewal"),
            "daemon": daemon, "daemon_log": daemon_log_kinds(self.profile),
            "tunnel_phases": self.states, "notes": self.notes,
            "criteria": criteria,
            "series": self.series(producers, my),
            "passed": all(c["ok"] is not False for c in criteria),
        }
        return result

    def daemon_figures(self, renewals):
        """RSS and descriptors at start and end, and their growth from a reference point: minute
        10 (a fifth of a shorter run), or after the first renewal when that comes later and
        leaves two minutes to compare (the first renewal's TLS setup is not a leak)."""
        s = self.samples
        if len(s) < 2:
            return {}
        dur = s[-1][0] - self.t0
        ref_s = min(600, max(60, dur / 5))
        if renewals:
            after_first = renewals[0]["end"] + 30 - self.t0
            if ref_s < after_first < dur - 120:
                ref_s = after_first
        near = [x for x in s if abs(x[0] - (self.t0 + ref_s)) <= 30] or [s[0]]
        last = [x for x in s if x[0] >= s[-1][0] - 60]
        ref_rss = percentile([x[1] for x in near], 50)
        end_rss = percentile([x[1] for x in last], 50)
        ref_fd = percentile([x[2] for x in near], 50)
        end_fd = percentile([x[2] for x in last], 50)
        return {"pid": self.pid, "start_rss_kb": s[0][1], "start_fds": s[0][2],
                "end_rss_kb": s[-1][1], "end_fds": s[-1][2], "max_rss_kb": max(x[1] for x in s),
                "ref_min": round(ref_s / 60, 1), "ref_rss_kb": ref_rss, "ref_fds": ref_fd,
                "rss_growth": round((end_rss - ref_rss) / ref_rss, 4) if ref_rss else None,
                "fd_growth": end_fd - ref_fd}

    def series(self, producers, my):
        """Ten-second buckets for the chart."""
        out = {"latency": {}, "daemon": [[round(t - self.t0, 1), rss, fds] for t, rss, fds in self.samples],
               "mysql_failures": [round(r[0] - self.t0, 1) for r in my["queries"] + my["logins"]
                                  if not r[1]]}
        for pname, p in producers.items():
            buckets = collections.defaultdict(list)
            for r in p["acked"]:
                buckets[int((r[1] - self.t0) // 10)].append(r[2])
            out["latency"][pname] = [[b * 10 + 5, ms(percentile(v, 50)), ms(percentile(v, 99))]
                                     for b, v in sorted(buckets.items())]
        return out


def renewals_from_log(profile):
    """The daemon's renewals from its log: `renewing the certificate` then `renewed: …`."""
    done, failed, start = [], [], None
    try:
        lines = open(os.path.join(profile, "tunnel.log"), errors="replace").read().splitlines()
    except FileNotFoundError:
        return done, failed
    for line in lines:
        t = parse_time(line.split(" ", 1)[0])
        if t is None:
            continue
        if "renewing the certificate" in line:
            start = t
        elif "renewed: " in line:
            done.append({"start": start or t, "end": t, "what": line.split("renewed: ", 1)[1]})
            start = None
        elif "cannot renew the certificate" in line:
            failed.append({"at": t, "what": line.split("cannot renew", 1)[1][:300]})
            start = None
    return done, failed


def daemon_log_kinds(profile):
    """The daemon's WARN and ERROR lines by kind (the message up to its first detail)."""
    kinds = collections.Counter()
    try:
        lines = open(os.path.join(profile, "tunnel.log"), errors="replace").read().splitlines()
    except FileNotFoundError:
        return {}
    for line in lines:
        m = re.match(r"\S+\s+(WARN|ERROR) (\S+): (.*)", line)
        if m:
            # The message without its fields (`port=…`), numbers and addresses, as a kind.
            text = re.sub(r"\s\w+=\S+", "", m.group(3))
            text = re.sub(r"https?://\S+|[\d.:]*\d[\d.:]*", "N", text)
            kinds[f"{m.group(1)} {text[:90].strip()}"] += 1
    return dict(kinds.most_common())


def fmt_duration(s):
    s = int(round(s))
    if s >= 86400:
        return f"{s / 86400:.1f} d"
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    if s >= 60:
        return f"{s // 60} min {s % 60} s" if s % 60 else f"{s // 60} min"
    return f"{s} s"


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------

def summary(r):
    lines = []
    add = lines.append
    add(f"soak {r['profile']}: {r['minutes']:g} min, {r['rate']:g} records/s per producer "
        f"({r['size']} bytes); certificates valid {fmt_duration(r['lifetime']['certificate_s'])} "
        f"from not_before to not_after, "
        f"{'--lifetime ' + r['lifetime']['asked'] if r['lifetime']['setup_offers_it'] else 'setup has no --lifetime'}")
    add("")
    add("records      sent   acked  failed  read(kip848/classic)  lost  duplicates  redelivered")
    for p, row in r["records"].items():
        c = row["consumed"]
        add(f"  {p:<8} {row['sent'] or 0:>7} {row['acknowledged']:>7} {row['failed']:>7}  "
            f"{c.get('java-kip848', 0):>8}/{c.get('rdkafka-classic', 0):<8}    "
            f"{max(row['lost'].values()):>5} {row['duplicates']:>11} "
            f"{sum(row['redelivered'].values()):>12}")
    add("")
    add("produce latency per minute, ms (p50 / p99), from the time each record was due:")
    mins = r["latency_per_minute"]
    names = list(mins)
    add("  min  " + "  ".join(f"{n:>16}" for n in names) + "  events")
    for i in range(len(mins[names[0]])):
        cells = []
        for n in names:
            row = mins[n][i]
            cells.append(f"{fmt_ms(row['p50_ms']):>7} /{fmt_ms(row['p99_ms']):>7}")
        ev = sorted(set(mins[names[0]][i]["events"]) | set(mins[names[-1]][i]["events"]))
        add(f"  {i + 1:>3}  " + "  ".join(f"{c:>16}" for c in cells) + "  " + ",".join(ev))
    add(f"  quiet minutes' median p99: " + ", ".join(
        f"{n} {fmt_ms(v)} ms" for n, v in r["quiet_minute_p99_ms"].items()))
    add("")
    add(f"renewals: {len(r['renewals'])}" + (f", failed attempts {len(r['renewal_failures'])}"
                                              if r["renewal_failures"] else ""))
    for row in r["around_renewals"]:
        cells = ", ".join(f"{n} p99 {fmt_ms(v['p99_ms'])} ms vs {fmt_ms(v['baseline_p99_ms'])} ms "
                          f"(x{v['ratio']})" for n, v in row["producers"].items())
        dist = f" [during {', '.join(row['disturbed_by'])}: not judged]" if row["disturbed_by"] else ""
        add(f"  +{(row['at'] - r['started']) / 60:5.1f} min, took {row['took_s']} s: {cells}{dist}")
    add("")
    add("disturbances:")
    for e in r["disturbances"]:
        back = "—" if not e["recovered"] else f"{e['recovered'] - e['end']:.1f} s"
        extra = f", MySQL failures {e['mysql_failures']}" if "mysql_failures" in e else ""
        worst = ", ".join(f"{n} {fmt_ms(v)} ms" for n, v in e.get("produce_max_ms", {}).items())
        add(f"  +{(e['start'] - r['started']) / 60:5.1f} min {e['kind']:<8} {e['detail']}; "
            f"back after {back}{extra}; slowest produce {worst}")
    m = r["mysql"]
    add("")
    add(f"MySQL: {m['queries']} session queries ({m['queries_failed']} failed, "
        f"{m['session_connections']} connections), {m['logins']} fresh logins "
        f"({m['logins_failed']} failed); p99 query {fmt_ms(m['query_p99_ms'])} ms, "
        f"login {fmt_ms(m['login_p99_ms'])} ms")
    if m["failures_by_kind"]:
        add("  failures by kind: " + ", ".join(f"{k} {v}" for k, v in m["failures_by_kind"].items()))
    add("")
    add("client errors by kind (application-visible; then the client's own log warnings):")
    for name, e in r["errors"].items():
        errs = ", ".join(f"{k} {v}" for k, v in e["errors"].items()) or "none"
        logs = ", ".join(f"{k} {v}" for k, v in list(e["log"].items())[:6]) or "none"
        add(f"  {name:<16} {errs}")
        add(f"  {'':<16} log: {logs}")
    d = r["daemon"]
    if d:
        add("")
        add(f"daemon pid {d['pid']}: RSS {d['start_rss_kb'] // 1024} MB at start, "
            f"{d['ref_rss_kb'] // 1024} MB at +{d['ref_min']:g} min, {d['end_rss_kb'] // 1024} MB at "
            f"the end (max {d['max_rss_kb'] // 1024} MB); descriptors {d['start_fds']} / "
            f"{d['ref_fds']} / {d['end_fds']}")
    if r["daemon_log"]:
        add("daemon log: " + ", ".join(f"{k} {v}" for k, v in r["daemon_log"].items()))
    if r["notes"]:
        add("")
        add("notes:")
        for n in r["notes"]:
            add(f"  {n}")
    add("")
    add("criteria:")
    for c in r["criteria"]:
        verdict = {True: "PASS", False: "FAIL", None: "----"}[c["ok"]]
        add(f"  {verdict}  {c['name']}: {c['value']} ({c['threshold']})")
    add("")
    add("soak: " + ("PASSED" if r["passed"] else "FAILED"))
    return "\n".join(lines)


def fmt_ms(v):
    return "—" if v is None else (f"{v:.0f}" if v >= 100 else f"{v:.1f}")


def main():
    ap = argparse.ArgumentParser(prog="scripts/soak", description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--lifetime", dest="lifetime_text", default="10m",
                    help="the certificate's lifetime, passed to setup when it offers --lifetime")
    ap.add_argument("--rate", type=float, default=20, help="records per second per producer")
    ap.add_argument("--size", type=int, default=256, help="bytes per record")
    ap.add_argument("--out", default=os.path.join(os.environ.get("CARGO_TARGET_DIR") or
                                                  os.path.join(REPO, "target"), "soak"),
                    help="where the report goes (default: the target folder's soak/)")
    ap.add_argument("--endpoint-port", type=int, default=19900)
    ap.add_argument("--broker", type=int, default=2, help="the Kafka node to restart (1-3)")
    ap.add_argument("--restarts", type=int, help="broker restarts (default 1)")
    ap.add_argument("--cuts", type=int, help="SSH cuts (default 2, or 1 under 20 minutes)")
    ap.add_argument("--freeze-secs", type=int,
                    help="freeze the daemon this long (default 60, or none under 20 minutes)")
    ap.add_argument("--name", help="the profile's name (default soak-XXXXXX)")
    ap.add_argument("--keep", action="store_true", help="leave the profile, unrevoked")
    ap.add_argument("--classes", required=True, help="Soak.class's folder (scripts/soak passes it)")
    ap.add_argument("--chart-python", help="a Python with matplotlib for the chart")
    args = ap.parse_args()
    try:
        parse_duration(args.lifetime_text)
    except argparse.ArgumentTypeError as e:
        ap.error(f"--lifetime {e}")
    if args.minutes < 3:
        ap.error("--minutes: at least 3 (a disturbance needs a minute on either side)")

    # A TERM (scripts/test interrupted) ends the soak as Ctrl-C does: through the clean-up.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(2))
    soak = Soak(args)
    result = soak.run()
    os.makedirs(soak.out, exist_ok=True)
    with open(os.path.join(soak.out, "soak.json"), "w") as f:
        json.dump(result, f, indent=1)
    text = summary(result)
    with open(os.path.join(soak.out, "summary.txt"), "w") as f:
        f.write(text + "\n")
    chart = os.path.join(soak.out, "soak.svg")
    if args.chart_python:
        out = run(args.chart_python, os.path.join(HERE, "chart.py"),
                  os.path.join(soak.out, "soak.json"), chart, check=False)
        if out.returncode != 0:
            log(f"no chart: {out.stderr.strip()[-500:]}")
    print(text)
    print(f"\nwritten: {soak.out}/soak.json, summary.txt"
          f"{', soak.svg' if os.path.exists(chart) else ''}, raw/ (each client's lines, tunnel.log)")
    sys.exit(0 if result["passed"] else 1)


if __name__ == "__main__":
    main()
