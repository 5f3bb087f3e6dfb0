package wire

import (
	"fmt"
	"math"
	"reflect"
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

// walkedSize is the estimate the way it was first written, a field-by-field reflect walk with
// no per-type plans (asking the type for every field); the planned walk must agree with it.
func walkedSize(v reflect.Value) int64 {
	switch v.Kind() {
	case reflect.String:
		return 4 + int64(v.Len())
	case reflect.Slice:
		n := int64(4)
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return n + int64(v.Len())
		}
		for i := 0; i < v.Len(); i++ {
			n += walkedSize(v.Index(i))
		}
		return n
	case reflect.Pointer:
		if v.IsNil() {
			return 1
		}
		return 1 + walkedSize(v.Elem())
	case reflect.Struct:
		n := int64(1)
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				n += walkedSize(v.Field(i))
			}
		}
		return n
	default: // the scalar sizes are not what the plans change
		return scalarSize(v.Type())
	}
}

// hotPathResponses are the group hot path's answers, filled the way a 100-member group's are.
func hotPathResponses() []kmsg.Response {
	cg := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	cg.SetVersion(0)
	cg.MemberID, cg.ErrorMessage = kmsg.StringPtr("member-1"), kmsg.StringPtr("a reason")
	a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
	for i := 0; i < 30; i++ {
		tp := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		tp.Partitions = make([]int32, i)
		a.Topics = append(a.Topics, tp)
	}
	cg.Assignment = &a
	oc := kmsg.NewPtrOffsetCommitResponse()
	oc.SetVersion(8)
	for i := 0; i < 50; i++ {
		tp := kmsg.NewOffsetCommitResponseTopic()
		tp.Topic = "topic-with-a-long-name"
		tp.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, 200)
		oc.Topics = append(oc.Topics, tp)
	}
	hb := kmsg.NewPtrHeartbeatResponse()
	hb.ErrorCode = 27
	return []kmsg.Response{cg, oc, hb}
}

// The per-type plans (fixed-size structs and slices of them counted without a walk) change no
// estimate: every response kmsg knows, empty, and the hot path's answers, filled.
func TestEncodedSizeAtMostPlansAgreeWithTheWalk(t *testing.T) {
	resps := hotPathResponses()
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		if r := kmsg.ResponseForKey(key); r != nil {
			resps = append(resps, r)
		}
	}
	for _, resp := range resps {
		want := 16 + walkedSize(reflect.ValueOf(resp).Elem())
		got, ok := encodedSizeAtMost(resp, math.MaxInt64)
		if !ok || got != want {
			t.Errorf("%T: planned estimate %d (ok=%v), the walk gives %d", resp, got, ok, want)
		}
		if real := int64(len(AppendResponse(nil, 1, resp))); got < real {
			t.Errorf("%T: estimate %d below the real %d bytes", resp, got, real)
		}
		// A limit one byte short refuses it: the bound holds on the counted-without-a-walk paths.
		if _, ok := encodedSizeAtMost(resp, want-1); ok {
			t.Errorf("%T: a limit of %d bytes, one short of the estimate, was not exceeded", resp, want-1)
		}
	}
}

// An OffsetCommit answer naming many partitions is refused under a limit it passes: its
// partitions are counted by multiplication, not one by one.
func TestEncodedSizeAtMostRefusesAnOversizeCommitAnswer(t *testing.T) {
	oc := hotPathResponses()[1]
	real := int64(len(AppendResponse(nil, 1, oc)))
	if _, ok := encodedSizeAtMost(oc, real-1); ok {
		t.Fatalf("an OffsetCommit answer of %d bytes fit a limit of %d", real, real-1)
	}
	if est, ok := encodedSizeAtMost(oc, math.MaxInt64); !ok || est < real {
		t.Fatalf("estimate %d below the real %d bytes", est, real)
	}
}

func BenchmarkEncodedSizeAtMost(b *testing.B) {
	for _, resp := range hotPathResponses() {
		b.Run(fmt.Sprintf("%T", resp)[len("*kmsg."):], func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				encodedSizeAtMost(resp, math.MaxInt64)
			}
		})
	}
}
