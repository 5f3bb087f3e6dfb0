package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// In gateway mode with authorizer.class.name the group APIs follow the upstream cluster's ACLs:
// a SCRAM client through the gateway joins and commits where the upstream's ACLs let it read
// the group and gets GROUP_AUTHORIZATION_FAILED where they do not; an ACL added with
// kafka-acls.sh through the gateway lands upstream (not in coordinatord) and then lets the
// client commit to the group it was denied, with no restart.
func TestGateway_GroupAPIsFollowTheUpstreamsACLs(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	adminAddr, saslAddr, caFile := startSASLKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	adm := kadm.NewClient(newClient(t, adminAddr))
	const topic = "acl-orders"
	// The gateway's user describes the cluster (its metadata, and DescribeAcls for the
	// mirror); alice owns her topic and may read the groups named app-*; ops manages ACLs.
	prepareSASLUpstream(t, ctx, adm, []string{"gw", "alice", "ops"}, topic,
		kadm.NewACLs().Allow("User:gw").AllowHosts().Topics("*").Clusters().Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Allow("User:alice").AllowHosts().Topics(topic).Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Allow("User:alice").AllowHosts().Groups("app-").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternPrefixed),
		kadm.NewACLs().Allow("User:ops").AllowHosts().Clusters().Operations(kadm.OpAlter, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral),
	)

	g := startSASLGateway(t, saslAddr, caFile, "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer")

	client := func(opts ...kgo.Opt) *kgo.Client {
		return newClient(t, g.Addr, append([]kgo.Opt{scramSHA256("alice", "alice-secret")}, opts...)...)
	}

	// Allowed: join, sync, fetch and commit in app-orders.
	consumer := client(kgo.ConsumerGroup("app-orders"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	for i := 0; i < 5; i++ {
		if err := consumer.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte{byte('0' + i)}}).FirstErr(); err != nil {
			t.Fatalf("alice produces to her topic: %v", err)
		}
	}
	for got := 0; got < 5; {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("alice consumes in app-orders: %v", err)
		}
		got += fs.NumRecords()
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("alice commits in app-orders: %v", err)
	}

	// Denied: no upstream ACL lets alice read the group "reports".
	alice := kadm.NewClient(client(kgo.RequestRetries(0)))
	commit := func(group string) error {
		resp, err := alice.CommitOffsets(ctx, group, kadm.Offsets{topic: {0: {Topic: topic, At: 1}}})
		if err != nil {
			return err
		}
		return resp.Error()
	}
	if err := commit("reports"); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("commit to reports: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}

	// ops grants it with kafka-acls.sh through the gateway.
	cmdConfig := filepath.Join(t.TempDir(), "ops.properties")
	if err := os.WriteFile(cmdConfig, []byte("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"+
		"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"ops\" password=\"ops-secret\";\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const tool = "org.apache.kafka.tools.AclCommand"
	kafkaTool(t, tool, g.Addr, "--command-config", cmdConfig, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", "reports")
	// It is the upstream's ACL, not one kept in coordinatord.
	bindings, err := adm.DescribeACLs(ctx, kadm.NewACLs().Groups("reports").ResourcePatternType(kadm.ACLPatternLiteral).
		AllowHosts().Allow().Operations(kadm.OpAny))
	if err != nil {
		t.Fatal(err)
	}
	if len(bindings) != 1 || bindings[0].Err != nil || len(bindings[0].Described) != 1 || bindings[0].Described[0].Principal != "User:alice" {
		t.Fatalf("upstream's ACLs on group reports: %+v", bindings)
	}
	if out := kafkaTool(t, tool, g.Addr, "--command-config", cmdConfig, "--list", "--group", "reports"); !strings.Contains(out, "principal=User:alice") {
		t.Fatalf("kafka-acls.sh --list through the gateway:\n%s", out)
	}
	// The denial reads the upstream's ACLs again; the commit succeeds on a retry, well within
	// upstream.acls.refresh.interval.ms.
	for {
		err := commit("reports")
		if err == nil {
			break
		}
		if !errors.Is(err, kerr.GroupAuthorizationFailed) {
			t.Fatalf("commit to reports after the grant: %v", err)
		}
		select {
		case <-ctx.Done():
			t.Fatal("the ACL added upstream never applied to the group APIs")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Two nodes (log.backend=kafka) with authorizer.class.name, reading the upstream's ACLs only
// every hour: an ACL deleted through the node that does not coordinate a group stops applying
// on the node that does before the DeleteAcls is answered, as a revocation on a Kafka cluster
// applies on every broker within milliseconds.
func TestGateway_ACLDeletedThroughOneNodeAppliesOnTheOther(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	adminAddr, saslAddr, caFile := startSASLKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	adm := kadm.NewClient(newClient(t, adminAddr))
	const topic = "revoke-orders"
	// gw is coordinatord's own user: its state topic, membership group and transactional ids,
	// the cluster's metadata and ACLs, and the markers between nodes.
	prepareSASLUpstream(t, ctx, adm, []string{"gw", "alice", "ops"}, topic,
		kadm.NewACLs().Allow("User:gw").AllowHosts().Topics("*").Groups("*").TransactionalIDs("*").Clusters().
			Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Allow("User:alice").AllowHosts().Topics(topic).Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Allow("User:alice").AllowHosts().Groups("app-").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternPrefixed),
		kadm.NewACLs().Allow("User:ops").AllowHosts().Clusters().Operations(kadm.OpAlter, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral),
	)
	run := time.Now().UnixNano()
	sets := append([]string{"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"upstream.acls.refresh.interval.ms=3600000",
		"log.backend=kafka", fmt.Sprintf("log.kafka.topic=state-%d", run), fmt.Sprintf("cluster.id=rv%d", run),
		fmt.Sprintf("offsets.topic.num.partitions=%d", scaleOutShards), "offsets.topic.replication.factor=1", "log.kafka.min.insync.replicas=1"},
		scaleOutTimings...)
	s := &scaleOut{t: t, nodes: map[int32]*gateway{}, shards: scaleOutShards}
	for _, id := range []int32{2001, 2002} {
		s.nodes[id] = startSASLGateway(t, saslAddr, caFile, append(append([]string{}, sets...), fmt.Sprintf("node.id=%d", id))...)
	}
	s.waitSpread(90*time.Second, 2001, 2002)

	alice := kadm.NewClient(newClient(t, s.nodes[2001].Addr, scramSHA256("alice", "alice-secret"), kgo.RequestRetries(0)))
	const group = "app-revoked"
	owner := coordinatorOf(ctx, t, alice, group)
	other := int32(2001)
	if owner == 2001 {
		other = 2002
	}
	commit := func() error {
		resp, err := alice.CommitOffsets(ctx, group, kadm.Offsets{topic: {0: {Topic: topic, At: 1}}})
		if err != nil {
			return err
		}
		return resp.Error()
	}
	if err := commit(); err != nil {
		t.Fatalf("alice commits in %s on node %d: %v", group, owner, err)
	}

	// Sent to the node that does not coordinate the group: an admin client (kafka-acls.sh) sends
	// DeleteAcls to whichever node it likes.
	ops := newClient(t, s.nodes[other].Addr, scramSHA256("ops", "ops-secret"))
	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType = kmsg.ACLResourceTypeGroup, kmsg.StringPtr("app-"), kmsg.ACLResourcePatternTypePrefixed
	f.Principal, f.Host, f.Operation, f.PermissionType = kmsg.StringPtr("User:alice"), kmsg.StringPtr("*"), kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	del.Filters = append(del.Filters, f)
	resp, err := del.RequestWith(ctx, ops.Broker(int(other)))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Results) != 1 || resp.Results[0].ErrorCode != 0 || len(resp.Results[0].MatchingACLs) != 1 {
		t.Fatalf("DeleteAcls through node %d: %+v", other, resp.Results)
	}
	if err := commit(); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("commit on node %d right after the grant was deleted through node %d: %v, want GROUP_AUTHORIZATION_FAILED", owner, other, err)
	}
	if n := metric(s.nodes[other], `coordinatord_gateway_acl_change_rereads_total{result="applied",target="peer"}`); n < 1 {
		t.Errorf("node %d counts %v notices applied by its peer, want at least 1", other, n)
	}
}
