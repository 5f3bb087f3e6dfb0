package handlers

import (
	"context"
	"github.com/coordinatord/coordinatord/internal/acl"

	"github.com/coordinatord/coordinatord/internal/state/classic"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicConfig is the classic group configuration; a Deps built without one (tests) gets
// Kafka's defaults.
func (t *Table) classicConfig() classic.Config {
	if t.deps.Classic == (classic.Config{}) {
		return classic.DefaultConfig()
	}
	c := t.deps.Classic
	if c.NewMemberJoinTimeoutMs == 0 {
		c.NewMemberJoinTimeoutMs = classic.DefaultConfig().NewMemberJoinTimeoutMs
	}
	return c
}

// clientHost is the peer address as Kafka reports it in DescribeGroups ("/127.0.0.1").
func clientHost(r *wire.Request) string {
	if r.Conn == nil {
		return ""
	}
	return r.Conn.Host()
}

// joinGroup joins a classic group (spec coordinator-apis §2.2). The request goroutine waits on
// the parked response until the join phase completes; the response leaves only after the
// group record deciding it is durable.
func (t *Table) joinGroup(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.JoinGroupRequest)
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	fail := func(code int16, member string) kmsg.Response {
		resp.ErrorCode, resp.Generation, resp.MemberID, resp.LeaderID = code, -1, member, ""
		resp.ProtocolType, resp.Protocol = nil, nil
		if r.Version < 7 {
			resp.Protocol = strPtr("")
		}
		resp.Members = nil
		return resp
	}
	if !t.groupAllowed(r, req.Group, acl.OpRead) {
		return fail(kerr.GroupAuthorizationFailed.Code, "")
	}
	if req.Group == "" {
		return fail(kerr.InvalidGroupID.Code, req.MemberID)
	}
	rebalance := req.RebalanceTimeoutMillis
	if r.Version == 0 {
		// v0 has no rebalance timeout: the session timeout stands in (JoinGroupRequest.java).
		rebalance = req.SessionTimeoutMillis
	}
	if code := t.releaseDescriptionBeforeConversion(ctx, req.Group); code != 0 {
		return fail(code, req.MemberID)
	}
	protocols := make([]classic.Protocol, len(req.Protocols))
	for i, p := range req.Protocols {
		protocols[i] = classic.Protocol{Name: p.Name, Metadata: p.Metadata}
	}
	jr := classic.JoinRequest{
		Group: req.Group, MemberID: req.MemberID, InstanceID: req.InstanceID, ClientID: r.ClientID,
		ClientHost: clientHost(r), SessionTimeoutMs: req.SessionTimeoutMillis, RebalanceTimeout: rebalance,
		ProtocolType: req.ProtocolType, Protocols: protocols, Version: r.Version,
	}
	v, err := t.deps.Groups.For(req.Group).Write(ctx, shard.JoinGroupWith(t.classicConfig(), jr, t.streamsContext(ctx, false)))
	if _, again := v.(shard.NeedsCatalog); again && err == nil {
		v, err = t.deps.Groups.For(req.Group).Write(ctx, shard.JoinGroupWith(t.classicConfig(), jr, t.streamsContext(ctx, true)))
	}
	if err != nil {
		return fail(availabilityCode(err), req.MemberID)
	}
	res := v.(*classic.JoinResult)
	if res.Code != 0 {
		return fail(res.Code, res.MemberID)
	}
	resp.Generation, resp.LeaderID, resp.MemberID = res.Generation, res.Leader, res.MemberID
	resp.ProtocolType, resp.Protocol = res.ProtocolType, res.Protocol
	if resp.Protocol == nil && r.Version < 7 {
		resp.Protocol = strPtr("")
	}
	resp.SkipAssignment = res.SkipAssignment
	for _, m := range res.Members {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ProtocolMetadata = m.ID, m.InstanceID, m.Metadata
		resp.Members = append(resp.Members, rm)
	}
	return resp
}

// streamsContext is what a classic request needs should its group id hold a streams group with
// classic members (online migration). The catalog is read only on the second attempt, after the
// shard answered NeedsCatalog, so classic groups never pay for it; without a readable catalog
// such a request is answered COORDINATOR_NOT_AVAILABLE.
func (t *Table) streamsContext(ctx context.Context, withCatalog bool) shard.StreamsContext {
	sx := shard.StreamsContext{Config: t.deps.Streams, AskCatalog: !withCatalog}
	if withCatalog && t.deps.Meta != nil {
		if snap, err := t.catalog(ctx); err == nil && snap != nil {
			sx.Catalog = snap
		}
	}
	return sx
}

// releaseDescriptionBeforeConversion applies topology-description §6.6: a JoinGroup that would
// turn an empty streams group into a classic group first deletes the topology description the
// plugin may hold. A failed delete answers REBALANCE_IN_PROGRESS and throttles further attempts
// with a back-off window at epoch -2, so that retrying clients do not hammer the plugin.
func (t *Table) releaseDescriptionBeforeConversion(ctx context.Context, group string) int16 {
	caller := t.deps.Topology
	if !caller.Enabled() {
		return 0
	}
	v, err := t.deps.Groups.For(group).Read(ctx, shard.StreamsDescriptionToRelease(group))
	if err != nil {
		return availabilityCode(err)
	}
	if !v.(bool) {
		return 0
	}
	if caller.Backoff().Active(group, streams.DescriptionUncertain) {
		return kerr.RebalanceInProgress.Code
	}
	failed, barrierErr := t.deleteTopologyDescriptions(ctx, []string{group})
	if err := barrierErr[group]; err != nil {
		return availabilityCode(err)
	}
	if failed[group] != nil {
		caller.Backoff().Extend(group, streams.DescriptionUncertain)
		return kerr.RebalanceInProgress.Code
	}
	return 0
}
