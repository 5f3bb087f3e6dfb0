package wire

import (
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The estimate is never below the real encoding, and stops early past its limit.
func TestEncodedSizeAtMostIsAnUpperBound(t *testing.T) {
	dg := kmsg.NewPtrDescribeGroupsResponse()
	dg.SetVersion(5)
	meta := make([]byte, 10_000)
	for i := 0; i < 50; i++ {
		g := kmsg.NewDescribeGroupsResponseGroup()
		g.Group = "group"
		for j := 0; j < 20; j++ {
			m := kmsg.NewDescribeGroupsResponseGroupMember()
			m.MemberID, m.ProtocolMetadata, m.MemberAssignment = "member", meta, meta[:100]
			g.Members = append(g.Members, m)
		}
		dg.Groups = append(dg.Groups, g)
	}
	of := kmsg.NewPtrOffsetFetchResponse()
	of.SetVersion(9)
	g := kmsg.NewOffsetFetchResponseGroup()
	g.Group = "g"
	for i := 0; i < 100; i++ {
		tp := kmsg.NewOffsetFetchResponseGroupTopic()
		tp.Topic = "topic"
		tp.Partitions = make([]kmsg.OffsetFetchResponseGroupTopicPartition, 100)
		g.Topics = append(g.Topics, tp)
	}
	of.Groups = append(of.Groups, g)
	for _, resp := range []kmsg.Response{dg, of, kmsg.NewPtrHeartbeatResponse()} {
		real := int64(len(AppendResponse(nil, 1, resp)))
		est, ok := encodedSizeAtMost(resp, math.MaxInt64)
		if !ok || est < real {
			t.Fatalf("%T: estimate %d below the real %d bytes", resp, est, real)
		}
		if est > 3*real+64 {
			t.Fatalf("%T: estimate %d far above the real %d bytes", resp, est, real)
		}
		if _, ok := encodedSizeAtMost(resp, real/2); ok {
			t.Fatalf("%T: a limit of half the size was not exceeded", resp)
		}
	}
}
