package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const standardAuthorizer = "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"

// The principal is User:ANONYMOUS on a plaintext listener, so ACLs are told apart by host:
// the admin connects from 127.0.0.1 and holds ALL on everything from there; the client under
// test connects from 127.0.0.2 and holds only the ACLs a case grants it.
const (
	adminHost  = "127.0.0.1"
	clientHost = "127.0.0.2"
)

type aclConn struct {
	t    *testing.T
	c    *rawConn
	corr int32
}

func dialFrom(t *testing.T, addr, ip string) *aclConn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &aclConn{t: t, c: &rawConn{t: t, nc: nc}}
}

func (a *aclConn) do(req kmsg.Request, version int16) kmsg.Response {
	a.t.Helper()
	a.corr++
	resp := req.ResponseKind()
	a.c.write(frame(req, version, a.corr, nil, nil))
	a.c.read(resp, version, a.corr)
	return resp
}

type grant struct {
	rt   kmsg.ACLResourceType
	name string
	op   kmsg.ACLOperation
}

func creation(g grant, host string, perm kmsg.ACLPermissionType, pattern kmsg.ACLResourcePatternType) kmsg.CreateACLsRequestCreation {
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = g.rt, g.name, pattern
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:ANONYMOUS", host, g.op, perm
	return c
}

func (a *aclConn) createACLs(cs ...kmsg.CreateACLsRequestCreation) {
	a.t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = cs
	for i, r := range a.do(req, 3).(*kmsg.CreateACLsResponse).Results {
		if r.ErrorCode != 0 {
			a.t.Fatalf("CreateAcls %+v: %v %v", cs[i], kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
		}
	}
}

func (a *aclConn) grant(host string, gs ...grant) {
	a.t.Helper()
	var cs []kmsg.CreateACLsRequestCreation
	for _, g := range gs {
		cs = append(cs, creation(g, host, kmsg.ACLPermissionTypeAllow, kmsg.ACLResourcePatternTypeLiteral))
	}
	a.createACLs(cs...)
}

// revokeHost deletes every binding of a host and returns how many there were.
func (a *aclConn) revokeHost(host string) int {
	a.t.Helper()
	req := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	f.Host = &host
	req.Filters = []kmsg.DeleteACLsRequestFilter{f}
	res := a.do(req, 3).(*kmsg.DeleteACLsResponse).Results[0]
	if res.ErrorCode != 0 {
		a.t.Fatalf("DeleteAcls: %v", kerr.ErrorForCode(res.ErrorCode))
	}
	return len(res.MatchingACLs)
}

// startACLDaemon runs coordinatord with the StandardAuthorizer and no allow-everyone default.
// It first runs with super.users=User:ANONYMOUS to create the admin's ACLs and the topics
// the cases use, then restarts without super users: the ACLs must have survived the restart
// for anything to work afterwards.
func startACLDaemon(t *testing.T) (*daemon, *aclConn) {
	t.Helper()
	d := startDaemon(t, append([]string{standardAuthorizer, "super.users=User:ANONYMOUS", "allow.everyone.if.no.acl.found=false"}, streamsTestSettings...)...)
	admin := dialFrom(t, d.Addr, adminHost)
	var cs []kmsg.CreateACLsRequestCreation
	for _, g := range []grant{
		{kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLOperationAll},
		{kmsg.ACLResourceTypeTopic, "*", kmsg.ACLOperationAll},
		{kmsg.ACLResourceTypeGroup, "*", kmsg.ACLOperationAll},
		{kmsg.ACLResourceTypeTransactionalId, "*", kmsg.ACLOperationAll},
	} {
		cs = append(cs, creation(g, adminHost, kmsg.ACLPermissionTypeAllow, kmsg.ACLResourcePatternTypeLiteral))
	}
	admin.createACLs(cs...)
	ct := kmsg.NewPtrCreateTopicsRequest()
	for _, name := range []string{"t1", "del1", "part1"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
		ct.Topics = append(ct.Topics, rt)
	}
	for _, r := range admin.do(ct, 7).(*kmsg.CreateTopicsResponse).Topics {
		if r.ErrorCode != 0 {
			t.Fatalf("create %s: %v", r.Topic, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	if code := commitOffset(admin, "g1", "t1"); code != 0 {
		t.Fatalf("commit as super user: %v", kerr.ErrorForCode(code))
	}
	if d.stop() != 0 {
		t.Fatal("unclean stop")
	}
	d.start(append([]string{standardAuthorizer, "allow.everyone.if.no.acl.found=false"}, streamsTestSettings...)...)
	return d, dialFrom(t, d.Addr, adminHost)
}

func commitOffset(c *aclConn, group, topic string) int16 {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset = 0, 5
	rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{p}
	req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
	return c.do(req, 9).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

// aclStep grants ACLs (on top of the earlier steps') and expects a code: exactly want, or
// with notWant, anything but the denial (the request got past authorization).
type aclStep struct {
	grants  []grant
	want    int16
	notWant bool
}

type aclCase struct {
	key   int16
	name  string
	send  func(c *aclConn) int16
	steps []aclStep
}

var (
	gfail = kerr.GroupAuthorizationFailed.Code
	tfail = kerr.TopicAuthorizationFailed.Code
	cfail = kerr.ClusterAuthorizationFailed.Code
	xfail = kerr.TransactionalIDAuthorizationFailed.Code
)

func grp(name string, op kmsg.ACLOperation) grant {
	return grant{kmsg.ACLResourceTypeGroup, name, op}
}
func tpc(name string, op kmsg.ACLOperation) grant {
	return grant{kmsg.ACLResourceTypeTopic, name, op}
}
func cluster(op kmsg.ACLOperation) grant {
	return grant{kmsg.ACLResourceTypeCluster, "kafka-cluster", op}
}

func streamsHeartbeatReq(group string) *kmsg.StreamsGroupHeartbeatRequest {
	r := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	r.Group, r.MemberID, r.RebalanceTimeoutMillis, r.Topology = group, "m1", 1000, streamsTopology("s", 1)()
	r.ActiveTasks, r.StandbyTasks, r.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	return r
}

// aclCases covers every served API but ApiVersions: each is denied without an ACL and gets
// past authorization with exactly the ACLs Kafka requires, step by step where it checks
// several resources. The order matters where a case uses what an earlier one made.
var aclCases = []aclCase{
	{3, "Metadata", func(c *aclConn) int16 {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = strp("t1")
		req.Topics = []kmsg.MetadataRequestTopic{rt}
		return c.do(req, 12).(*kmsg.MetadataResponse).Topics[0].ErrorCode
	}, []aclStep{{nil, tfail, false}, {[]grant{tpc("t1", kmsg.ACLOperationDescribe)}, 0, false}}},
	{8, "OffsetCommit", func(c *aclConn) int16 { return commitOffset(c, "g1", "t1") },
		[]aclStep{{nil, gfail, false}, {[]grant{grp("g1", kmsg.ACLOperationRead)}, tfail, false}, {[]grant{tpc("t1", kmsg.ACLOperationRead)}, 0, false}}},
	{9, "OffsetFetch", func(c *aclConn) int16 {
		req := kmsg.NewPtrOffsetFetchRequest()
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = "g1"
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = "t1", []int32{0}
		g.Topics = []kmsg.OffsetFetchRequestGroupTopic{rt}
		req.Groups = []kmsg.OffsetFetchRequestGroup{g}
		rg := c.do(req, 8).(*kmsg.OffsetFetchResponse).Groups[0]
		if rg.ErrorCode != 0 {
			return rg.ErrorCode
		}
		return rg.Topics[0].Partitions[0].ErrorCode
	}, []aclStep{{nil, gfail, false}, {[]grant{grp("g1", kmsg.ACLOperationDescribe)}, tfail, false}, {[]grant{tpc("t1", kmsg.ACLOperationDescribe)}, 0, false}}},
	{10, "FindCoordinator", func(c *aclConn) int16 {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKeys = []string{"g1"}
		g := c.do(req, 4).(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode
		req.CoordinatorType, req.CoordinatorKeys = 1, []string{"tx"}
		x := c.do(req, 4).(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode
		if g != 0 {
			return g
		}
		return x
	}, []aclStep{{nil, gfail, false}, {[]grant{grp("g1", kmsg.ACLOperationDescribe)}, xfail, false}, {[]grant{{kmsg.ACLResourceTypeTransactionalId, "tx", kmsg.ACLOperationDescribe}}, 0, false}}},
	{11, "JoinGroup", func(c *aclConn) int16 {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = "g2", 10000, 10000, "consumer"
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", []byte{}
		req.Protocols = []kmsg.JoinGroupRequestProtocol{p}
		return c.do(req, 9).(*kmsg.JoinGroupResponse).ErrorCode
	}, []aclStep{{nil, gfail, false}, {[]grant{grp("g2", kmsg.ACLOperationRead)}, kerr.MemberIDRequired.Code, false}}},
	{12, "Heartbeat", func(c *aclConn) int16 {
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.Generation, req.MemberID = "g2", 1, "m"
		return c.do(req, 4).(*kmsg.HeartbeatResponse).ErrorCode
	}, []aclStep{{nil, gfail, false}, {[]grant{grp("g2", kmsg.ACLOperationRead)}, gfail, true}}},
	{13, "LeaveGroup", func(c *aclConn) int16 {
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Group = "g2"
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = "m"
		req.Members = []kmsg.LeaveGroupRequestMember{m}
		resp := c.do(req, 5).(*kmsg.LeaveGroupResponse)
		if resp.ErrorCode != 0 || len(resp.Members) == 0 {
			return resp.ErrorCode
		}
		return resp.Members[0].ErrorCode
	}, []aclStep{{nil, gfail, false}, {[]grant{grp("g2", kmsg.ACLOperationRead)}, gfail, true}}},
	{14, "SyncGroup", func(c *aclConn) int16 {
		req := kmsg.NewPtrSyncGroupRequest()
		req.Group, req.Generation, req.MemberID, req.ProtocolType, req.Protocol = "g2", 1, "m", strp("consumer"), strp("range")
		return c.do(req, 5).(*kmsg.SyncGroupResponse).ErrorCode
	}, []aclStep{{nil, gfail, false}, {[]grant{grp("g2", kmsg.ACLOperationRead)}, gfail, true}}},
	{15, "DescribeGroups", func(c *aclConn) int16 {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups, req.IncludeAuthorizedOperations = []string{"g1"}, true
		return c.do(req, 5).(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode
	}, []aclStep{{nil, gfail, false}, {[]grant{grp("g1", kmsg.ACLOperationDescribe)}, 0, false}}},
	{16, "ListGroups", func(c *aclConn) int16 {
		// ListGroups never fails for authorization: an unauthorized group is left out.
		for _, g := range c.do(kmsg.NewPtrListGroupsRequest(), 5).(*kmsg.ListGroupsResponse).Groups {
			if g.Group == "g1" {
				return 0
			}
		}
		return gfail
	}, []aclStep{{nil, gfail, false}, {[]grant{grp("g1", kmsg.ACLOperationDescribe)}, 0, false}}},
	{19, "CreateTopics", func(c *aclConn) int16 {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "nt", 1, 1
		req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
		return c.do(req, 7).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode
	}, []aclStep{{nil, tfail, false}, {[]grant{tpc("nt", kmsg.ACLOperationCreate)}, 0, false}}},
	{20, "DeleteTopics", func(c *aclConn) int16 {
		req := kmsg.NewPtrDeleteTopicsRequest()
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = strp("del1")
		req.Topics = []kmsg.DeleteTopicsRequestTopic{rt}
		return c.do(req, 6).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode
	}, []aclStep{{nil, tfail, false}, {[]grant{tpc("del1", kmsg.ACLOperationDelete)}, 0, false}}},
	{37, "CreatePartitions", func(c *aclConn) int16 {
		req := kmsg.NewPtrCreatePartitionsRequest()
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = "part1", 2
		req.Topics, req.TimeoutMillis = []kmsg.CreatePartitionsRequestTopic{rt}, 5000
		return c.do(req, 3).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode
	}, []aclStep{{nil, tfail, false}, {[]grant{tpc("part1", kmsg.ACLOperationAlter)}, 0, false}}},
	{27, "WriteTxnMarkers", func(c *aclConn) int16 {
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.Committed = 1, true
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = "__consumer_offsets", []int32{0}
		m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{mt}
		req.Markers = []kmsg.WriteTxnMarkersRequestMarker{m}
		return c.do(req, 1).(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode
	}, []aclStep{{nil, cfail, false}, {[]grant{cluster(kmsg.ACLOperationClusterAction)}, cfail, true}}},
	{28, "TxnOffsetCommit", func(c *aclConn) int16 {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.Generation = "tx", "g1", 1, -1
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = "t1"
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset = 0, 1
		rt.Partitions = []kmsg.TxnOffsetCommitRequestTopicPartition{p}
		req.Topics = []kmsg.TxnOffsetCommitRequestTopic{rt}
		return c.do(req, 3).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}, []aclStep{{nil, xfail, false}, {[]grant{{kmsg.ACLResourceTypeTransactionalId, "tx", kmsg.ACLOperationWrite}}, gfail, false},
		{[]grant{grp("g1", kmsg.ACLOperationRead)}, tfail, false}, {[]grant{tpc("t1", kmsg.ACLOperationRead)}, tfail, true}}},
	{29, "DescribeAcls", func(c *aclConn) int16 {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType, req.ResourcePatternType, req.Operation, req.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		return c.do(req, 3).(*kmsg.DescribeACLsResponse).ErrorCode
	}, []aclStep{{nil, cfail, false}, {[]grant{cluster(kmsg.ACLOperationDescribe)}, 0, false}}},
	{30, "CreateAcls", func(c *aclConn) int16 {
		req := kmsg.NewPtrCreateACLsRequest()
		req.Creations = []kmsg.CreateACLsRequestCreation{creation(grp("other", kmsg.ACLOperationRead), clientHost, kmsg.ACLPermissionTypeAllow, kmsg.ACLResourcePatternTypeLiteral)}
		return c.do(req, 3).(*kmsg.CreateACLsResponse).Results[0].ErrorCode
	}, []aclStep{{nil, cfail, false}, {[]grant{cluster(kmsg.ACLOperationAlter)}, 0, false}}},
	{31, "DeleteAcls", func(c *aclConn) int16 {
		req := kmsg.NewPtrDeleteACLsRequest()
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourceName, f.ResourcePatternType, f.Operation, f.PermissionType = kmsg.ACLResourceTypeGroup, strp("nothing"), kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		req.Filters = []kmsg.DeleteACLsRequestFilter{f}
		return c.do(req, 3).(*kmsg.DeleteACLsResponse).Results[0].ErrorCode
	}, []aclStep{{nil, cfail, false}, {[]grant{cluster(kmsg.ACLOperationAlter)}, 0, false}}},
	{32, "DescribeConfigs", func(c *aclConn) int16 {
		req := kmsg.NewPtrDescribeConfigsRequest()
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g1"
		req.Resources = []kmsg.DescribeConfigsRequestResource{r}
		return c.do(req, 4).(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode
	}, []aclStep{{nil, gfail, false}, {[]grant{grp("g1", kmsg.ACLOperationDescribeConfigs)}, 0, false}}},
	{33, "AlterConfigs", func(c *aclConn) int16 {
		req := kmsg.NewPtrAlterConfigsRequest()
		r := kmsg.NewAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g1"
		cfg := kmsg.NewAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = "consumer.session.timeout.ms", strp("45000")
		r.Configs = []kmsg.AlterConfigsRequestResourceConfig{cfg}
		req.Resources, req.ValidateOnly = []kmsg.AlterConfigsRequestResource{r}, true
		return c.do(req, 2).(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode
	}, []aclStep{{nil, gfail, false}, {[]grant{grp("g1", kmsg.ACLOperationAlterConfigs)}, gfail, true}}},
	{44, "IncrementalAlterConfigs", func(c *aclConn) int16 {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g1"
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Op, cfg.Value = "consumer.session.timeout.ms", kmsg.IncrementalAlterConfigOpSet, strp("45000")
		r.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{cfg}
		req.Resources, req.ValidateOnly = []kmsg.IncrementalAlterConfigsRequestResource{r}, true
		return c.do(req, 1).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode
	}, []aclStep{{nil, gfail, false}, {[]grant{grp("g1", kmsg.ACLOperationAlterConfigs)}, gfail, true}}},
	{74, "ListConfigResources", func(c *aclConn) int16 {
		return c.do(kmsg.NewPtrListConfigResourcesRequest(), 1).(*kmsg.ListConfigResourcesResponse).ErrorCode
	}, []aclStep{{nil, cfail, false}, {[]grant{cluster(kmsg.ACLOperationDescribeConfigs)}, 0, false}}},
	{88, "StreamsGroupHeartbeat", func(c *aclConn) int16 {
		return c.do(streamsHeartbeatReq("sg"), 1).(*kmsg.StreamsGroupHeartbeatResponse).ErrorCode
	}, []aclStep{{nil, gfail, false}, {[]grant{grp("sg", kmsg.ACLOperationRead)}, tfail, false},
		{[]grant{tpc("s-0", kmsg.ACLOperationDescribe), tpc("s-store-0-changelog", kmsg.ACLOperationDescribe)}, 0, false}}},
	{89, "StreamsGroupDescribe", func(c *aclConn) int16 {
		req := kmsg.NewPtrStreamsGroupDescribeRequest()
		req.Groups = []string{"sg"}
		return c.do(req, 0).(*kmsg.StreamsGroupDescribeResponse).Groups[0].ErrorCode
	}, []aclStep{{nil, gfail, false}, {[]grant{grp("sg", kmsg.ACLOperationDescribe)}, tfail, false},
		{[]grant{tpc("s-0", kmsg.ACLOperationDescribe), tpc("s-store-0-changelog", kmsg.ACLOperationDescribe)}, 0, false}}},
	{93, "StreamsGroupTopologyDescriptionUpdate", func(c *aclConn) int16 {
		req := kmsg.NewPtrStreamsGroupTopologyDescriptionUpdateRequest()
		req.Group, req.MemberID = "sg", "m1"
		return c.do(req, 0).(*kmsg.StreamsGroupTopologyDescriptionUpdateResponse).ErrorCode
	}, []aclStep{{nil, gfail, false}, {[]grant{grp("sg", kmsg.ACLOperationRead)}, gfail, true}}},
	{48, "DescribeClientQuotas", func(c *aclConn) int16 {
		return c.do(kmsg.NewPtrDescribeClientQuotasRequest(), 1).(*kmsg.DescribeClientQuotasResponse).ErrorCode
	}, []aclStep{{nil, cfail, false}, {[]grant{cluster(kmsg.ACLOperationDescribeConfigs)}, 0, false}}},
	{51, "AlterUserScramCredentials", func(c *aclConn) int16 {
		req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations = "scram-user", 1, 4096
		u.Salt, u.SaltedPassword = []byte("salt-of-sixteen!"), make([]byte, 32)
		req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{u}
		return c.do(req, 0).(*kmsg.AlterUserSCRAMCredentialsResponse).Results[0].ErrorCode
	}, []aclStep{{nil, cfail, false}, {[]grant{cluster(kmsg.ACLOperationAlter)}, 0, false}}},
	{50, "DescribeUserScramCredentials", func(c *aclConn) int16 {
		return c.do(kmsg.NewPtrDescribeUserSCRAMCredentialsRequest(), 0).(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode
	}, []aclStep{{nil, cfail, false}, {[]grant{cluster(kmsg.ACLOperationDescribe)}, 0, false}}},
	// The join assigns t1's partition to the member, which the describe case below relies on.
	{68, "ConsumerGroupHeartbeat", func(c *aclConn) int16 {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberEpoch, req.RebalanceTimeoutMillis = "cg", 0, 10000
		req.SubscribedTopicNames, req.Topics = []string{"t1"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return c.do(req, 0).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode
	}, []aclStep{{nil, gfail, false}, {[]grant{grp("cg", kmsg.ACLOperationRead)}, tfail, false}, {[]grant{tpc("t1", kmsg.ACLOperationDescribe)}, 0, false}}},
	{69, "ConsumerGroupDescribe", func(c *aclConn) int16 {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{"cg"}
		return c.do(req, 0).(*kmsg.ConsumerGroupDescribeResponse).Groups[0].ErrorCode
	}, []aclStep{{nil, gfail, false}, {[]grant{grp("cg", kmsg.ACLOperationDescribe)}, tfail, false}, {[]grant{tpc("t1", kmsg.ACLOperationDescribe)}, 0, false}}},
	{47, "OffsetDelete", func(c *aclConn) int16 {
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = "g1"
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = "t1"
		p := kmsg.NewOffsetDeleteRequestTopicPartition()
		rt.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{p}
		req.Topics = []kmsg.OffsetDeleteRequestTopic{rt}
		resp := c.do(req, 0).(*kmsg.OffsetDeleteResponse)
		if resp.ErrorCode != 0 {
			return resp.ErrorCode
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}, []aclStep{{nil, gfail, false}, {[]grant{grp("g1", kmsg.ACLOperationDelete)}, tfail, false}, {[]grant{tpc("t1", kmsg.ACLOperationRead)}, 0, false}}},
	{42, "DeleteGroups", func(c *aclConn) int16 {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = []string{"g3"}
		return c.do(req, 2).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode
	}, []aclStep{{nil, gfail, false}, {[]grant{grp("g3", kmsg.ACLOperationDelete)}, kerr.GroupIDNotFound.Code, false}}},
}

// Issue 13: with allow.everyone.if.no.acl.found=false every served API refuses a principal
// without ACLs and serves it with exactly the ACLs Kafka requires; an ACL change applies to
// the next request without a restart, and a denial is logged.
func TestACLsEveryAPIDeniedWithoutAndAllowedWithExactlyKafkasACL(t *testing.T) {
	t.Parallel()
	d, admin := startACLDaemon(t)
	client := dialFrom(t, d.Addr, clientHost)
	// ApiVersions, SaslHandshake and SaslAuthenticate are never authorized: they are answered
	// before a principal exists, as in Kafka.
	covered := map[int16]bool{17: true, 18: true, 36: true}
	for _, c := range aclCases {
		covered[c.key] = true
		for i, s := range c.steps {
			if len(s.grants) > 0 {
				admin.grant(clientHost, s.grants...)
			}
			got := c.send(client)
			switch {
			case s.notWant && got == s.want:
				t.Errorf("%s (key %d) step %d: still %v with %v granted", c.name, c.key, i, kerr.ErrorForCode(got), s.grants)
			case !s.notWant && got != s.want:
				t.Errorf("%s (key %d) step %d: got %v, want %v", c.name, c.key, i, kerr.ErrorForCode(got), kerr.ErrorForCode(s.want))
			}
		}
		admin.revokeHost(clientHost)
	}
	var served []int16
	av := kmsg.NewPtrApiVersionsRequest()
	av.ClientSoftwareName, av.ClientSoftwareVersion = "acl-test", "1"
	for _, k := range admin.do(av, 3).(*kmsg.ApiVersionsResponse).ApiKeys {
		served = append(served, k.ApiKey)
		if !covered[k.ApiKey] {
			t.Errorf("API key %d (%s) is served but has no authorization case here", k.ApiKey, kmsg.NameForKey(k.ApiKey))
		}
	}
	if !slices.Contains(served, 29) {
		t.Fatalf("ApiVersions does not list DescribeAcls: %v", served)
	}
	d.waitLogged("authorization denied", func(l map[string]any) bool {
		return l["principal"] == "User:ANONYMOUS" && l["host"] == clientHost && l["resource_type"] == "GROUP" && l["resource"] == "g2" && l["operation"] == "READ"
	})
	resp, err := http.Get("http://" + d.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `coordinatord_authorization_denied_total{operation="READ",resource_type="GROUP"}`) {
		t.Fatal("/metrics does not count the GROUP READ denials")
	}
}

// DENY wins over ALLOW, a PREFIXED ALLOW covers the names it prefixes, and the
// AuthorizedOperations of DescribeGroups and Metadata follow the ACLs (implied DESCRIBE
// included).
func TestACLsDenyPrefixedAndAuthorizedOperations(t *testing.T) {
	t.Parallel()
	d, admin := startACLDaemon(t)
	client := dialFrom(t, d.Addr, clientHost)
	describe := func(group string) kmsg.DescribeGroupsResponseGroup {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups, req.IncludeAuthorizedOperations = []string{group}, true
		return client.do(req, 5).(*kmsg.DescribeGroupsResponse).Groups[0]
	}
	admin.createACLs(creation(grp("app-", kmsg.ACLOperationRead), clientHost, kmsg.ACLPermissionTypeAllow, kmsg.ACLResourcePatternTypePrefixed))
	if g := describe("app-1"); g.ErrorCode != 0 || g.AuthorizedOperations != 1<<3|1<<8 {
		t.Fatalf("prefixed READ: %v, authorized operations %d; want NONE and READ|DESCRIBE (264)", kerr.ErrorForCode(g.ErrorCode), g.AuthorizedOperations)
	}
	if g := describe("other"); g.ErrorCode != gfail {
		t.Fatalf("a group outside the prefix: %v", kerr.ErrorForCode(g.ErrorCode))
	}
	admin.createACLs(creation(grp("app-1", kmsg.ACLOperationDescribe), clientHost, kmsg.ACLPermissionTypeDeny, kmsg.ACLResourcePatternTypeLiteral))
	if g := describe("app-1"); g.ErrorCode != gfail {
		t.Fatalf("DENY DESCRIBE beside a prefixed ALLOW READ: %v", kerr.ErrorForCode(g.ErrorCode))
	}
	if g := describe("app-2"); g.ErrorCode != 0 {
		t.Fatalf("the DENY on app-1 reached app-2: %v", kerr.ErrorForCode(g.ErrorCode))
	}

	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = strp("t1")
	req.Topics, req.IncludeTopicAuthorizedOperations, req.IncludeClusterAuthorizedOperations = []kmsg.MetadataRequestTopic{rt}, true, true
	admin.grant(clientHost, tpc("t1", kmsg.ACLOperationWrite), tpc("t1", kmsg.ACLOperationAlterConfigs))
	m := client.do(req, 10).(*kmsg.MetadataResponse)
	if want := int32(1<<4 | 1<<8 | 1<<10 | 1<<11); m.Topics[0].ErrorCode != 0 || m.Topics[0].AuthorizedOperations != want {
		t.Fatalf("topic operations %d (%v), want WRITE|DESCRIBE|DESCRIBE_CONFIGS|ALTER_CONFIGS (%d)", m.Topics[0].AuthorizedOperations, kerr.ErrorForCode(m.Topics[0].ErrorCode), want)
	}
	if m.AuthorizedOperations != 0 {
		t.Fatalf("cluster operations %d without cluster ACLs, want 0", m.AuthorizedOperations)
	}
	// The admin host holds ALL on the cluster: every cluster operation.
	if m := admin.do(req, 10).(*kmsg.MetadataResponse); m.AuthorizedOperations != 8096 {
		t.Fatalf("cluster operations of ALL: %d, want 8096", m.AuthorizedOperations)
	}
	// An all-topics Metadata lists only what the principal may describe.
	all := kmsg.NewPtrMetadataRequest()
	var names []string
	for _, tp := range client.do(all, 12).(*kmsg.MetadataResponse).Topics {
		names = append(names, *tp.Topic)
	}
	if strings.Join(names, ",") != "t1" {
		t.Fatalf("all-topics Metadata lists %v, want only t1", names)
	}
}

// Without authorizer.class.name everything stays open, as before ACLs existed, and the ACL
// APIs say security is disabled.
func TestACLsWithoutAuthorizerEverythingOpen(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := dialFrom(t, d.Addr, clientHost)
	if code := commitOffset(c, "g", "missing"); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("commit without an authorizer: %v", kerr.ErrorForCode(code))
	}
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType, req.Operation, req.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if resp := c.do(req, 3).(*kmsg.DescribeACLsResponse); resp.ErrorCode != kerr.SecurityDisabled.Code {
		t.Fatalf("DescribeAcls without an authorizer: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups, dg.IncludeAuthorizedOperations = []string{"g"}, true
	if g := c.do(dg, 5).(*kmsg.DescribeGroupsResponse).Groups[0]; g.AuthorizedOperations != 3400 {
		t.Fatalf("authorized operations without an authorizer: %d, want 3400", g.AuthorizedOperations)
	}
}

// The ACL APIs through franz-go's admin client (what kafka-acls.sh sends): creations answer
// one by one, an invalid one with INVALID_REQUEST beside valid ones, a MATCH filter finds the
// literal, wildcard and prefixed bindings that apply to a name, and a delete returns what it
// removed.
func TestACLsAdminAPIs(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, standardAuthorizer, "super.users=User:ANONYMOUS")
	adm := kadm.NewClient(d.client())
	ctx := ctxT(t)
	b := kadm.NewACLs().Allow("User:alice").AllowHosts().Groups("app-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead)
	res, err := adm.CreateACLs(ctx, b)
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("create: %v %+v", err, res)
	}
	b2 := kadm.NewACLs().Deny("User:bob").DenyHosts("10.0.0.1").Groups("*", "app-1", "other").Operations(kadm.OpAll)
	if res, err := adm.CreateACLs(ctx, b2); err != nil || len(res) != 3 || res[0].Err != nil {
		t.Fatalf("create: %v %+v", err, res)
	}

	match := kadm.NewACLs().AnyResource("app-1").ResourcePatternType(kadm.ACLPatternMatch).Operations(kadm.OpAny).Allow().Deny().AllowHosts().DenyHosts()
	described, err := adm.DescribeACLs(ctx, match)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range described {
		if r.Err != nil {
			t.Fatalf("describe: %v %s", r.Err, r.ErrMessage)
		}
		for _, a := range r.Described {
			got = append(got, fmt.Sprintf("%s/%s/%s/%s", a.Name, a.Pattern, a.Principal, a.Permission))
		}
	}
	slices.Sort(got)
	want := []string{"*/LITERAL/User:bob/DENY", "app-/PREFIXED/User:alice/ALLOW", "app-1/LITERAL/User:bob/DENY"}
	if !slices.Equal(got, want) {
		t.Fatalf("MATCH app-1 described %v, want %v", got, want)
	}

	del := kadm.NewACLs().Deny("User:bob").DenyHosts("10.0.0.1").Groups("other").Operations(kadm.OpAll)
	dres, err := adm.DeleteACLs(ctx, del)
	if err != nil || len(dres) != 1 || dres[0].Err != nil || len(dres[0].Deleted) != 1 || dres[0].Deleted[0].Name != "other" {
		t.Fatalf("delete: %v %+v", err, dres)
	}

	c := dialFrom(t, d.Addr, adminHost)
	req := kmsg.NewPtrCreateACLsRequest()
	bad := creation(grant{kmsg.ACLResourceTypeCluster, "not-the-cluster", kmsg.ACLOperationAlter}, "*", kmsg.ACLPermissionTypeAllow, kmsg.ACLResourcePatternTypeLiteral)
	good := creation(grant{kmsg.ACLResourceTypeTopic, "t", kmsg.ACLOperationRead}, "*", kmsg.ACLPermissionTypeAllow, kmsg.ACLResourcePatternTypeLiteral)
	req.Creations = []kmsg.CreateACLsRequestCreation{bad, good}
	results := c.do(req, 3).(*kmsg.CreateACLsResponse).Results
	if results[0].ErrorCode != kerr.InvalidRequest.Code || results[0].ErrorMessage == nil || results[1].ErrorCode != 0 {
		t.Fatalf("invalid beside valid: %v %v / %v", kerr.ErrorForCode(results[0].ErrorCode), results[0].ErrorMessage, kerr.ErrorForCode(results[1].ErrorCode))
	}

	// What was created and not deleted is what a restart loads.
	listAll := func(c *aclConn) []string {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType, req.ResourcePatternType, req.Operation, req.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		var out []string
		for _, r := range c.do(req, 3).(*kmsg.DescribeACLsResponse).Resources {
			for _, a := range r.ACLs {
				out = append(out, fmt.Sprintf("%d/%s/%d/%s/%s/%d/%d", r.ResourceType, r.ResourceName, r.ResourcePatternType, a.Principal, a.Host, a.Operation, a.PermissionType))
			}
		}
		return out
	}
	before := listAll(c)
	if len(before) != 4 {
		t.Fatalf("%d bindings before the restart, want 4: %v", len(before), before)
	}
	d.stop()
	d.start(standardAuthorizer, "super.users=User:ANONYMOUS")
	if after := listAll(dialFrom(t, d.Addr, adminHost)); !slices.Equal(before, after) {
		t.Fatalf("bindings changed across a restart:\n%v\n%v", before, after)
	}
}

// A streams member may make coordinatord create its internal topics only with CREATE on them
// (or on the cluster), as Kafka's heartbeat checks; until then the MISSING_INTERNAL_TOPICS
// status says which it may not create. StreamsGroupDescribe reports the group's authorized
// operations from the ACLs.
func TestACLsStreamsInternalTopicsNeedCreate(t *testing.T) {
	t.Parallel()
	d, admin := startACLDaemon(t)
	ct := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "s-0", 2, 1
	ct.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	if code := admin.do(ct, 7).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create s-0: %v", kerr.ErrorForCode(code))
	}
	admin.grant(clientHost, grp("sg", kmsg.ACLOperationRead), tpc("s-0", kmsg.ACLOperationDescribe), tpc("s-store-0-changelog", kmsg.ACLOperationDescribe))
	client := dialFrom(t, d.Addr, clientHost)
	resp := client.do(streamsHeartbeatReq("sg"), 1).(*kmsg.StreamsGroupHeartbeatResponse)
	denied := false
	for _, st := range resp.Status {
		denied = denied || st.StatusCode == 3 && strings.HasSuffix(st.StatusDetail, "; Unauthorized to CREATE on topics s-store-0-changelog.")
	}
	if resp.ErrorCode != 0 || !denied {
		t.Fatalf("heartbeat without CREATE: %v %+v", kerr.ErrorForCode(resp.ErrorCode), resp.Status)
	}
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = strp("s-store-0-changelog")
	md.Topics = []kmsg.MetadataRequestTopic{mt}
	if code := admin.do(md, 12).(*kmsg.MetadataResponse).Topics[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("the changelog exists without CREATE on it: %v", kerr.ErrorForCode(code))
	}

	admin.grant(clientHost, tpc("s-store-0-changelog", kmsg.ACLOperationCreate))
	hb := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "sg", "m1", resp.MemberEpoch, -1
	resp = client.do(hb, 1).(*kmsg.StreamsGroupHeartbeatResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("heartbeat with CREATE: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if code := admin.do(md, 12).(*kmsg.MetadataResponse).Topics[0].ErrorCode; code != 0 {
		t.Fatalf("the changelog was not created with CREATE on it: %v", kerr.ErrorForCode(code))
	}

	admin.grant(clientHost, grp("sg", kmsg.ACLOperationDelete))
	dr := kmsg.NewPtrStreamsGroupDescribeRequest()
	dr.Groups, dr.IncludeAuthorizedOperations = []string{"sg"}, true
	g := client.do(dr, 0).(*kmsg.StreamsGroupDescribeResponse).Groups[0]
	if want := int32(1<<3 | 1<<6 | 1<<8); g.ErrorCode != 0 || g.AuthorizedOperations != want {
		t.Fatalf("describe: %v, authorized operations %d, want READ|DELETE|DESCRIBE (%d)", kerr.ErrorForCode(g.ErrorCode), g.AuthorizedOperations, want)
	}
}

// DeleteTopics by id checks DESCRIBE before DELETE, as Kafka: a client that may not describe
// the topic learns nothing but its id, even holding DELETE.
func TestACLsDeleteTopicByIDNeedsDescribe(t *testing.T) {
	t.Parallel()
	d, admin := startACLDaemon(t)
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = strp("del1")
	md.Topics = []kmsg.MetadataRequestTopic{mt}
	id := admin.do(md, 12).(*kmsg.MetadataResponse).Topics[0].TopicID
	client := dialFrom(t, d.Addr, clientHost)
	del := func() kmsg.DeleteTopicsResponseTopic {
		req := kmsg.NewPtrDeleteTopicsRequest()
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.TopicID = id
		req.Topics = []kmsg.DeleteTopicsRequestTopic{rt}
		return client.do(req, 6).(*kmsg.DeleteTopicsResponse).Topics[0]
	}
	admin.grant(clientHost, tpc("del1", kmsg.ACLOperationDelete))
	// DELETE implies DESCRIBE for an ALLOW: deny DESCRIBE explicitly to see the id rule.
	admin.createACLs(creation(tpc("del1", kmsg.ACLOperationDescribe), clientHost, kmsg.ACLPermissionTypeDeny, kmsg.ACLResourcePatternTypeLiteral))
	if r := del(); r.ErrorCode != tfail || r.Topic != nil {
		t.Fatalf("by id without DESCRIBE: %v, name %v; want TOPIC_AUTHORIZATION_FAILED and no name", kerr.ErrorForCode(r.ErrorCode), r.Topic)
	}
	admin.revokeHost(clientHost)
	admin.grant(clientHost, tpc("del1", kmsg.ACLOperationDelete))
	if r := del(); r.ErrorCode != 0 || r.Topic == nil || *r.Topic != "del1" {
		t.Fatalf("by id with DELETE: %v, name %v", kerr.ErrorForCode(r.ErrorCode), r.Topic)
	}
}

// The answers of the SCRAM, quota and KIP-848 APIs to a denied client have Kafka 4.4's shape
// (its error answers), and ConsumerGroupDescribe's AuthorizedOperations come from the ACLs:
// a tool reading them sees what it may do, not everything.
func TestACLsScramQuotaAndConsumerGroupAnswers(t *testing.T) {
	t.Parallel()
	d, admin := startACLDaemon(t)
	client := dialFrom(t, d.Addr, clientHost)
	const clusterMsg = "Cluster authorization failed."

	q := client.do(kmsg.NewPtrDescribeClientQuotasRequest(), 1).(*kmsg.DescribeClientQuotasResponse)
	if q.ErrorCode != cfail || q.ErrorMessage == nil || *q.ErrorMessage != clusterMsg || q.Entries != nil {
		t.Errorf("DescribeClientQuotas denied: %v %v entries %v; want CLUSTER_AUTHORIZATION_FAILED %q, null entries", kerr.ErrorForCode(q.ErrorCode), q.ErrorMessage, q.Entries, clusterMsg)
	}

	dreq := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, u := range []string{"alice", "bob"} {
		ru := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		ru.Name = u
		dreq.Users = append(dreq.Users, ru)
	}
	ds := client.do(dreq, 0).(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if ds.ErrorCode != cfail || ds.ErrorMessage == nil || *ds.ErrorMessage != clusterMsg || len(ds.Results) != 2 {
		t.Fatalf("DescribeUserScramCredentials denied: %v %v, %d results; want CLUSTER_AUTHORIZATION_FAILED %q and one result per user", kerr.ErrorForCode(ds.ErrorCode), ds.ErrorMessage, len(ds.Results), clusterMsg)
	}
	for _, r := range ds.Results {
		if r.ErrorCode != cfail || r.User != "" || r.ErrorMessage == nil || *r.ErrorMessage != clusterMsg {
			t.Errorf("DescribeUserScramCredentials denied result %+v; want CLUSTER_AUTHORIZATION_FAILED, no user (as Kafka)", r)
		}
	}

	areq := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	for _, u := range []string{"carol", "alice", "carol"} {
		up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = u, 1, 4096, []byte("salt-of-sixteen!"), make([]byte, 32)
		areq.Upsertions = append(areq.Upsertions, up)
	}
	del := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	del.Name, del.Mechanism = "bob", 2
	areq.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{del}
	var users []string
	for _, r := range client.do(areq, 0).(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
		if r.ErrorCode != cfail {
			t.Errorf("AlterUserScramCredentials denied: %s got %v", r.User, kerr.ErrorForCode(r.ErrorCode))
		}
		users = append(users, r.User)
	}
	if !slices.Equal(users, []string{"alice", "bob", "carol"}) {
		t.Errorf("AlterUserScramCredentials denied results for %v; want each user once, sorted, as Kafka", users)
	}
	if ds := admin.do(kmsg.NewPtrDescribeUserSCRAMCredentialsRequest(), 0).(*kmsg.DescribeUserSCRAMCredentialsResponse); len(ds.Results) != 0 {
		t.Errorf("a denied AlterUserScramCredentials stored credentials: %+v", ds.Results)
	}

	// A member (the super user's) holds t1's partition in group cg.
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.RebalanceTimeoutMillis = "cg", 10000
	hb.SubscribedTopicNames, hb.Topics = []string{"t1"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if r := admin.do(hb, 0).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("join as super user: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	admin.grant(clientHost, grp("cg", kmsg.ACLOperationRead))
	if r := client.do(hb, 0).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != tfail || r.ErrorMessage != nil {
		t.Errorf("ConsumerGroupHeartbeat without TOPIC DESCRIBE on t1: %v %v; want TOPIC_AUTHORIZATION_FAILED, no message", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	admin.revokeHost(clientHost)

	describe := func() kmsg.ConsumerGroupDescribeResponseGroup {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups, req.IncludeAuthorizedOperations = []string{"cg"}, true
		return client.do(req, 0).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
	}
	if g := describe(); g.ErrorCode != gfail || g.ErrorMessage != nil {
		t.Errorf("ConsumerGroupDescribe without GROUP DESCRIBE: %v %v; want GROUP_AUTHORIZATION_FAILED, no message", kerr.ErrorForCode(g.ErrorCode), g.ErrorMessage)
	}
	admin.grant(clientHost, grp("cg", kmsg.ACLOperationDescribe))
	const topicMsg = "The group has described topic(s) that the client is not authorized to describe."
	if g := describe(); g.ErrorCode != tfail || g.ErrorMessage == nil || *g.ErrorMessage != topicMsg || len(g.Members) != 0 || g.State != "" {
		t.Errorf("ConsumerGroupDescribe of a group assigned t1 without TOPIC DESCRIBE on it: %v %v, %d members, state %q; want TOPIC_AUTHORIZATION_FAILED %q and nothing of the group",
			kerr.ErrorForCode(g.ErrorCode), g.ErrorMessage, len(g.Members), g.State, topicMsg)
	}
	admin.grant(clientHost, tpc("t1", kmsg.ACLOperationDescribe))
	if g := describe(); g.ErrorCode != 0 || len(g.Members) != 1 || g.AuthorizedOperations != 1<<8 {
		t.Errorf("ConsumerGroupDescribe with GROUP and TOPIC DESCRIBE: %v, %d members, authorized operations %d; want NONE, 1 member, DESCRIBE only (256)",
			kerr.ErrorForCode(g.ErrorCode), len(g.Members), g.AuthorizedOperations)
	}
}

// A regex subscription resolves only to topics the heartbeating client may describe (Kafka
// 4.4 filters its regex refresh so): the member is not assigned part1, which it cannot see.
func TestACLsConsumerRegexResolvesOnlyDescribableTopics(t *testing.T) {
	t.Parallel()
	d, admin := startACLDaemon(t)
	client := dialFrom(t, d.Addr, clientHost)
	admin.grant(clientHost, grp("rg", kmsg.ACLOperationRead), tpc("t1", kmsg.ACLOperationDescribe))
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.RebalanceTimeoutMillis, hb.SubscribedTopicRegex = "rg", 10000, strp("t1|part1")
	hb.MemberID, hb.Topics = "AAAAAAAAAAAAAAAAAAAAAA", []kmsg.ConsumerGroupHeartbeatRequestTopic{} // v1: the client names the member
	if r := client.do(hb, 1).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("regex join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{"rg"}
	g := admin.do(req, 0).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
	if g.ErrorCode != 0 || len(g.Members) != 1 {
		t.Fatalf("describe as super user: %v, %d members", kerr.ErrorForCode(g.ErrorCode), len(g.Members))
	}
	var topics []string
	for _, tp := range g.Members[0].TargetAssignment.TopicPartitions {
		topics = append(topics, tp.Topic)
	}
	if !slices.Equal(topics, []string{"t1"}) {
		t.Errorf("regex t1|part1 with DESCRIBE on t1 only resolved to %v; want [t1]", topics)
	}
}
