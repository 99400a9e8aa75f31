"""scripts/soak.d/mysql_client.py — the soak's MySQL clients (PyMySQL, from the stack's venv),
run on the laptop by scripts/soak.d/soak.py:

    python mysql_client.py HOST PORT USER

Two threads until SIGTERM, through the tunnel's local endpoint (no TLS, no password: the
endpoint logs in with the certificate):
- a session: one connection, one query a second; when a query fails, the next second opens a
  new connection (a reconnect, counted);
- a fresh login every 10 seconds: connect, one query, close.

One line per attempt on stdout:

    Q ms ok latency_us connection_id        the session's query
    Q ms fail latency_us KIND message
    L ms ok latency_us                      a fresh login and its query
    L ms fail latency_us KIND message
    K ms connection_id                      the session opened a (new) connection
"""

import signal
import sys
import threading
import time

import pymysql

stop = threading.Event()
out_lock = threading.Lock()
TIMEOUT = 10  # seconds, for connect, read and write: a frozen tunnel fails a query in 10 s


def on_term(_sig, _frame):
    stop.set()


signal.signal(signal.SIGTERM, on_term)
signal.signal(signal.SIGINT, on_term)


def line(text):
    with out_lock:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def kind(e):
    code = e.args[0] if getattr(e, "args", None) and isinstance(e.args[0], int) else None
    return f"{type(e).__name__}:{code}" if code is not None else type(e).__name__


def text(e):
    return str(e).replace("\n", " ")


def connect(host, port, user):
    return pymysql.connect(host=host, port=port, user=user, connect_timeout=TIMEOUT,
                           read_timeout=TIMEOUT, write_timeout=TIMEOUT, autocommit=True)


def session(host, port, user):
    conn = None
    while not stop.is_set():
        began = time.monotonic()
        t0 = time.time()
        try:
            if conn is None:
                conn = connect(host, port, user)
                line(f"K {int(t0 * 1000)} {conn.thread_id()}")
            with conn.cursor() as cur:
                cur.execute("SELECT CONNECTION_ID(), CURRENT_USER()")
                cid, _who = cur.fetchone()
            lat = int((time.monotonic() - began) * 1e6)
            line(f"Q {int(t0 * 1000)} ok {lat} {cid}")
        except Exception as e:  # noqa: BLE001 — every failure is counted, by kind
            lat = int((time.monotonic() - began) * 1e6)
            line(f"Q {int(t0 * 1000)} fail {lat} {kind(e)} {text(e)}")
            try:
                if conn is not None:
                    conn.close()
            except Exception:  # noqa: BLE001 — the connection is already gone
                pass
            conn = None
        stop.wait(max(0.0, 1.0 - (time.monotonic() - began)))


def logins(host, port, user):
    while not stop.is_set():
        began = time.monotonic()
        t0 = time.time()
        try:
            conn = connect(host, port, user)
            try:
                with conn.cursor() as cur:
                    cur.execute("SELECT CURRENT_USER()")
                    cur.fetchone()
            finally:
                conn.close()
            line(f"L {int(t0 * 1000)} ok {int((time.monotonic() - began) * 1e6)}")
        except Exception as e:  # noqa: BLE001
            lat = int((time.monotonic() - began) * 1e6)
            line(f"L {int(t0 * 1000)} fail {lat} {kind(e)} {text(e)}")
        stop.wait(max(0.0, 10.0 - (time.monotonic() - began)))


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: mysql_client.py HOST PORT USER")
    host, port, user = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    threads = [threading.Thread(target=f, args=(host, port, user)) for f in (session, logins)]
    for t in threads:
        t.start()
    while not stop.is_set():
        stop.wait(1)
    for t in threads:
        t.join(TIMEOUT + 5)


if __name__ == "__main__":
    main()
