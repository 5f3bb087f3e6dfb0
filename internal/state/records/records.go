// Package records defines every kind of persistent fact a shard keeps and the compact binary
// codec shared by all of them. A record key is `[u16 kind][key fields]` and a value is
// `[u16 version][fields]`, encoded with kbin; a nil value is a tombstone. The latest value of a
// key is self-contained, so compaction may drop every older one, and a new field is always a
// new value version, never a reinterpretation of an old one.
package records

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
)

// Kind says what a record is about. Values are persisted: never renumber or reuse one.
type Kind uint16

const (
	// KindOffsetCommit: key (group, topic, partition), value the committed offset.
	KindOffsetCommit Kind = 1
	// KindTxnOffset: key (producer id, group, topic, partition), value an offset staged by a
	// transaction (TxnOffsetCommit) until its COMMIT or ABORT marker.
	KindTxnOffset Kind = 2
	// KindTxnProducer: key (producer id), value the producer's last epoch, coordinator epoch and
	// activity time, so stale epochs are fenced after the staged offsets are gone.
	KindTxnProducer Kind = 3
	// KindClassicGroup: key (group), value the whole classic group (state, generation,
	// protocol, leader, members with metadata and assignment, pending member ids).
	KindClassicGroup Kind = 10
	// Streams groups (spec streams-groups §10), keyed by group id (and member id where named).
	KindStreamsGroupMetadata  Kind = 20 // group: epoch, metadata hash, validated topology epoch, assignment configs
	KindStreamsMemberMetadata Kind = 21 // group, member: the member's metadata
	KindStreamsTargetMetadata Kind = 22 // group: target assignment epoch and timestamp
	KindStreamsTargetMember   Kind = 23 // group, member: the member's target assignment
	KindStreamsCurrentMember  Kind = 24 // group, member: epochs, state, assigned and pending tasks
	KindStreamsTopology       Kind = 25 // group: the topology as sent by the first joiner
	// KindStreamsClassicMember: key (group, member), value the classic-protocol part of a
	// streams group member that talks JoinGroup/SyncGroup (online migration, spec
	// online-migration §7.5): its session timeout and last JoinGroup protocols. Absent for
	// streams-protocol members. Kinds 30-39 belong to online migration.
	KindStreamsClassicMember Kind = 30
	// KindTopic: key (topic name), value the topic's id, partition count, replication factor and
	// configs. Lives in the metadata shard.
	KindTopic Kind = 40
	// KindScramCredential: key (user, SCRAM mechanism number), value the credential's salt,
	// iterations, StoredKey and ServerKey (never the password); a tombstone deletes it. Lives
	// in the metadata shard. Kinds 42-44 are reserved for further authentication records.
	KindScramCredential Kind = 41
	// KindACL: key (resource type, resource name, pattern type, principal, host, operation,
	// permission), the whole binding; value empty (version only). A tombstone deletes it.
	KindACL Kind = 45
	// KindGroupConfig: key (group), value the group's config overrides (name/value pairs, the
	// whole set); a tombstone clears them. Kinds 60-69 are group-level records of any type.
	KindGroupConfig Kind = 60
	// KIP-848 consumer groups (docs/consumer-groups.md), keyed by group id (and member id where
	// named). Kinds 70-89 are theirs.
	KindConsumerGroupMetadata  Kind = 70 // group: epoch, metadata hash
	KindConsumerMemberMetadata Kind = 71 // group, member: the member's metadata and subscription
	KindConsumerTargetMetadata Kind = 72 // group: target assignment epoch and timestamp
	KindConsumerTargetMember   Kind = 73 // group, member: the member's target assignment
	KindConsumerCurrentMember  Kind = 74 // group, member: epochs, state, assigned and pending partitions
	KindConsumerClassicMember  Kind = 75 // group, member: a classic-protocol member's session timeout and protocols (online migration)
	// KindTest is for engine tests that need a record before any group type exists.
	KindTest Kind = 0xFFFF
)

var kindNames = map[Kind]string{
	KindOffsetCommit:           "offset_commit",
	KindTxnOffset:              "txn_offset",
	KindTxnProducer:            "txn_producer",
	KindClassicGroup:           "classic_group",
	KindStreamsGroupMetadata:   "streams_group_metadata",
	KindStreamsMemberMetadata:  "streams_member_metadata",
	KindStreamsTargetMetadata:  "streams_target_assignment_metadata",
	KindStreamsTargetMember:    "streams_target_assignment_member",
	KindStreamsCurrentMember:   "streams_current_member_assignment",
	KindStreamsTopology:        "streams_topology",
	KindStreamsClassicMember:   "streams_classic_member",
	KindTopic:                  "topic",
	KindScramCredential:        "scram_credential",
	KindACL:                    "acl",
	KindGroupConfig:            "group_config",
	KindConsumerGroupMetadata:  "consumer_group_metadata",
	KindConsumerMemberMetadata: "consumer_member_metadata",
	KindConsumerTargetMetadata: "consumer_target_assignment_metadata",
	KindConsumerTargetMember:   "consumer_target_assignment_member",
	KindConsumerCurrentMember:  "consumer_current_member_assignment",
	KindConsumerClassicMember:  "consumer_classic_member",
	KindTest:                   "test",
}

func (k Kind) String() string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("kind_%d", uint16(k))
}

// ErrShort is returned when a key or value ends before its fields do.
var ErrShort = errors.New("record truncated")

// KindOf reads the kind of a record key.
func KindOf(key []byte) (Kind, error) {
	if len(key) < 2 {
		return 0, ErrShort
	}
	return Kind(binary.BigEndian.Uint16(key)), nil
}

// Builder appends fields of a key or value.
type Builder struct{ b []byte }

// NewKey starts a key of the given kind.
func NewKey(k Kind) *Builder {
	return &Builder{b: binary.BigEndian.AppendUint16(make([]byte, 0, 32), uint16(k))}
}

// NewValue starts a value of the given version.
func NewValue(version uint16) *Builder {
	return &Builder{b: binary.BigEndian.AppendUint16(make([]byte, 0, 32), version)}
}

// AppendKey starts a key of the given kind at the end of buf, so that a caller who knows the
// size can build a record in one allocation.
func AppendKey(buf []byte, k Kind) Builder {
	return Builder{b: binary.BigEndian.AppendUint16(buf, uint16(k))}
}

// AppendValue starts a value of the given version at the end of buf.
func AppendValue(buf []byte, version uint16) Builder {
	return Builder{b: binary.BigEndian.AppendUint16(buf, version)}
}

func (b *Builder) String(s string) *Builder { b.b = kbin.AppendCompactString(b.b, s); return b }
func (b *Builder) Bytes(p []byte) *Builder  { b.b = kbin.AppendCompactNullableBytes(b.b, p); return b }
func (b *Builder) Int16(v int16) *Builder   { b.b = kbin.AppendInt16(b.b, v); return b }
func (b *Builder) Int32(v int32) *Builder   { b.b = kbin.AppendVarint(b.b, v); return b }
func (b *Builder) Int64(v int64) *Builder   { b.b = kbin.AppendVarlong(b.b, v); return b }
func (b *Builder) Bool(v bool) *Builder     { b.b = kbin.AppendBool(b.b, v); return b }
func (b *Builder) UUID(u [16]byte) *Builder { b.b = kbin.AppendUuid(b.b, u); return b }
func (b *Builder) NullableString(s *string) *Builder {
	b.b = kbin.AppendCompactNullableString(b.b, s)
	return b
}

// Build returns the encoded bytes.
func (b *Builder) Build() []byte { return b.b }

// Reader reads fields back in the order they were built. Errors are sticky: check Err once at
// the end.
type Reader struct {
	r kbin.Reader
}

// ReadKey checks the kind and positions a reader after it.
func ReadKey(key []byte, want Kind) (*Reader, error) {
	r, err := OpenKey(key, want)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// OpenKey is ReadKey returning the reader itself, which can stay on the caller's stack: for
// the records replayed on every commit.
func OpenKey(key []byte, want Kind) (Reader, error) {
	k, err := KindOf(key)
	if err != nil {
		return Reader{}, err
	}
	if k != want {
		return Reader{}, fmt.Errorf("record kind %s, want %s", k, want)
	}
	return Reader{r: kbin.Reader{Src: key[2:]}}, nil
}

// ReadValue returns the value's version and a reader after it.
func ReadValue(value []byte) (uint16, *Reader, error) {
	if len(value) < 2 {
		return 0, nil, ErrShort
	}
	return binary.BigEndian.Uint16(value), &Reader{r: kbin.Reader{Src: value[2:]}}, nil
}

func (r *Reader) String() string { return r.r.CompactString() }

// UnsafeString reads a string that aliases the record's bytes: valid only while they are not
// changed, so only for looking up (a map key must be a copy).
func (r *Reader) UnsafeString() string { return r.r.UnsafeCompactString() }

func (r *Reader) Bytes() []byte           { return r.r.CompactNullableBytes() }
func (r *Reader) Int16() int16            { return r.r.Int16() }
func (r *Reader) Int32() int32            { return r.r.Varint() }
func (r *Reader) Int64() int64            { return r.r.Varlong() }
func (r *Reader) Bool() bool              { return r.r.Bool() }
func (r *Reader) UUID() [16]byte          { return r.r.Uuid() }
func (r *Reader) NullableString() *string { return r.r.CompactNullableString() }

// Err reports whether any field ran past the end.
func (r *Reader) Err() error {
	if err := r.r.Complete(); err != nil {
		return ErrShort
	}
	return nil
}

// ErrNewerValue is wrapped by the error of a value whose version this build does not read:
// a newer coordinatord wrote it, and the shard cannot load its log (docs/storage.md,
// "Compatibility").
var ErrNewerValue = errors.New("the log was written by a newer coordinatord")

// CheckVersion returns an error naming the record's kind when a value's version is above the
// newest this build reads. Every reader calls it before reading a field: a value read with
// another version's layout would be silently wrong.
func CheckVersion(kind Kind, version, newest uint16) error {
	if version <= newest {
		return nil
	}
	return fmt.Errorf("%s value version %d is newer than this build reads (up to %d): %w; run that version or a later one",
		kind, version, newest, ErrNewerValue)
}
