"""The conformance matrix (issue 46): every client x Kafka release x cluster shape, through the
tunnel's local endpoint on the real stack, every byte the endpoint sends a client scanned for the
brokers' advertised names. Run by scripts/conformance, which prepares the
clients; writes docs/conformance.md and docs/conformance.json.

Each cell: a fresh `app.` topic (3 partitions, on every broker) made through the endpoint, then
the client's own program lists the brokers, produces 20 records, reads them back in a group and
commits. A cell passes when every broker the client was told of is on 127.0.0.1 (an advertised
name reaching a client would send it around the tunnel) and it read all 20; else the first
error. A cell whose feature the release lacks is `n/a` with why.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STACK = os.path.join(REPO, "scripts", "stack")
COUNT = 20
PORT = 19800


def stack(*args, check=True):
    out = subprocess.run([STACK, *args], capture_output=True, text=True)
    if check and out.returncode != 0:
        sys.exit(f"conformance: scripts/stack {' '.join(args)} failed:\n{out.stdout}{out.stderr}")
    return out


def info():
    return dict(line.split("=", 1) for line in stack("info").stdout.splitlines() if "=" in line)


def laptop(home, *cmd, timeout=180):
    """CMD in the laptop namespace as its user, with SHIQI_HOME=home."""
    try:
        return subprocess.run(
            [STACK, "exec", "laptop", "--env", f"SHIQI_HOME={home}", "--", *cmd],
            capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        # The partial output comes back as bytes even in text mode.
        partial = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return subprocess.CompletedProcess(cmd, 124, partial, f"no end within {timeout} s")


def version_tuple(v):
    return tuple(int(x) for x in v.split("."))


def clients(tools):
    """(row name, how to run it for bootstrap/topic/group, why not on a release or None)."""
    java = lambda jars, protocol, tx: lambda b, t, g: [  # noqa: E731
        "java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", f"{jars}/*:{tools['classes']}",
        "Conformance", b, t, g, str(COUNT), protocol, tx]
    py = tools["python"]
    return [
        ("Java kafka-clients 4.1.1 (classic group, transactions)",
         java(tools["java-4.1.1"], "classic", "yes"), lambda v: None),
        ("Java kafka-clients 4.1.1 (group.protocol=consumer, KIP-848)",
         java(tools["java-4.1.1"], "consumer", "no"),
         lambda v: None if version_tuple(v) >= (4, 0, 0) else
         "the consumer group protocol is Kafka 4.0+ (a preview before, off by default)"),
        ("Java kafka-clients 4.1.1 (share group, KIP-932)", Share(tools),
         lambda v: None if version_tuple(v) >= (4, 1, 0) else
         "share groups are a preview from Kafka 4.1 (share.version=1); 4.0's early access speaks "
         "RPCs a 4.1 client cannot, and 3.x has none"),
        ("Java kafka-clients 3.9.1 (classic group, transactions)",
         java(tools["java-3.9.1"], "classic", "yes"), lambda v: None),
        ("librdkafka: confluent-kafka (Python) 2.16.1",
         lambda b, t, g: [py, os.path.join(tools["clients"], "python_client.py"), "confluent", b, t, g, str(COUNT)],
         lambda v: None),
        ("kafka-python 3.0.12",
         lambda b, t, g: [py, os.path.join(tools["clients"], "python_client.py"), "kafka-python", b, t, g, str(COUNT)],
         lambda v: None),
        ("franz-go 1.22.3",
         lambda b, t, g: [tools["go"], "franz", b, t, g, str(COUNT)], lambda v: None),
        ("sarama 1.61.1",
         lambda b, t, g: [tools["go"], "sarama", b, t, g, str(COUNT)], lambda v: None),
        ("KafkaJS 2.2.4 (Node)",
         lambda b, t, g: ["env", f"NODE_PATH={tools['node']}",
                          f"KAFKAJS_LOG={os.environ.get('KAFKAJS_LOG', 'nothing')}", "node",
                          os.path.join(tools["clients"], "kafkajs_client.js"), b, t, g, str(COUNT)],
         lambda v: None),
        ("kcat (librdkafka, Debian)", "kcat", lambda v: None),
    ]


def cluster_admin(tools, *args):
    """ClusterAdmin VERB ARGS on the server, as the admin, with the stack's own Kafka jars; None,
    or the first error."""
    i = info()
    log4j = os.path.join(REPO, "scripts", "kafka", "log4j2-tools.properties")
    out = stack("exec", "server", "--", "java", "-Xmx192m", "-XX:TieredStopAtLevel=1",
                f"-Dlog4j2.configurationFile={log4j}", "-cp",
                f"{i['kafka_libs']}/*:{tools['classes']}", "ClusterAdmin", args[0],
                i["kafka_bootstrap"], i["kafka_admin_properties"], *args[1:], check=False)
    return None if out.returncode == 0 else first_line(out.stderr or out.stdout)


class Share:
    """The share-group row: on the server, the admin turns share groups on and starts the cell's
    group at the earliest offset (ClusterAdmin share-group); then the client's KafkaShareConsumer
    reads the records back through the endpoint."""

    def __init__(self, tools):
        self.tools = tools

    def prepare(self, group):
        """The admin's part; None, or the first error."""
        err = cluster_admin(self.tools, "share-group", group)
        return f"the admin's part: {err}" if err else None

    def __call__(self, bootstrap, topic, group):
        return ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp",
                f"{self.tools['java-4.1.1']}/*:{self.tools['classes']}", "ShareConformance",
                bootstrap, topic, group, str(COUNT)]


def first_line(text):
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("SLF4J", "WARNING", "at ")):
            return line[:300]
    return "(no output)"


def rdkafka_error(text):
    """librdkafka's error among its notices (`%5|…` is a notice, `%3|…` or `% ERROR` an error)."""
    for line in text.splitlines():
        if line.startswith(("%3|", "%2|", "% ERROR", "% Fatal")):
            return line.strip()[:300]
    return first_line(text)


def kcat_cell(home, bootstrap, topic, group):
    """kcat has no group commit of its own worth the name: metadata, produce, then a balanced
    group consume (-G) that commits as it reads."""
    meta = laptop(home, "kcat", "-b", bootstrap, "-L", "-J", timeout=60)
    if meta.returncode != 0:
        return "fail", f"kcat -L: {first_line(meta.stderr)}", []
    brokers = [f"{b['name']}" for b in json.loads(meta.stdout)["brokers"]]
    records = "".join(f"k{i}:v{i}\n" for i in range(COUNT))
    prod = subprocess.run(
        [STACK, "exec", "laptop", "--", "kcat", "-b", bootstrap, "-P", "-t", topic, "-K:",
         "-X", "acks=all"], input=records, capture_output=True, text=True, timeout=60)
    if prod.returncode != 0:
        return "fail", f"kcat -P: {rdkafka_error(prod.stderr)}", brokers
    cons = laptop(home, "timeout", "60", "kcat", "-b", bootstrap, "-G", group, "-o", "beginning",
                  "-c", str(COUNT), "-e", "-f", "%s\n", "-X", "enable.auto.commit=true",
                  "-X", "auto.commit.interval.ms=100", topic, timeout=90)
    got = {line for line in cons.stdout.splitlines() if line.startswith("v")}
    if len(got) < COUNT:
        return "fail", f"kcat -G read {len(got)} of {COUNT}: {first_line(cons.stderr)}", brokers
    return "pass", f"{len(brokers)} brokers, {COUNT} records back in group {group}", brokers


def grant_transactions(i, profile):
    """Transactional ids are not among the agent's default grants: the admin allows the user's
    under `app.`, as the e2e does (through the brokers' own listener, with the admin's config)."""
    script = (
        "import sys\n"
        "from confluent_kafka.admin import (AdminClient, AclBinding, AclOperation,\n"
        "    AclPermissionType, ResourcePatternType, ResourceType)\n"
        "conf = dict(l.strip().split('=', 1) for l in open(sys.argv[1]) if '=' in l)\n"
        "conf['bootstrap.servers'] = sys.argv[2]\n"
        "a = AdminClient(conf)\n"
        "b = [AclBinding(ResourceType.TRANSACTIONAL_ID, 'app.', ResourcePatternType.PREFIXED,\n"
        "      'User:' + sys.argv[3], '*', op, AclPermissionType.ALLOW)\n"
        "     for op in (AclOperation.WRITE, AclOperation.DESCRIBE)]\n"
        "[f.result(30) for f in a.create_acls(b).values()]\n")
    out = stack("exec", "server", "--", i["python"], "-c", script, i["kafka_admin_kcat_config"],
                i["kafka_bootstrap"], profile, check=False)
    return None if out.returncode == 0 else first_line(out.stderr)


def create_topic(home, tools, bootstrap, topic, assignment=None):
    """A topic of 3 partitions on every broker, or with `assignment` (replicas per partition,
    the leader first)."""
    script = (
        "import json, sys\n"
        "from confluent_kafka.admin import AdminClient, NewTopic\n"
        "a = AdminClient({'bootstrap.servers': sys.argv[1]})\n"
        "plan = json.loads(sys.argv[3])\n"
        "new = NewTopic(sys.argv[2], num_partitions=len(plan), replica_assignment=plan) if plan else NewTopic(sys.argv[2], 3, 3)\n"
        "parts = len(plan) if plan else 3\n"
        "f = a.create_topics([new])\n"
        "[x.result(30) for x in f.values()]\n"
        # Created is not yet known everywhere: each broker learns it from the metadata log on its
        # own time. Wait until every broker's own answer has a leader for every partition, so a
        # cell fails on the client, not on the cluster catching up. librdkafka picks the broker it
        # asks, so each broker is asked here by a Metadata v4 request of our own on its endpoint
        # port. (KafkaJS also fails on a leaderless partition of *any* topic: docs/design.md.)
        "import socket, struct, time\n"
        "def leaders(addr, topic):\n"
        "    host, port = addr.rsplit(':', 1)\n"
        "    name = topic.encode()\n"
        "    body = struct.pack('>hhih', 3, 4, 1, 4) + b'conf' + struct.pack('>ih', 1, len(name)) + name + b'\\0'\n"
        "    with socket.create_connection((host, int(port)), timeout=10) as c:\n"
        "        c.sendall(struct.pack('>i', len(body)) + body)\n"
        "        f = c.makefile('rb')\n"
        "        n, = struct.unpack('>i', f.read(4))\n"
        "        d = f.read(n)\n"
        "    at = 8  # correlation id, throttle time\n"
        "    def i16():\n"
        "        nonlocal at; at += 2; return struct.unpack_from('>h', d, at - 2)[0]\n"
        "    def i32():\n"
        "        nonlocal at; at += 4; return struct.unpack_from('>i', d, at - 4)[0]\n"
        "    def text():\n"
        "        nonlocal at; k = i16(); at += max(k, 0); return d[at - max(k, 0):at]\n"
        "    for _ in range(i32()):\n"
        "        i32(); text(); i32(); text()  # node id, host, port, rack\n"
        "    text(); i32()  # cluster id, controller id\n"
        "    out = []\n"
        "    for _ in range(i32()):\n"
        "        err = i16(); text(); at += 1\n"
        "        for _ in range(i32()):\n"
        "            i16(); i32(); out.append(i32() if err == 0 else -1)\n"
        "            for _ in range(2):  # replicas, isr\n"
        "                k = i32(); at += 4 * k\n"
        "    return out\n"
        "brokers = a.list_topics(timeout=10).brokers.values()\n"
        "waiting = {b.id: f'{b.host}:{b.port}' for b in brokers}\n"
        "end = time.time() + 30\n"
        "while waiting and time.time() < end:\n"
        "    for i, addr in list(waiting.items()):\n"
        "        got = leaders(addr, sys.argv[2])\n"
        "        if len(got) == parts and min(got) >= 0:\n"
        "            del waiting[i]\n"
        "    if waiting:\n"
        "        time.sleep(0.3)\n"
        "if waiting:\n"
        "    sys.exit(f'broker(s) {sorted(waiting)} had no leader for every partition after 30 s')\n")
    out = laptop(home, tools["python"], "-c", script, bootstrap, topic,
                 json.dumps(assignment or []), timeout=60)
    return None if out.returncode == 0 else first_line(out.stderr)


class Capture:
    """Every byte the endpoint sends to clients (from its ports, on the laptop's loopback),
    recorded by tcpdump for one cell; `leaks` says which advertised names are among them."""

    def __init__(self, path):
        self.path = path
        # -U: each packet written as it comes; -s 0: whole packets.
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", "shiqi-laptop", "tcpdump", "-i", "lo", "-U", "-s", "0",
             "-w", path, f"tcp and src portrange {PORT}-{PORT + 9}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # tcpdump says "listening on lo" once it captures.
        deadline = time.time() + 10
        while time.time() < deadline and not os.path.exists(path):
            time.sleep(0.1)
        time.sleep(0.3)

    def leaks(self, names, present):
        """Which of `names` the capture holds; `present` (the cell's topic, which the endpoint's
        answers name) must be there, or the capture saw nothing and proves nothing."""
        time.sleep(0.5)
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except OSError as e:
            return [f"(no capture: {e})"]
        finally:
            if os.path.exists(self.path):
                os.remove(self.path)
        if present.encode() not in data:
            return [f"(the capture lacks the topic `{present}`: it saw nothing)"]
        return [n for n in names if n.encode() in data]


def advertised_names(shape):
    """What the brokers advertise in `shape`, which no byte to a client may carry."""
    return ["localhost"] if shape == "localhost" else ["kafka.internal", "broker-1", "broker-2", "broker-3"]


EVENT_COUNT = 100
EVENT_RATE = 10


def laptop_bg(home, cmd, stdin=None):
    """CMD in the laptop namespace in the background (as `laptop`)."""
    return subprocess.Popen(
        [STACK, "exec", "laptop", "--env", f"SHIQI_HOME={home}", "--", *cmd],
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc, timeout):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        err = (err or "") + f"\nno end within {timeout} s"
    return proc.returncode, out or "", err or ""


EVENTS = {
    "leader": "the partition's leader (broker 2) stops 3 s in and starts again 6 s later",
    "coordinator": "the group's coordinator stops 3 s in (another broker leads the partition) "
                   "and starts again 6 s later",
    "reassign": "3 s in, the partition moves from brokers 2, 3, 1 to 3, 1 (its leader leaves)",
}


def coordinator_of(home, tools, bootstrap, group):
    """The broker coordinating `group` (asked through the endpoint, as any client finds it)."""
    script = (
        "import sys\n"
        "from confluent_kafka.admin import AdminClient\n"
        "a = AdminClient({'bootstrap.servers': sys.argv[1]})\n"
        "d = a.describe_consumer_groups([sys.argv[2]])[sys.argv[2]].result(30)\n"
        "print(d.coordinator.id)\n")
    out = laptop(home, tools["python"], "-c", script, bootstrap, group, timeout=60)
    try:
        return int(out.stdout.strip().splitlines()[-1]), None
    except (ValueError, IndexError):
        return None, first_line(out.stderr or out.stdout)


def event_cell(home, tools, version, shape, row, runner, why_not, n, event):
    """A producer and a consumer of the client run at once through `event` (EVENTS): the client
    must carry on through the endpoint with the new leader or coordinator (KIP-951 hints and
    metadata rewritten to local ports) and read every record."""
    why = why_not(version)
    if not why and getattr(runner, "prepare", None):
        why = "not in the events scenario yet (its program has no produce/consume modes)"
    cell = {"client": row, "version": version, "shape": shape, "event": event}
    if why:
        return {**cell, "status": "n/a", "detail": why}
    bootstrap = f"127.0.0.1:{PORT}"
    topic = group = f"app.ev.{n}"
    started = time.time()
    assignment, stopped = [[2, 3, 1]], 2
    if event == "coordinator":
        stopped, err = coordinator_of(home, tools, bootstrap, group)
        if err:
            return {**cell, "status": "fail", "detail": f"finding the coordinator: {err}"}
        others = [b for b in (1, 2, 3) if b != stopped]
        assignment = [others + [stopped]]
    err = create_topic(home, tools, bootstrap, topic, assignment=assignment)
    if err:
        return {**cell, "status": "fail", "detail": f"creating the topic: {err}"}
    feeder = None
    if runner == "kcat":
        # No -e: the partition is empty when it starts; -c ends it once every record is in.
        consumer = laptop_bg(home, ["timeout", "150", "kcat", "-b", bootstrap, "-G", group, "-o",
                                    "beginning", "-c", str(EVENT_COUNT), "-f", "%s\n",
                                    "-X", "enable.auto.commit=true", topic])
        producer = laptop_bg(home, ["kcat", "-b", bootstrap, "-P", "-t", topic, "-K:", "-X",
                                    "acks=all", "-X", "linger.ms=0"], stdin=True)

        def feed():
            for i in range(EVENT_COUNT):
                producer.stdin.write(f"k{i}:v{i}\n")
                producer.stdin.flush()
                time.sleep(1 / EVENT_RATE)
            producer.stdin.close()
        import threading
        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
    else:
        base = runner(bootstrap, topic, group)
        # Each program's COUNT is its fourth argument after the fixed ones: replace it and add
        # MODE and RATE (see each client's usage).
        def with_mode(mode, rate):
            cmd = list(base)
            i = cmd.index(str(COUNT), len(cmd) - 6 if len(cmd) > 6 else 0)
            cmd[i] = str(EVENT_COUNT)
            if "Conformance" in cmd:
                cmd[-1] = "no"  # no transaction spanning the restart: one per record is not the point
            return cmd + [mode, str(rate)]
        consumer = laptop_bg(home, with_mode("consume", 0))
        time.sleep(1)
        producer = laptop_bg(home, with_mode("produce", EVENT_RATE))
    disturbed = None
    try:
        time.sleep(3)
        if event == "reassign":
            disturbed = cluster_admin(tools, "reassign", topic, "3,1")
        else:
            stack("kafka-node", "down", str(stopped))
            time.sleep(6)
    finally:
        if event != "reassign":
            stack("kafka-node", "up", str(stopped), check=False)
    if feeder:
        feeder.join(timeout=60)
        producer.stdin = None  # the feeder closed it: communicate() must not flush it
    pcode, pout, perr = finish(producer, 150)
    ccode, cout, cerr = finish(consumer, 170)
    detail, brokers = None, []
    if disturbed:
        detail = f"the reassignment itself: {disturbed}"
    elif pcode != 0:
        detail = f"the producer: {rdkafka_error(perr) if runner == 'kcat' else first_line(perr or pout)}"
    elif runner == "kcat":
        got = {line for line in cout.splitlines() if line.startswith("v")}
        if len(got) < EVENT_COUNT:
            detail = f"kcat -G read {len(got)} of {EVENT_COUNT}: {rdkafka_error(cerr)}"
    elif ccode != 0:
        detail = f"the consumer: {first_line(cerr or cout)}"
    else:
        try:
            r = json.loads(cout.strip().splitlines()[-1])
            brokers = r["brokers"] + json.loads(pout.strip().splitlines()[-1])["brokers"]
            if r["consumed"] < EVENT_COUNT:
                detail = f"read {r['consumed']} of {EVENT_COUNT} back"
        except (ValueError, IndexError, KeyError):
            detail = f"no result: {first_line(cout)}"
    outside = [b for b in brokers if not b.startswith("127.0.0.1:")]
    if outside and not detail:
        detail = f"told of brokers outside the endpoint: {', '.join(outside)}"
    status = "fail" if detail else "pass"
    if not detail:
        through = {"leader": "broker 2's stop and return",
                   "coordinator": f"the coordinator's (broker {stopped}) stop and return",
                   "reassign": "the move to brokers 3, 1"}[event]
        detail = f"{EVENT_COUNT} records at {EVENT_RATE}/s through {through}, all read back"
    return {**cell, "status": status, "detail": detail, "seconds": round(time.time() - started, 1)}


def scanned(cell_fn, shape, n, topic):
    """Runs `cell_fn()` with everything the endpoint sends the client captured and scanned for
    the advertised names (the cell's topic must be among the bytes, or the capture saw nothing)."""
    capture = Capture(f"/tmp/shiqi-conformance-{n}.pcap")
    cell = cell_fn()
    leaked = capture.leaks(advertised_names(shape), topic)
    if leaked and cell["status"] == "pass":
        cell["status"] = "fail"
        cell["detail"] = f"the endpoint sent the client the advertised name(s) {', '.join(leaked)}"
    elif not leaked and cell["status"] == "pass":
        cell["detail"] += "; no advertised name in any byte sent to it"
    return cell


def run_cell(home, tools, version, shape, row, runner, why_not, n):
    """One cell, with everything the endpoint sent the client captured and scanned, and the
    client's telemetry pushes (KIP-714) counted where the brokers received them."""
    if why_not(version):
        return one_cell(home, tools, version, shape, row, runner, why_not, n)
    since = time.time()
    cell = scanned(lambda: one_cell(home, tools, version, shape, row, runner, why_not, n),
                   shape, n, f"app.conf.{n}")
    if cell["status"] == "pass" and (client_id := PUSHERS.get(row.split(" (")[0].split(":")[0])):
        pushes = telemetry_pushes(client_id, since)
        if pushes:
            cell["detail"] += f"; {pushes} telemetry pushes (KIP-714) reached the brokers through it"
        elif client_id.startswith("conformance-java"):
            cell["status"] = "fail"
            cell["detail"] = ("no telemetry push (KIP-714) reached a broker: the Java client pushes "
                              "each second while the brokers' subscription asks it to")
    return cell


# Clients that push telemetry when a broker asks (Java since 3.7, librdkafka since 2.5), by the
# start of their row's name, with the client id their program gives. A Java cell without a push
# fails; librdkafka's are counted (a short-lived Python client may end before its first push).
PUSHERS = {"Java kafka-clients 4.1.1": "conformance-java", "Java kafka-clients 3.9.1": "conformance-java",
           "librdkafka": "conformance-confluent"}


def telemetry_pushes(client_id, since):
    """Pushes from clients named `client_id` (or `client_id-…`) the brokers' TelemetrySink logged
    since `since` (every node's client-telemetry.log)."""
    import glob
    count = 0
    for path in glob.glob(os.path.join(info()["kafka_dir"], "node*", "logs", "client-telemetry.log")):
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and int(parts[0]) >= since * 1000 and (
                        parts[2] == client_id or parts[2].startswith(client_id + "-")):
                    count += 1
    return count


def telemetry(tools, on):
    """Client telemetry on the cluster (the sink put in the brokers' plugins folder first) or off;
    None, or the first error."""
    if on:
        import shutil
        shutil.copy(os.path.join(tools["classes"], "TelemetrySink.class"), info()["kafka_plugins"])
    return cluster_admin(tools, "telemetry", "on" if on else "off")


def run_event(home, tools, version, shape, row, runner, why_not, n, event):
    """One event cell, scanned as run_cell scans (n/a ones are not run)."""
    cell = lambda: event_cell(home, tools, version, shape, row, runner, why_not, n, event)  # noqa: E731
    if why_not(version) or getattr(runner, "prepare", None):
        return cell()
    return scanned(cell, shape, n, f"app.ev.{n}")


def one_cell(home, tools, version, shape, row, runner, why_not, n):
    name = row
    why = why_not(version)
    if why:
        return {"client": name, "version": version, "shape": shape, "status": "n/a", "detail": why}
    bootstrap = f"127.0.0.1:{PORT}"
    topic = f"app.conf.{n}"
    group = f"app.conf.{n}"
    started = time.time()
    log = []
    err = create_topic(home, tools, bootstrap, topic)
    prepare = getattr(runner, "prepare", None)
    if err:
        status, detail, brokers = "fail", f"creating the topic: {err}", []
    elif prepare and (err := prepare(group)):
        status, detail, brokers = "fail", err, []
    elif runner == "kcat":
        status, detail, brokers = kcat_cell(home, bootstrap, topic, group)
    else:
        out = laptop(home, *runner(bootstrap, topic, group))
        if out.returncode != 0:
            status, detail, brokers = "fail", first_line(out.stderr or out.stdout), []
            # The whole story for docs/conformance.json: the first line is rarely all of it.
            log = (out.stderr or out.stdout).strip().splitlines()[-30:]
        else:
            try:
                r = json.loads(out.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                r = None
            if not r:
                status, detail, brokers = "fail", f"no result: {first_line(out.stdout)}", []
            else:
                brokers = r["brokers"]
                if r["consumed"] < COUNT:
                    status, detail = "fail", f"read {r['consumed']} of {COUNT} back"
                else:
                    status = "pass"
                    kind = "share group" if prepare else "group"
                    detail = f"{len(brokers)} brokers, {COUNT} records back in {kind} {group}, committed"
    outside = [b for b in brokers if not b.startswith("127.0.0.1:")]
    if outside and status == "pass":
        status, detail = "fail", f"told of brokers outside the endpoint: {', '.join(outside)}"
    cell = {"client": name, "version": version, "shape": shape, "status": status,
            "detail": detail, "brokers": brokers, "seconds": round(time.time() - started, 1)}
    if log:
        cell["log"] = log
    return cell


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--versions", default="3.7.2,3.9.1,4.0.2,4.1.1")
    ap.add_argument("--shapes", default="localhost,hosts")
    ap.add_argument("--clients", default="", help="substrings of the rows to run (default all)")
    ap.add_argument("--tools", required=True, help="JSON of the prepared clients")
    ap.add_argument("--out", default=os.path.join(REPO, "docs"))
    ap.add_argument("--events", nargs="?", const=",".join(EVENTS), default="",
                    help="the broker-event scenarios instead, all or those named "
                         f"({', '.join(EVENTS)}; its own files: conformance-events.*)")
    args = ap.parse_args()
    unknown = [e for e in args.events.split(",") if e and e not in EVENTS]
    if unknown:
        ap.error(f"--events: unknown event(s) {', '.join(unknown)} (known: {', '.join(EVENTS)})")
    tools = json.loads(args.tools)
    rows = [r for r in clients(tools)
            if not args.clients or any(c in r[0] for c in args.clients.split(","))]
    results = []
    switched = []
    try:
        matrix(args, tools, rows, results, switched)
    finally:
        # Whatever happened (a failure on the way out too), the stack goes back to what the
        # tests expect.
        if switched:
            stack("kafka-version", "default", check=False)
        else:
            stack("kafka-shape", "localhost", check=False)
    write(results, args.out, "conformance-events" if args.events else "conformance")
    failed = [r for r in results if r["status"] == "fail"]
    print(f"conformance: {len(results)} cells, {len(failed)} failed")
    sys.exit(1 if failed else 0)


def matrix(args, tools, rows, results, switched):
    """Runs every cell into `results`; each Kafka release it switched the stack to goes into
    `switched` as it happens."""
    n = int(time.time()) % 100000
    for version in args.versions.split(","):
        print(f"== Kafka {version}", flush=True)
        # Already on it (scripts/test's slice on the stack it just tested): no fresh server.
        if info().get("kafka_version") != version or stack("status", check=False).returncode:
            switched.append(version)
            stack("kafka-version", version)
        for shape in args.shapes.split(","):
            stack("kafka-shape", shape)
            i = info()
            home = f"{i['laptop_home']}/conformance-{version}-{shape}"
            laptop(home, "rm", "-rf", home)
            laptop(home, "mkdir", "-p", home)
            profile = f"conf{n % 1000}"
            setup = laptop(home, "shiqi-connect", "setup", profile, "--server",
                           i["ssh_destination"], "--yes", "--endpoint", "local",
                           "--endpoint-port", str(PORT))
            up = laptop(home, "shiqi-connect", "tunnel", "up", profile)
            try:
                granted = grant_transactions(i, profile) if setup.returncode == 0 else None
                # Client telemetry asked of every client in the matrix (the events run without).
                granted = granted or (None if args.events else telemetry(tools, True))
                if setup.returncode != 0 or up.returncode != 0 or granted:
                    why = granted or first_line((setup.stderr if setup.returncode else up.stderr))
                    for row, _, _ in rows:
                        results.append({"client": row, "version": version, "shape": shape,
                                        "status": "fail", "detail": f"setup/tunnel: {why}"})
                    continue
                for row, runner, why_not in rows:
                    for event in args.events.split(",") if args.events else [None]:
                        n += 1
                        cell = run_event(home, tools, version, shape, row, runner, why_not, n,
                                         event) if event else \
                            run_cell(home, tools, version, shape, row, runner, why_not, n)
                        label = f"{event}: " if event else ""
                        print(f"   {shape:9} {cell['status']:4} {label}{row}: {cell['detail']}", flush=True)
                        results.append(cell)
            finally:
                # Its ports are the next shape's; the cluster as the tests expect it.
                laptop(home, "shiqi-connect", "tunnel", "down", profile)
                if not args.events:
                    telemetry(tools, False)


def write(results, out, stem):
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    events = stem.endswith("events")
    with open(os.path.join(out, f"{stem}.json"), "w") as f:
        json.dump({"run": when, "records_per_cell": EVENT_COUNT if events else COUNT,
                   "cells": results}, f, indent=1)
        f.write("\n")
    # Columns: release x shape (x event, in the events' file).
    columns = list(dict.fromkeys((r["version"], r["shape"], r.get("event")) for r in results))
    rows = list(dict.fromkeys(r["client"] for r in results))
    cell = {(r["client"], r["version"], r["shape"], r.get("event")): r for r in results}
    if events:
        lines = [
            "# Conformance under broker events, through the local endpoint",
            "",
            f"Written by `scripts/conformance --events` on {when} (`docs/conformance-events.json` has",
            "every cell). Each cell: a topic of one partition (replicas 2, 3, 1, or for the",
            "coordinator event led by a broker other than the group's coordinator); the client's",
            f"consumer and producer run at once, {EVENT_COUNT} records at {EVENT_RATE} a second, through",
            "one event:",
            "",
        ] + [f"- `{e}`: {EVENTS[e]}" for e in dict.fromkeys(c[2] for c in columns)] + [
            "",
            "`pass`: the producer finished, the consumer read every record, every broker either was",
            "told of is on 127.0.0.1, and no byte the endpoint sent the client carries an advertised",
            "name (tcpdump on the laptop's loopback, as in [conformance.md](conformance.md)). The Java",
            "rows run without a transaction here (the rows' names are the matrix's).",
            "",
        ]
    else:
        lines = [
            "# Conformance: clients x Kafka releases x cluster shapes, through the local endpoint",
            "",
            f"Written by `scripts/conformance` on {when} (the last full run; `docs/conformance.json`",
            "has every cell with its detail). Each cell: a fresh topic of 3 partitions on every",
            f"broker, then the client's own program lists the brokers, produces {COUNT} records, reads",
            "them back in a consumer group (the KIP-932 row: a share group, each record acknowledged)",
            "and commits, through the tunnel's local endpoint on the stack. `pass` means every broker",
            "the client was told of is on 127.0.0.1, all records came back, and no byte the endpoint",
            "sent the client (captured with tcpdump on the laptop's loopback, checked to hold the",
            "cell's topic) carries an advertised name (`localhost`, `broker-N`, `kafka.internal`);",
            "`fail` gives the first error; `n/a` says why the release lacks the feature.",
            "Shapes: `localhost` (each broker advertised as localhost:N9094) and `hosts` (every broker",
            "on port 9093 of its own name, `broker-N.kafka.internal`, which only the server resolves).",
            "The same clients through a leader's stop, a coordinator's stop and a reassignment:",
            "[conformance-events.md](conformance-events.md).",
            "",
        ]
    header = "| client | " + " | ".join(
        " ".join(x for x in (v, s, e) if x) for v, s, e in columns) + " |"
    lines.append(header)
    lines.append("|" + "---|" * (1 + len(columns)))
    notes = []  # one per row and reason: an n/a for every old release is said once
    for row in rows:
        cols = []
        for v, s, e in columns:
            r = cell.get((row, v, s, e))
            if r is None:
                cols.append("")
            elif r["status"] == "pass":
                cols.append("pass")
            else:
                where = ", ".join(x for x in (f"Kafka {v}", s, e) if x) if r["status"] == "fail" else ""
                text = f"{row}{': ' + where if where else ''}: **{r['status']}**: {r['detail']}"
                if text not in notes:
                    notes.append(text)
                cols.append(f"{r['status']} ({notes.index(text) + 1})")
        lines.append(f"| {row} | " + " | ".join(cols) + " |")
    if notes:
        lines += ["", "Notes:", ""] + [f"{n}. {text}" for n, text in enumerate(notes, 1)]
    with open(os.path.join(out, f"{stem}.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
