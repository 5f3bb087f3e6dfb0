package shard

import (
	"encoding/binary"

	"github.com/coordinatord/coordinatord/internal/state/records"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/twmb/franz-go/pkg/kbin"
)

// RecordScope is the shard's runtime.Options.Scope: the records of a group's membership — its
// classic record, its streams and consumer group records of every member, its config overrides
// — share one scope, the group id as it is encoded in their keys. A heartbeat reads all of
// them and nothing else persisted in the shard, so naming that scope (groupReads) lets a
// heartbeat that writes nothing wait only for its own group's pending records. Offsets and
// transactions have no scope: no heartbeat reads them, and a group's commits must not hold
// its heartbeats either.
func RecordScope(key []byte) []byte {
	kind, err := records.KindOf(key)
	if err != nil || !membershipKind(kind) {
		return nil
	}
	n, w := binary.Uvarint(key[2:])
	if w <= 0 || n == 0 || uint64(len(key)-2-w) < n-1 {
		return nil
	}
	return key[2 : 2+w+int(n-1)]
}

func membershipKind(k records.Kind) bool {
	switch k {
	case records.KindClassicGroup, records.KindGroupConfig,
		records.KindStreamsGroupMetadata, records.KindStreamsMemberMetadata, records.KindStreamsTargetMetadata,
		records.KindStreamsTargetMember, records.KindStreamsCurrentMember, records.KindStreamsTopology,
		records.KindStreamsClassicMember,
		records.KindConsumerGroupMetadata, records.KindConsumerMemberMetadata, records.KindConsumerTargetMetadata,
		records.KindConsumerTargetMember, records.KindConsumerCurrentMember, records.KindConsumerClassicMember:
		return true
	}
	return false
}

// groupReads names a group's membership scope (RecordScope) as what an operation read. Call
// it only for an operation that appends nothing: one with records waits for them anyway.
func groupReads(c *runtime.Ctx[*Machine], group string) {
	// The scope is only hashed, never kept: a group id of up to 100 bytes (every realistic
	// one) encodes on the stack instead of in two allocations per heartbeat.
	var buf [104]byte
	c.ReadsScope(kbin.AppendCompactString(buf[:0], group))
}
