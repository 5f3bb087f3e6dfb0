package gateway

import (
	"context"
	"fmt"
	"strconv"

	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kbin"
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
		return p.g.opts.Local.Handle(ctx, r)
	}
	localReq, upReq := splitRequest(r.Body, local)
	localResp := p.g.opts.Local.Handle(ctx, &wire.Request{Header: r.Header, Body: localReq, Conn: r.Conn})
	upResp, err := p.forwardRequest(ctx, r, upReq)
	if err != nil {
		p.g.lg.Warn("config request: upstream part failed", zap.Error(err))
		return nil
	}
	return mergeResponses(r.Body, localResp, upResp, local)
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
