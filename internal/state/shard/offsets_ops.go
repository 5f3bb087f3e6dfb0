package shard

import (
	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/twmb/franz-go/pkg/kerr"
)

// CommitPartition is one partition of an OffsetCommit that passed the catalog check.
type CommitPartition struct {
	offsets.TopicPartition
	Offset      int64
	LeaderEpoch int32
	Metadata    *string
	// RetentionMs is an explicit retention (OffsetCommit v2-v4); -1: none, the default rules apply.
	RetentionMs int64
	// TopicID is the id of the topic the catalog resolved the commit to; the offset is bound to
	// it (a re-created topic of the same name does not inherit it).
	TopicID [16]byte
}

// CommitRequest is an OffsetCommit addressed to one group.
type CommitRequest struct {
	Group      string
	Generation int32 // GenerationIdOrMemberEpoch
	MemberID   string
	InstanceID *string
	Version    int16
	Partitions []CommitPartition
	// MaxMetadata is offset.metadata.max.bytes.
	MaxMetadata int
	// Transactional marks a TxnOffsetCommit (spec coordinator-apis §4.2 step 5); Version is then
	// the TxnOffsetCommit version. Validators must then never answer REBALANCE_IN_PROGRESS,
	// must accept generation < 0 with no member id on a non-empty classic group, must skip
	// OffsetCommit's v9 UNSUPPORTED_VERSION rule, and return semantic codes (GROUP_ID_NOT_FOUND,
	// STALE_MEMBER_EPOCH): the handler translates them for old versions.
	Transactional bool
	// Codes, when not nil and with one entry per partition, receives CommitOffsets' answer in
	// place of its response (which is then nil): the handler lends an array it already has,
	// sparing the op an allocation and the boxing of the answer into the response (two of an
	// offset commit's ~16 objects, issue 12). The caller reads it only after Write returned
	// without an error; until then it is the op's.
	Codes []int16
}

// CommitOffsets validates a commit against the group and stores the partitions that pass. The
// response is one error code per partition, in request order.
func CommitOffsets(r CommitRequest) runtime.WriteOp[*Machine] {
	return func(c *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		codes := r.Codes
		var resp any // nil when the caller lent Codes
		if codes != nil && len(codes) == len(r.Partitions) {
			clear(codes)
		} else {
			codes = make([]int16, len(r.Partitions))
			resp = codes
		}
		if code := m.validateCommit(r); code != 0 {
			for i := range codes {
				codes[i] = code
			}
			return runtime.Result{Response: resp}
		}
		now := c.Now().UnixMilli()
		recs := make([]log.Record, 0, len(r.Partitions))
		size := 0
		for _, p := range r.Partitions {
			size += offsets.CommitRecordSize(r.Group, p.TopicPartition, committed(p, now))
		}
		buf := make([]byte, 0, size) // every record of the commit in one allocation
		for i, p := range r.Partitions {
			cm := committed(p, now)
			if offsets.MetadataLength(cm.Metadata) > r.MaxMetadata {
				codes[i] = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			var rec log.Record
			rec, buf = offsets.AppendCommitRecord(buf, r.Group, p.TopicPartition, cm)
			recs = append(recs, rec)
		}
		if m.Offsets.HasCommitted(r.Group) {
			// Its records change only this group's committed offsets, validation at most notes
			// the committing member of this group alive (classic Touch), and the op arranges no
			// timer: no heartbeat of another group reads any of it (RecordScope), so their
			// tickets stay valid; this group's own end, conservatively. A first commit
			// creates the group's offsets entry (a simple group, in ListGroups and
			// DescribeGroups): unscoped, like anything not read to be within one group.
			c.Scoped(r.Group)
		}
		return runtime.Result{Records: recs, Response: resp}
	}
}

// committed is what a commit of p at now (Unix ms) stores.
func committed(p CommitPartition, now int64) offsets.Committed {
	meta := ""
	if p.Metadata != nil {
		meta = *p.Metadata
	}
	expire := int64(-1)
	if p.RetentionMs >= 0 {
		expire = now + p.RetentionMs
	}
	return offsets.Committed{
		Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: meta,
		CommitTimestamp: now, ExpireTimestamp: expire, TopicID: p.TopicID,
	}
}

// validateCommit applies the group rules of spec coordinator-apis §3.2 steps 3-4; it returns
// the code every partition gets, or 0. Each group type that owns the group id decides; a group
// id no type owns is a simple group, known only by its committed offsets.
func (m *Machine) validateCommit(r CommitRequest) int16 {
	if code, owned := m.ownerCode(r); owned {
		return code
	}
	return m.validateSimpleCommit(r)
}

// ownerCode asks, per group type, whether the type owns the group id and, if so, for the
// commit's code. (Called directly: a slice of the three method values cost four allocations on
// every commit.)
func (m *Machine) ownerCode(r CommitRequest) (code int16, owned bool) {
	if code, owned = m.validateClassicCommit(r); owned {
		return code, true
	}
	if code, owned = m.validateStreamsCommit(r); owned {
		return code, true
	}
	return m.validateConsumerCommit(r)
}

func (m *Machine) validateSimpleCommit(r CommitRequest) int16 {
	exists := m.Offsets.HasGroup(r.Group)
	if !exists {
		if r.Generation < 0 {
			return 0 // a simple (admin) commit creates the group
		}
		if r.Version >= 9 {
			return kerr.GroupIDNotFound.Code
		}
		return kerr.IllegalGeneration.Code
	}
	// A group that has only committed offsets is an Empty simple group. Kafka accepts any
	// commit with a negative generation there, whatever member or instance id it names; one
	// that claims a generation comes from a member the group cannot have.
	if r.Generation < 0 {
		return 0
	}
	return kerr.UnknownMemberID.Code
}

// FetchPartition is one requested partition's answer.
type FetchPartition struct {
	offsets.TopicPartition
	Committed offsets.Committed
	Found     bool
	// Unstable: a RequireStable fetch found an offset staged by an open transaction
	// (UNSTABLE_OFFSET_COMMIT); see FetchOffsetsStable.
	Unstable bool
}

// FetchOffsets reads a group's committed offsets from durable state: the named partitions, or
// all when parts is nil. An unknown group is not an error: its partitions come back not found.
func FetchOffsets(group string, parts []offsets.TopicPartition) runtime.ReadOp[*Machine] {
	return func(m *Machine) (any, error) {
		if parts == nil {
			all := m.Offsets.All(group)
			out := make([]FetchPartition, len(all))
			for i, e := range all {
				out[i] = FetchPartition{TopicPartition: e.TopicPartition, Committed: e.Committed, Found: true}
			}
			return out, nil
		}
		out := make([]FetchPartition, len(parts))
		for i, tp := range parts {
			c, ok := m.Offsets.Get(group, tp.Topic, tp.Partition)
			out[i] = FetchPartition{TopicPartition: tp, Committed: c, Found: ok}
		}
		return out, nil
	}
}
