package handlers

import (
	"context"
	"errors"
	"github.com/coordinatord/coordinatord/internal/acl"
	"strconv"

	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchTopic is one requested topic of one group, normalized across versions.
type fetchTopic struct {
	name       string
	id         [16]byte
	partitions []int32
	code       int16 // a topic-level problem copied to every partition (unknown topic id)
}

// fetchAnswer is one group's answer.
type fetchAnswer struct {
	code   int16
	topics []fetchTopic
	parts  [][]shard.FetchPartition
}

// offsetFetch reads committed offsets (spec coordinator-apis §3.3). An unknown group is not an
// error; availability problems are NOT_COORDINATOR, which consumers before Kafka 3.9 retry where
// they would give up on the other coordinator codes.
func (t *Table) offsetFetch(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	var ids [][16]byte // v10 names topics by id only: one the catalog lacks may be brand new
	for _, g := range req.Groups {
		for _, rt := range g.Topics {
			ids = append(ids, rt.TopicID)
		}
	}
	snap, catErr := t.catalogKnowing(ctx, nil, ids)

	if r.Version < 8 {
		var topics []fetchTopic
		if req.Topics != nil || r.Version < 2 {
			for _, rt := range req.Topics {
				topics = append(topics, fetchTopic{name: rt.Topic, partitions: rt.Partitions})
			}
		} else {
			topics = nil // all
		}
		var a fetchAnswer
		if !t.groupAllowed(r, req.Group, acl.OpDescribe) {
			a.code = kerr.GroupAuthorizationFailed.Code
		} else {
			a = t.fetchGroup(ctx, r, req.Group, topics, req.Topics == nil && r.Version >= 2, req.RequireStable && r.Version >= 7, snap, catErr)
		}
		if a.code != 0 {
			if r.Version >= 2 {
				resp.ErrorCode = a.code
				return resp
			}
			// v0-v1 have no group-level error: it goes into every requested partition.
			for _, ft := range topics {
				st := kmsg.NewOffsetFetchResponseTopic()
				st.Topic = ft.name
				for _, p := range ft.partitions {
					sp := kmsg.NewOffsetFetchResponseTopicPartition()
					sp.Partition, sp.Offset, sp.LeaderEpoch, sp.Metadata, sp.ErrorCode = p, -1, -1, strPtr(""), a.code
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			return resp
		}
		for i, ft := range a.topics {
			st := kmsg.NewOffsetFetchResponseTopic()
			st.Topic = ft.name
			for _, fp := range a.parts[i] {
				sp := kmsg.NewOffsetFetchResponseTopicPartition()
				sp.Partition, sp.Offset, sp.LeaderEpoch, sp.Metadata, sp.ErrorCode = fetchedValues(fp, ft.code)
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}

	// A group asked for all its offsets is answered from state, not from the request: a repeat
	// of the same question reuses the first answer rather than building another copy.
	allAnswered := map[string]int{}
	for _, rg := range req.Groups {
		if rg.Topics == nil {
			member := "\x00null"
			if rg.MemberID != nil {
				member = "\x01" + *rg.MemberID
			}
			allKey := strconv.Quote(rg.Group) + member + "\x00" + strconv.Itoa(int(rg.MemberEpoch))
			if j, ok := allAnswered[allKey]; ok {
				resp.Groups = append(resp.Groups, resp.Groups[j])
				continue
			}
			allAnswered[allKey] = len(resp.Groups)
		}
		if !t.groupAllowed(r, rg.Group, acl.OpDescribe) {
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group, g.ErrorCode = rg.Group, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		if r.Version >= 9 {
			code := t.validateStreamsFetch(ctx, rg.Group, rg.MemberID, rg.MemberEpoch)
			if code == 0 {
				code = t.validateConsumerFetch(ctx, rg.Group, rg.MemberID, rg.MemberEpoch)
			}
			if code != 0 {
				g := kmsg.NewOffsetFetchResponseGroup()
				g.Group, g.ErrorCode = rg.Group, code
				resp.Groups = append(resp.Groups, g)
				continue
			}
		}
		var topics []fetchTopic
		for _, rt := range rg.Topics {
			ft := fetchTopic{name: rt.Topic, id: rt.TopicID, partitions: rt.Partitions}
			if r.Version >= 10 {
				ft.name = ""
				if snap == nil {
					ft.code = kerr.NotCoordinator.Code
				} else if topic, ok := snap.TopicByID(rt.TopicID); ok {
					ft.name = topic.Name
				} else {
					ft.code = kerr.UnknownTopicID.Code
				}
			}
			topics = append(topics, ft)
		}
		a := t.fetchGroup(ctx, r, rg.Group, topics, rg.Topics == nil, req.RequireStable, snap, catErr)
		g := kmsg.NewOffsetFetchResponseGroup()
		g.Group, g.ErrorCode = rg.Group, a.code
		for i, ft := range a.topics {
			st := kmsg.NewOffsetFetchResponseGroupTopic()
			st.Topic, st.TopicID = ft.name, ft.id
			if r.Version >= 10 {
				st.Topic = ""
			}
			for _, fp := range a.parts[i] {
				sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				sp.Partition, sp.Offset, sp.LeaderEpoch, sp.Metadata, sp.ErrorCode = fetchedValues(fp, ft.code)
				st.Partitions = append(st.Partitions, sp)
			}
			g.Topics = append(g.Topics, st)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}

func fetchedValues(fp shard.FetchPartition, code int16) (int32, int64, int32, *string, int16) {
	if code == 0 && fp.Unstable {
		// RequireStable and an open transaction has staged an offset here (spec §3.3).
		return fp.Partition, -1, -1, strPtr(""), kerr.UnstableOffsetCommit.Code
	}
	if code != 0 || !fp.Found {
		return fp.Partition, -1, -1, strPtr(""), code
	}
	c := fp.Committed
	return fp.Partition, c.Offset, c.LeaderEpoch, strPtr(c.Metadata), 0
}

// fetchGroup answers one group: the named topics (in request order) or, with all, every
// committed topic still in the catalog. A stable fetch (RequireStable, v7+) runs on the write
// path so that it sees every accepted commit and marker, and reports partitions with staged
// transactional offsets as UNSTABLE_OFFSET_COMMIT. A named topic the principal may not
// DESCRIBE answers TOPIC_AUTHORIZATION_FAILED in its partitions; with all, such topics are left
// out, as Kafka does.
func (t *Table) fetchGroup(ctx context.Context, r *wire.Request, group string, topics []fetchTopic, all, stable bool, snap *meta.Snapshot, catErr error) fetchAnswer {
	if catErr != nil && all {
		return fetchAnswer{code: fetchAvailabilityCode(catErr)}
	}
	for i := range topics {
		if topics[i].code == 0 && !t.topicAllowed(r, topics[i].name, acl.OpDescribe) {
			topics[i].code = kerr.TopicAuthorizationFailed.Code
		}
	}
	var parts []offsets.TopicPartition
	if !all {
		parts = []offsets.TopicPartition{}
		for _, ft := range topics {
			if ft.code != 0 {
				continue
			}
			for _, p := range ft.partitions {
				parts = append(parts, offsets.TopicPartition{Topic: ft.name, Partition: p})
			}
		}
	}
	var v any
	var err error
	if stable {
		v, err = t.deps.Groups.For(group).Write(ctx, shard.FetchOffsetsStable(group, parts))
	} else {
		v, err = t.deps.Groups.For(group).Read(ctx, shard.FetchOffsets(group, parts))
	}
	if err != nil {
		return fetchAnswer{code: fetchAvailabilityCode(err)}
	}
	got := v.([]shard.FetchPartition)
	if all {
		// Group the flat, sorted list by topic; topics gone from the catalog are left out (v10
		// could not name them anyway), and so are offsets of an earlier topic of the same name.
		var a fetchAnswer
		for _, fp := range got {
			topic, ok := snap.Topic(fp.Topic)
			if !ok || !fp.Committed.For(topic.ID) || !t.allowed(r, acl.ResourceTopic, fp.Topic, acl.OpDescribe) {
				continue
			}
			if n := len(a.topics); n == 0 || a.topics[n-1].name != fp.Topic {
				a.topics = append(a.topics, fetchTopic{name: fp.Topic, id: topic.ID})
				a.parts = append(a.parts, nil)
			}
			a.parts[len(a.parts)-1] = append(a.parts[len(a.parts)-1], fp)
		}
		return a
	}
	a := fetchAnswer{topics: topics, parts: make([][]shard.FetchPartition, len(topics))}
	k := 0
	for i, ft := range topics {
		id := ft.id
		if id == [16]byte{} && snap != nil {
			id, _ = snap.Lookup(ft.name)
		}
		for _, p := range ft.partitions {
			if ft.code != 0 {
				a.parts[i] = append(a.parts[i], shard.FetchPartition{TopicPartition: offsets.TopicPartition{Topic: ft.name, Partition: p}})
				continue
			}
			a.parts[i] = append(a.parts[i], boundTo(got[k], id))
			k++
		}
	}
	return a
}

// boundTo hides an offset committed for another topic of the same name (deleted and
// re-created under a new id, Kafka's OffsetFetchRequestTest.testFetchOffsetWithRecreatedTopic):
// that topic's offsets went with it, so the partition has none (-1). An offset still staged by
// an open transaction keeps the partition unstable.
func boundTo(fp shard.FetchPartition, topicID [16]byte) shard.FetchPartition {
	if fp.Found && !fp.Committed.For(topicID) {
		fp.Found, fp.Committed = false, offsets.Committed{}
	}
	return fp
}

func fetchAvailabilityCode(err error) int16 {
	if errors.Is(err, runtime.ErrLoading) {
		return kerr.CoordinatorLoadInProgress.Code
	}
	return kerr.NotCoordinator.Code
}
