#!/usr/bin/env bash
# The quickstart of docs/quickstart.md: Apache Kafka 4.4 as the upstream cluster (streams groups
# off, so every streams group comes from coordinatord), coordinatord in gateway mode in front of
# it, and the Kafka Streams word-count application with group.protocol=streams.
#
#   deploy/demo/demo.sh start                  what `make demo` runs
#   deploy/demo/demo.sh produce LINE...        each LINE as one record of the input topic
#   deploy/demo/demo.sh counts                 the word counts the application has written
#   deploy/demo/demo.sh TOOL ARGS...           one of Kafka's tools through coordinatord:
#                                              kafka-groups, kafka-consumer-groups,
#                                              kafka-streams-groups, kafka-topics, kafka-configs
#   deploy/demo/demo.sh stop                   what `make demo-stop` runs
#
# Ports (override with the environment): DEMO_PORT (9092, what clients bootstrap to),
# DEMO_ADMIN_PORT (9644, console and metrics), DEMO_BROKER_PORTS (9093-9099, one per upstream
# broker), DEMO_KAFKA_PORT (19092, the upstream; only coordinatord connects to it).
# DEMO_DIR (bin/demo) holds logs, data and process ids.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
PORT="${DEMO_PORT:-9092}"
ADMIN_PORT="${DEMO_ADMIN_PORT:-9644}"
BROKER_PORTS="${DEMO_BROKER_PORTS:-9093-9099}"
KAFKA_PORT="${DEMO_KAFKA_PORT:-19092}"
DIR="${DEMO_DIR:-$ROOT/bin/demo}"
APP=wordcount IN=words OUT=counts
log() { echo "demo: $*" >&2; }
die() { log "$*"; exit 1; }

classpath() { test/e2e/streamsapp/build.sh; }

java_class() {
  local cp="$1" class="$2"; shift 2
  java -Xmx256m -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$cp" "$class" "$@"
}

wait_ready() {
  local i
  for ((i = 0; i < 300; i++)); do
    if curl -fsS "http://127.0.0.1:$ADMIN_PORT/readyz" >/dev/null 2>&1; then return 0; fi
    kill -0 "$(cat "$DIR/coordinatord.pid")" 2>/dev/null || die "coordinatord exited; see $DIR/coordinatord.log"
    sleep 0.2
  done
  die "coordinatord not ready after 60 s; see $DIR/coordinatord.log"
}

wait_running() {
  local i
  for ((i = 0; i < 600; i++)); do
    if grep -q '^STATE RUNNING' "$DIR/wordcount.log" 2>/dev/null; then return 0; fi
    kill -0 "$(cat "$DIR/wordcount.pid")" 2>/dev/null || die "the word-count application exited; see $DIR/wordcount.log"
    sleep 0.2
  done
  die "the word-count application is not RUNNING after 120 s; see $DIR/wordcount.log"
}

cmd_start() {
  [[ -f "$DIR/coordinatord.pid" ]] && kill -0 "$(cat "$DIR/coordinatord.pid")" 2>/dev/null &&
    die "already running (deploy/demo/demo.sh stop first)"
  # shellcheck source=../../test/kafka/deps.sh
  source test/kafka/deps.sh
  install_java_maven
  mkdir -p "$DIR"
  log "starting Apache Kafka 4.4 on 127.0.0.1:$KAFKA_PORT (streams groups off) ..."
  test/kafka/kafka.sh start --dir "$DIR/kafka" --port "$KAFKA_PORT" --no-warmup --no-topology-plugin \
    --config group.coordinator.rebalance.protocols=classic,consumer >"$DIR/kafka-start.log"
  log "building coordinatord ..."
  go build -o "$DIR/coordinatord" ./cmd/coordinatord
  "$DIR/coordinatord" serve --config configs/coordinatord.properties \
    --set "listeners=PLAINTEXT://127.0.0.1:$PORT" \
    --set "admin.listener=127.0.0.1:$ADMIN_PORT" \
    --set "log.dirs=$DIR/data" --set node.id=100 \
    --set "upstream.bootstrap.servers=127.0.0.1:$KAFKA_PORT" \
    --set "gateway.broker.port.range=$BROKER_PORTS" \
    --set "group.streams.initial.rebalance.delay.ms=0" \
    </dev/null >"$DIR/coordinatord.log" 2>&1 &
  echo $! >"$DIR/coordinatord.pid"
  wait_ready
  local cp
  cp="$(classpath)"
  for t in "$IN" "$OUT"; do
    java_class "$cp" org.apache.kafka.tools.TopicCommand --bootstrap-server "127.0.0.1:$PORT" \
      --create --if-not-exists --topic "$t" --partitions 4 >/dev/null
  done
  log "starting the Kafka Streams word count (group.protocol=streams) ..."
  # The application stops when its standard input closes: keep it open.
  # Nothing of the background processes may hold this script's output open, or a caller reading
  # it would wait for them.
  (tail -f /dev/null | java_class "$cp" WordCount "127.0.0.1:$PORT" "$APP" "$IN" "$OUT" streams "$DIR/state") \
    </dev/null >"$DIR/wordcount.log" 2>&1 &
  echo $! >"$DIR/wordcount.pid"
  wait_running
  cat <<MSG

coordinatord is running in gateway mode in front of Apache Kafka 4.4.
  clients bootstrap to   127.0.0.1:$PORT
  web console            http://127.0.0.1:$ADMIN_PORT/console/
  metrics                http://127.0.0.1:$ADMIN_PORT/metrics
The word-count application ($APP) counts the words of topic '$IN' into '$OUT'. Try:
  deploy/demo/demo.sh produce "hello coordinatord" "hello streams"
  deploy/demo/demo.sh counts
  deploy/demo/demo.sh kafka-streams-groups --describe --group $APP --members
  deploy/demo/demo.sh kafka-groups --list
Stop everything with: make demo-stop
MSG
}

cmd_produce() {
  (($#)) || die "usage: demo.sh produce LINE..."
  printf '%s\n' "$@" | java_class "$(classpath)" org.apache.kafka.tools.ConsoleProducer \
    --bootstrap-server "127.0.0.1:$PORT" --topic "$IN"
}

cmd_counts() {
  # The application commits (and so writes its counts) every few seconds: read until the topic
  # has been quiet for 10 s.
  java_class "$(classpath)" org.apache.kafka.tools.consumer.ConsoleConsumer \
    --bootstrap-server "127.0.0.1:$PORT" --topic "$OUT" --from-beginning --timeout-ms 10000 \
    --property print.key=true --property key.separator=' ' \
    --property value.deserializer=org.apache.kafka.common.serialization.LongDeserializer 2>/dev/null |
    awk '{count[$1] = $2} END {for (w in count) print w, count[w]}' | sort
}

cmd_tool() {
  local class
  case "$1" in
    kafka-groups) class=org.apache.kafka.tools.GroupsCommand ;;
    kafka-consumer-groups) class=org.apache.kafka.tools.consumer.group.ConsumerGroupCommand ;;
    kafka-streams-groups) class=org.apache.kafka.tools.streams.StreamsGroupCommand ;;
    kafka-topics) class=org.apache.kafka.tools.TopicCommand ;;
    kafka-configs) class=org.apache.kafka.tools.ConfigCommand ;;
    *) die "unknown command '$1' (see the top of $0)" ;;
  esac
  shift
  java_class "$(classpath)" "$class" --bootstrap-server "127.0.0.1:$PORT" "$@"
}

cmd_stop() {
  local name pid
  for name in wordcount coordinatord; do
    if [[ -f "$DIR/$name.pid" ]]; then
      pid="$(cat "$DIR/$name.pid")"
      pkill -TERM -P "$pid" 2>/dev/null || true
      kill -TERM "$pid" 2>/dev/null || true
      rm -f "$DIR/$name.pid"
    fi
  done
  [[ -d "$DIR/kafka" ]] && test/kafka/kafka.sh stop --dir "$DIR/kafka" >/dev/null 2>&1 || true
  log "stopped (logs and data stay in $DIR)"
}

sub="${1:-start}"
(($#)) && shift
case "$sub" in
  start) cmd_start ;;
  produce) cmd_produce "$@" ;;
  counts) cmd_counts ;;
  stop) cmd_stop ;;
  kafka-*) cmd_tool "$sub" "$@" ;;
  -h|--help|help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) die "unknown command '$sub' (see $0 --help)" ;;
esac
