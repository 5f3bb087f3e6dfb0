package main

import (
	"strings"
	"testing"
)

func TestParseTarget(t *testing.T) {
	tg, err := parseTarget("kafka=127.0.0.1:9092,pid=42")
	if err != nil || tg.Name != "kafka" || tg.Addr != "127.0.0.1:9092" || tg.PID != 42 {
		t.Fatalf("got %+v, %v", tg, err)
	}
	tg, err = parseTarget("c=127.0.0.1:1")
	if err != nil || tg.PID != 0 {
		t.Fatalf("got %+v, %v", tg, err)
	}
	for _, bad := range []string{"", "noaddr", "=127.0.0.1:1", "x=", "x=a:1,pid=0", "x=a:1,pid=abc", "x=a:1,color=red"} {
		if _, err := parseTarget(bad); err == nil {
			t.Errorf("parseTarget(%q) accepted", bad)
		}
	}
}

func TestPickScenarios(t *testing.T) {
	all, err := pickScenarios([]string{"all"})
	if err != nil || len(all) < 5 || all[0].Name() != "metadata" {
		t.Fatalf("all: %d scenarios, %v", len(all), err)
	}
	if _, err := pickScenarios([]string{"nope"}); err == nil || !strings.Contains(err.Error(), "offset-commit") {
		t.Errorf("unknown scenario error should list the known ones: %v", err)
	}
}

func TestParseEnv(t *testing.T) {
	env := parseEnv("KAFKA_ADDR=127.0.0.1:1\nKAFKA_PID='7'\n\nnoise\n")
	if env["KAFKA_ADDR"] != "127.0.0.1:1" || env["KAFKA_PID"] != "7" {
		t.Errorf("got %v", env)
	}
}

// A startup target's settings apply to a gateway it starts; on a broker address they would be
// silently ignored, so they are refused.
func TestParseStartupTarget(t *testing.T) {
	tg, err := parseStartupTarget("gw=gateway,protocol=streams,set=group.streams.join.creates.internal.topics=false")
	if err != nil || tg.addr != "gateway" || tg.protocol != "streams" || len(tg.sets) != 1 || tg.sets[0] != "group.streams.join.creates.internal.topics=false" {
		t.Fatalf("got %+v, %v", tg, err)
	}
	if tg, err := parseStartupTarget("k=127.0.0.1:9092"); err != nil || tg.protocol != "streams" {
		t.Fatalf("default protocol: %+v, %v", tg, err)
	}
	for _, bad := range []string{"", "noaddr", "k=127.0.0.1:1,protocol=consumer", "k=127.0.0.1:1,set=a=b", "gw=gateway,set=novalue", "k=a:1,color=red"} {
		if _, err := parseStartupTarget(bad); err == nil {
			t.Errorf("parseStartupTarget(%q) accepted", bad)
		}
	}
}

// The gateway suite is not the coordinator suite: `make bench` must not start measuring brokers.
func TestAllScenariosLeaveOutTheGatewaySuite(t *testing.T) {
	all, _ := pickScenarios([]string{"all"})
	for _, s := range all {
		if strings.HasPrefix(s.Name(), "produce-") || strings.HasPrefix(s.Name(), "fetch-") {
			t.Errorf("suite runs %s", s.Name())
		}
	}
}
