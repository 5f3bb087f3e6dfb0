#!/usr/bin/env bash
# Resolves the Kafka Connect 4.4 jars (Maven) and compiles src/*.java with javac into
# .cache/classes, with the ServiceLoader manifests that let a worker skip scanning its classpath
# for plugins (plugin.discovery=service_load). Prints the classpath to run a worker with. Cheap
# when nothing changed.
set -euo pipefail
dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="$dir/.cache"
stamp="$cache/pom.sha"
sum="$(sha256sum "$dir/pom.xml" | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$sum" || ! -d "$cache/lib" ]]; then
  rm -rf "$cache/lib"
  echo "connectapp: resolving Kafka Connect jars (first run only) ..." >&2
  mvn -B -q -f "$dir/pom.xml" dependency:copy-dependencies >&2
  echo "$sum" >"$stamp"
fi
src_sum="$(cat "$dir"/src/*.java | sha256sum | cut -d' ' -f1)"
if [[ ! -f "$cache/classes/LineConnectors.class" || "$(cat "$cache/src.sha" 2>/dev/null)" != "$src_sum" ]]; then
  rm -rf "$cache/classes"
  mkdir -p "$cache/classes/META-INF/services"
  javac -nowarn -d "$cache/classes" -cp "$cache/lib/*" "$dir"/src/*.java >&2
  echo 'LineConnectors$Source' >"$cache/classes/META-INF/services/org.apache.kafka.connect.source.SourceConnector"
  echo 'LineConnectors$Sink' >"$cache/classes/META-INF/services/org.apache.kafka.connect.sink.SinkConnector"
  echo "$src_sum" >"$cache/src.sha"
fi
echo "$cache/classes:$cache/lib/*"
