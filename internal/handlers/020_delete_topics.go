package handlers

import (
	"context"
	"github.com/coordinatord/coordinatord/internal/acl"
	"sync"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// deleteTopics removes topics from the catalog, by name (v0-v5) or by name or id (v6).
func (t *Table) deleteTopics(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	var refs []meta.TopicRef
	if r.Version >= 6 {
		for _, rt := range req.Topics {
			refs = append(refs, meta.TopicRef{Name: rt.Topic, ID: rt.TopicID})
		}
	} else {
		for _, name := range req.TopicNames {
			refs = append(refs, meta.TopicRef{Name: strPtr(name)})
		}
	}
	// TOPIC DELETE per topic; a topic named by id is checked under its name (DESCRIBE, then
	// DELETE), and an unknown id is left to the catalog (UNKNOWN_TOPIC_ID), as Kafka does.
	denied := make([]bool, len(refs))
	describable := make([]string, len(refs)) // by id: the name, when the client may see it
	var allowedRefs []meta.TopicRef
	if t.deps.Authorizer.Enabled() {
		snap, _ := t.catalog(ctx)
		for i, ref := range refs {
			switch {
			case ref.Name != nil:
				denied[i] = !t.topicAllowed(r, *ref.Name, acl.OpDelete)
			case snap != nil:
				// By id Kafka checks DESCRIBE first: without it the id is all the answer names.
				if topic, ok := snap.TopicByID(ref.ID); ok {
					denied[i] = true
					if t.topicAllowed(r, topic.Name, acl.OpDescribe) {
						describable[i] = topic.Name
						denied[i] = !t.topicAllowed(r, topic.Name, acl.OpDelete)
					}
				}
			}
			if !denied[i] {
				allowedRefs = append(allowedRefs, ref)
			}
		}
	} else {
		allowedRefs = refs
	}
	var v any
	var err error
	if len(allowedRefs) > 0 {
		v, err = t.deps.Meta.Write(ctx, meta.DeleteTopics(allowedRefs))
	}
	if err == nil && len(allowedRefs) < len(refs) {
		// Put the denied topics back in request order.
		var got []meta.TopicResult
		if v != nil {
			got = v.([]meta.TopicResult)
		}
		merged := make([]meta.TopicResult, len(refs))
		k := 0
		for i := range refs {
			if denied[i] {
				merged[i] = meta.TopicResult{Code: kerr.TopicAuthorizationFailed.Code}
				continue
			}
			merged[i] = got[k]
			k++
		}
		v = merged
	}
	if err == nil && v != nil { // nil: no topic was allowed (or none was named)
		for _, res := range v.([]meta.TopicResult) {
			if res.Code == 0 && res.Topic != nil {
				t.dropDeletedTopicOffsets()
				break
			}
		}
	}
	for i, ref := range refs {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = ref.Name, ref.ID
		switch {
		case denied[i]:
			// No message, and a topic named by id keeps its name from a client that may not
			// DESCRIBE it, as Kafka's.
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
			if ref.Name == nil && describable[i] != "" {
				st.Topic = strPtr(describable[i])
			}
		case err != nil:
			st.ErrorCode, st.ErrorMessage = availabilityCode(err), strPtr(err.Error())
		default:
			res := v.([]meta.TopicResult)[i]
			st.ErrorCode = res.Code
			if res.Code != 0 {
				st.ErrorMessage = strPtr(res.Message)
			}
			if res.Topic != nil {
				st.Topic, st.TopicID = strPtr(res.Topic.Name), res.Topic.ID
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// dropDeletedTopicOffsets removes, in every group shard, the committed and staged offsets of
// topics the catalog no longer has, as Kafka does when it learns of a deletion
// (onPartitionsDeleted): a group left with nothing disappears, and a topic re-created under
// the name starts without offsets. It runs in the background, as in Kafka the answer to
// DeleteTopics does not wait for it; fetches are right meanwhile because offsets are bound to
// the topic id they were committed for. One pass runs at a time, and deletions during a pass
// make one more; the periodic retention sweep catches whatever a pass misses (a shard not
// loaded yet).
func (t *Table) dropDeletedTopicOffsets() { t.TopicsDeleted() }

// TopicsDeleted starts the removal of deleted topics' offsets (see dropDeletedTopicOffsets) for
// deletions learned elsewhere: in gateway mode, from the upstream's metadata.
func (t *Table) TopicsDeleted() {
	if t.deps.Groups == nil {
		return // a table without group shards (tests of the catalog alone)
	}
	t.drops.run(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		v, err := t.deps.Meta.Read(ctx, meta.Read)
		if err != nil {
			t.log.Warn("offsets of deleted topics: catalog unavailable; the retention sweep removes them later", zap.Error(err))
			return
		}
		snap, at := v.(*meta.Snapshot), time.Now()
		cfg := shard.RetentionConfig{Logger: t.log}
		for i := range t.deps.Groups.Count() {
			if _, err := t.deps.Groups.Shard(i).Write(ctx, shard.DropDeletedTopicOffsets(cfg, snap.Lookup, at)); err != nil {
				t.log.Debug("offsets of deleted topics: shard unavailable; the retention sweep removes them later", zap.Int32("shard", i), zap.Error(err))
			}
		}
	})
}

// singleFlight runs one function at a time in the background; a call while one runs makes it
// run once more after, however many calls there were.
type singleFlight struct {
	mu      sync.Mutex
	running bool
	again   bool
}

func (s *singleFlight) run(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		s.again = true
		return
	}
	s.running = true
	go func() {
		for {
			fn()
			s.mu.Lock()
			if !s.again {
				s.running = false
				s.mu.Unlock()
				return
			}
			s.again = false
			s.mu.Unlock()
		}
	}()
}
