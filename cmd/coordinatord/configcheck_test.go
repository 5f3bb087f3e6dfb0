package main

import (
	"bytes"
	"strings"
	"testing"
)

// `config check` of a scale-out node left with the default broker port range warns on stderr
// (several nodes on one host collide in it) and keeps stdout to the keys scripts read.
func TestConfigCheckWarnsOfTheDefaultBrokerPortRangeInScaleOut(t *testing.T) {
	cmd := newConfigCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"check", "--set", "listeners=PLAINTEXT://127.0.0.1:9092", "--set", "upstream.bootstrap.servers=kafka-1:9092",
		"--set", "log.backend=kafka", "--set", "cluster.id=c"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut.String(), "WARNING: gateway.broker.port.range is its default 9093-9192") {
		t.Fatalf("stderr %q, want the warning on the default range", errOut.String())
	}
	if strings.Contains(out.String(), "WARNING") {
		t.Fatal("the warning went to stdout, among the keys")
	}
}
