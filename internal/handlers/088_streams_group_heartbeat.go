package handlers

import (
	"context"
	"fmt"
	"github.com/coordinatord/coordinatord/internal/acl"
	"sort"
	"strings"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// streamsGroupHeartbeat is the Kafka Streams rebalance protocol (KIP-1071, spec
// streams-groups §2-§3): the request is validated here, the group's shard runs the heartbeat,
// and internal topics the topology needs are created in the catalog before the answer leaves
// (the next heartbeat sees them and re-validates, spec §5.5). With
// group.streams.join.creates.internal.topics a join creates them first, so that its own answer
// already carries tasks.
func (t *Table) streamsGroupHeartbeat(ctx context.Context, r *wire.Request) kmsg.Response {
	resp := t.streamsHeartbeat(ctx, r)
	resp.SetVersion(r.Version)
	return resp
}

func (t *Table) streamsHeartbeat(ctx context.Context, r *wire.Request) *kmsg.StreamsGroupHeartbeatResponse {
	req := r.Body.(*kmsg.StreamsGroupHeartbeatRequest)
	if !t.groupAllowed(r, req.Group, acl.OpRead) {
		return streams.ErrorResponse(kerr.GroupAuthorizationFailed.Code, "")
	}
	// No message: Kafka 4.4 answers this denial with the code alone (test/conformance/testdata/authz_sasl.txt).
	if unauthorized := t.undescribableTopologyTopics(r, req.Topology); len(unauthorized) > 0 {
		return streams.ErrorResponse(kerr.TopicAuthorizationFailed.Code, "")
	}
	if code, msg := streams.ValidateRequest(req); code != 0 {
		return streams.ErrorResponse(code, msg)
	}
	var sources []string
	if req.Topology != nil {
		for _, st := range req.Topology.Subtopologies {
			sources = append(sources, st.SourceTopics...)
		}
	}
	snap, err := t.catalogKnowing(ctx, sources, nil)
	if err != nil {
		return streams.ErrorResponse(availabilityCode(err), "")
	}
	if tk, ok := memo(r).(*streamsTicket); ok && tk.answers(r, req, snap) && (tk.shortIntervalUntil == 0 || time.Now().UnixMilli() < tk.shortIntervalUntil) &&
		t.deps.Groups.Shard(tk.shard).Valid(&tk.ticket, tk.session) {
		return &tk.resp
	}
	if t.deps.JoinCreatesInternalTopics && req.MemberEpoch == 0 && req.Topology != nil {
		snap = t.createInternalTopicsOfJoin(ctx, r, req, snap)
	}
	in := streams.HeartbeatInput{
		Req: req, Version: r.Version, ClientID: r.ClientID, ClientHost: clientHost(r),
		Catalog: snap, Config: t.deps.Streams,
	}
	v, err := t.deps.Groups.For(req.Group).Write(ctx, shard.StreamsHeartbeat(in))
	if err != nil {
		return streams.ErrorResponse(availabilityCode(err), "")
	}
	out := v.(streams.HeartbeatOutput)
	if r.Conn != nil {
		// A member that may still be asked for its topology description must get the question
		// from a heartbeat that runs the rule (maybeSolicitTopologyDescription), not a repeat.
		if out.Ticket != nil && t.descriptionSettled(r.Version, req, out) {
			// The stored answer is shared (the shard may hand it to other heartbeats): the
			// ticket keeps its own copy, whose version the caller sets, always this key's.
			r.Conn.Memo = &streamsTicket{endpointEpoch: req.EndpointInformationEpoch, ticket: *out.Ticket, session: out.Session,
				shortIntervalUntil: out.ShortIntervalUntil, resp: *out.Response,
				steadyKey: t.newSteadyKey(r, req.Group, req.MemberID, req.MemberEpoch, req.InstanceID, snap)}
		} else if _, ok := r.Conn.Memo.(*streamsTicket); ok {
			r.Conn.Memo = nil
		}
	}
	t.maybeSolicitTopologyDescription(ctx, r.Version, req, out)
	if len(out.ToCreate) > 0 {
		if denied := t.uncreatableTopics(r, out.ToCreate); len(denied) > 0 {
			// Kafka creates none of them then: the next heartbeat tries the whole set again.
			for i := range out.Response.Status {
				if out.Response.Status[i].StatusCode == streams.StatusMissingInternalTopics {
					out.Response.Status[i].StatusDetail += "; Unauthorized to CREATE on topics " + strings.Join(denied, ", ") + "."
				}
			}
		} else if failed := t.createInternalTopics(ctx, out.ToCreate); failed != "" {
			for i := range out.Response.Status {
				if out.Response.Status[i].StatusCode == streams.StatusMissingInternalTopics {
					out.Response.Status[i].StatusDetail += "; Creation failed: " + failed + "."
				}
			}
		}
	}
	return out.Response
}

// createInternalTopicsOfJoin creates the internal topics a joining member's topology is missing
// before its heartbeat runs, and returns the catalog that shows them. Kafka answers the join with
// MISSING_INTERNAL_TOPICS and creates them meanwhile; its member then gets tasks only at its
// heartbeat one interval (5 s by default) later, and an acknowledging heartbeat in between finds
// the assignment interval not yet elapsed. Created first, the join's own answer carries tasks.
// Only for a topology the group would adopt (new group, none yet, or the same one): a member
// whose topology the group ignores or refuses must not create topics. Anything that goes wrong
// here leaves snap as it was, and the heartbeat reports and retries the creation as Kafka does.
func (t *Table) createInternalTopicsOfJoin(ctx context.Context, r *wire.Request, req *kmsg.StreamsGroupHeartbeatRequest, snap *meta.Snapshot) *meta.Snapshot {
	if req.Topology.Epoch < 0 {
		return snap
	}
	rt := streams.TopologyFromRequest(req.Topology)
	configured, err := streams.Configure(rt, snap)
	if err != nil || configured.Ready() || len(configured.ToCreate) == 0 {
		return snap
	}
	if t.deps.Groups == nil {
		return snap
	}
	v, err := t.deps.Groups.For(req.Group).Read(ctx, shard.StreamsTopologyAdopts(req.Group, rt))
	if err != nil || !v.(bool) || len(t.uncreatableTopics(r, configured.ToCreate)) > 0 {
		return snap
	}
	if failed := t.createInternalTopics(ctx, configured.ToCreate); failed != "" {
		return snap
	}
	fresh, err := t.catalog(ctx)
	if err != nil {
		return snap
	}
	return fresh
}

// createInternalTopics creates the topics a topology needs; a topic created meanwhile by
// someone else counts as created. It returns Kafka's "t (ERROR)[, …][ and N more]" summary
// of the failures, or "".
func (t *Table) createInternalTopics(ctx context.Context, topics []streams.InternalTopic) string {
	nts := make([]meta.NewTopic, len(topics))
	for i, it := range topics {
		nt := meta.NewTopic{Name: it.Name, Partitions: it.Partitions, ReplicationFactor: it.ReplicationFactor, Configs: map[string]*string{}}
		for k, v := range it.Configs {
			nt.Configs[k] = &v
		}
		nts[i] = nt
	}
	create := t.deps.CreateTopics
	if create == nil {
		create = t.createInCatalog
	}
	results, err := create(ctx, nts)
	if err != nil {
		return fmt.Sprintf("%s (%s)", topics[0].Name, errName(availabilityCode(err)))
	}
	var failed []string
	for _, res := range results {
		if res.Code != 0 && res.Code != kerr.TopicAlreadyExists.Code {
			failed = append(failed, fmt.Sprintf("%s (%s)", res.Name, errName(res.Code)))
		}
	}
	if len(failed) == 0 {
		return ""
	}
	t.log.Warn("creating internal topics of a streams group failed", zap.Strings("failures", failed))
	if len(failed) > 3 {
		return fmt.Sprintf("%s and %d more", strings.Join(failed[:3], ", "), len(failed)-3)
	}
	return strings.Join(failed, ", ")
}

// createInCatalog creates topics in the local catalog (standalone mode, where the catalog is
// the only cluster there is).
func (t *Table) createInCatalog(ctx context.Context, topics []meta.NewTopic) ([]meta.TopicResult, error) {
	v, err := t.deps.Meta.Write(ctx, meta.CreateTopics(topics, false, t.metaDefaults()))
	if err != nil {
		return nil, err
	}
	return v.([]meta.TopicResult), nil
}

func errName(code int16) string {
	if e := kerr.ErrorForCode(code); e != nil {
		if ke, ok := e.(*kerr.Error); ok {
			return ke.Message
		}
	}
	return fmt.Sprint(code)
}

// maybeSolicitTopologyDescription sets TopologyDescriptionRequired on a committed heartbeat's
// response by the rule of spec topology-description §2.2, checked in order. No plugin call
// happens here: only the group's epochs (from the heartbeat op) and the in-memory back-off.
func (t *Table) maybeSolicitTopologyDescription(ctx context.Context, version int16, req *kmsg.StreamsGroupHeartbeatRequest, out streams.HeartbeatOutput) {
	resp, d := out.Response, out.Description
	if t.descriptionSettled(version, req, out) {
		return
	}
	for _, st := range resp.Status {
		if st.StatusCode == streams.StatusStaleTopology {
			return
		}
	}
	if !t.deps.Topology.Backoff().Solicit(req.Group, d.Topology) {
		return
	}
	// The epochs above are those the heartbeat saw, which may predate a push that completed
	// since: its final write was durable and its back-off entry cleared before this Solicit, so
	// Solicit opened a new window. Durable state settles it; without this a member would be
	// asked twice at one epoch.
	if t.deps.Groups != nil {
		if v, err := t.deps.Groups.For(req.Group).Read(ctx, shard.StreamsDescriptionEpochsOf(req.Group)); err == nil && v != nil {
			if now := v.(streams.DescriptionEpochs); now.Topology == d.Topology && (now.Stored == d.Topology || now.Failed == d.Topology) {
				t.deps.Topology.Backoff().Clear(req.Group, d.Topology)
				return
			}
		}
	}
	resp.TopologyDescriptionRequired = true
	// Kafka's wording (its system tests grep for it), with the fields for structured search.
	t.log.Info(fmt.Sprintf("[GroupId %s] Requested topology description push at topology epoch %d.", req.Group, d.Topology),
		zap.String("group", req.Group), zap.Int32("topology_epoch", d.Topology), zap.String("member", req.MemberID))
}

// descriptionSettled reports whether a heartbeat's answer can never ask for the topology
// description, whatever time it is: the rule of maybeSolicitTopologyDescription stops before
// its time-based back-off. What it reads besides the configuration is the group's durable
// description epochs, which only a write moves.
func (t *Table) descriptionSettled(version int16, req *kmsg.StreamsGroupHeartbeatRequest, out streams.HeartbeatOutput) bool {
	d := out.Description
	return version < 1 || !t.deps.Topology.Enabled() || req.MemberEpoch < 0 || out.Response.ErrorCode != 0 ||
		d.Topology < 0 || d.Stored == d.Topology || d.Failed == d.Topology
}

// streamsTicket is a steady streams heartbeat's answer kept on its connection, as
// consumerTicket is for the consumer protocol: the same request gets the same answer without
// a round trip through the shard while the ticket holds (runtime.Shard.Valid), which also moves
// the member's session deadline. The request must match in everything the answer depends on:
// group, member, epoch, endpoint information epoch, instance id, client id and version, with
// every optional field null (streams.SteadyRequest), and the same catalog snapshot.
//
// Everything the steady path reads of its member is in this one object (with the key's strings
// in one allocation of their own, and the session timer's lease), not spread over the
// heartbeat's output, its ticket and its stored answer: at 1000 members each heartbeat finds
// its member's objects out of the caches, and every separate one is another miss (issue 12).
type streamsTicket struct {
	steadyKey
	endpointEpoch      int32
	shortIntervalUntil int64 // HeartbeatOutput.ShortIntervalUntil
	session            time.Duration
	ticket             runtime.Ticket
	// resp is the answer the steady path returns, copied from the stored one when the ticket
	// is kept: the wire layer encodes an answer before it reads the connection's next request
	// and keeps nothing of it, and its version is the key's.
	resp kmsg.StreamsGroupHeartbeatResponse
}

func (tk *streamsTicket) answers(r *wire.Request, req *kmsg.StreamsGroupHeartbeatRequest, snap *meta.Snapshot) bool {
	return streams.SteadyRequest(req) && req.EndpointInformationEpoch == tk.endpointEpoch &&
		tk.matches(r, req.Group, req.MemberID, req.MemberEpoch, req.InstanceID, snap)
}

// undescribableTopologyTopics lists the topics of a heartbeat's topology the principal may not
// DESCRIBE: its source, repartition and changelog topics, as Kafka's heartbeat checks them.
func (t *Table) undescribableTopologyTopics(r *wire.Request, topo *kmsg.StreamsGroupHeartbeatRequestTopology) []string {
	if topo == nil || !t.deps.Authorizer.Enabled() {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	check := func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		if !t.topicAllowed(r, name, acl.OpDescribe) {
			out = append(out, name)
		}
	}
	for _, st := range topo.Subtopologies {
		for _, n := range st.SourceTopics {
			check(n)
		}
		for _, n := range st.RepartitionSinkTopics {
			check(n)
		}
		for _, it := range st.StateChangelogTopics {
			check(it.Topic)
		}
		for _, it := range st.RepartitionSourceTopics {
			check(it.Topic)
		}
	}
	sort.Strings(out)
	return out
}

// uncreatableTopics lists the internal topics the principal may not create: none with CLUSTER
// CREATE, else those without TOPIC CREATE.
func (t *Table) uncreatableTopics(r *wire.Request, topics []streams.InternalTopic) []string {
	if t.allowed(r, acl.ResourceCluster, acl.ClusterName, acl.OpCreate) {
		return nil
	}
	var out []string
	for _, it := range topics {
		if !t.topicAllowed(r, it.Name, acl.OpCreate) {
			out = append(out, it.Name)
		}
	}
	return out
}
