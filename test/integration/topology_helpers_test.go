package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Helpers of the topology description plugin tests (KIP-1331, spec topology-description).

const topoPluginKey = "group.streams.topology.description.plugin."

// topoMember is one streams member on its own raw connection.
type topoMember struct {
	t            *testing.T
	c            *rawConn
	corr         int32
	group, id    string
	epoch        int32
	lastRequired bool
}

// joinTopo joins a member with a one-subtopology topology reading <group>-in-0 and returns it
// with the join response.
func joinTopo(t *testing.T, addr, group, id string) (*topoMember, *kmsg.StreamsGroupHeartbeatResponse) {
	t.Helper()
	m := &topoMember{t: t, c: dialRaw(t, addr), group: group, id: id}
	r := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	r.Group, r.MemberID, r.RebalanceTimeoutMillis, r.Topology = group, id, 1000, streamsTopology(group+"-in", 1)()
	r.ActiveTasks, r.StandbyTasks, r.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	resp := m.send(r)
	if resp.ErrorCode != 0 {
		t.Fatalf("join %s/%s: %d %v", group, id, resp.ErrorCode, resp.ErrorMessage)
	}
	m.epoch = resp.MemberEpoch
	return m, resp
}

func (m *topoMember) send(r *kmsg.StreamsGroupHeartbeatRequest) *kmsg.StreamsGroupHeartbeatResponse {
	m.t.Helper()
	m.corr++
	resp := streamsHeartbeatRaw(m.t, m.c, m.corr, r)
	m.lastRequired = resp.TopologyDescriptionRequired
	return resp
}

// beat sends a v1 heartbeat at the member's epoch and returns the response.
func (m *topoMember) beat() *kmsg.StreamsGroupHeartbeatResponse {
	m.t.Helper()
	r := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = m.group, m.id, m.epoch, -1
	resp := m.send(r)
	if resp.ErrorCode != 0 {
		m.t.Fatalf("heartbeat %s/%s: %d %v", m.group, m.id, resp.ErrorCode, resp.ErrorMessage)
	}
	m.epoch = resp.MemberEpoch
	return resp
}

// leave sends the leave heartbeat (epoch -1).
func (m *topoMember) leave() *kmsg.StreamsGroupHeartbeatResponse {
	m.t.Helper()
	r := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	r.Group, r.MemberID, r.MemberEpoch = m.group, m.id, -1
	return m.send(r)
}

// sampleDescription is a canonical description: a source, a processor with a store and a
// sink in one subtopology, and a global store.
func sampleDescription(prefix string) kmsg.TopologyDescription {
	node := func(name string, typ int8, succ ...string) kmsg.TopologyDescriptionNode {
		n := kmsg.NewTopologyDescriptionNode()
		n.Name, n.NodeType, n.Successors = name, typ, succ
		return n
	}
	src := node("KSTREAM-SOURCE-0000000000", 1, "KSTREAM-PROCESSOR-0000000001")
	src.SourceTopics = []string{prefix + "-in-0"}
	proc := node("KSTREAM-PROCESSOR-0000000001", 2, "KSTREAM-SINK-0000000002")
	proc.Stores = []string{prefix + "-store"}
	sink := node("KSTREAM-SINK-0000000002", 3)
	out := prefix + "-out"
	sink.SinkTopic = &out
	st := kmsg.NewTopologyDescriptionSubtopology()
	st.SubtopologyID, st.Nodes = "0", []kmsg.TopologyDescriptionNode{src, proc, sink}
	gs := kmsg.NewTopologyDescriptionGlobalStore()
	gs.Source = node("KSTREAM-SOURCE-0000000003", 1, "KTABLE-SOURCE-0000000004")
	gs.Source.SourceTopics = []string{prefix + "-global"}
	gs.Processor = node("KTABLE-SOURCE-0000000004", 2)
	gs.Processor.Stores = []string{prefix + "-global-store"}
	d := kmsg.NewTopologyDescription()
	d.Subtopologies, d.GlobalStores = []kmsg.TopologyDescriptionSubtopology{st}, []kmsg.TopologyDescriptionGlobalStore{gs}
	return d
}

// pushTopo sends StreamsGroupTopologyDescriptionUpdate v0 on a fresh connection.
func pushTopo(t *testing.T, addr, group, member string, epoch int32, d kmsg.TopologyDescription) *kmsg.StreamsGroupTopologyDescriptionUpdateResponse {
	t.Helper()
	c := dialRaw(t, addr)
	req := kmsg.NewPtrStreamsGroupTopologyDescriptionUpdateRequest()
	req.Group, req.MemberID, req.TopologyEpoch, req.TopologyDescription = group, member, epoch, d
	c.write(frame(req, 0, 1, nil, nil))
	resp := kmsg.NewPtrStreamsGroupTopologyDescriptionUpdateResponse()
	c.read(resp, 0, 1)
	return resp
}

// describeTopo sends StreamsGroupDescribe v1 with IncludeTopologyDescription.
func describeTopo(t *testing.T, addr string, groups ...string) []kmsg.StreamsGroupDescribeResponseGroup {
	t.Helper()
	c := dialRaw(t, addr)
	req := kmsg.NewPtrStreamsGroupDescribeRequest()
	req.Groups, req.IncludeTopologyDescription = groups, true
	c.write(frame(req, 1, 1, nil, nil))
	resp := kmsg.NewPtrStreamsGroupDescribeResponse()
	c.read(resp, 1, 1)
	if len(resp.Groups) != len(groups) {
		t.Fatalf("describe answered %d groups, asked %d", len(resp.Groups), len(groups))
	}
	return resp.Groups
}

// deleteGroupsRaw sends DeleteGroups at a version.
func deleteGroupsRaw(t *testing.T, addr string, version int16, groups ...string) map[string]kmsg.DeleteGroupsResponseGroup {
	t.Helper()
	c := dialRaw(t, addr)
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = groups
	c.write(frame(req, version, 1, nil, nil))
	resp := kmsg.NewPtrDeleteGroupsResponse()
	c.read(resp, version, 1)
	out := map[string]kmsg.DeleteGroupsResponseGroup{}
	for _, g := range resp.Groups {
		out[g.Group] = g
	}
	return out
}

// sameDescription compares the wire bytes of a described description with what was pushed.
func sameDescription(got *kmsg.StreamsGroupDescribeResponseGroupTopologyDescription, pushed kmsg.TopologyDescription) bool {
	if got == nil {
		return false
	}
	enc := func(d *kmsg.StreamsGroupDescribeResponseGroupTopologyDescription) []byte {
		r := kmsg.NewPtrStreamsGroupDescribeResponse()
		r.SetVersion(1)
		g := kmsg.NewStreamsGroupDescribeResponseGroup()
		g.TopologyDescription, g.TopologyDescriptionStatus = d, 3
		r.Groups = []kmsg.StreamsGroupDescribeResponseGroup{g}
		return r.AppendTo(nil)
	}
	want := kmsg.NewStreamsGroupDescribeResponseGroupTopologyDescription()
	want.Subtopologies, want.GlobalStores = pushed.Subtopologies, pushed.GlobalStores
	return string(enc(got)) == string(enc(&want))
}

// topoService is an http plugin backend in the test process whose answers a test controls.
type topoService struct {
	*httptest.Server
	mu           sync.Mutex
	stored       map[string][]byte // group/epoch -> body
	putStatus    int               // non-zero: answer PUTs with it
	putBody      string
	deleteStatus int
	getFail      map[string]bool // groups whose GET answers 500
	puts         int
	deletes      int
	putArrived   chan struct{} // receives once per PUT before it is answered
	putRelease   chan struct{} // when non-nil, PUTs wait for it
}

func newTopoService(t *testing.T) *topoService {
	s := &topoService{stored: map[string][]byte{}, putArrived: make(chan struct{}, 100)}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *topoService) serve(w http.ResponseWriter, r *http.Request) {
	// /groups/{group}/topology[/{epoch}]
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/groups/"), "/")
	group := parts[0]
	key := group
	if len(parts) == 3 {
		key += "/" + parts[2]
	}
	switch r.Method {
	case http.MethodPut:
		body, _ := io.ReadAll(r.Body)
		s.putArrived <- struct{}{}
		s.mu.Lock()
		release := s.putRelease
		s.mu.Unlock()
		if release != nil {
			<-release
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.puts++
		if s.putStatus != 0 {
			w.WriteHeader(s.putStatus)
			io.WriteString(w, s.putBody)
			return
		}
		if !json.Valid(body) {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		for k := range s.stored {
			if strings.HasPrefix(k, group+"/") {
				delete(s.stored, k)
			}
		}
		s.stored[key] = body
	case http.MethodGet:
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.getFail[group] {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		body, ok := s.stored[key]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	case http.MethodDelete:
		s.mu.Lock()
		defer s.mu.Unlock()
		s.deletes++
		if s.deleteStatus != 0 {
			w.WriteHeader(s.deleteStatus)
			io.WriteString(w, "backend refuses deletes")
			return
		}
		for k := range s.stored {
			if strings.HasPrefix(k, group+"/") {
				delete(s.stored, k)
			}
		}
	}
}

func (s *topoService) set(f func(s *topoService)) { s.mu.Lock(); f(s); s.mu.Unlock() }

func (s *topoService) count() (puts, deletes, stored int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.puts, s.deletes, len(s.stored)
}

func httpPluginSettings(s *topoService) []string {
	return []string{topoPluginKey + "class=http", topoPluginKey + "http.url=" + s.URL, topoPluginKey + "http.retries=0"}
}

// holds counts the descriptions the service holds for a group (any epoch).
func (s *topoService) holds(group string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k := range s.stored {
		if strings.HasPrefix(k, group+"/") {
			n++
		}
	}
	return n
}
