package gateway

import (
	"context"
	"time"

	"github.com/coordinatord/coordinatord/internal/upstream"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// topicWaitMax bounds how long a CreateTopics/DeleteTopics/CreatePartitions answer is held
// while the upstream's metadata catches up with it.
const topicWaitMax = 3 * time.Second

// afterTopicChange holds the answer to a forwarded CreateTopics, DeleteTopics or
// CreatePartitions until the upstream's metadata shows its effect and the catalog has followed,
// so that a client that creates a topic and then commits offsets for it is not told the topic
// does not exist.
func (g *Gateway) afterTopicChange(ctx context.Context, h wire.Header, request, frame []byte) {
	if g.refreshUntil == nil || validateOnly(h, request) {
		return // a validate-only request changes nothing: waiting would only delay its answer
	}
	resp := kmsg.ResponseForKey(h.Key)
	resp.SetVersion(h.Version)
	bodyAt := 8
	if resp.IsFlexible() {
		var err error
		if bodyAt, err = headerEnd(frame); err != nil {
			return
		}
	}
	if len(frame) < bodyAt || resp.ReadFrom(frame[bodyAt:]) != nil {
		return
	}
	var done func(*upstream.View) bool
	switch r := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		want := map[string][16]byte{}
		for _, t := range r.Topics {
			if t.ErrorCode == 0 {
				want[t.Topic] = t.TopicID
			}
		}
		done = func(v *upstream.View) bool { return hasTopics(v, want) }
	case *kmsg.CreatePartitionsResponse:
		// The new counts are in the request; one refresh after the answer shows them.
		done = func(*upstream.View) bool { return true }
	case *kmsg.DeleteTopicsResponse:
		gone := map[string]bool{}
		for _, t := range r.Topics {
			if t.ErrorCode == 0 && t.Topic != nil {
				gone[*t.Topic] = true
			}
		}
		done = func(v *upstream.View) bool {
			for _, t := range v.Topics {
				if gone[t.Name] {
					return false
				}
			}
			return true
		}
	default:
		return
	}
	ctx, cancel := context.WithTimeout(ctx, topicWaitMax)
	defer cancel()
	if err := g.refreshUntil(ctx, done); err != nil {
		g.lg.Debug("upstream metadata did not show a topic change in time", zap.Error(err))
	}
}

// hasTopics reports whether the view has every topic of want, under the id given (from
// CreateTopics v7 on; a zero id matches any): a topic deleted and created again under its name
// through the gateway is not there while the view still shows the deleted one, whose offsets
// a commit by name would otherwise be taken for.
func hasTopics(v *upstream.View, want map[string][16]byte) bool {
	for name, id := range want {
		have, ok := v.TopicID(name)
		if !ok || (id != [16]byte{} && have != id) {
			return false
		}
	}
	return true
}

// validateOnly reads ValidateOnly from a CreateTopics or CreatePartitions request frame.
func validateOnly(h wire.Header, request []byte) bool {
	if h.Key != 19 && h.Key != 37 {
		return false
	}
	_, rest, err := wire.ParseHeader(request)
	if err != nil {
		return false
	}
	req := kmsg.RequestForKey(h.Key)
	req.SetVersion(h.Version)
	if req.IsFlexible() {
		if rest, err = wire.SkipHeaderTags(rest); err != nil {
			return false
		}
	}
	if req.ReadFrom(rest) != nil {
		return false
	}
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		return r.ValidateOnly
	case *kmsg.CreatePartitionsRequest:
		return r.ValidateOnly
	}
	return false
}

// afterMetadata holds a forwarded Metadata answer that names a topic under another id than the
// upstream view has (deleted and re-created upstream since the last refresh) until the view,
// and so the catalog, shows the new id. A client learns a topic's id from this answer before
// it commits for the topic; a commit by name (OffsetCommit v9 and older) that the catalog took
// for the old topic would be dropped with the old topic's offsets, although acknowledged.
func (g *Gateway) afterMetadata(ctx context.Context, resp *kmsg.MetadataResponse) {
	g.lookIfViewDisagrees(resp)
	if g.refreshUntil == nil || resp.GetVersion() < 10 {
		return // ids are in Metadata from v10 on
	}
	stale := func(v *upstream.View) map[string][16]byte {
		var out map[string][16]byte
		for _, t := range resp.Topics {
			if t.ErrorCode != 0 || t.Topic == nil || t.TopicID == ([16]byte{}) {
				continue
			}
			g.mu.RLock()
			unwaited := g.unwaited[t.TopicID]
			g.mu.RUnlock()
			if unwaited {
				continue // an id the view has moved past: this answer is the older one
			}
			// A topic the view lacks is left to the refresh a request naming it makes
			// (catalogKnowing): nothing of it is in the catalog to mistake it for.
			if id, ok := v.TopicID(*t.Topic); ok && id != t.TopicID {
				if out == nil {
					out = map[string][16]byte{}
				}
				out[*t.Topic] = t.TopicID
			}
		}
		return out
	}
	v := g.View()
	if v == nil || stale(v) == nil {
		return
	}
	g.catchingUp.Lock()
	defer g.catchingUp.Unlock()
	want := stale(g.View())
	if want == nil {
		return // an answer waited on before this one brought the view up to date
	}
	ctx, cancel := context.WithTimeout(ctx, topicWaitMax)
	defer cancel()
	done := func(v *upstream.View) bool {
		for name, id := range want {
			if have, ok := v.TopicID(name); ok && have != id {
				return false
			}
		}
		return true
	}
	if err := g.refreshUntil(ctx, done); err != nil {
		g.lg.Debug("upstream metadata did not show a re-created topic in time", zap.Error(err))
		// Whatever names it next is passed on at once: answers must not queue here a
		// topicWaitMax each for an id the upstream's metadata does not settle on.
		g.mu.Lock()
		for _, id := range want {
			g.unwaitLocked(id)
		}
		g.mu.Unlock()
	}
}

// viewLookMinInterval bounds the looks at the upstream's metadata that Metadata answers
// disagreeing with the view ask for (lookIfViewDisagrees): a topic the gateway's own principal
// may not describe disagrees for good, and every answer naming it must not cost a look.
const viewLookMinInterval = time.Second

// lookIfViewDisagrees asks for a look at the upstream's metadata when a forwarded Metadata
// answer shows a topic the view lacks (created upstream since the last look) or says that a
// topic the view has does not exist (deleted upstream). The catalog follows the view, and a
// consumer-protocol member subscribed to the topic by name learns of the change only through
// the catalog: the Java consumer names its topics in a ConsumerGroupHeartbeat only when its
// subscription changes, so nothing else makes the catalog look before its next periodic
// refresh (upstream.metadata.max.age.ms), while the member's own Metadata requests show the
// change at once. An answer that disagrees too soon after the last look schedules one look
// for when the interval is over, since the client that saw the change may not ask again.
func (g *Gateway) lookIfViewDisagrees(resp *kmsg.MetadataResponse) {
	v := g.View()
	if v == nil {
		return
	}
	disagrees := false
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic == "" {
			continue
		}
		_, known := v.TopicID(*t.Topic)
		switch t.ErrorCode {
		case 0:
			disagrees = !known
		case kerr.UnknownTopicOrPartition.Code:
			disagrees = known
		}
		if disagrees {
			break
		}
	}
	if !disagrees {
		return
	}
	wait := time.Until(v.Fetched.Add(viewLookMinInterval))
	if wait <= 0 {
		g.refresh()
		return
	}
	if g.lookScheduled.CompareAndSwap(false, true) {
		time.AfterFunc(wait, func() {
			g.lookScheduled.Store(false)
			g.refresh()
		})
	}
}
