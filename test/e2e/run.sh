#!/usr/bin/env bash
# End-to-end run of gateway mode: coordinatord in front of a real Apache Kafka 4.4 broker
# (streams groups off), driven by real clients. Entry point of `make e2e` and .ci/run.
#
#   test/e2e/run.sh [go test flags...]     e.g. -run 'TestGateway_ListGroups'
#
# Installs Java (17+) and Maven with apt-get when they are missing, fetches the broker's jars,
# then runs `go test ./test/e2e` with E2E=1; the test starts and stops coordinatord and the
# broker. E2E_KAFKA_ADDR=host:port uses a broker already running (started with
# `test/kafka/kafka.sh start --no-topology-plugin --config group.coordinator.rebalance.protocols=classic,consumer`).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
log() { echo "e2e: $*" >&2; }
# shellcheck source=../kafka/deps.sh
source "$ROOT/test/kafka/deps.sh"

if [[ -z "${E2E_KAFKA_ADDR:-}" ]]; then
  install_java_maven
  test/kafka/kafka.sh fetch
fi
tmp="$(mktemp -d "${TMPDIR:-/tmp}/e2e-run.XXXXXX")"
cleanup() {
  test/kafka/kafka.sh stop --dir "$tmp/kafka" >/dev/null 2>&1 || true
  test/kafka/kafka.sh stop --dir "$tmp/kafkalog" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

start=$SECONDS
# The Kafka log backend's broker tests (internal/state/log/kafkalog) run beside the e2e tests,
# against a broker of their own: they create, compact and fence their own topic and
# transactional ids, and most of their time is spent waiting on the broker.
kafkalog_tests() (
  set +e
  addr="$(test/kafka/kafka.sh start --dir "$tmp/kafkalog" --no-warmup | sed -n 's/^KAFKA_ADDR=//p')" || return 1
  KAFKALOG_KAFKA_ADDR="$addr" go test -race -count=1 -timeout 5m -v ./internal/state/log/kafkalog 2>&1 |
    grep -v -e '^=== RUN' -e '^=== PAUSE' -e '^=== CONT' -e '^=== NAME'
  rc=${PIPESTATUS[0]}
  test/kafka/kafka.sh stop --dir "$tmp/kafkalog" >/dev/null 2>&1 || true
  exit "$rc"
)
kafkalog_status=0
if [[ -z "${E2E_NO_KAFKALOG:-}" && "$*" != *-run* ]]; then
  kafkalog_tests >"$tmp/kafkalog.out" 2>&1 &
  kafkalog_pid=$!
fi
# Independent tests run side by side (t.Parallel): each starts its own coordinatord and names its
# own topics, and most of their time is spent waiting on sessions, JVMs and the broker.
E2E=1 E2E_KAFKA_DIR="$tmp/kafka" go test -count=1 -timeout 30m -parallel "${E2E_PARALLEL:-4}" -v ./test/e2e "$@" 2>&1 |
  grep -v -e '^=== RUN' -e '^=== PAUSE' -e '^=== CONT' -e '^=== NAME'
status=${PIPESTATUS[0]}
if [[ -n "${kafkalog_pid:-}" ]]; then
  wait "$kafkalog_pid" || kafkalog_status=$?
  cat "$tmp/kafkalog.out"
  (( kafkalog_status == 0 )) || status=1
fi
if (( status != 0 )); then
  log "FAILED after $(( SECONDS - start )) s"
  exit 1
fi
log "passed in $(( SECONDS - start )) s"
