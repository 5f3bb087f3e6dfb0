#!/usr/bin/env bash
# Sourced by the scripts that run the reference broker (test/conformance/run.sh, test/e2e/run.sh):
# install_java_maven installs a Java 17+ JDK and Maven with apt-get when they are missing, so that a
# clean machine (CI) needs nothing installed by hand. Expects a log function.

java_ok() {
  local j v major
  j="${KAFKA_JAVA:-}"
  if [[ -z "$j" && -n "${JAVA_HOME:-}" && -x "${JAVA_HOME}/bin/java" ]]; then j="$JAVA_HOME/bin/java"; fi
  if [[ -z "$j" ]]; then j="$(command -v java || true)"; fi
  [[ -n "$j" && -x "$j" ]] || return 1
  v="$("$j" -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n1)"
  major="${v%%[.+-]*}"
  [[ "$major" =~ ^[0-9]+$ ]] && (( major >= 17 ))
}

install_java_maven() {
  local -a pkgs=()
  # A JDK, not only a runtime: test/e2e compiles its Kafka Streams application with javac.
  if ! java_ok || ! command -v javac >/dev/null 2>&1; then pkgs+=(default-jdk-headless); fi
  command -v mvn >/dev/null 2>&1 || pkgs+=(maven)
  (( ${#pkgs[@]} )) || return 0
  local sudo=""
  if [[ "$(id -u)" != 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo="sudo"
    else
      log "missing ${pkgs[*]} and not root (no sudo): install Java 17+ and Maven, then rerun"
      exit 1
    fi
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    log "missing ${pkgs[*]} and no apt-get: install Java 17+ and Maven, then rerun"
    exit 1
  fi
  log "installing ${pkgs[*]} (apt-get)"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
  java_ok || { log "Java 17+ still not found after installing ${pkgs[*]}"; exit 1; }
}

