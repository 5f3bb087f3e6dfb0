package topologyplugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// NodeType is the kind of a processing node. The numbers are the wire values of
// StreamsGroupTopologyDescriptionUpdate and StreamsGroupDescribe.
type NodeType int8

const (
	NodeSource    NodeType = 1
	NodeProcessor NodeType = 2
	NodeSink      NodeType = 3
)

func (t NodeType) String() string {
	switch t {
	case NodeSource:
		return "SOURCE"
	case NodeProcessor:
		return "PROCESSOR"
	case NodeSink:
		return "SINK"
	}
	return "UNKNOWN"
}

// Node is one processing node. Which list fields are meaningful depends on Type: sources
// read SourceTopics (empty for a pattern subscription), processors own Stores, sinks write
// to SinkTopic (nil when the topic is chosen dynamically). Predecessors are never carried;
// a reader rebuilds them from Successors.
type Node struct {
	Name         string   `json:"name"`
	Type         NodeType `json:"nodeType"`
	SourceTopics []string `json:"sourceTopics"`
	SinkTopic    *string  `json:"sinkTopic"`
	Stores       []string `json:"stores"`
	Successors   []string `json:"successors"`
}

// Subtopology is a connected part of the processing graph.
type Subtopology struct {
	ID    string `json:"subtopologyId"`
	Nodes []Node `json:"nodes"`
}

// GlobalStore is a global state store: a source node feeding one processor.
type GlobalStore struct {
	Source    Node `json:"source"`
	Processor Node `json:"processor"`
}

// Description is the processing graph of a Kafka Streams application as its client pushed it
// (KIP-1331). The JSON form (field names mirror the wire schema) is what the file and http
// plugins store and send; empty lists are written as [] and read back from [], null or absence
// alike.
type Description struct {
	Subtopologies []Subtopology `json:"subtopologies"`
	GlobalStores  []GlobalStore `json:"globalStores"`
}

// MarshalJSON writes empty lists as [] rather than null so that non-Go readers see one shape.
func (n Node) MarshalJSON() ([]byte, error) {
	type plain Node
	p := plain(n)
	p.SourceTopics = orEmpty(p.SourceTopics)
	p.Stores = orEmpty(p.Stores)
	p.Successors = orEmpty(p.Successors)
	return json.Marshal(p)
}

func (s Subtopology) MarshalJSON() ([]byte, error) {
	type plain Subtopology
	p := plain(s)
	if p.Nodes == nil {
		p.Nodes = []Node{}
	}
	return json.Marshal(p)
}

func (d Description) MarshalJSON() ([]byte, error) {
	type plain Description
	p := plain(d)
	if p.Subtopologies == nil {
		p.Subtopologies = []Subtopology{}
	}
	if p.GlobalStores == nil {
		p.GlobalStores = []GlobalStore{}
	}
	return json.Marshal(p)
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Clone returns a deep copy, so that a plugin can keep a description without sharing slices
// with its caller. Clone of nil is nil.
func (d *Description) Clone() *Description {
	if d == nil {
		return nil
	}
	out := &Description{}
	if d.Subtopologies != nil {
		out.Subtopologies = make([]Subtopology, len(d.Subtopologies))
		for i, s := range d.Subtopologies {
			out.Subtopologies[i].ID = s.ID
			if s.Nodes != nil {
				out.Subtopologies[i].Nodes = make([]Node, len(s.Nodes))
				for j := range s.Nodes {
					out.Subtopologies[i].Nodes[j] = s.Nodes[j].clone()
				}
			}
		}
	}
	if d.GlobalStores != nil {
		out.GlobalStores = make([]GlobalStore, len(d.GlobalStores))
		for i, g := range d.GlobalStores {
			out.GlobalStores[i] = GlobalStore{Source: g.Source.clone(), Processor: g.Processor.clone()}
		}
	}
	return out
}

func (n Node) clone() Node {
	n.SourceTopics = slices.Clone(n.SourceTopics)
	n.Stores = slices.Clone(n.Stores)
	n.Successors = slices.Clone(n.Successors)
	if n.SinkTopic != nil {
		t := *n.SinkTopic
		n.SinkTopic = &t
	}
	return n
}

// Equal reports whether two descriptions hold the same graph, with nil and empty lists
// treated alike (a JSON round trip may turn one into the other). Order matters: it is
// part of what a client pushed and what describe returns.
func Equal(a, b *Description) bool {
	if a == nil || b == nil {
		return a == b
	}
	if len(a.Subtopologies) != len(b.Subtopologies) || len(a.GlobalStores) != len(b.GlobalStores) {
		return false
	}
	for i := range a.Subtopologies {
		sa, sb := a.Subtopologies[i], b.Subtopologies[i]
		if sa.ID != sb.ID || len(sa.Nodes) != len(sb.Nodes) {
			return false
		}
		for j := range sa.Nodes {
			if !nodeEqual(sa.Nodes[j], sb.Nodes[j]) {
				return false
			}
		}
	}
	for i := range a.GlobalStores {
		ga, gb := a.GlobalStores[i], b.GlobalStores[i]
		if !nodeEqual(ga.Source, gb.Source) || !nodeEqual(ga.Processor, gb.Processor) {
			return false
		}
	}
	return true
}

func nodeEqual(a, b Node) bool {
	if a.Name != b.Name || a.Type != b.Type || (a.SinkTopic == nil) != (b.SinkTopic == nil) {
		return false
	}
	if a.SinkTopic != nil && *a.SinkTopic != *b.SinkTopic {
		return false
	}
	return slices.Equal(a.SourceTopics, b.SourceTopics) && slices.Equal(a.Stores, b.Stores) &&
		slices.Equal(a.Successors, b.Successors)
}

// EncodedSize is the number of bytes the description takes in the Kafka wire encoding (the
// TopologyDescription struct of StreamsGroupTopologyDescriptionUpdate v0, a flexible version).
// Plugins use it to enforce size limits in the unit an operator can relate to request sizes.
func (d *Description) EncodedSize() int {
	if d == nil {
		return 0
	}
	n := uvarintLen(len(d.Subtopologies) + 1)
	for _, s := range d.Subtopologies {
		n += compactStringLen(s.ID) + uvarintLen(len(s.Nodes)+1)
		for _, node := range s.Nodes {
			n += node.encodedSize()
		}
		n++ // tagged fields
	}
	n += uvarintLen(len(d.GlobalStores) + 1)
	for _, g := range d.GlobalStores {
		n += g.Source.encodedSize() + g.Processor.encodedSize() + 1
	}
	return n + 1 // tagged fields
}

func (n Node) encodedSize() int {
	size := compactStringLen(n.Name) + 1 // NodeType int8
	size += compactArrayLen(n.SourceTopics)
	if n.SinkTopic == nil {
		size++
	} else {
		size += compactStringLen(*n.SinkTopic)
	}
	size += compactArrayLen(n.Stores) + compactArrayLen(n.Successors)
	return size + 1 // tagged fields
}

func compactArrayLen(s []string) int {
	n := uvarintLen(len(s) + 1)
	for _, e := range s {
		n += compactStringLen(e)
	}
	return n
}

func compactStringLen(s string) int { return uvarintLen(len(s)+1) + len(s) }

func uvarintLen(v int) int {
	n := 1
	for u := uint64(v); u >= 0x80; u >>= 7 {
		n++
	}
	return n
}

// Validate checks what the wire format cannot express wrongly elsewhere: every node type is
// SOURCE, PROCESSOR or SINK, and every global store is a source plus a processor. The messages
// are the ones Kafka answers a malformed push with (INVALID_REQUEST).
func (d *Description) Validate() error {
	if d == nil {
		return errors.New("TopologyDescription can't be null.")
	}
	check := func(n Node) error {
		if n.Type < NodeSource || n.Type > NodeSink {
			return fmt.Errorf("Unknown topology node type: %d", n.Type)
		}
		return nil
	}
	for _, s := range d.Subtopologies {
		for _, n := range s.Nodes {
			if err := check(n); err != nil {
				return err
			}
		}
	}
	for _, g := range d.GlobalStores {
		if err := check(g.Source); err != nil {
			return err
		}
		if err := check(g.Processor); err != nil {
			return err
		}
		if g.Source.Type != NodeSource || g.Processor.Type != NodeProcessor {
			return errors.New("Global store must be composed of a source and a processor node.")
		}
	}
	return nil
}
