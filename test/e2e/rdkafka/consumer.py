"""One librdkafka consumer (confluent-kafka) in a consumer group with group.protocol=consumer.

Arguments: bootstrap servers, group id, topic, client id. Prints "VERSION <librdkafka version>" first, then
"R <partition> <offset>" for every record it consumes, committing synchronously after each batch,
until stdin closes; then commits, leaves the group (close) and prints "CONSUMED <n>".
"""
import sys
import threading

from confluent_kafka import Consumer, KafkaException, libversion


def main():
    bootstrap, group, topic, client_id = sys.argv[1:5]
    print("VERSION", libversion()[0], flush=True)
    stop = threading.Event()

    def watch_stdin():
        while sys.stdin.read(1):
            pass
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    errors = []
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": client_id,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "error_cb": lambda err: errors.append(err),
    })
    consumer.subscribe([topic])
    seen = 0
    while not stop.is_set():
        batch = consumer.consume(num_messages=100, timeout=0.5)
        got = False
        for msg in batch:
            if msg.error():
                print("ERROR", msg.error(), flush=True)
                continue
            print("R", msg.partition(), msg.offset(), flush=True)
            seen += 1
            got = True
        if got:
            consumer.commit(asynchronous=False)
    try:
        consumer.commit(asynchronous=False)
    except KafkaException as e:
        # Nothing consumed since the last commit: librdkafka reports _NO_OFFSET.
        print("LASTCOMMIT", e, flush=True)
    consumer.close()
    for err in errors:
        print("ERROR", err, flush=True)
    print("CONSUMED", seen, flush=True)


if __name__ == "__main__":
    main()
