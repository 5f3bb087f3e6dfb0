package integration

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// connectCounter counts the client's successful broker connections, to tell a request on an
// open connection from one that needed a new (re-authenticated) connection.
type connectCounter struct{ n atomic.Int32 }

func (c *connectCounter) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		c.n.Add(1)
	}
}

// groupOps is the authorized_operations bitfield of the GROUP operations given.
func groupOps(ops ...kmsg.ACLOperation) int32 {
	var bits int32
	for _, op := range ops {
		bits |= 1 << op
	}
	return bits
}

// Issue 13's first test, in one standalone daemon as an operator would run it: a SASL_SSL
// listener with a CA and server certificate made here, StandardAuthorizer without the
// allow-everyone default, super.users=User:admin (a PLAIN user of the users file), and SCRAM
// users alice and bob that admin creates over the wire. The ACLs name SASL principals; every
// client connects from the same host, so only the principal tells them apart.
func TestACLsOnSASLPrincipalsOverTLS(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	d, sets := saslDaemon(t, p, append(append([]string{standardAuthorizer, "super.users=User:admin",
		"allow.everyone.if.no.acl.found=false", "group.initial.rebalance.delay.ms=0"}, consumerKeys...), streamsTestSettings...)...)
	// kadm resolves a commit's topics with metadata it caches for the metadata min age
	// (errors included): the clients here reuse it for no longer than 10 ms, so that a request
	// right after an ACL change is decided by the new ACLs, not by an answer cached before.
	as := func(mech sasl.Mechanism, opts ...kgo.Opt) []kgo.Opt {
		return append([]kgo.Opt{kgo.SeedBrokers(d.Listeners["SASL_SSL"]), kgo.DialTLSConfig(p.clientTLS()), kgo.SASL(mech),
			kgo.MetadataMinAge(10 * time.Millisecond)}, opts...)
	}
	adminLogin := plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()
	aliceLogin := scramSHA256("alice", "alice-secret")
	bobLogin := scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism()

	adminCl := d.client(as(adminLogin)...)
	admin := kadm.NewClient(adminCl)
	if res, err := admin.AlterUserSCRAMs(ctxT(t), nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-secret"},
		{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-secret"},
	}); err != nil || res.Error() != nil {
		t.Fatalf("the super user creating SCRAM users: %v %v", err, res.Error())
	}
	createTopic(t, admin, "orders", 3)
	createTopic(t, admin, "s-0", 1) // the source topic of streamsHeartbeatReq's topology

	for name, login := range map[string]sasl.Mechanism{
		"wrong SCRAM password":             scramSHA256("alice", "alice-wrong"),
		"unknown user":                     scramSHA256("mallory", "alice-secret"),
		"super user, wrong PLAIN password": plain.Auth{User: "admin", Pass: "admin-wrong"}.AsMechanism(),
	} {
		cl := d.client(as(login, kgo.RetryTimeout(time.Second), kgo.RequestRetries(0))...)
		if _, err := kadm.NewClient(cl).ListGroups(ctxT(t)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("%s: %v, want SASL_AUTHENTICATION_FAILED", name, err)
		}
		cl.Close()
	}

	commit := func(adm *kadm.Client, group string, at int64) error {
		offs := kadm.Offsets{}
		for p := int32(0); p < 3; p++ {
			offs.AddOffset("orders", p, at+int64(p), -1)
		}
		res, err := adm.CommitOffsets(ctxT(t), group, offs)
		if err != nil {
			return err
		}
		return res.Error()
	}
	fetched := func(adm *kadm.Client, group string) (string, error) {
		res, err := adm.FetchOffsets(ctxT(t), group)
		if err != nil {
			return "", err
		}
		if err := res.Error(); err != nil {
			return "", err
		}
		out := ""
		for p := int32(0); p < 3; p++ {
			o, _ := res.Lookup("orders", p)
			out += fmt.Sprintf("%d ", o.At)
		}
		return out, nil
	}

	createACLs := func(b *kadm.ACLBuilder) {
		t.Helper()
		res, err := admin.CreateACLs(ctxT(t), b)
		if err != nil {
			t.Fatalf("CreateAcls: %v", err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("CreateAcls %s %s: %v %s", r.Type, r.Name, r.Err, r.ErrMessage)
			}
		}
	}
	allowAlice := func() *kadm.ACLBuilder { return kadm.NewACLs().Allow("User:alice").AllowHosts() }

	// alice without any ACL: her consumer (kgo joins once it has the topic's metadata) is
	// refused the topic, her offset fetches the group.
	var aliceConnects connectCounter
	aliceCl := d.client(as(aliceLogin, kgo.WithHooks(&aliceConnects))...)
	alice := kadm.NewClient(aliceCl)
	// A consumer retries a refused topic's metadata after the metadata min age.
	orders := d.groupMember(t, "app-orders", "orders", as(aliceLogin, kgo.MetadataMinAge(200*time.Millisecond))...)
	eventually(t, "alice's consumer refused TOPIC_AUTHORIZATION_FAILED", func() bool { return orders.polled(kerr.TopicAuthorizationFailed) })
	topics, err := alice.ListTopics(ctxT(t), "orders")
	if err == nil {
		err = topics["orders"].Err
	}
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice's metadata of orders without an ACL: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if _, err := fetched(alice, "app-offsets"); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("alice's offset fetch without an ACL: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}

	// READ on orders (and DESCRIBE on the topics prefixed s-, her streams topology's): the
	// running consumer gets the topic and goes on to the group, which refuses it, as it
	// refuses her commits (kadm sends them once it may see the topic).
	createACLs(allowAlice().Topics("orders").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead))
	createACLs(allowAlice().Topics("s-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpDescribe))
	eventually(t, "alice's consumer refused GROUP_AUTHORIZATION_FAILED", func() bool { return orders.polled(kerr.GroupAuthorizationFailed) })
	if err := commit(alice, "app-offsets", 100); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("alice's commit without a group ACL: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}

	// READ on the groups prefixed app-, and two more operations on two groups for the
	// AuthorizedOperations below.
	connectsBefore := aliceConnects.n.Load()
	createACLs(allowAlice().Groups("app-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead))
	createACLs(allowAlice().Groups("app-cg").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpDelete))
	createACLs(allowAlice().Groups("app-streams").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpAlterConfigs))

	// The bindings apply to the next request of alice's open connection: no restart, no
	// reconnection.
	if err := commit(alice, "app-offsets", 100); err != nil {
		t.Fatalf("alice's commit after the ACLs: %v", err)
	}
	if got, err := fetched(alice, "app-offsets"); err != nil || got != "100 101 102 " {
		t.Fatalf("alice's fetch after the ACLs: %q %v", got, err)
	}
	if n := aliceConnects.n.Load(); n != connectsBefore {
		t.Fatalf("alice's client opened %d connections to be allowed; the ACLs should apply on the open one", n-connectsBefore)
	}
	// bob, authenticated as well, holds no ACL.
	bob := kadm.NewClient(d.client(as(bobLogin)...))
	if _, err := fetched(bob, "app-offsets"); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("bob's offset fetch with ACLs for alice only: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
	// Nor does User:ANONYMOUS, the principal of saslDaemon's PLAINTEXT listener.
	if _, err := fetched(kadm.NewClient(d.client()), "app-offsets"); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("an anonymous offset fetch: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}

	// alice's consumer, refused until now, joins on its own retry, and commits at its
	// generation; she fetches what it committed.
	waitBalanced(t, admin, "app-orders", []*groupMember{orders}, 3)
	var commitErr error
	orders.cl.CommitOffsetsSync(ctxT(t), map[string]map[int32]kgo.EpochOffset{"orders": {0: {Epoch: -1, Offset: 10}, 1: {Epoch: -1, Offset: 11}, 2: {Epoch: -1, Offset: 12}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if commitErr = err; err != nil {
				return
			}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if commitErr == nil && rp.ErrorCode != 0 {
						commitErr = kerr.ErrorForCode(rp.ErrorCode)
					}
				}
			}
		})
	if commitErr != nil {
		t.Fatalf("alice's consumer committing: %v", commitErr)
	}
	if got, err := fetched(alice, "app-orders"); err != nil || got != "10 11 12 " {
		t.Fatalf("alice fetching her consumer's offsets: %q %v", got, err)
	}

	// A DENY on a literal group inside the prefix wins over the prefixed ALLOW, for that group
	// only. The super user, whom no ACL names, runs a consumer in it all the same.
	createACLs(kadm.NewACLs().Deny("User:alice").DenyHosts().Groups("app-blocked").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead))
	if err := commit(admin, "app-blocked", 50); err != nil {
		t.Fatalf("the super user's commit: %v", err)
	}
	adminMember := d.groupMember(t, "app-blocked", "orders", as(adminLogin)...)
	waitBalanced(t, admin, "app-blocked", []*groupMember{adminMember}, 3)
	blocked := d.groupMember(t, "app-blocked", "orders", as(aliceLogin)...)
	eventually(t, "alice's consumer in app-blocked refused GROUP_AUTHORIZATION_FAILED", func() bool {
		return blocked.polled(kerr.GroupAuthorizationFailed)
	})
	if err := commit(alice, "app-blocked", 1); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("alice's commit to app-blocked beside the DENY: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
	if err := commit(alice, "app-offsets", 200); err != nil {
		t.Fatalf("the DENY on app-blocked reached app-offsets: %v", err)
	}
	d.waitLogged("authorization denied", func(l map[string]any) bool {
		return l["principal"] == "User:alice" && l["resource_type"] == "GROUP" && l["resource"] == "app-blocked" && l["operation"] == "READ"
	})

	// A KIP-848 consumer group and a streams group of alice's, for their describes.
	own := &ownership{owner: map[int32]int{}}
	cg := d.nextGenMember(t, own, 0, "app-cg", "orders", as(aliceLogin)...)
	waitConsumerBalanced(t, admin, own, "app-cg", []*nextGenMember{cg}, 3)
	// kgo routes no streams group API: they go to the (only) broker directly.
	onBroker := func(cl *kgo.Client, req kmsg.Request) (kmsg.Response, error) {
		return cl.SeedBrokers()[0].Request(ctxT(t), req)
	}
	if r, err := onBroker(aliceCl, streamsHeartbeatReq("app-streams")); err != nil || r.(*kmsg.StreamsGroupHeartbeatResponse).ErrorCode != 0 {
		t.Fatalf("alice's streams heartbeat: %v %+v", err, r)
	}

	// AuthorizedOperations as Kafka computes them (AuthHelper.authorizedOperations): each
	// operation GROUP supports (READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS) is
	// authorized on the LITERAL group name, the set bits are 1<<op. StandardAuthorizerData's
	// findResult lets an ALLOW of READ or DELETE imply DESCRIBE and one of ALTER_CONFIGS imply
	// DESCRIBE_CONFIGS, but a DENY only ever denies its own operation; any DENY wins.
	aliceOps := map[string]int32{
		// ALLOW READ app- (prefixed): READ, and DESCRIBE implied. 264
		"DescribeGroups app-orders": groupOps(kmsg.ACLOperationRead, kmsg.ACLOperationDescribe),
		// ...and DENY READ app-blocked: the DENY takes READ; DESCRIBE stays implied by the ALLOW. 256
		"DescribeGroups app-blocked": groupOps(kmsg.ACLOperationDescribe),
		// ...and ALLOW DELETE app-cg. 328
		"ConsumerGroupDescribe app-cg": groupOps(kmsg.ACLOperationRead, kmsg.ACLOperationDelete, kmsg.ACLOperationDescribe),
		// ...and ALLOW ALTER_CONFIGS app-streams, which implies DESCRIBE_CONFIGS. 3336
		"StreamsGroupDescribe app-streams": groupOps(kmsg.ACLOperationRead, kmsg.ACLOperationDescribe,
			kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs),
	}
	// The super user: every GROUP operation. 3400
	all := groupOps(kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete,
		kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs)
	adminOps := map[string]int32{"DescribeGroups app-orders": all, "DescribeGroups app-blocked": all,
		"ConsumerGroupDescribe app-cg": all, "StreamsGroupDescribe app-streams": all}
	checkOps := func(when, who string, cl *kgo.Client, want map[string]int32) {
		t.Helper()
		got := map[string]int32{}
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Groups, dg.IncludeAuthorizedOperations = []string{"app-orders", "app-blocked"}, true
		dgr, err := dg.RequestWith(ctxT(t), cl)
		if err != nil {
			t.Fatalf("%s, %s: DescribeGroups: %v", when, who, err)
		}
		for _, g := range dgr.Groups {
			if g.ErrorCode != 0 {
				t.Fatalf("%s, %s: DescribeGroups %s: %v", when, who, g.Group, kerr.ErrorForCode(g.ErrorCode))
			}
			got["DescribeGroups "+g.Group] = g.AuthorizedOperations
		}
		cgd := kmsg.NewPtrConsumerGroupDescribeRequest()
		cgd.Groups, cgd.IncludeAuthorizedOperations = []string{"app-cg"}, true
		cgr, err := cgd.RequestWith(ctxT(t), cl)
		if err != nil || cgr.Groups[0].ErrorCode != 0 {
			t.Fatalf("%s, %s: ConsumerGroupDescribe: %v %v", when, who, err, cgr)
		}
		got["ConsumerGroupDescribe app-cg"] = cgr.Groups[0].AuthorizedOperations
		sgd := kmsg.NewPtrStreamsGroupDescribeRequest()
		sgd.Groups, sgd.IncludeAuthorizedOperations = []string{"app-streams"}, true
		resp, err := onBroker(cl, sgd)
		if err != nil {
			t.Fatalf("%s, %s: StreamsGroupDescribe: %v", when, who, err)
		}
		sgr := resp.(*kmsg.StreamsGroupDescribeResponse)
		if sgr.Groups[0].ErrorCode != 0 {
			t.Fatalf("%s, %s: StreamsGroupDescribe: %v", when, who, kerr.ErrorForCode(sgr.Groups[0].ErrorCode))
		}
		got["StreamsGroupDescribe app-streams"] = sgr.Groups[0].AuthorizedOperations
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%s, %s: %s authorized operations %d, want %d", when, who, k, got[k], w)
			}
		}
	}
	checkOps("before the restart", "alice", aliceCl, aliceOps)
	checkOps("before the restart", "the super user", adminCl, adminOps)

	// Restarted on the same data directory, the bindings decide the same.
	for _, m := range []*groupMember{orders, adminMember, blocked} {
		m.cl.Close()
	}
	cg.cl.Close()
	if code := d.stop(); code != 0 {
		t.Fatalf("stop: exit %d", code)
	}
	d.start(sets...)
	adminCl = d.client(as(adminLogin)...)
	admin = kadm.NewClient(adminCl)
	aliceCl = d.client(as(aliceLogin)...)
	alice = kadm.NewClient(aliceCl)
	bob = kadm.NewClient(d.client(as(bobLogin)...))
	checkOps("after the restart", "alice", aliceCl, aliceOps)
	checkOps("after the restart", "the super user", adminCl, adminOps)
	if got, err := fetched(alice, "app-orders"); err != nil || got != "10 11 12 " {
		t.Fatalf("after the restart, alice fetching app-orders: %q %v", got, err)
	}
	if err := commit(alice, "app-offsets", 300); err != nil {
		t.Fatalf("after the restart, alice's commit under the prefix: %v", err)
	}
	if err := commit(alice, "app-blocked", 1); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("after the restart, alice's commit to app-blocked: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
	if _, err := fetched(bob, "app-offsets"); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("after the restart, bob's offset fetch: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
	if err := commit(admin, "app-blocked", 60); err != nil {
		t.Fatalf("after the restart, the super user's commit: %v", err)
	}

	// Deleting the DENY applies as at once to alice's open connection: the prefixed ALLOW
	// now decides app-blocked.
	res, err := admin.DeleteACLs(ctxT(t), kadm.NewACLs().Deny("User:alice").DenyHosts().Groups("app-blocked").
		ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead))
	if err != nil || len(res) != 1 || res[0].Err != nil || len(res[0].Deleted) != 1 {
		t.Fatalf("DeleteAcls of the DENY: %v %+v", err, res)
	}
	if err := commit(alice, "app-blocked", 70); err != nil {
		t.Fatalf("alice's commit to app-blocked once the DENY is gone: %v", err)
	}
}
