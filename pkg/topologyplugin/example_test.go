package topologyplugin_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/coordinatord/coordinatord/pkg/topologyplugin"
)

type entry struct {
	epoch int32
	d     *topologyplugin.Description
}

// store is a minimal user plugin: one description per group, bounded in size per description.
type store struct {
	max int
	mu  sync.Mutex
	m   map[string]entry
}

func newStore(cfg topologyplugin.Config) (topologyplugin.Plugin, error) {
	if err := cfg.Check("max.bytes"); err != nil {
		return nil, err
	}
	max, err := cfg.Int("max.bytes", 1<<20, 1, 1<<30)
	if err != nil {
		return nil, err
	}
	return &store{max: int(max), m: map[string]entry{}}, nil
}

func (s *store) Set(ctx context.Context, group string, epoch int32, d *topologyplugin.Description) error {
	if n := d.EncodedSize(); n > s.max {
		return topologyplugin.Permanentf("description of %d bytes is larger than %d", n, s.max)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.m[group]; ok && cur.epoch > epoch {
		return nil
	}
	s.m[group] = entry{epoch, d.Clone()}
	return nil
}

func (s *store) Get(ctx context.Context, group string, epoch int32) (*topologyplugin.Description, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.m[group]; ok && cur.epoch == epoch {
		return cur.d.Clone(), nil
	}
	return nil, nil
}

func (s *store) Delete(ctx context.Context, group string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, group)
	return nil
}

func (s *store) Close() error { return nil }

func Example() {
	// A custom build would call topologyplugin.Register("acme", newStore) from init.
	p, err := newStore(topologyplugin.Config{"max.bytes": "128"})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	ctx := context.Background()
	sink := "out"
	d := &topologyplugin.Description{Subtopologies: []topologyplugin.Subtopology{{
		ID: "0",
		Nodes: []topologyplugin.Node{
			{Name: "KSTREAM-SOURCE-0000000000", Type: topologyplugin.NodeSource, SourceTopics: []string{"in"}, Successors: []string{"KSTREAM-SINK-0000000001"}},
			{Name: "KSTREAM-SINK-0000000001", Type: topologyplugin.NodeSink, SinkTopic: &sink},
		},
	}}}
	fmt.Println("set:", p.Set(ctx, "orders", 3, d))
	got, _ := p.Get(ctx, "orders", 3)
	fmt.Println("same epoch:", topologyplugin.Equal(got, d))
	other, _ := p.Get(ctx, "orders", 2)
	fmt.Println("other epoch:", other)

	d.Subtopologies[0].Nodes[0].SourceTopics = []string{"a-very-long-topic-name-that-makes-it-too-large"}
	err = p.Set(ctx, "orders", 4, d)
	fmt.Println("too large:", err, "permanent:", topologyplugin.IsPermanent(err))
	// Output:
	// set: <nil>
	// same epoch: true
	// other epoch: <nil>
	// too large: description of 143 bytes is larger than 128 permanent: true
}
