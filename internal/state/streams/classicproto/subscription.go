package classicproto

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Subscription is Kafka Streams' SubscriptionInfo (spec §1.4), the user data of a classic
// Streams member's consumer-protocol subscription.
type Subscription struct {
	// Version is the layout used; LatestSupportedVersion the highest the client understands
	// (-1 for versions 1 and 2, which do not carry it).
	Version                int32
	LatestSupportedVersion int32
	ProcessID              [16]byte
	// PrevTasks and StandbyTasks exist in versions 1-6 only.
	PrevTasks    []TaskID
	StandbyTasks []TaskID
	// UserEndPoint is application.server as "host:port" (versions 2+); empty when not configured.
	UserEndPoint string
	// TaskOffsetSums exist in versions 7+.
	TaskOffsetSums []TaskOffsetSum
	UniqueField    int8  // versions 8+
	ErrorCode      int32 // versions 9+
	ClientTags     []ClientTag
	// Future is set for versions above LatestVersion: only Version and LatestSupportedVersion
	// were read, the rest is opaque (Kafka's own decoder does the same).
	Future bool
}

// TaskOffsetSum is one task's state progress (spec §1.4 "Offset-sum values").
type TaskOffsetSum struct {
	Task      TaskID
	OffsetSum int64
}

// ClientTag is one rack-awareness tag (versions 11+).
type ClientTag struct{ Key, Value string }

// ProcessIDString is the process id as the Streams protocol client sends it: UUID.toString().
func (s Subscription) ProcessIDString() string {
	h := hex.EncodeToString(s.ProcessID[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// RunningActiveTasks are the tasks the member reports as running actives: its prevTasks
// (versions 1-6) or the tasks with offset sum -2 (versions 7+). Together with the tasks of its
// owned partitions they are its owned active tasks (spec §1.5).
func (s Subscription) RunningActiveTasks() []TaskID {
	if s.Version < minOffsetSums {
		return s.PrevTasks
	}
	var out []TaskID
	for _, o := range s.TaskOffsetSums {
		if o.OffsetSum == OffsetSumRunning {
			out = append(out, o.Task)
		}
	}
	return out
}

// Endpoint parses UserEndPoint (spec §1.4): split at the last ':', an IPv6 host may be
// bracketed, the port must be 0..65535. ok is false when no endpoint is configured.
func (s Subscription) Endpoint() (host string, port int32, ok bool, err error) {
	if s.UserEndPoint == "" {
		return "", 0, false, nil
	}
	i := strings.LastIndexByte(s.UserEndPoint, ':')
	if i < 0 {
		return "", 0, false, malformed("user endpoint %q has no port", s.UserEndPoint)
	}
	host = s.UserEndPoint[:i]
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	p, perr := strconv.ParseUint(s.UserEndPoint[i+1:], 10, 16)
	if host == "" || perr != nil {
		return "", 0, false, malformed("user endpoint %q is not host:port", s.UserEndPoint)
	}
	return host, int32(p), true, nil
}

// Validate applies the rules of spec §1.6 (3, 4) beyond the layout: the latest supported
// version is consistent, no task belongs to a named topology, the endpoint parses.
func (s Subscription) Validate() error {
	if s.Version >= minLatestSupported && s.LatestSupportedVersion < s.Version {
		return malformed("latest supported version %d below used version %d", s.LatestSupportedVersion, s.Version)
	}
	if s.Future {
		return nil
	}
	for _, o := range s.TaskOffsetSums {
		if o.Task.NamedTopology != "" {
			return malformed("task %s belongs to named topology %q, which a streams group cannot hold", o.Task, o.Task.NamedTopology)
		}
	}
	if _, _, _, err := s.Endpoint(); err != nil {
		return err
	}
	return nil
}

// DecodeSubscription decodes SubscriptionInfo bytes (spec §1.4). Trailing bytes after the last
// field of the version are ignored, as Kafka's decoder ignores them.
func DecodeSubscription(b []byte) (Subscription, error) {
	r := &reader{b: b}
	s := Subscription{LatestSupportedVersion: -1}
	s.Version = r.int32("version")
	if r.err != nil {
		return Subscription{}, r.err
	}
	if s.Version < 1 {
		return Subscription{}, malformed("SubscriptionInfo version %d", s.Version)
	}
	if s.Version >= minLatestSupported {
		s.LatestSupportedVersion = r.int32("latest supported version")
	}
	if s.Version > LatestVersion {
		s.Future = true
		return s, r.err
	}
	copy(s.ProcessID[:], r.take(16, "process id"))
	if s.Version < minOffsetSums {
		s.PrevTasks = r.taskPairs("prev tasks")
		s.StandbyTasks = r.taskPairs("standby tasks")
	}
	if s.Version >= 2 {
		p, _ := r.kbytes(false, "user endpoint")
		s.UserEndPoint = string(p)
	}
	if s.Version >= minOffsetSums {
		s.TaskOffsetSums = r.offsetSums(s.Version)
	}
	if s.Version >= minUniqueField {
		s.UniqueField = r.int8("unique field")
	}
	if s.Version >= minErrorCode {
		s.ErrorCode = r.int32("error code")
	}
	if s.Version >= minClientTags {
		n := r.count(8, "client tags")
		for i := 0; i < n && r.err == nil; i++ {
			k, _ := r.kbytes(false, "client tag key")
			v, _ := r.kbytes(false, "client tag value")
			s.ClientTags = append(s.ClientTags, ClientTag{Key: string(k), Value: string(v)})
		}
	}
	if r.err != nil {
		return Subscription{}, fmt.Errorf("SubscriptionInfo v%d: %w", s.Version, r.err)
	}
	return s, nil
}

func (r *reader) taskPairs(what string) []TaskID {
	n := r.count(8, what)
	var out []TaskID
	for i := 0; i < n && r.err == nil; i++ {
		out = append(out, TaskID{Subtopology: r.int32(what), Partition: r.int32(what)})
	}
	return out
}

func (r *reader) offsetSums(version int32) []TaskOffsetSum {
	var out []TaskOffsetSum
	if version < minFlatOffsetSums {
		groups := r.count(8, "task offset sums")
		for i := 0; i < groups && r.err == nil; i++ {
			sub := r.int32("task offset sum subtopology")
			n := r.count(12, "partition offset sums")
			for j := 0; j < n && r.err == nil; j++ {
				p := r.int32("task offset sum partition")
				out = append(out, TaskOffsetSum{Task: TaskID{Subtopology: sub, Partition: p}, OffsetSum: r.int64("offset sum")})
			}
		}
		return out
	}
	n := r.count(18, "task offset sums")
	for i := 0; i < n && r.err == nil; i++ {
		t := TaskID{Subtopology: r.int32("task offset sum subtopology"), Partition: r.int32("task offset sum partition")}
		sum := r.int64("offset sum")
		t.NamedTopology, _ = r.kstring("named topology")
		out = append(out, TaskOffsetSum{Task: t, OffsetSum: sum})
	}
	return out
}

// Encode writes the SubscriptionInfo at s.Version. Versions 7-9 group the offset sums by
// subtopology in order of first appearance. A future version writes only its first 8 bytes.
func (s Subscription) Encode() ([]byte, error) {
	if s.Version < 1 {
		return nil, fmt.Errorf("SubscriptionInfo version %d", s.Version)
	}
	w := &writer{}
	w.int32(s.Version)
	if s.Version >= minLatestSupported {
		w.int32(s.LatestSupportedVersion)
	}
	if s.Version > LatestVersion {
		return w.b, nil
	}
	w.b = append(w.b, s.ProcessID[:]...)
	if s.Version < minOffsetSums {
		for _, set := range [][]TaskID{s.PrevTasks, s.StandbyTasks} {
			w.count(len(set))
			for _, t := range set {
				w.int32(t.Subtopology)
				w.int32(t.Partition)
			}
		}
	}
	if s.Version >= 2 {
		w.kbytes([]byte(s.UserEndPoint))
	}
	if s.Version >= minOffsetSums && s.Version < minFlatOffsetSums {
		var order []int32
		bySub := map[int32][]TaskOffsetSum{}
		for _, o := range s.TaskOffsetSums {
			if _, ok := bySub[o.Task.Subtopology]; !ok {
				order = append(order, o.Task.Subtopology)
			}
			bySub[o.Task.Subtopology] = append(bySub[o.Task.Subtopology], o)
		}
		w.count(len(order))
		for _, sub := range order {
			w.int32(sub)
			w.count(len(bySub[sub]))
			for _, o := range bySub[sub] {
				w.int32(o.Task.Partition)
				w.int64(o.OffsetSum)
			}
		}
	}
	if s.Version >= minFlatOffsetSums {
		w.count(len(s.TaskOffsetSums))
		for _, o := range s.TaskOffsetSums {
			w.int32(o.Task.Subtopology)
			w.int32(o.Task.Partition)
			w.int64(o.OffsetSum)
			w.kstring(o.Task.NamedTopology, o.Task.NamedTopology == "")
		}
	}
	if s.Version >= minUniqueField {
		w.int8(s.UniqueField)
	}
	if s.Version >= minErrorCode {
		w.int32(s.ErrorCode)
	}
	if s.Version >= minClientTags {
		w.count(len(s.ClientTags))
		for _, t := range s.ClientTags {
			w.kbytes([]byte(t.Key))
			w.kbytes([]byte(t.Value))
		}
	}
	return w.b, nil
}

// Member is a classic Streams member's decoded JoinGroup metadata: the consumer-protocol
// subscription and the SubscriptionInfo inside it.
type Member struct {
	Outer        kmsg.ConsumerMemberMetadata
	Subscription Subscription
}

// DecodeMember decodes and validates the metadata of the "stream" protocol (spec §1.3, §1.6
// rules 2-4, 6): a negative outer version or a short buffer is malformed, a version above 3 is
// read with the version-3 layout, the user data must be present and a valid SubscriptionInfo.
func DecodeMember(metadata []byte) (Member, error) {
	if len(metadata) >= 2 && int16(uint16(metadata[0])<<8|uint16(metadata[1])) < 0 {
		return Member{}, malformed("consumer protocol subscription version is negative")
	}
	var m Member
	if err := m.Outer.ReadFrom(metadata); err != nil {
		return Member{}, malformed("consumer protocol subscription: %v", err)
	}
	if m.Outer.UserData == nil {
		return Member{}, malformed("consumer protocol subscription carries no user data")
	}
	s, err := DecodeSubscription(m.Outer.UserData)
	if err != nil {
		return Member{}, err
	}
	if err := s.Validate(); err != nil {
		return Member{}, err
	}
	m.Subscription = s
	return m, nil
}
