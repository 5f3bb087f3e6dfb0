// Package meta is the metadata shard: the topic catalog and the ACL bindings. It is one
// more shard machine whose state is the replay of its own log, and it hands out immutable
// snapshots so that readers never hold a lock or see a half-applied change.
package meta

import (
	"fmt"
	"maps"
	"sort"
	"sync/atomic"

	"github.com/coordinatord/coordinatord/internal/acl"
	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/records"
)

// Topic is one catalog entry. coordinatord stores no data: a topic is metadata only, and its
// id, partition count and configs must match the data cluster's where clients also use one.
type Topic struct {
	Name              string
	ID                [16]byte
	Partitions        int32
	ReplicationFactor int16
	Configs           map[string]string
}

// Snapshot is an immutable view of the catalog.
type Snapshot struct {
	byName map[string]*Topic
	byID   map[[16]byte]*Topic
}

var emptySnapshot = &Snapshot{byName: map[string]*Topic{}, byID: map[[16]byte]*Topic{}}

// Topic looks a topic up by name.
func (s *Snapshot) Topic(name string) (*Topic, bool) { t, ok := s.byName[name]; return t, ok }

// TopicByID looks a topic up by id.
func (s *Snapshot) TopicByID(id [16]byte) (*Topic, bool) { t, ok := s.byID[id]; return t, ok }

// Lookup returns the id of the topic with this name (offsets.TopicLookup).
func (s *Snapshot) Lookup(name string) ([16]byte, bool) {
	if t, ok := s.byName[name]; ok {
		return t.ID, true
	}
	return [16]byte{}, false
}

// Topics lists every topic sorted by name.
func (s *Snapshot) Topics() []*Topic {
	out := make([]*Topic, 0, len(s.byName))
	for _, t := range s.byName {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Len is the number of topics.
func (s *Snapshot) Len() int { return len(s.byName) }

// Catalog is the metadata shard's machine. Replay changes its own maps in place, so a record
// costs O(1) however many topics there are (a restart with 10 000 topics, or a CreateTopics of
// 10 000, is linear). Readers get an immutable Snapshot, built from those maps the first time
// one is asked for after a change and shared until the next change: snapshots already handed
// out never change, and the copy is paid once per change that someone reads, not per record.
type Catalog struct {
	byName map[string]*Topic
	byID   map[[16]byte]*Topic
	// collide maps a topic's collision name ('.' as '_') to its name: CreateTopics refuses a
	// topic whose collision name is taken without scanning every topic.
	collide map[string]string
	snap    *Snapshot // nil: changed since the last snapshot
	// scram holds the SCRAM credentials (record kind 41).
	scram map[scramKey]ScramCredential

	// acls are the ACL bindings; aclVersion the offset of the last change to them.
	acls       map[acl.Binding]struct{}
	aclVersion int64
	aclSnap    *acl.Set // nil: changed since the last view
}

// NewCatalog returns an empty catalog.
func NewCatalog() *Catalog {
	return &Catalog{byName: map[string]*Topic{}, byID: map[[16]byte]*Topic{}, collide: map[string]string{}, snap: emptySnapshot,
		scram: map[scramKey]ScramCredential{}, acls: map[acl.Binding]struct{}{}, aclVersion: -1}
}

// Snapshot returns the current immutable view. It runs on the shard goroutine (a read
// operation); the copy it may make is a cache of the state, not a change of it.
func (c *Catalog) Snapshot() *Snapshot {
	if c.snap == nil {
		c.snap = &Snapshot{byName: maps.Clone(c.byName), byID: maps.Clone(c.byID)}
	}
	return c.snap
}

// Replay applies a catalog record.
func (c *Catalog) Replay(offset int64, rec log.Record) error {
	kind, err := records.KindOf(rec.Key)
	if err != nil {
		return err
	}
	if kind == records.KindScramCredential {
		return c.replayScram(rec)
	}
	if kind == records.KindACL {
		return c.replayACL(offset, rec)
	}
	if kind != records.KindTopic {
		return nil // other metadata kinds arrive with their features
	}
	name, err := decodeTopicKey(rec.Key)
	if err != nil {
		return err
	}
	var t *Topic
	if !rec.Tombstone() {
		// Decode before changing anything, so that a bad record leaves the catalog as it was.
		if t, err = decodeTopicValue(name, rec.Value); err != nil {
			return err
		}
	}
	if old, ok := c.byName[name]; ok {
		delete(c.byID, old.ID)
		delete(c.byName, name)
		delete(c.collide, collisionName(name))
	}
	if t != nil {
		c.byName[name] = t
		c.byID[t.ID] = t
		c.collide[collisionName(name)] = name
	}
	c.snap = nil
	return nil
}

func topicKey(name string) []byte { return records.NewKey(records.KindTopic).String(name).Build() }

func decodeTopicKey(key []byte) (string, error) {
	r, err := records.ReadKey(key, records.KindTopic)
	if err != nil {
		return "", err
	}
	name := r.String()
	return name, r.Err()
}

// TopicRecord is the record that creates or replaces a topic.
func TopicRecord(t *Topic) log.Record {
	b := records.NewValue(0).UUID(t.ID).Int32(t.Partitions).Int16(t.ReplicationFactor).Int32(int32(len(t.Configs)))
	names := make([]string, 0, len(t.Configs))
	for k := range t.Configs {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		b.String(k).String(t.Configs[k])
	}
	return log.Record{Key: topicKey(t.Name), Value: b.Build()}
}

// DeleteTopicRecord is the tombstone for a topic.
func DeleteTopicRecord(name string) log.Record { return log.Record{Key: topicKey(name)} }

func decodeTopicValue(name string, value []byte) (*Topic, error) {
	version, r, err := records.ReadValue(value)
	if err != nil {
		return nil, err
	}
	if err := records.CheckVersion(records.KindTopic, version, 0); err != nil {
		return nil, fmt.Errorf("topic %s: %w", name, err)
	}
	t := &Topic{Name: name, ID: r.UUID(), Partitions: r.Int32(), ReplicationFactor: r.Int16()}
	n := r.Int32()
	if err := r.Err(); err != nil {
		return nil, err
	}
	if n < 0 || int(n) > len(value) {
		return nil, fmt.Errorf("topic %s: config count %d", name, n)
	}
	t.Configs = make(map[string]string, n)
	for i := int32(0); i < n; i++ {
		k := r.String()
		t.Configs[k] = r.String()
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("topic %s: %w", name, err)
	}
	return t, nil
}

// Published holds the catalog's latest durable snapshot so that request handlers read it with
// one atomic load instead of a round trip through the metadata shard, which every commit and
// heartbeat would otherwise queue behind. Only the durable machine publishes (the shard's
// OnDurable hook), so a topic whose record is not durable yet is never visible here.
type Published struct{ p atomic.Pointer[Snapshot] }

// Publish stores c's current snapshot; it runs on the metadata shard's goroutine.
func (p *Published) Publish(c *Catalog) { p.p.Store(c.Snapshot()) }

// Load returns the latest published snapshot, nil before the first load.
func (p *Published) Load() *Snapshot { return p.p.Load() }
