"""scripts/soak.d/rdkafka_client.py — the soak's librdkafka clients (confluent-kafka, from the
stack's venv), run on the laptop by scripts/soak.d/soak.py:

    python rdkafka_client.py produce CONF TOPIC ID RATE SECONDS SIZE   idempotent, RATE records/s
    python rdkafka_client.py consume CONF TOPIC GROUP PROTOCOL         classic | consumer (KIP-848)

CONF is the profile's librdkafka.conf (the local endpoint: plaintext). The lines on stdout are
those of Soak.java (A, F, C, G, E, R, D; see there); latency counts from the time the record was
due. librdkafka's own log lines go to stderr, where soak.py counts them by facility.
"""

import signal
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

stop = False


def on_term(_sig, _frame):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)
signal.signal(signal.SIGINT, on_term)


def line(text):
    sys.stdout.write(text + "\n")


def now_ms():
    return int(time.time() * 1000)


def load(path):
    conf = {}
    for raw in open(path):
        raw = raw.strip()
        if raw and not raw.startswith("#"):
            k, v = raw.split("=", 1)
            conf[k.strip()] = v.strip()
    return conf


def error_kind(err):
    # KafkaError.name() is librdkafka's code name: _TRANSPORT, _ALL_BROKERS_DOWN, …
    return err.name() if isinstance(err, KafkaError) else type(err).__name__


class Errors:
    """librdkafka's error callback: one E line each; a fatal one asks for a new client."""

    def __init__(self):
        self.fatal = None

    def __call__(self, err):
        line(f"E {now_ms()} {error_kind(err)} {str(err).replace(chr(10), ' ')}")
        if err.fatal():
            self.fatal = err


def produce(conf_path, topic, pid, rate, seconds, size):
    base = load(conf_path)
    errors = Errors()

    def new_producer():
        return Producer({**base, "client.id": f"soak-{pid}", "enable.idempotence": True,
                         "acks": "all", "error_cb": errors})

    producer = new_producer()
    interval = 1.0 / float(rate)
    start_mono, start_wall = time.monotonic(), time.time()
    end = start_mono + float(seconds)
    seq = 0
    last_flush = time.monotonic()

    def delivered(seq, due_mono, due_ms):
        def cb(err, msg):
            lat = int((time.monotonic() - due_mono) * 1e6)
            if err is None:
                line(f"A {seq} {due_ms} {lat} {msg.partition()} {msg.offset()}")
            else:
                line(f"F {seq} {due_ms} {lat} {error_kind(err)}")
        return cb

    while not stop:
        due = start_mono + seq * interval
        if due >= end:
            break
        # Serve delivery reports while waiting for the next record's time.
        while True:
            wait = due - time.monotonic()
            if wait <= 0:
                break
            producer.poll(wait)
        due_ms = int((start_wall + seq * interval) * 1000)
        key = f"{pid}:{seq}"
        value = (key + ":").encode().ljust(int(size), b"x")
        try:
            producer.produce(topic, key=key, value=value, on_delivery=delivered(seq, due, due_ms))
        except BufferError:
            line(f"F {seq} {due_ms} 0 QUEUE_FULL")
        except KafkaException as e:
            line(f"F {seq} {due_ms} 0 {error_kind(e.args[0])}")
        seq += 1
        producer.poll(0)
        if errors.fatal is not None:
            line(f"R {now_ms()} {error_kind(errors.fatal)}")
            errors.fatal = None
            producer.flush(5)
            producer = new_producer()
        if time.monotonic() - last_flush > 0.5:
            sys.stdout.flush()
            last_flush = time.monotonic()
    left = producer.flush(120)
    if left:
        line(f"E {now_ms()} UNANSWERED {left} records had no delivery report after 120 s")
    line(f"D {now_ms()} {seq}")
    sys.stdout.flush()


def consume(conf_path, topic, group, protocol):
    base = load(conf_path)
    errors = Errors()

    def new_consumer():
        conf = {**base, "client.id": group, "group.id": group, "auto.offset.reset": "earliest",
                "error_cb": errors}
        if protocol != "classic":
            conf["group.protocol"] = protocol
        c = Consumer(conf)
        c.subscribe([topic],
                    on_assign=lambda _c, parts: line(f"G {now_ms()} assigned {len(parts)}"),
                    on_revoke=lambda _c, parts: line(f"G {now_ms()} revoked {len(parts)}"),
                    on_lost=lambda _c, parts: line(f"G {now_ms()} lost {len(parts)}"))
        return c

    consumer = new_consumer()
    count = 0
    last_flush = time.monotonic()
    while not stop:
        msg = consumer.poll(0.5)
        if msg is not None:
            if msg.error():
                err = msg.error()
                if err.code() != KafkaError._PARTITION_EOF:
                    line(f"E {now_ms()} {error_kind(err)} {str(err).replace(chr(10), ' ')}")
            else:
                key = msg.key().decode() if msg.key() else "-"
                line(f"C {now_ms()} {key} {msg.partition()} {msg.offset()}")
                count += 1
        if errors.fatal is not None:
            line(f"R {now_ms()} {error_kind(errors.fatal)}")
            errors.fatal = None
            consumer.close()
            consumer = new_consumer()
        if time.monotonic() - last_flush > 0.5:
            sys.stdout.flush()
            last_flush = time.monotonic()
    consumer.close()
    line(f"D {now_ms()} {count}")
    sys.stdout.flush()


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "produce" and len(sys.argv) == 8:
        produce(*sys.argv[2:8])
    elif mode == "consume" and len(sys.argv) == 6:
        consume(*sys.argv[2:6])
    else:
        sys.exit("usage: rdkafka_client.py produce CONF TOPIC ID RATE SECONDS SIZE | "
                 "consume CONF TOPIC GROUP PROTOCOL")


if __name__ == "__main__":
    main()
