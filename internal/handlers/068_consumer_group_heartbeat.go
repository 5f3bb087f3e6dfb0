package handlers

import (
	"context"
	"crypto/rand"
	"encoding/base64"

	"github.com/coordinatord/coordinatord/internal/acl"
	"github.com/coordinatord/coordinatord/internal/state/consumer"
	"github.com/coordinatord/coordinatord/internal/state/meta"
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
	if tk, ok := memo(r).(*consumerTicket); ok && tk.answers(r, req, snap) && t.deps.Groups.Shard(tk.shard).Valid(tk.out.Ticket, tk.out.Session) {
		tk.resp = *tk.out.Response // the stored answer is shared: the caller sets the version
		return &tk.resp
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
	out := v.(consumer.HeartbeatOutput)
	if r.Conn != nil {
		if out.Ticket != nil {
			r.Conn.Memo = &consumerTicket{out: out, steadyKey: t.newSteadyKey(r, req.Group, req.MemberID, req.MemberEpoch, req.InstanceID, snap)}
		} else if _, ok := r.Conn.Memo.(*consumerTicket); ok {
			r.Conn.Memo = nil
		}
	}
	return out.Response
}

// consumerTicket is a steady heartbeat's answer kept on its connection: the same request on it
// gets the same answer without a round trip through the shard while the ticket holds on the
// shard the group maps to now (runtime.Shard.Valid), which also moves the member's session
// deadline. The request must be the same in everything the answer depends on: group, member,
// epoch, instance id, client id and version, with every optional field null
// (consumer.SteadyRequest), and the same topic catalog snapshot (a topic change may change the
// group's metadata hash).
type consumerTicket struct {
	out consumer.HeartbeatOutput
	steadyKey
	// resp is the copy of the stored answer that the steady path returns, reused: the wire
	// layer encodes an answer before it reads the connection's next request and keeps
	// nothing of it.
	resp kmsg.ConsumerGroupHeartbeatResponse
}

func (tk *consumerTicket) answers(r *wire.Request, req *kmsg.ConsumerGroupHeartbeatRequest, snap *meta.Snapshot) bool {
	return consumer.SteadyRequest(req) && tk.matches(r, req.Group, req.MemberID, req.MemberEpoch, req.InstanceID, snap)
}

// steadyKey is what a steady heartbeat's kept answer depends on besides the shard's state: the
// request's group, member, epoch and instance id, the connection's client id and API version,
// and the topic catalog snapshot the answer was computed against.
type steadyKey struct {
	group    string
	member   string
	epoch    int32
	instance *string
	clientID string
	version  int16
	catalog  *meta.Snapshot
	// shard is the group's shard index: the same group id always hashes to it, so the
	// steady path does not hash it again (issue 12).
	shard int32
}

// newSteadyKey copies the key's strings into one allocation: each steady heartbeat compares
// them with the request's, and at 1000 members three separate strings are three cache misses
// where adjacent ones are one or two (issue 12).
func (t *Table) newSteadyKey(r *wire.Request, group, member string, epoch int32, instance *string, snap *meta.Snapshot) steadyKey {
	packed := make([]byte, 0, len(group)+len(member)+len(r.ClientID))
	packed = append(append(append(packed, group...), member...), r.ClientID...)
	all := string(packed)
	group, member = all[:len(group)], all[len(group):len(group)+len(member)]
	return steadyKey{group: group, member: member, epoch: epoch, instance: instance, clientID: all[len(group)+len(member):],
		version: r.Version, catalog: snap, shard: t.deps.Groups.ShardOf(group)}
}

func (k *steadyKey) matches(r *wire.Request, group, member string, epoch int32, instance *string, snap *meta.Snapshot) bool {
	return epoch == k.epoch && member == k.member && group == k.group && r.ClientID == k.clientID && r.Version == k.version &&
		snap == k.catalog && (instance == nil) == (k.instance == nil) && (instance == nil || *instance == *k.instance)
}

// memo is the connection's handler memory (nil without a connection: direct calls in tests).
func memo(r *wire.Request) any {
	if r.Conn == nil {
		return nil
	}
	return r.Conn.Memo
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
