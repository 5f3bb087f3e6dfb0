# coordinatord build entry points. `make run` and `make test` are the two commands a fresh
# machine needs (README.md).
GO        ?= go
BIN       := bin/coordinatord
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)
# A count of inputs, not a duration: Go 1.26's fuzz coordinator can fail a duration-bounded run
# with a bare "context deadline exceeded" at its deadline, no crasher written (golang/go#75804,
# fixed in Go 1.27; a CI run here hit it on FuzzReadFrame). 100000 inputs take 2-15 s a target here.
FUZZTIME  ?= 100000x
# The load tool is a module of its own so the server's module carries none of its dependencies
# (charts, kfake); `go mod tidy` must leave both modules unchanged.
BENCH_MOD := cmd/coordbench
# Fuzz targets: package:Target, each run for FUZZTIME by `make fuzz` (and so by `make test`).
FUZZ_TARGETS := ./internal/wire:FuzzReadFrame ./internal/wire:FuzzParseRequest \
	./internal/state/log/segment:FuzzDecodeBatch ./internal/state/streams/assign:FuzzAssign \
	./internal/state/classic:FuzzGroupRecord \
	./internal/state/streams/classicproto:FuzzDecodeSubscription ./internal/state/streams/classicproto:FuzzDecodeAssignment \
	./internal/state/streams/classicproto:FuzzDecodeMember \
	./internal/gateway:FuzzRewriteAnswer ./internal/gateway:FuzzRewriteFetch \
	./internal/gateway:FuzzRewriteProduce ./internal/gateway:FuzzRewriteBrokerLists \
	./internal/gateway:FuzzRequestReaders ./internal/gateway:FuzzRequestReadersBuilt \
	./internal/gateway:FuzzMergeVersions ./internal/gateway:FuzzMergeFeatures \
	./internal/gateway:FuzzClaimedUser \
	./internal/upstream:FuzzRoundTripAnswer

.PHONY: build run demo demo-stop test tools unit fuzz bench bench-gateway microbench lint conformance conformance-gateway e2e soak clean console-test deploy-check

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/coordinatord

run: build
	./$(BIN) serve --config configs/coordinatord.properties --log-format console

# The quickstart (docs/quickstart.md): Kafka 4.4 upstream, coordinatord in gateway mode and the
# Kafka Streams word count, on this machine.
demo:
	deploy/demo/demo.sh start

demo-stop:
	deploy/demo/demo.sh stop

test: lint tools unit fuzz

# What the console and deploy tests need beyond Go (chromium, promtool, kubeconform), installed
# only when missing, so `make test` stays the one command on a fresh machine.
tools:
	test/install-tools.sh

# The console test's Chromium screenshots (test/integration/console_test.go) land in
# bin/test-output/console/, one PNG per page, from the same run.
CONSOLE_SCREENSHOT_DIR ?= $(CURDIR)/bin/test-output/console
# test/integration's tests run side by side (each runs a daemon of its own on ports it picks),
# and spend most of their time waiting on sessions and timers, not on the two cores.
TEST_PARALLEL ?= 4
unit:
	CONSOLE_SCREENSHOT_DIR=$(CONSOLE_SCREENSHOT_DIR) $(GO) test -race -count=1 -timeout 15m -parallel $(TEST_PARALLEL) ./...
	cd $(BENCH_MOD) && $(GO) test -race -count=1 ./...

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$pkg $$name for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

# Hostile-client soak beside well-behaved groups (test/soak, docs/reliability.md). `make test`
# runs it for 25 s; this runs it for SOAKTIME, with SOAKSEED to replay a failure.
SOAKTIME  ?= 5m
SOAKSEED  ?= 0
soak:
	$(GO) test -count=1 -v -run 'TestHostileSoak' -timeout 60m ./test/soak \
		-soak.duration=$(SOAKTIME) -soak.seed=$(SOAKSEED) -soak.rate=0

# Differential run against Apache Kafka 4.4 (installs Java/Maven and fetches the broker's jars
# when missing; see test/conformance/README.md).
conformance:
	test/conformance/run.sh

# The same scenarios with coordinatord in gateway mode in front of the reference broker, diffed
# against the broker directly (about 3 minutes; test/conformance/README.md).
conformance-gateway:
	CONFORMANCE_GATEWAY=1 test/conformance/run.sh

# Gateway mode end to end: coordinatord in front of a real Kafka 4.4 broker with real clients
# (installs Java/Maven and fetches the broker when missing; see docs/gateway.md).
e2e:
	test/e2e/run.sh

# Load comparison of coordinatord, Kafka 4.4 (when Java is available) and kfake; rewrites
# docs/benchmarks.md and its charts, then the gateway hop (bench-gateway), then a restart with
# 1M committed offsets against Kafka's, then the Kafka backend's rows (issue 18): offset commits
# at 8 and 64 clients on log.backend=kafka, the local log and Kafka itself, matched by partition
# count (below), and the fail-over of a shard of 1M offsets. The other tables go to
# bin/benchmarks-{gateway,restart,kafka-backend,kafka-backend-50,failover}.md, from which the
# pages that explain them (docs/benchmarks-gateway.md, docs/benchmarks-storage.md) are updated by
# hand. Takes about 25 minutes (the suite 11.5, of which the issue-12 scenarios
# offset-commit-10k-groups, streams-heartbeat-scaling and mixed-load(-idle) took 260 s in one run
# on a loaded 2-core machine and streams-heartbeat-paced, the scaling rows at one rate, about 90 s;
# the gateway 3; the restart 4, with 20 s of commits per target after it for the resident memory
# under traffic; the Kafka backend's three 3, 2 and 1).
bench: build
	cd $(BENCH_MOD) && $(GO) build -o ../../bin/coordbench .
	bin/coordbench suite --coordinatord $(BIN) --out docs/benchmarks.md --charts docs/img
	bin/coordbench gateway --coordinatord $(BIN) --upstream $(GATEWAY_UPSTREAM) --out bin/benchmarks-gateway.md
	bin/coordbench restart --coordinatord $(BIN) --rounds 2 --traffic 20s --out bin/benchmarks-restart.md
	bin/coordbench gateway --coordinatord $(BIN) --upstream $(GATEWAY_UPSTREAM) --scenario offset-commit --clients 8,64 --rounds 3 --duration 5s \
		--also '$(KAFKA_BACKEND_1)' --also '$(KAFKA_BACKEND_50)' \
		--out bin/benchmarks-kafka-backend.md --results bin/coordbench-kafka-backend-results.json
	bin/coordbench gateway --coordinatord $(BIN) --upstream auto --upstream-config offsets.topic.num.partitions=50 \
		--scenario offset-commit --clients 8,64 --rounds 3 --duration 5s --also '$(KAFKA_BACKEND_50)' \
		--out bin/benchmarks-kafka-backend-50.md --results bin/coordbench-kafka-backend-50-results.json
	bin/coordbench restart --coordinatord $(BIN) --kafka off --failover --clients 64 --rounds 2 --out bin/benchmarks-failover.md

# The offset-commit rows of log.backend=kafka (issue 18): gateways on the Kafka backend beside the
# one on the local log and Kafka itself, in one run. Kafka's own commits go to as many partitions
# as the broker's offsets.topic.num.partitions (test/kafka/kafka.sh: 1), coordinatord's to one
# partition per shard, and the broker's cost per commit grows with the partitions a transaction
# touches: so the first run sets a 1-shard backend against kafka.sh's broker and keeps the 50-shard
# default beside it, and the second sets the 50-shard backend against a broker with 50 offsets
# partitions (docs/benchmarks-storage.md, "Matched partition counts"; with GATEWAY_UPSTREAM set,
# the first pair is matched only if that broker has one offsets partition). Each target has its own
# cluster.id and topic so that they neither fence each other nor share a topic of another
# partition count.
KAFKA_BACKEND_SETS = set=log.backend=kafka,set=offsets.topic.replication.factor=1,set=log.kafka.min.insync.replicas=1
KAFKA_BACKEND_1 = kafka-backend-1-shard=$(BIN),$(KAFKA_BACKEND_SETS),set=offsets.topic.num.partitions=1,set=cluster.id=coordbench1,set=log.kafka.topic=__coordbench_state_1
KAFKA_BACKEND_50 = kafka-backend-50-shards=$(BIN),$(KAFKA_BACKEND_SETS),set=offsets.topic.num.partitions=50,set=cluster.id=coordbench50,set=log.kafka.topic=__coordbench_state_50

# Produce and fetch straight to a Kafka 4.4 broker against through coordinatord's gateway
# (docs/benchmarks-gateway.md). GATEWAY_UPSTREAM=host:port[,pid=PID] reuses a running broker;
# the default starts one with test/kafka/kafka.sh. About 3 minutes.
GATEWAY_UPSTREAM ?= auto
bench-gateway: build
	cd $(BENCH_MOD) && $(GO) build -o ../../bin/coordbench .
	bin/coordbench gateway --coordinatord $(BIN) --upstream $(GATEWAY_UPSTREAM) --out bin/benchmarks-gateway.md

# Go micro-benchmarks of single components (storage, assignors, ...).
microbench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
	cd $(BENCH_MOD) && $(GO) test -run '^$$' -bench . -benchmem ./...

# deploy/ checked with the tools operators use (test/deploy): promtool on the alert rules, their
# unit tests and the dashboard's queries; kubeconform (strict, Kubernetes 1.34 API schemas from
# the Go module proxy) on deploy/kubernetes; `config check` on its ConfigMap. `make unit` runs
# the same tests. Tools: test/install-tools.sh.
deploy-check:
	$(GO) test -count=1 -v ./test/deploy

# The web console in headless Chromium alone (docs/console.md), leaving each page's screenshot
# in bin/test-output/console/ as `make unit` does.
console-test:
	CONSOLE_SCREENSHOT_DIR=$(CONSOLE_SCREENSHOT_DIR) $(GO) test -race -count=1 -run 'TestConsole' ./test/integration

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd $(BENCH_MOD) && $(GO) vet ./...
	$(GO) mod tidy -diff
	cd $(BENCH_MOD) && $(GO) mod tidy -diff
	$(GO) vet -tags testhooks ./cmd/coordinatord
	$(GO) test -count=1 ./test/layers

clean:
	rm -rf bin
