"""The Python clients' conformance scenario (scripts/conformance): confluent-kafka (librdkafka)
or kafka-python lists the brokers, produces COUNT records, reads them back in GROUP and commits,
then prints one JSON line with what it saw; any failure goes to stderr with exit 1.

    python python_client.py confluent|kafka-python BOOTSTRAP TOPIC GROUP COUNT [MODE RATE]

MODE: all (the default) | produce | consume (the events scenario runs one of each at once);
RATE: records a second when producing (0: as fast as it can).
"""

import json
import sys
import time


def confluent(bootstrap, topic, group, count, mode, rate):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "conformance-confluent"})
    meta = admin.list_topics(timeout=30)
    brokers = [f"{b.host}:{b.port}" for b in meta.brokers.values()]
    if mode != "consume":
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                             "enable.idempotence": True, "client.id": "conformance-confluent"})
        errors = []
        for i in range(count):
            producer.produce(topic, key=f"k{i}", value=f"v{i}",
                             on_delivery=lambda err, _msg: err and errors.append(str(err)))
            if rate:
                producer.flush(30)
                time.sleep(1 / rate)
        left = producer.flush(60)
        if left or errors:
            raise RuntimeError(f"produce: {left} undelivered, {errors[:1]}")
    if mode == "produce":
        return brokers, 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "client.id": "conformance-confluent"})
    consumer.subscribe([topic])
    seen = set()
    end = time.time() + (150 if mode == "consume" else 60)
    while len(seen) < count and time.time() < end:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            raise RuntimeError(f"consume: {msg.error()}")
        seen.add(msg.value().decode())
    consumer.commit(asynchronous=False)
    consumer.close()
    return brokers, len(seen)


def kafka_python(bootstrap, topic, group, count, mode, rate):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="conformance-kafka-python")
    cluster = admin.describe_cluster()
    brokers = [f"{b['host']}:{b['port']}" for b in cluster["brokers"]]
    admin.close()
    if mode != "consume":
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=10)
        for i in range(count):
            producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode()).get(timeout=60)
            if rate:
                time.sleep(1 / rate)
        producer.close()
    if mode == "produce":
        return brokers, 0
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    seen = set()
    end = time.time() + (150 if mode == "consume" else 60)
    while len(seen) < count and time.time() < end:
        for records in consumer.poll(timeout_ms=500).values():
            seen.update(r.value.decode() for r in records)
    consumer.commit()
    consumer.close()
    return brokers, len(seen)


def main():
    which, bootstrap, topic, group, count = sys.argv[1:6]
    mode = sys.argv[6] if len(sys.argv) > 6 else "all"
    rate = int(sys.argv[7]) if len(sys.argv) > 7 else 0
    count = int(count)
    run = {"confluent": confluent, "kafka-python": kafka_python}[which]
    try:
        brokers, consumed = run(bootstrap, topic, group, count, mode, rate)
    except Exception as e:  # the first error is the cell's verdict
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
    produced = 0 if mode == "consume" else count
    print(json.dumps({"brokers": brokers, "produced": produced, "consumed": consumed,
                      "committed": True}))


if __name__ == "__main__":
    main()
