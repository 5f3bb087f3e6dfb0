// Package conformance is the differential conformance harness: it runs scenario scripts
// (testdata/*.txt) against coordinatord and against a real Apache Kafka 4.4 broker
// (test/kafka), normalizes what legitimately differs between two servers, and diffs every
// response field by field. A difference is either fixed in coordinatord or explained: an
// exception in the scenario names a row of docs/conformance.md.
//
// Files: script.go parses scenarios, tree.go maps kmsg messages to and from the JSON-like
// view scenarios use, conn.go is a simulated client (one raw TCP connection), run.go runs a
// scenario on one server, compare.go holds expect, normalization and diff, apitable.go the
// ApiVersions table, differential.go the cross-server comparison. The tests
// (conformance_test.go) start the servers. README.md describes the scenario format.
package conformance
