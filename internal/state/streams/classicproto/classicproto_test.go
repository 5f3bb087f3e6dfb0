package classicproto

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func unhex(t testing.TB, parts ...string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(strings.Join(parts, ""), " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The spec §1.7 "B-like" member: process ...0b, endpoint hostB:8080, running stateful active 0_1
// (sum -2), standby 0_0 (sum 42), uniqueField 1, no error, no tags.
var processB = [16]byte{15: 0x0b}

func bLike(version int32) Subscription {
	s := Subscription{Version: version, LatestSupportedVersion: 11, ProcessID: processB, UserEndPoint: "hostB:8080"}
	if version < 3 {
		s.LatestSupportedVersion = -1
	}
	if version < 2 {
		s.UserEndPoint = ""
	}
	if version < 7 {
		s.PrevTasks = []TaskID{{0, 1, ""}}
		s.StandbyTasks = []TaskID{{0, 0, ""}}
		return s
	}
	s.TaskOffsetSums = []TaskOffsetSum{{TaskID{0, 1, ""}, -2}, {TaskID{0, 0, ""}, 42}}
	if version >= 8 {
		s.UniqueField = 1
	}
	return s
}

// Byte segments of the B-like subscription, per field of spec §1.4.
const (
	hexProcess  = "0000000000000000000000000000000b"
	hexEndpoint = "0000000a686f7374423a38303830"
	hexV3Tasks  = "00000001 0000000000000001 00000001 0000000000000000"
	hexV7Sums   = "00000001 00000000 00000002 00000001fffffffffffffffe 00000000000000000000002a"
	hexV10Sums  = "00000002 0000000000000001fffffffffffffffe ffff 0000000000000000000000000000002a ffff"
)

func TestSubscriptionGoldenPerVersion(t *testing.T) {
	cases := []struct {
		version int32
		hex     string
	}{
		// Vectors printed in spec §1.7.
		{11, "0000000b0000000b0000000000000000000000000000000b0000000a686f7374423a38303830000000020000000000000001fffffffffffffffeffff0000000000000000000000000000002affff010000000000000000"},
		{7, "000000070000000b0000000000000000000000000000000b0000000a686f7374423a3830383000000001000000000000000200000001fffffffffffffffe00000000000000000000002a"},
		{3, "000000030000000b0000000000000000000000000000000b0000000100000000000000010000000100000000000000000000000a686f7374423a38303830"},
		// The other versions, assembled field by field from the layout table of spec §1.4.
		{1, "00000001" + hexProcess + hexV3Tasks},
		{2, "00000002" + hexProcess + hexV3Tasks + hexEndpoint},
		{4, "000000040000000b" + hexProcess + hexV3Tasks + hexEndpoint},
		{5, "000000050000000b" + hexProcess + hexV3Tasks + hexEndpoint},
		{6, "000000060000000b" + hexProcess + hexV3Tasks + hexEndpoint},
		{8, "000000080000000b" + hexProcess + hexEndpoint + hexV7Sums + "01"},
		{9, "000000090000000b" + hexProcess + hexEndpoint + hexV7Sums + "01" + "00000000"},
		{10, "0000000a0000000b" + hexProcess + hexEndpoint + hexV10Sums + "01" + "00000000"},
	}
	for _, c := range cases {
		want := unhex(t, c.hex)
		s := bLike(c.version)
		got, err := s.Encode()
		if err != nil {
			t.Fatalf("v%d encode: %v", c.version, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("v%d encode:\n got %x\nwant %x", c.version, got, want)
		}
		dec, err := DecodeSubscription(want)
		if err != nil {
			t.Fatalf("v%d decode: %v", c.version, err)
		}
		if !reflect.DeepEqual(dec, s) {
			t.Errorf("v%d decode:\n got %+v\nwant %+v", c.version, dec, s)
		}
		if err := dec.Validate(); err != nil {
			t.Errorf("v%d validate: %v", c.version, err)
		}
		if got := dec.ProcessIDString(); got != "00000000-0000-0000-0000-00000000000b" {
			t.Errorf("v%d process id %q", c.version, got)
		}
		if run := dec.RunningActiveTasks(); !reflect.DeepEqual(run, []TaskID{{0, 1, ""}}) {
			t.Errorf("v%d running actives %v, want [0_1]", c.version, run)
		}
	}
}

func TestSubscriptionClientTagsAndNamedTopology(t *testing.T) {
	s := bLike(11)
	s.ClientTags = []ClientTag{{"az", "eu-1"}, {"rack", "r2"}}
	s.ErrorCode = ErrShutdown
	b, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(b, unhex(t, "01 00000004 00000002 00000002617a 000000046575 2d31 00000004 7261636b 00000002 7232")) {
		t.Fatalf("client tags not at the end in spec §1.4 layout: %x", b)
	}
	dec, err := DecodeSubscription(b)
	if err != nil || !reflect.DeepEqual(dec, s) {
		t.Fatalf("round trip: %+v %v", dec, err)
	}

	s.TaskOffsetSums[1].Task.NamedTopology = "nt"
	b, _ = s.Encode()
	dec, err = DecodeSubscription(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := dec.Validate(); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "named topology") {
		t.Fatalf("named topology must be refused (spec §1.5), got %v", err)
	}
}

func TestSubscriptionFutureVersion(t *testing.T) {
	// Only version and latest supported are readable; the rest is opaque.
	b := unhex(t, "0000000c0000000c", "deadbeef")
	s, err := DecodeSubscription(b)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Future || s.Version != 12 || s.LatestSupportedVersion != 12 {
		t.Fatalf("got %+v", s)
	}
	used, commonly := AssignmentVersions(s)
	if used != 11 || commonly != 11 {
		t.Fatalf("future member gets v%d/commonly %d, want 11/11 (spec §2.5)", used, commonly)
	}
}

func TestAssignmentVersions(t *testing.T) {
	for _, c := range []struct{ u, l, wantU, wantC int32 }{
		{11, 11, 11, 11}, {10, 11, 10, 11}, {7, 8, 7, 8}, {3, 3, 3, 3}, {2, -1, 2, -1}, {12, 13, 11, 11},
	} {
		u, cm := AssignmentVersions(Subscription{Version: c.u, LatestSupportedVersion: c.l})
		if u != c.wantU || cm != c.wantC {
			t.Errorf("u=%d l=%d: got %d/%d want %d/%d", c.u, c.l, u, cm, c.wantU, c.wantC)
		}
	}
	for in, want := range map[int16]int16{0: 0, 1: 1, 3: 3, 4: 3, 9: 3} {
		if got := OuterVersion(in); got != want {
			t.Errorf("OuterVersion(%d) = %d, want %d", in, got, want)
		}
	}
}

func TestSubscriptionValidation(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(*Subscription)
		ok   bool
	}{
		{"no endpoint", func(s *Subscription) { s.UserEndPoint = "" }, true},
		{"ipv6", func(s *Subscription) { s.UserEndPoint = "[::1]:8080" }, true},
		{"no port", func(s *Subscription) { s.UserEndPoint = "hostA8080" }, false},
		{"port range", func(s *Subscription) { s.UserEndPoint = "hostA:65536" }, false},
		{"empty host", func(s *Subscription) { s.UserEndPoint = ":80" }, false},
		{"latest below used", func(s *Subscription) { s.LatestSupportedVersion = 10 }, false},
	} {
		s := bLike(11)
		c.mod(&s)
		err := s.Validate()
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	s := bLike(11)
	s.UserEndPoint = "[::1]:8080"
	if h, p, ok, _ := s.Endpoint(); h != "::1" || p != 8080 || !ok {
		t.Errorf("ipv6 endpoint: %q %d %v", h, p, ok)
	}
}

func TestSubscriptionTruncatedAfterProcessID(t *testing.T) {
	full, _ := bLike(11).Encode()
	for n := range len(full) {
		_, err := DecodeSubscription(full[:n])
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("prefix of %d bytes: %v, want ErrMalformed", n, err)
		}
	}
	// Trailing bytes are ignored, like Kafka's decoder.
	if _, err := DecodeSubscription(append(full, 1, 2, 3)); err != nil {
		t.Fatal(err)
	}
}

func TestMemberGolden(t *testing.T) {
	// Spec §1.7: ConsumerProtocolSubscription v3 around the v11 bytes, owned input-1, generation 23.
	user, _ := bLike(11).Encode()
	want := unhex(t, "0003 00000001 0005696e707574 00000057", hex.EncodeToString(user), "00000001 0005696e707574 00000001 00000001 00000017 ffff")
	outer := kmsg.ConsumerMemberMetadata{Version: 3, Topics: []string{"input"}, UserData: user,
		OwnedPartitions: []kmsg.ConsumerMemberMetadataOwnedPartition{{Topic: "input", Partitions: []int32{1}}}, Generation: 23}
	if got := outer.AppendTo(nil); !bytes.Equal(got, want) {
		t.Fatalf("outer:\n got %x\nwant %x", got, want)
	}
	m, err := DecodeMember(want)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m.Subscription, bLike(11)) || m.Outer.Generation != 23 || m.Outer.Rack != nil {
		t.Fatalf("got %+v", m)
	}

	// A version above 3 is read with the version-3 layout; trailing bytes are ignored.
	newer := append(append([]byte{0, 7}, want[2:]...), 0xAA, 0xBB)
	if m, err := DecodeMember(newer); err != nil || m.Outer.Generation != 23 {
		t.Fatalf("outer v7: %+v %v", m, err)
	}
	for name, b := range map[string][]byte{
		"negative version": append([]byte{0xff, 0xff}, want[2:]...),
		"short":            want[:20],
		"empty":            nil,
		"null user data":   (&kmsg.ConsumerMemberMetadata{Version: 3, Topics: []string{"input"}}).AppendTo(nil),
	} {
		if _, err := DecodeMember(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

// Spec §2.7: active [0_1] (input-1), standby {0_0: [input-0]}, hostB:8080 → active [input-1],
// standby [input-0], errCode 0, commonly 11, nextRebalanceMs MAX.
func sampleAssignment(v int32) Assignment {
	a := Assignment{
		Version: v, CommonlySupportedVersion: 11,
		Active:  []TaskID{{0, 1, ""}},
		Standby: []StandbyTask{{TaskID{0, 0, ""}, []TopicPartition{{"input", 0}}}},
	}
	if v < 3 {
		a.CommonlySupportedVersion = -1
	}
	if v >= 2 {
		a.ActiveByHost = []HostPartitions{{"hostB", 8080, []TopicPartition{{"input", 1}}}}
	}
	if v >= 6 {
		a.StandbyByHost = []HostPartitions{{"hostB", 8080, []TopicPartition{{"input", 0}}}}
	}
	if v >= 7 {
		a.NextRebalanceMs = NoFollowUp
	}
	return a
}

const (
	v11Assignment = "0000000b0000000b0000000100000000000000010000000000000001000000000000000000000000000000010005696e7075740000000000000001000000000005696e707574000000010005686f73744200001f90000000010000000000000001000000010005686f73744200001f90000000010000000000000000000000007fffffffffffffff"
	v7Assignment  = "000000070000000b000000010000000000000001000000010000000000000000000000010005696e7075740000000000000001000000000005696e707574000000010005686f73744200001f90000000010000000000000001000000010005686f73744200001f90000000010000000000000000000000007fffffffffffffff"
)

func TestAssignmentGoldenPerVersion(t *testing.T) {
	cases := []struct {
		version int32
		hex     string
	}{
		// Vectors of spec §2.7 (produced by Kafka's AssignmentInfo.encode()).
		{11, v11Assignment},
		{7, v7Assignment},
		{6, "000000060000000b000000010000000000000001000000010000000000000000000000010005696e7075740000000000000001000000000005696e707574000000010005686f73744200001f90000000010000000000000001000000010005686f73744200001f9000000001000000000000000000000000"},
		{5, "000000050000000b000000010000000000000001000000010000000000000000000000010005696e7075740000000000000001000000000005696e707574000000010005686f73744200001f9000000001000000000000000100000000"},
		{4, "000000040000000b000000010000000000000001000000010000000000000000000000010005696e70757400000000000000010005686f73744200001f90000000010005696e7075740000000100000000"},
		{2, "00000002000000010000000000000001000000010000000000000000000000010005696e70757400000000000000010005686f73744200001f90000000010005696e70757400000001"},
		{1, "00000001000000010000000000000001000000010000000000000000000000010005696e70757400000000"},
		// Versions 8-9 share version 7's layout and 10 shares 11's (spec §2.2 table); v3 is v4
		// without errCode.
		{8, "00000008" + v7Assignment[8:]},
		{9, "00000009" + v7Assignment[8:]},
		{10, "0000000a" + v11Assignment[8:]},
		{3, "000000030000000b000000010000000000000001000000010000000000000000000000010005696e70757400000000000000010005686f73744200001f90000000010005696e70757400000001"},
	}
	for _, c := range cases {
		want := unhex(t, c.hex)
		a := sampleAssignment(c.version)
		got, err := a.Encode()
		if err != nil {
			t.Fatalf("v%d: %v", c.version, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("v%d encode:\n got %x\nwant %x", c.version, got, want)
		}
		dec, err := DecodeAssignment(want)
		if err != nil {
			t.Fatalf("v%d decode: %v", c.version, err)
		}
		if !reflect.DeepEqual(dec, a) {
			t.Errorf("v%d decode:\n got %+v\nwant %+v", c.version, dec, a)
		}
	}
}

func TestShutdownAssignmentGolden(t *testing.T) {
	a := Assignment{Version: 11, CommonlySupportedVersion: 11, ErrCode: ErrShutdown, NextRebalanceMs: NoFollowUp}
	got, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if want := unhex(t, "0000000b0000000b0000000000000000000000000000000000000000000000047fffffffffffffff"); !bytes.Equal(got, want) {
		t.Fatalf("got %x\nwant %x", got, want)
	}
}

func TestMemberAssignmentGolden(t *testing.T) {
	info := sampleAssignment(11)
	got, err := EncodeMemberAssignment(3, []TopicPartition{{"input", 1}}, info)
	if err != nil {
		t.Fatal(err)
	}
	want := unhex(t, "0003 00000001 0005696e707574 00000001 00000001 00000088", v11Assignment)
	if !bytes.Equal(got, want) {
		t.Fatalf("got %x\nwant %x", got, want)
	}
	parts, dec, empty, err := DecodeMemberAssignment(got)
	if err != nil || empty || !reflect.DeepEqual(parts, []TopicPartition{{"input", 1}}) || !reflect.DeepEqual(dec, info) {
		t.Fatalf("decode: %v %+v %v %v", parts, dec, empty, err)
	}
	if _, _, empty, err := DecodeMemberAssignment(nil); !empty || err != nil {
		t.Fatalf("empty stored assignment: %v %v", empty, err)
	}
}

// Spec §10 scenario 34: subtopology 1 reads left (4 partitions) and right (2); tasks 1_1 and
// 1_3 give partitions left-1, left-3, right-1 and ACTIVE [1_1, 1_3, 1_1].
func TestMultiTopicTaskOrder(t *testing.T) {
	parts := []TopicPartition{{"right", 1}, {"left", 3}, {"left", 1}}
	SortPartitions(parts)
	if !reflect.DeepEqual(parts, []TopicPartition{{"left", 1}, {"left", 3}, {"right", 1}}) {
		t.Fatalf("sorted %v", parts)
	}
	b, err := EncodeMemberAssignment(3, parts, Assignment{Version: 11, CommonlySupportedVersion: 11,
		Active: []TaskID{{1, 1, ""}, {1, 3, ""}, {1, 1, ""}}, NextRebalanceMs: NoFollowUp})
	if err != nil {
		t.Fatal(err)
	}
	var outer kmsg.ConsumerMemberAssignment
	if err := outer.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	if len(outer.Topics) != 2 || outer.Topics[0].Topic != "left" || !reflect.DeepEqual(outer.Topics[0].Partitions, []int32{1, 3}) ||
		outer.Topics[1].Topic != "right" || !reflect.DeepEqual(outer.Topics[1].Partitions, []int32{1}) {
		t.Fatalf("topics %+v", outer.Topics)
	}
}

func TestAssignmentNamedTopologyAndModifiedUTF8(t *testing.T) {
	a := Assignment{Version: 11, CommonlySupportedVersion: 11, Active: []TaskID{{0, 1, "nt"}},
		ActiveByHost: []HostPartitions{{"h\x00\U0001F600", 1, []TopicPartition{{"input", 1}}}}, NextRebalanceMs: NoFollowUp}
	b, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	// Named topology: 2 chars in UTF-16BE; host: NUL as C0 80 and U+1F600 as two 3-byte surrogates.
	if !bytes.Contains(b, unhex(t, "00000000 00000001 00000002 006e 0074")) {
		t.Errorf("named topology not as Java writeChars: %x", b)
	}
	if !bytes.Contains(b, unhex(t, "0009 68 c080 eda0bd edb880")) {
		t.Errorf("host not in modified UTF-8: %x", b)
	}
	dec, err := DecodeAssignment(b)
	if err != nil || !reflect.DeepEqual(dec, a) {
		t.Fatalf("round trip %+v %v", dec, err)
	}
	long := Assignment{Version: 2, ActiveByHost: []HostPartitions{{strings.Repeat("h", 70000), 1, nil}}}
	if _, err := long.Encode(); err == nil {
		t.Fatal("a host beyond writeUTF's 65535 bytes must be refused, not truncated")
	}
}

func TestAssignmentMalformed(t *testing.T) {
	full := unhex(t, v11Assignment)
	for n := range len(full) {
		if _, err := DecodeAssignment(full[:n]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("prefix %d: %v", n, err)
		}
	}
	for name, b := range map[string][]byte{
		"version 0":          unhex(t, "00000000"),
		"version 12":         unhex(t, "0000000c0000000b"),
		"huge active count":  unhex(t, "0000000b0000000b7fffffff"),
		"negative count":     unhex(t, "00000001ffffffff"),
		"unknown dict index": unhex(t, "000000060000000b 00000000 00000000 00000000 00000001 0005686f737442 00001f90 00000001 00000007 00000001"),
		"bad modified utf8":  unhex(t, "00000002 00000000 00000000 00000001 0001 ff 00000001 00000000"),
	} {
		if _, err := DecodeAssignment(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	if _, _, _, err := DecodeMemberAssignment((&kmsg.ConsumerMemberAssignment{Version: 3}).AppendTo(nil)); !errors.Is(err, ErrMalformed) {
		t.Errorf("null AssignmentInfo: %v", err)
	}
}
