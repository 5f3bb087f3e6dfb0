package handlers

import (
	"context"
	"crypto/rand"
	"encoding/base64"

	"github.com/coordinatord/coordinatord/internal/state/consumer"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/wire"
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
	if code, msg := consumer.ValidateRequest(req, t.deps.Consumer); code != 0 {
		return consumer.ErrorResponse(code, msg)
	}
	// authz: GROUP READ on req.Group (Kafka checks it first, then TOPIC DESCRIBE of the subscribed topic names; topics a regex matches are filtered to the described ones)
	snap, err := t.catalogKnowing(ctx, req.SubscribedTopicNames, nil)
	if err != nil {
		return consumer.ErrorResponse(availabilityCode(err), "")
	}
	in := consumer.HeartbeatInput{
		Req: req, ClientID: r.ClientID, ClientHost: clientHost(r), Catalog: snap, Config: t.deps.Consumer,
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
