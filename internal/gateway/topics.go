package gateway

import (
	"context"
	"time"

	"github.com/coordinatord/coordinatord/internal/upstream"
	"github.com/coordinatord/coordinatord/internal/wire"
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
		want := map[string]int32{}
		for _, t := range r.Topics {
			if t.ErrorCode == 0 {
				want[t.Topic] = t.NumPartitions
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

func hasTopics(v *upstream.View, want map[string]int32) bool {
	if len(want) == 0 {
		return true
	}
	have := map[string]bool{}
	for _, t := range v.Topics {
		have[t.Name] = true
	}
	for name := range want {
		if !have[name] {
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
