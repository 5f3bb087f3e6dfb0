package handlers

import (
	"context"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/plugin"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/coordinatord/coordinatord/pkg/topologyplugin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

func memoryCaller(t *testing.T) *plugin.Caller {
	t.Helper()
	p, err := plugin.NewMemory(topologyplugin.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := plugin.NewCaller(plugin.Options{Plugin: p, Name: "memory", Backoff: plugin.BackoffConfig{Initial: time.Hour, Max: time.Hour, Multiplier: 2}}, nil)
	t.Cleanup(func() { c.Close() })
	return c
}

// Spec topology-description §2.2: the rules that keep TopologyDescriptionRequired unset, in
// order, and the back-off that lets one member per window be asked.
func TestTopologyDescription2_2_SolicitationRule(t *testing.T) {
	stale := kmsg.NewStreamsGroupHeartbeatResponseStatus()
	stale.StatusCode = streams.StatusStaleTopology
	ok := streams.DescriptionEpochs{Topology: 3, Stored: -1, Failed: -1}
	for _, tc := range []struct {
		name    string
		noPlug  bool
		version int16
		epoch   int32
		code    int16
		status  []kmsg.StreamsGroupHeartbeatResponseStatus
		d       streams.DescriptionEpochs
		want    bool
	}{
		{name: "v0", version: 0, epoch: 1, d: ok},
		{name: "no plugin", noPlug: true, version: 1, epoch: 1, d: ok},
		{name: "leaving", version: 1, epoch: -1, d: ok},
		{name: "static leave", version: 1, epoch: -2, d: ok},
		{name: "error response", version: 1, epoch: 1, code: kerr.FencedMemberEpoch.Code, d: ok},
		{name: "no topology", version: 1, epoch: 1, d: streams.DescriptionEpochs{Topology: -1, Stored: -1, Failed: -1}},
		{name: "stored", version: 1, epoch: 1, d: streams.DescriptionEpochs{Topology: 3, Stored: 3, Failed: -1}},
		{name: "failed", version: 1, epoch: 1, d: streams.DescriptionEpochs{Topology: 3, Stored: -2, Failed: 3}},
		{name: "stale topology", version: 1, epoch: 1, status: []kmsg.StreamsGroupHeartbeatResponseStatus{stale}, d: ok},
		{name: "asked", version: 1, epoch: 1, d: ok, want: true},
		{name: "uncertain is asked", version: 1, epoch: 1, d: streams.DescriptionEpochs{Topology: 3, Stored: -2, Failed: 2}, want: true},
		{name: "older stored epoch is asked", version: 1, epoch: 1, d: streams.DescriptionEpochs{Topology: 3, Stored: 2, Failed: -1}, want: true},
	} {
		tbl := &Table{log: zap.NewNop()}
		if !tc.noPlug {
			tbl.deps.Topology = memoryCaller(t)
		}
		req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
		req.Group, req.MemberEpoch = "g", tc.epoch
		resp := kmsg.NewPtrStreamsGroupHeartbeatResponse()
		resp.ErrorCode, resp.Status = tc.code, tc.status
		tbl.maybeSolicitTopologyDescription(context.Background(), tc.version, req, streams.HeartbeatOutput{Response: resp, Description: tc.d})
		if resp.TopologyDescriptionRequired != tc.want {
			t.Errorf("%s: flag %v, want %v", tc.name, resp.TopologyDescriptionRequired, tc.want)
		}
		if tc.noPlug {
			continue
		}
		// A rule that said no must not have armed the back-off: a v1 heartbeat is asked now.
		// One that said yes has: the next one is not.
		next := kmsg.NewPtrStreamsGroupHeartbeatResponse()
		req.MemberEpoch = 1
		tbl.maybeSolicitTopologyDescription(context.Background(), 1, req, streams.HeartbeatOutput{Response: next, Description: streams.DescriptionEpochs{Topology: tc.d.Topology, Stored: -1, Failed: -1}})
		if want := !tc.want && tc.d.Topology >= 0; next.TopologyDescriptionRequired != want {
			t.Errorf("%s: following heartbeat flag %v, want %v", tc.name, next.TopologyDescriptionRequired, want)
		}
	}
}

// Spec topology-description §1.2 / §3.1 step 5: without a plugin a push is refused before any
// group lookup (the table has no shards at all here).
func TestTopologyDescription1_2_PushWithoutPlugin(t *testing.T) {
	tbl := &Table{log: zap.NewNop()}
	req := kmsg.NewPtrStreamsGroupTopologyDescriptionUpdateRequest()
	req.Group, req.MemberID = "g", "m"
	r := &wire.Request{Header: wire.Header{Key: 93, Version: 0}, Body: req}
	resp := tbl.streamsGroupTopologyDescriptionUpdate(context.Background(), r).(*kmsg.StreamsGroupTopologyDescriptionUpdateResponse)
	if resp.ErrorCode != kerr.UnsupportedVersion.Code || resp.ErrorMessage == nil || *resp.ErrorMessage != noTopologyPluginMessage {
		t.Fatalf("%d %v", resp.ErrorCode, resp.ErrorMessage)
	}
}

// Spec topology-description §5: the describe form keeps node and list order, drops
// duplicates and the fields that do not belong to a node's type.
func TestTopologyDescription5_Canonicalisation(t *testing.T) {
	w := kmsg.NewTopologyDescription()
	st := kmsg.NewTopologyDescriptionSubtopology()
	sink := "out"
	st.SubtopologyID = "0"
	st.Nodes = []kmsg.TopologyDescriptionNode{
		{Name: "s", NodeType: 1, SourceTopics: []string{"b", "a", "b"}, Stores: []string{"x"}, SinkTopic: &sink, Successors: []string{"p", "p"}},
		{Name: "p", NodeType: 2, SourceTopics: []string{"a"}, Stores: []string{"st"}, Successors: []string{"k"}},
		{Name: "k", NodeType: 3, SinkTopic: &sink},
	}
	w.Subtopologies = []kmsg.TopologyDescriptionSubtopology{st}
	got := DescriptionToWire(DescriptionFromWire(&w)).Subtopologies[0].Nodes
	if s := got[0]; len(s.SourceTopics) != 2 || s.SourceTopics[0] != "b" || len(s.Stores) != 0 || s.SinkTopic != nil || len(s.Successors) != 1 {
		t.Errorf("source %+v", s)
	}
	if p := got[1]; len(p.SourceTopics) != 0 || len(p.Stores) != 1 || p.SinkTopic != nil {
		t.Errorf("processor %+v", p)
	}
	if k := got[2]; k.SinkTopic == nil || *k.SinkTopic != "out" || len(k.Stores) != 0 {
		t.Errorf("sink %+v", k)
	}
}
