package gateway

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// Config requests (DescribeConfigs 32, AlterConfigs 33, IncrementalAlterConfigs 44) may name
// GROUP resources, whose configs coordinatord keeps, beside TOPIC and BROKER resources of the
// data cluster (spec gateway §3.5). A request without a local resource is forwarded whole; one
// with local resources is split: the GROUP resources and coordinatord's own BROKER resource are
// answered by the local table, the rest goes upstream in one request, and the answers are
// merged in request order.

var configKeys = map[int16]bool{32: true, 33: true, 44: true}

// configResource is what the split needs of a resource of any of the three requests.
type configResource struct {
	typ  kmsg.ConfigResourceType
	name string
}

func configResources(req kmsg.Request) []configResource {
	var out []configResource
	switch r := req.(type) {
	case *kmsg.DescribeConfigsRequest:
		for _, x := range r.Resources {
			out = append(out, configResource{x.ResourceType, x.ResourceName})
		}
	case *kmsg.AlterConfigsRequest:
		for _, x := range r.Resources {
			out = append(out, configResource{x.ResourceType, x.ResourceName})
		}
	case *kmsg.IncrementalAlterConfigsRequest:
		for _, x := range r.Resources {
			out = append(out, configResource{x.ResourceType, x.ResourceName})
		}
	}
	return out
}

// localConfig reports whether coordinatord answers a resource: every GROUP resource, and the
// BROKER resource named by coordinatord's node id.
func (g *Gateway) localConfig(r configResource) bool {
	switch r.typ {
	case kmsg.ConfigResourceTypeGroupConfig:
		return true
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		// coordinatord's node: an upstream broker would refuse it naming its own node id,
		// which tells the client nothing about the node it asked for.
		return r.name == strconv.Itoa(int(g.opts.NodeID))
	}
	return false
}

// configsLocal decides Forwards for a config request: false (answer here, splitting) when it
// names a local resource and the local table serves its version.
func (p *portHandler) configsLocal(h wire.Header, rest []byte) bool {
	if _, decode, ok := p.g.opts.Local.NewRequest(h.Key, h.Version); !ok || !decode {
		return false
	}
	req := kmsg.RequestForKey(h.Key)
	req.SetVersion(h.Version)
	if req.IsFlexible() {
		var err error
		if rest, err = wire.SkipHeaderTags(rest); err != nil {
			return false
		}
	}
	if err := req.ReadFrom(rest); err != nil {
		return false // forwarded as is: the upstream answers a malformed request as Kafka does
	}
	for _, r := range configResources(req) {
		if p.g.localConfig(r) {
			return true
		}
	}
	return false
}

// splitConfigs answers a config request that names at least one local resource. A nil answer
// (the upstream could not be reached) closes the client's connection, as a failed forward does.
func (p *portHandler) splitConfigs(ctx context.Context, r *wire.Request) kmsg.Response {
	all := configResources(r.Body)
	local := make([]bool, len(all))
	nLocal := 0
	for i, res := range all {
		if local[i] = p.g.localConfig(res); local[i] {
			nLocal++
		}
	}
	if nLocal == len(all) {
		resp := p.g.opts.Local.Handle(ctx, r)
		p.configsToOwners(ctx, r, r.Body, resp)
		return resp
	}
	localReq, upReq := splitRequest(r.Body, local)
	localResp := p.g.opts.Local.Handle(ctx, &wire.Request{Header: r.Header, Body: localReq, Conn: r.Conn})
	p.configsToOwners(ctx, r, localReq, localResp)
	upResp, err := p.forwardRequest(ctx, r, upReq)
	if err != nil {
		p.g.lg.Warn("config request: upstream part failed", zap.Error(err))
		return nil
	}
	return mergeResponses(r.Body, localResp, upResp, local)
}

// PeerForwardClientID is the client id of the requests a node passes to another node (group
// configs to the owner of the group's shard). The node receiving one answers it from its own
// state and never passes it on, so two nodes whose views of the assignment differ for a moment
// cannot send a request back and forth.
const PeerForwardClientID = "coordinatord-peer-forward"

// configsToOwners passes the GROUP resources that the local table answered NOT_COORDINATOR
// (the client may ask, and asked validly, but another node owns the group's shard:
// log.backend=kafka with several nodes) to the node owning each group's shard, and puts that
// node's answers in their place. Kafka keeps group configs in the cluster's metadata, so every
// broker describes and alters them and Kafka's admin client sends them to any broker; here
// they live in the group's shard. The local table decided authorization first, with the
// client's principal; the owner checks coordinatord's own (docs/scale-out.md). A resource
// whose shard has no owner now (handed over) or whose owner cannot be reached keeps the local
// answer, which the client may retry.
func (p *portHandler) configsToOwners(ctx context.Context, r *wire.Request, req kmsg.Request, resp kmsg.Response) {
	if p.g.opts.GroupOwner == nil || p.g.opts.PeerRequest == nil || resp == nil || r.ClientID == PeerForwardClientID {
		return
	}
	res, codes := configResources(req), configAnswerCodes(resp)
	if len(res) != len(codes) {
		return
	}
	byOwner := map[Peer][]int{}
	var owners []Peer
	for i, x := range res {
		if x.typ != kmsg.ConfigResourceTypeGroupConfig || codes[i] != kerr.NotCoordinator.Code {
			continue
		}
		owner, ok := p.g.opts.GroupOwner(x.name)
		if !ok {
			continue
		}
		if _, seen := byOwner[owner]; !seen {
			owners = append(owners, owner)
		}
		byOwner[owner] = append(byOwner[owner], i)
	}
	for _, owner := range owners {
		idx := byOwner[owner]
		sub := pickConfigResources(req, idx)
		sub.SetVersion(r.Version)
		out, err := p.g.opts.PeerRequest(ctx, owner, sub)
		if err == nil {
			err = placeConfigAnswers(resp, out, idx)
		}
		if err != nil {
			p.g.lg.Warn("could not pass group config resources to the node owning their shard; they are answered NOT_COORDINATOR",
				zap.String("api", kmsg.NameForKey(r.Key)), zap.Int32("owner", owner.ID), zap.Int("resources", len(idx)), zap.Error(err))
		}
	}
}

// configAnswerCodes are the error codes of a config answer's resources, in order.
func configAnswerCodes(resp kmsg.Response) []int16 {
	var out []int16
	switch r := resp.(type) {
	case *kmsg.DescribeConfigsResponse:
		for _, x := range r.Resources {
			out = append(out, x.ErrorCode)
		}
	case *kmsg.AlterConfigsResponse:
		for _, x := range r.Resources {
			out = append(out, x.ErrorCode)
		}
	case *kmsg.IncrementalAlterConfigsResponse:
		for _, x := range r.Resources {
			out = append(out, x.ErrorCode)
		}
	}
	return out
}

// pickConfigResources copies req with the resources at idx only.
func pickConfigResources(req kmsg.Request, idx []int) kmsg.Request {
	switch r := req.(type) {
	case *kmsg.DescribeConfigsRequest:
		c := *r
		c.Resources = pick(r.Resources, idx)
		return &c
	case *kmsg.AlterConfigsRequest:
		c := *r
		c.Resources = pick(r.Resources, idx)
		return &c
	case *kmsg.IncrementalAlterConfigsRequest:
		c := *r
		c.Resources = pick(r.Resources, idx)
		return &c
	}
	panic("gateway: not a config request")
}

// placeConfigAnswers puts the owner's answers for the resources at idx into resp.
func placeConfigAnswers(resp, out kmsg.Response, idx []int) error {
	switch r := resp.(type) {
	case *kmsg.DescribeConfigsResponse:
		o, ok := out.(*kmsg.DescribeConfigsResponse)
		if !ok || len(o.Resources) != len(idx) {
			return errMismatchedAnswer
		}
		place(r.Resources, o.Resources, idx)
	case *kmsg.AlterConfigsResponse:
		o, ok := out.(*kmsg.AlterConfigsResponse)
		if !ok || len(o.Resources) != len(idx) {
			return errMismatchedAnswer
		}
		place(r.Resources, o.Resources, idx)
	case *kmsg.IncrementalAlterConfigsResponse:
		o, ok := out.(*kmsg.IncrementalAlterConfigsResponse)
		if !ok || len(o.Resources) != len(idx) {
			return errMismatchedAnswer
		}
		place(r.Resources, o.Resources, idx)
	}
	return nil
}

var errMismatchedAnswer = errors.New("the owner answered other resources than it was asked")

func pick[T any](in []T, idx []int) []T {
	out := make([]T, 0, len(idx))
	for _, i := range idx {
		out = append(out, in[i])
	}
	return out
}

func place[T any](dst, src []T, idx []int) {
	for j, i := range idx {
		dst[i] = src[j]
	}
}

// forwardRequest encodes req with the client's header and sends it upstream like any
// forwarded request.
func (p *portHandler) forwardRequest(ctx context.Context, r *wire.Request, req kmsg.Request) (kmsg.Response, error) {
	req.SetVersion(r.Version)
	b := kbin.AppendInt16(nil, r.Key)
	b = kbin.AppendInt16(b, r.Version)
	b = kbin.AppendInt32(b, r.CorrelationID)
	cid := r.ClientID
	b = kbin.AppendNullableString(b, &cid)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	// The request's budget share is the wire server's; the upstream part of a split answer is
	// bounded by MaxResponseBytes only (it is decoded and merged, not passed on as bytes).
	out, err := p.g.forward(ctx, p.node, r.Conn, r.Header, b, func(int) error { return nil })
	if err != nil {
		return nil, err
	}
	// The header's tagged fields are stepped over as the rewrite does: skipping one byte for
	// them read the body from inside them when the upstream sent any.
	resp, err := parseAnswer(r.Header, out)
	if err != nil {
		return nil, fmt.Errorf("decoding upstream %s answer: %w", kmsg.NameForKey(r.Key), err)
	}
	return resp, nil
}

// splitRequest copies req twice: with the local resources, and with the others.
func splitRequest(req kmsg.Request, local []bool) (kmsg.Request, kmsg.Request) {
	switch r := req.(type) {
	case *kmsg.DescribeConfigsRequest:
		l, u := *r, *r
		l.Resources, u.Resources = partition(r.Resources, local)
		return &l, &u
	case *kmsg.AlterConfigsRequest:
		l, u := *r, *r
		l.Resources, u.Resources = partition(r.Resources, local)
		return &l, &u
	case *kmsg.IncrementalAlterConfigsRequest:
		l, u := *r, *r
		l.Resources, u.Resources = partition(r.Resources, local)
		return &l, &u
	}
	panic("gateway: not a config request")
}

func partition[T any](in []T, local []bool) (l, u []T) {
	for i, x := range in {
		if local[i] {
			l = append(l, x)
		} else {
			u = append(u, x)
		}
	}
	return l, u
}

// interleave takes from l where local[i] and from u otherwise, in order; a part that answered
// fewer resources than it was asked leaves the rest out.
func interleave[T any](l, u []T, local []bool) []T {
	out := make([]T, 0, len(local))
	for _, isLocal := range local {
		if isLocal && len(l) > 0 {
			out, l = append(out, l[0]), l[1:]
		} else if !isLocal && len(u) > 0 {
			out, u = append(out, u[0]), u[1:]
		}
	}
	return out
}

// mergeResponses puts the two answers together in request order; the throttle is the longer.
func mergeResponses(req kmsg.Request, localResp, upResp kmsg.Response, local []bool) kmsg.Response {
	switch req.(type) {
	case *kmsg.DescribeConfigsRequest:
		l, u := localResp.(*kmsg.DescribeConfigsResponse), upResp.(*kmsg.DescribeConfigsResponse)
		l.Resources = interleave(l.Resources, u.Resources, local)
		l.ThrottleMillis = max(l.ThrottleMillis, u.ThrottleMillis)
		return l
	case *kmsg.AlterConfigsRequest:
		l, u := localResp.(*kmsg.AlterConfigsResponse), upResp.(*kmsg.AlterConfigsResponse)
		l.Resources = interleave(l.Resources, u.Resources, local)
		l.ThrottleMillis = max(l.ThrottleMillis, u.ThrottleMillis)
		return l
	case *kmsg.IncrementalAlterConfigsRequest:
		l, u := localResp.(*kmsg.IncrementalAlterConfigsResponse), upResp.(*kmsg.IncrementalAlterConfigsResponse)
		l.Resources = interleave(l.Resources, u.Resources, local)
		l.ThrottleMillis = max(l.ThrottleMillis, u.ThrottleMillis)
		return l
	}
	panic("gateway: not a config request")
}

// listConfigResourcesLocal: ListConfigResources asking for GROUP resources only is answered
// here (coordinatord keeps the group configs); any other is the upstream's.
// listConfigResources answers ListConfigResources for GROUP resources. With several nodes
// each lists the groups of the shards it owns, so the node asked puts every node's list
// together: Kafka answers it from the cluster's metadata on any broker, and its admin client
// asks one. A node that cannot be asked makes the answer an error, not a shorter list.
func (p *portHandler) listConfigResources(ctx context.Context, r *wire.Request) kmsg.Response {
	resp := p.g.opts.Local.Handle(ctx, r)
	lr, ok := resp.(*kmsg.ListConfigResourcesResponse)
	if !ok || lr.ErrorCode != 0 || p.g.opts.Peers == nil || p.g.opts.PeerRequest == nil || r.ClientID == PeerForwardClientID {
		return resp
	}
	req := r.Body.(*kmsg.ListConfigResourcesRequest)
	if r.Version < 1 || len(req.ResourceTypes) == 0 {
		return resp // v0 (client metrics) and every type: not a group list (listConfigResourcesLocal)
	}
	for _, peer := range p.g.opts.Peers() {
		if peer.ID == p.g.opts.NodeID {
			continue
		}
		sub := *req
		sub.SetVersion(r.Version)
		out, err := p.g.opts.PeerRequest(ctx, peer, &sub)
		var o *kmsg.ListConfigResourcesResponse
		if err == nil {
			if o, ok = out.(*kmsg.ListConfigResourcesResponse); !ok {
				err = errMismatchedAnswer
			} else if o.ErrorCode != 0 {
				err = kerr.ErrorForCode(o.ErrorCode)
			}
		}
		if err != nil {
			p.g.lg.Warn("could not list another node's group config resources; the answer is an error", zap.Int32("node", peer.ID), zap.Error(err))
			lr.ConfigResources = nil
			lr.ErrorCode = kerr.CoordinatorNotAvailable.Code
			if o != nil && o.ErrorCode != 0 {
				lr.ErrorCode = o.ErrorCode
			}
			return lr
		}
		lr.ConfigResources = append(lr.ConfigResources, o.ConfigResources...)
	}
	sort.Slice(lr.ConfigResources, func(i, j int) bool { return lr.ConfigResources[i].Name < lr.ConfigResources[j].Name })
	return lr
}

func listConfigResourcesLocal(h wire.Header, rest []byte) bool {
	if h.Version < 1 {
		return false
	}
	req := kmsg.NewPtrListConfigResourcesRequest()
	req.SetVersion(h.Version)
	rest, err := wire.SkipHeaderTags(rest)
	if err != nil || req.ReadFrom(rest) != nil {
		return false
	}
	return len(req.ResourceTypes) == 1 && req.ResourceTypes[0] == int8(kmsg.ConfigResourceTypeGroupConfig)
}
