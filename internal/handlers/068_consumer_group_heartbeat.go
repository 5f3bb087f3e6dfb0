package handlers

import (
	"context"
	"crypto/rand"
	"encoding/base64"

	"github.com/coordinatord/coordinatord/internal/acl"
	"github.com/coordinatord/coordinatord/internal/state/consumer"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumerGroupHeartbeat is the KIP-848 consumer rebalance protocol (docs/consumer-groups.md):
// the request is checked here as Kafka checks it before its coordinator runs, and the group's
// shard runs the heartbeat.
func (t *Table) consumerGroupHeartbeat(ctx context.Context, r *wire.Request) kmsg.Response {
	resp := t.consumerHeartbeat(ctx, r)
	resp.SetVersion(r.Version)
	return resp
}

func (t *Table) consumerHeartbeat(ctx context.Context, r *wire.Request) *kmsg.ConsumerGroupHeartbeatResponse {
	req := r.Body.(*kmsg.ConsumerGroupHeartbeatRequest)
	req.Version = r.Version
	// Kafka decides authorization before its coordinator validates the request.
	if !t.groupAllowed(r, req.Group, acl.OpRead) {
		return consumer.ErrorResponse(kerr.GroupAuthorizationFailed.Code, "")
	}
	if !t.topicsDescribable(r, req.SubscribedTopicNames) {
		return consumer.ErrorResponse(kerr.TopicAuthorizationFailed.Code, "")
	}
	if code, msg := consumer.ValidateRequest(req, t.deps.Consumer); code != 0 {
		return consumer.ErrorResponse(code, msg)
	}
	snap, err := t.catalogKnowing(ctx, req.SubscribedTopicNames, nil)
	if err != nil {
		return consumer.ErrorResponse(availabilityCode(err), "")
	}
	in := consumer.HeartbeatInput{
		Req: req, ClientID: r.ClientID, ClientHost: clientHost(r), Catalog: snap, Config: t.deps.Consumer,
	}
	if t.deps.Authorizer.Enabled() {
		p, host := who(r)
		in.Describable = func(topic string) bool {
			return t.deps.Authorizer.Allowed(p, host, acl.ResourceTopic, topic, acl.OpDescribe)
		}
	}
	if req.MemberID == "" && req.MemberEpoch == 0 {
		in.NewMemberID = newConsumerMemberID() // v0: the server names the member
	}
	v, err := t.deps.Groups.For(req.Group).Write(ctx, shard.ConsumerHeartbeat(in))
	if err != nil {
		return consumer.ErrorResponse(availabilityCode(err), "")
	}
	return v.(consumer.HeartbeatOutput).Response
}

// newConsumerMemberID is a random 128-bit id in the text form of Kafka's Uuid (URL-safe base64
// without padding), as Kafka names a v0 member.
func newConsumerMemberID() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// topicsDescribable reports whether every named topic may be described: a subscription may not
// reveal (by its assignment) a topic its client cannot see. Each distinct name is checked once.
func (t *Table) topicsDescribable(r *wire.Request, names []string) bool {
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		if !t.topicAllowed(r, n, acl.OpDescribe) {
			return false
		}
	}
	return true
}
