package e2e

import (
	"strings"
	"testing"
)

// Apache Kafka 4.4's kafka-acls.sh (AclCommand) manages coordinatord's ACLs as a broker's:
// add with prefixed patterns and hosts, list, remove.
func TestStandalone_KafkaAclsToolWorks(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	addr := startStandalone(t, "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer", "super.users=User:ANONYMOUS").Addr
	const tool = "org.apache.kafka.tools.AclCommand"
	kafkaTool(t, tool, addr, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", "app-", "--resource-pattern-type", "prefixed")
	kafkaTool(t, tool, addr, "--add", "--deny-principal", "User:bob", "--deny-host", "10.0.0.1", "--operation", "All", "--topic", "orders")
	out := kafkaTool(t, tool, addr, "--list")
	for _, want := range []string{
		"ResourcePattern(resourceType=GROUP, name=app-, patternType=PREFIXED)",
		"(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
		"ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)",
		"(principal=User:bob, host=10.0.0.1, operation=ALL, permissionType=DENY)",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("kafka-acls.sh --list lacks %q:\n%s", want, out)
		}
	}
	kafkaTool(t, tool, addr, "--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read", "--group", "app-", "--resource-pattern-type", "prefixed")
	out = kafkaTool(t, tool, addr, "--list", "--group", "app-", "--resource-pattern-type", "prefixed")
	if strings.Contains(out, "User:alice") {
		t.Fatalf("the removed ACL is still listed:\n%s", out)
	}
	if out := kafkaTool(t, tool, addr, "--list", "--topic", "orders"); !strings.Contains(out, "User:bob") {
		t.Fatalf("removing alice's ACL removed bob's:\n%s", out)
	}
}
