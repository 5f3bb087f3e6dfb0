package plugin

import (
	"container/list"
	"context"
	"sync"

	"github.com/coordinatord/coordinatord/pkg/topologyplugin"
)

// Memory is the built-in `memory` plugin (spec §7.3): Kafka's in-memory reference plugin
// (InMemoryTopologyDescriptionPlugin) plus bounds. One entry per group; Get answers only for
// the exact epoch stored; Delete removes the entry; Close empties it. Unlike Kafka's, a Set for
// a lower epoch than the stored one is ignored (and succeeds), so a late push cannot replace
// newer data, and the plugin holds at most max.groups entries and max.bytes bytes (sizes are
// wire-encoded lengths), dropping the least recently used entry (Set and Get both count as use).
// Nothing survives a restart, which the plugin declares (topologyplugin.Volatile) so that the
// coordinator asks for the descriptions again after one; an evicted group is asked again once
// a describe finds its description gone.
type Memory struct {
	maxGroups int
	maxBytes  int64
	maxDesc   int64

	mu        sync.Mutex
	lru       *list.List // of *memEntry, most recently used first
	groups    map[string]*list.Element
	bytes     int64
	evictions int64
	closed    bool
}

type memEntry struct {
	group string
	epoch int32
	d     *topologyplugin.Description
	size  int64
}

// Keys of the memory plugin (under group.streams.topology.description.plugin.memory.).
const (
	MemoryMaxGroups           = "max.groups"
	MemoryMaxBytes            = "max.bytes"
	MemoryMaxDescriptionBytes = "max.description.bytes"
)

// NewMemory is the memory plugin's factory.
func NewMemory(cfg topologyplugin.Config) (topologyplugin.Plugin, error) {
	if err := cfg.Check(MemoryMaxGroups, MemoryMaxBytes, MemoryMaxDescriptionBytes); err != nil {
		return nil, err
	}
	groups, err := cfg.Int(MemoryMaxGroups, 10000, 1, 1<<31-1)
	if err != nil {
		return nil, err
	}
	maxBytes, err := cfg.Int(MemoryMaxBytes, 256<<20, 1, 1<<62)
	if err != nil {
		return nil, err
	}
	maxDesc, err := cfg.Int(MemoryMaxDescriptionBytes, min(4<<20, maxBytes), 1, maxBytes)
	if err != nil {
		return nil, err
	}
	return &Memory{maxGroups: int(groups), maxBytes: maxBytes, maxDesc: maxDesc,
		lru: list.New(), groups: map[string]*list.Element{}}, nil
}

var errClosed = topologyplugin.Transient("topology description plugin is closed")

func (m *Memory) Set(ctx context.Context, group string, epoch int32, d *topologyplugin.Description) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d == nil {
		return topologyplugin.Permanent("no topology description")
	}
	size := int64(d.EncodedSize())
	if size > m.maxDesc {
		return topologyplugin.Permanentf("topology description of %d bytes is larger than the memory plugin's max.description.bytes (%d)", size, m.maxDesc)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errClosed
	}
	if el, ok := m.groups[group]; ok {
		e := el.Value.(*memEntry)
		if e.epoch > epoch {
			return nil
		}
		m.bytes += size - e.size
		e.epoch, e.d, e.size = epoch, d.Clone(), size
		m.lru.MoveToFront(el)
	} else {
		m.groups[group] = m.lru.PushFront(&memEntry{group: group, epoch: epoch, d: d.Clone(), size: size})
		m.bytes += size
	}
	for (len(m.groups) > m.maxGroups || m.bytes > m.maxBytes) && m.lru.Len() > 1 {
		m.removeLocked(m.lru.Back())
		m.evictions++
	}
	return nil
}

func (m *Memory) removeLocked(el *list.Element) {
	e := m.lru.Remove(el).(*memEntry)
	delete(m.groups, e.group)
	m.bytes -= e.size
}

func (m *Memory) Get(ctx context.Context, group string, epoch int32) (*topologyplugin.Description, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errClosed
	}
	el, ok := m.groups[group]
	if !ok || el.Value.(*memEntry).epoch != epoch {
		return nil, nil
	}
	m.lru.MoveToFront(el)
	return el.Value.(*memEntry).d.Clone(), nil
}

func (m *Memory) Delete(ctx context.Context, group string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errClosed
	}
	if el, ok := m.groups[group]; ok {
		m.removeLocked(el)
	}
	return nil
}

func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.lru.Init()
	m.groups = map[string]*list.Element{}
	m.bytes = 0
	return nil
}

// Volatile implements topologyplugin.Volatile: a new process starts empty.
func (m *Memory) Volatile() bool { return true }

// Stats implements topologyplugin.StatsReporter.
func (m *Memory) Stats() topologyplugin.Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return topologyplugin.Stats{Descriptions: int64(len(m.groups)), Bytes: m.bytes, Evictions: m.evictions}
}
