#!/usr/bin/env bash
# Reference runner: one real Apache Kafka broker (KRaft, combined
# controller+broker) on 127.0.0.1, for comparing coordinatord against it.
# See test/kafka/README.md.
#
#   kafka.sh fetch                      resolve the broker jars into .cache/lib
#   kafka.sh start [--port P] [--dir D] [--config key=value]... [--no-warmup]
#                  [--no-topology-plugin] [--listener NAME]...
#     --listener NAME adds NAME://127.0.0.1:<free port> to listeners and
#     advertised.listeners (map its protocol with --config
#     listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,NAME:...)
#     and prints KAFKA_LISTENER_NAME=127.0.0.1:<port>.
#   kafka.sh stop  [--dir D]
#   kafka.sh restart [--dir D]           start a stopped broker again on its data
#   kafka.sh status [--dir D]
#
# Exit codes: 0 ok, 1 failure, 2 java or mvn missing (callers may skip), 64 usage.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="$HERE/.cache"
LIB="$CACHE/lib"
STAMP="$LIB/.stamp"
DEFAULT_DIR="$CACHE/run"

START_TIMEOUT="${KAFKA_START_TIMEOUT:-120}" # seconds
STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-30}"   # seconds before SIGKILL
HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xmx512m -Xms256m}"

log() { echo "kafka.sh: $*" >&2; }
die() { log "$*"; exit 1; }
usage() {
  sed -n '5,15p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 64
}

# ---------------------------------------------------------------- java, mvn

find_java() {
  local j=""
  if [[ -n "${KAFKA_JAVA:-}" ]]; then
    j="$KAFKA_JAVA"
  elif [[ -n "${JAVA_HOME:-}" && -x "${JAVA_HOME}/bin/java" ]]; then
    j="${JAVA_HOME}/bin/java"
  else
    j="$(command -v java || true)"
  fi
  if [[ -z "$j" || ! -x "$j" ]]; then
    log "java not found (Kafka 4.4 needs Java 17+; set KAFKA_JAVA or JAVA_HOME)"
    exit 2
  fi
  local v major
  v="$("$j" -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n1)"
  major="${v%%[.+-]*}"
  [[ "$major" == "1" ]] && major="$(echo "$v" | cut -d. -f2)"
  if ! [[ "$major" =~ ^[0-9]+$ ]] || (( major < 17 )); then
    log "java at $j is version '${v:-unknown}'; Kafka 4.4 needs Java 17+ (set KAFKA_JAVA or JAVA_HOME)"
    exit 2
  fi
  JAVA="$j"
}

pom_hash() { sha256sum "$HERE/pom.xml" | cut -d' ' -f1; }

cache_ok() {
  [[ -f "$STAMP" ]] && [[ "$(cat "$STAMP")" == "$(pom_hash)" ]] &&
    compgen -G "$LIB/kafka_2.13-*.jar" >/dev/null
}

cmd_fetch() {
  find_java
  if cache_ok; then
    return 0
  fi
  if ! command -v mvn >/dev/null 2>&1; then
    log "mvn not found (needed once to resolve the Kafka jars into $LIB)"
    exit 2
  fi
  log "resolving Kafka jars into $LIB (first run only) ..."
  rm -rf "$LIB"
  mkdir -p "$LIB"
  local out="$CACHE/fetch.log"
  if ! mvn -B -q -f "$HERE/pom.xml" dependency:copy-dependencies >"$out" 2>&1; then
    tail -n 30 "$out" >&2 || true
    die "mvn dependency:copy-dependencies failed (full log: $out)"
  fi
  compgen -G "$LIB/kafka_2.13-*.jar" >/dev/null || die "no kafka_2.13 jar in $LIB after mvn"
  pom_hash >"$STAMP"
  log "fetched $(ls "$LIB"/*.jar | wc -l) jars"
}

# ---------------------------------------------------------------- helpers

abs_dir() { mkdir -p "$1" && (cd "$1" && pwd); }

# True when any TCP socket on this machine (listening, connected, TIME_WAIT)
# has local port $1, or something answers a connect on 127.0.0.1:$1.
port_in_use() {
  local hex
  hex="$(printf ':%04X' "$1")"
  if [[ -r /proc/net/tcp ]] && awk -v h="$hex" \
      'substr($2, length($2) - 4) == h { found = 1 } END { exit !found }' \
      /proc/net/tcp /proc/net/tcp6 2>/dev/null; then
    return 0
  fi
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Random port below the kernel's ephemeral range: a port inside that range can
# be taken by some outgoing connection between our check and Kafka's bind (the
# controller listener binds late in startup), which made start flaky.
free_port() { # free_port [avoid]
  local lo=32768 hi=60999 base span p i
  if [[ -r /proc/sys/net/ipv4/ip_local_port_range ]]; then
    read -r lo hi </proc/sys/net/ipv4/ip_local_port_range || true
  fi
  if (( lo > 12000 )); then
    base=10000 span=$(( lo - 10000 ))
  elif (( hi < 63000 )); then
    base=$(( hi + 1 )) span=$(( 65000 - hi ))
  else
    base=20000 span=40000
  fi
  for i in $(seq 1 200); do
    p=$(( base + (RANDOM * 32768 + RANDOM) % span ))
    [[ "$p" == "${1:-}" ]] && continue
    port_in_use "$p" || { echo "$p"; return 0; }
  done
  die "could not find a free loopback port"
}

# Sends a raw Kafka request (hex of the bytes after the 4-byte size) to
# 127.0.0.1:$1 and prints the first $3 bytes of the response (after the size)
# as hex. Bash /dev/tcp only, so it costs no JVM start.
raw_request() { # raw_request port hexbody nbytes
  local port="$1" body="$2" n="$3"
  local len=$(( ${#body} / 2 ))
  local frame esc="" i
  frame="$(printf '%08x' "$len")$body"
  for (( i = 0; i < ${#frame}; i += 2 )); do esc+="\\x${frame:i:2}"; done
  timeout 3 bash -c '
    exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf "$2" >&3
    head -c $(( 4 + $3 )) <&3 | od -An -v -tx1 | tr -d " \n"
  ' _ "$port" "$esc" "$n" 2>/dev/null | cut -c9-
}

hexstr() { # Kafka STRING: int16 length + bytes, as hex
  printf '%04x' "${#1}"
  printf '%s' "$1" | od -An -v -tx1 | tr -d ' \n'
}

CLIENT_ID_HEX="0008$(printf 'kafka.sh' | od -An -v -tx1 | tr -d ' \n')"

# ApiVersions v0 (key 18), header v1, correlation id 7.
# Ready when the reply carries correlation id 7 and error code 0.
api_versions_ok() {
  local r
  r="$(raw_request "$1" "00120000"00000007"$CLIENT_ID_HEX" 6 || true)"
  [[ "$r" == "000000070000" ]]
}

# FindCoordinator v0 (key 10) for a group key, correlation id 8. Returns 0 once
# the broker names a coordinator (error code 0): __consumer_offsets exists, has
# a leader, and the group coordinator serves it.
find_coordinator_ok() {
  local r
  r="$(raw_request "$1" "000a0000"00000008"$CLIENT_ID_HEX$(hexstr kafka-sh-warmup)" 6 || true)"
  [[ "$r" == "000000080000" ]]
}

pid_alive() { [[ -n "${1:-}" ]] && kill -0 "$1" 2>/dev/null; }

is_kafka_pid() {
  pid_alive "$1" && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q 'kafka\.Kafka'
}

random_cluster_id() { # 16 random bytes, base64url without padding (Kafka Uuid form)
  local id
  while :; do
    id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
    # Kafka rejects ids starting with '-' on the command line; retry.
    [[ "$id" != -* ]] && { echo "$id"; return; }
  done
}

# ---------------------------------------------------------------- start

cmd_start() {
  local port="" dir="$DEFAULT_DIR" warmup=1 plugin=1
  local -a extra=() lnames=()
  while (( $# )); do
    case "$1" in
      --port) port="${2:?--port needs a value}"; shift 2 ;;
      --port=*) port="${1#*=}"; shift ;;
      --dir) dir="${2:?--dir needs a value}"; shift 2 ;;
      --dir=*) dir="${1#*=}"; shift ;;
      --config) extra+=("${2:?--config needs key=value}"); shift 2 ;;
      --config=*) extra+=("${1#*=}"); shift ;;
      --listener) lnames+=("${2:?--listener needs a name}"); shift 2 ;;
      --no-warmup) warmup=0; shift ;;
      --no-topology-plugin) plugin=0; shift ;;
      -h|--help) usage ;;
      *) log "start: unknown argument '$1'"; usage ;;
    esac
  done
  cmd_fetch
  local t0=$SECONDS t0ns
  t0ns=$(date +%s%N)
  dir="$(abs_dir "$dir")"

  if [[ -f "$dir/kafka.pid" ]] && is_kafka_pid "$(cat "$dir/kafka.pid")"; then
    die "a broker is already running from $dir (pid $(cat "$dir/kafka.pid")); run: $0 stop --dir $dir"
  fi

  if [[ -n "$port" ]]; then
    [[ "$port" =~ ^[0-9]+$ ]] || die "bad --port '$port'"
    port_in_use "$port" && die "port $port on 127.0.0.1 is already in use"
  else
    port="$(free_port)"
  fi
  local cport
  cport="$(free_port "$port")"
  local xl="" xa="" xenv="" ln lp
  for ln in ${lnames[@]+"${lnames[@]}"}; do
    [[ "$ln" =~ ^[A-Z0-9_]+$ ]] || die "bad --listener name '$ln'"
    lp="$(free_port "$cport")"
    xl+=",$ln://127.0.0.1:$lp"
    xa+=",$ln://127.0.0.1:$lp"
    xenv+="KAFKA_LISTENER_$ln=127.0.0.1:$lp"$'\n'
  done

  # Fresh cluster on every start: only our own files in $dir are removed.
  rm -rf "$dir/data" "$dir/kafka.log" "$dir/format.log" "$dir/kafka.pid" \
    "$dir/server.properties" "$dir/log4j2.properties" "$dir/kafka.env"
  mkdir -p "$dir/data"

  cat >"$dir/server.properties" <<EOF
# Written by test/kafka/kafka.sh start. Reference broker for coordinatord tests.
# One KRaft node that is both controller and broker, on loopback only.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport$xl
advertised.listeners=PLAINTEXT://127.0.0.1:$port$xa
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$dir/data

# Single node: every internal topic gets replication factor 1 and 1 partition.
offsets.topic.num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
num.partitions=1
default.replication.factor=1
auto.create.topics.enable=false

# Groups: no artificial delay before the first assignment.
group.initial.rebalance.delay.ms=0
group.streams.initial.rebalance.delay.ms=0

# Streams groups (KIP-1071) are on through the default
# group.coordinator.rebalance.protocols (classic,consumer,streams) plus the
# streams.version=1 feature set at format time.
EOF
  if (( plugin )); then
    cat >>"$dir/server.properties" <<'EOF'
# KIP-1331 topology descriptions need a plugin; this is the in-memory one
# shipped in kafka-server (reference/test use only: state is lost on restart).
group.streams.topology.description.plugin.class=org.apache.kafka.server.streams.InMemoryTopologyDescriptionPlugin
EOF
  fi
  if (( ${#extra[@]} )); then
    echo "# --config overrides" >>"$dir/server.properties"
    local kv
    for kv in "${extra[@]}"; do
      [[ "$kv" == *=* ]] || die "--config wants key=value, got '$kv'"
      echo "$kv" >>"$dir/server.properties"
    done
  fi

  cat >"$dir/log4j2.properties" <<'EOF'
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
EOF

  local cid
  cid="$(random_cluster_id)"
  if ! "$JAVA" -cp "$LIB/*" -Dlog4j2.configurationFile="$dir/log4j2.properties" \
      kafka.tools.StorageTool format \
      --cluster-id "$cid" --config "$dir/server.properties" \
      --feature streams.version=1 >"$dir/format.log" 2>&1; then
    cat "$dir/format.log" >&2
    die "formatting storage failed"
  fi

  launch_broker "$dir"
  local pid
  pid="$(cat "$dir/kafka.pid")"
  local deadline=$(( t0 + START_TIMEOUT )) ready=0
  wait_listening "$dir" "$pid" "$port" "$deadline" && ready=1
  if (( ready )) && (( warmup )); then
    ready=0
    while (( SECONDS < deadline )); do
      pid_alive "$pid" || break
      if find_coordinator_ok "$port"; then ready=1; break; fi
      sleep 0.2
    done
  fi
  if (( ! ready )); then
    tail -n 40 "$dir/kafka.log" >&2 || true
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$dir/kafka.pid"
    die "broker not ready on 127.0.0.1:$port after ${START_TIMEOUT}s (log: $dir/kafka.log)"
  fi

  local ms=$(( ($(date +%s%N) - t0ns) / 1000000 ))
  {
    echo "KAFKA_ADDR=127.0.0.1:$port"
    echo "KAFKA_PID=$pid"
    echo "KAFKA_DIR=$dir"
    printf '%s' "$xenv"
  } | tee "$dir/kafka.env"
  log "broker ready on 127.0.0.1:$port (controller 127.0.0.1:$cport, cluster $cid) in ${ms} ms"
}

# launch_broker runs the broker of $1's server.properties in the background (its own session,
# so that it outlives the caller) and records its pid in $1/kafka.pid.
launch_broker() {
  local dir="$1"
  # shellcheck disable=SC2086 # HEAP_OPTS / KAFKA_JAVA_OPTS are word lists
  setsid "$JAVA" $HEAP_OPTS -XX:+UseG1GC -Djava.awt.headless=true \
    ${KAFKA_JAVA_OPTS:-} \
    -Dlog4j2.configurationFile="$dir/log4j2.properties" \
    -cp "$LIB/*" kafka.Kafka "$dir/server.properties" \
    >>"$dir/kafka.log" 2>&1 </dev/null &
  echo "$!" >"$dir/kafka.pid"
}

# wait_listening DIR PID PORT DEADLINE: until the broker answers ApiVersions; dies if it exits.
wait_listening() {
  local dir="$1" pid="$2" port="$3" deadline="$4"
  while (( SECONDS < deadline )); do
    if ! pid_alive "$pid"; then
      tail -n 40 "$dir/kafka.log" >&2 || true
      rm -f "$dir/kafka.pid"
      die "broker exited during startup (log: $dir/kafka.log)"
    fi
    if api_versions_ok "$port"; then return 0; fi
    sleep 0.2
  done
  return 1
}

# cmd_restart starts again a broker that `start` set up and `stop` stopped, on its data as it was
# left (start always formats a fresh cluster): what a restart benchmark measures is the broker
# reloading its own logs and __consumer_offsets.
cmd_restart() {
  parse_dir_only "$@"
  find_java
  local dir t0=$SECONDS port
  dir="$(abs_dir "$DIR")"
  [[ -f "$dir/server.properties" && -d "$dir/data" ]] || die "restart: no broker set up in $dir (run start first)"
  if [[ -f "$dir/kafka.pid" ]] && is_kafka_pid "$(cat "$dir/kafka.pid")"; then
    die "restart: a broker is running from $dir (pid $(cat "$dir/kafka.pid")); stop it first"
  fi
  port="$(sed -n 's/^listeners=PLAINTEXT:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$dir/server.properties")"
  [[ -n "$port" ]] || die "restart: no PLAINTEXT listener in $dir/server.properties"
  launch_broker "$dir"
  local pid
  pid="$(cat "$dir/kafka.pid")"
  if ! wait_listening "$dir" "$pid" "$port" $(( t0 + START_TIMEOUT )); then
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$dir/kafka.pid"
    die "restart: broker not listening on 127.0.0.1:$port after ${START_TIMEOUT}s (log: $dir/kafka.log)"
  fi
  { echo "KAFKA_ADDR=127.0.0.1:$port"; echo "KAFKA_PID=$pid"; echo "KAFKA_DIR=$dir"; } | tee "$dir/kafka.env"
  log "broker restarted on 127.0.0.1:$port"
}

# ---------------------------------------------------------------- stop, status

parse_dir_only() {
  DIR="$DEFAULT_DIR"
  while (( $# )); do
    case "$1" in
      --dir) DIR="${2:?--dir needs a value}"; shift 2 ;;
      --dir=*) DIR="${1#*=}"; shift ;;
      -h|--help) usage ;;
      *) log "unknown argument '$1'"; usage ;;
    esac
  done
}

cmd_stop() {
  parse_dir_only "$@"
  local pidfile="$DIR/kafka.pid" pid
  if [[ ! -f "$pidfile" ]]; then
    log "no broker recorded in $DIR (no kafka.pid)"
    return 0
  fi
  pid="$(cat "$pidfile")"
  if ! is_kafka_pid "$pid"; then
    log "broker pid $pid from $DIR is not running"
    rm -f "$pidfile"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$(( SECONDS + STOP_TIMEOUT ))
  while pid_alive "$pid" && (( SECONDS < deadline )); do sleep 0.2; done
  if pid_alive "$pid"; then
    log "broker pid $pid still running after ${STOP_TIMEOUT}s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    while pid_alive "$pid"; do sleep 0.1; done
  fi
  rm -f "$pidfile" "$DIR/kafka.env"
  log "broker pid $pid stopped"
}

cmd_status() {
  parse_dir_only "$@"
  if [[ -f "$DIR/kafka.pid" ]] && is_kafka_pid "$(cat "$DIR/kafka.pid")"; then
    cat "$DIR/kafka.env" 2>/dev/null || echo "KAFKA_PID=$(cat "$DIR/kafka.pid")"
    return 0
  fi
  log "not running ($DIR)"
  return 1
}

# ---------------------------------------------------------------- main

(( $# )) || usage
sub="$1"; shift
case "$sub" in
  fetch) (( $# == 0 )) || usage; cmd_fetch ;;
  start) cmd_start "$@" ;;
  restart) cmd_restart "$@" ;;
  stop) cmd_stop "$@" ;;
  status) cmd_status "$@" ;;
  -h|--help|help) usage ;;
  *) log "unknown subcommand '$sub'"; usage ;;
esac
