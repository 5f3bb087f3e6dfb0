package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Apache Kafka 4.4's kafka-configs.sh manages SCRAM users of a standalone coordinatord
// (AlterUserScramCredentials, then DescribeClientQuotas and DescribeUserScramCredentials for
// --describe), and the user it creates logs in on a SASL listener. docs/security.md runs these
// commands.
func TestKafkaConfigsManagesSCRAMUsers(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	base := freePortRange(t, 2)
	saslAddr := "127.0.0.1:" + strconv.Itoa(base+1)
	g := &gateway{t: t, DataDir: t.TempDir(), standalone: true, Addr: "127.0.0.1:" + strconv.Itoa(base),
		sets: []string{"listeners=PLAINTEXT://127.0.0.1:" + strconv.Itoa(base) + ",SASL_PLAINTEXT://" + saslAddr}}
	g.start()
	const tool = "org.apache.kafka.tools.ConfigCommand"

	out := kafkaTool(t, tool, g.Addr, "--alter", "--entity-type", "users", "--entity-name", "alice",
		"--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret]")
	if !strings.Contains(out, "Completed updating config for user alice.") {
		t.Fatalf("kafka-configs --alter: %s", out)
	}
	out = kafkaTool(t, tool, g.Addr, "--describe", "--entity-type", "users", "--entity-name", "alice")
	if !strings.Contains(out, "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192") {
		t.Fatalf("kafka-configs --describe: %s", out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	login := func(pass string) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(saslAddr), kgo.SASL(scram.Auth{User: "alice", Pass: pass}.AsSha256Mechanism()),
			kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		_, err = kadm.NewClient(cl).ListGroups(ctx)
		return err
	}
	if err := login("alice-secret"); err != nil {
		t.Fatalf("alice as kafka-configs created her: %v", err)
	}

	kafkaTool(t, tool, g.Addr, "--alter", "--entity-type", "users", "--entity-name", "alice", "--delete-config", "SCRAM-SHA-256")
	out = kafkaTool(t, tool, g.Addr, "--describe", "--entity-type", "users", "--entity-name", "alice")
	if strings.Contains(out, "SCRAM-SHA-256") {
		t.Fatalf("kafka-configs --describe after --delete-config: %s", out)
	}
	if err := login("alice-secret"); err == nil {
		t.Fatal("alice logged in after her credential was deleted")
	}
}
