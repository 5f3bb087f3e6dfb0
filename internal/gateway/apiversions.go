package gateway

import (
	"context"
	"sort"

	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// groupFeatures are the feature flags of protocols coordinatord implements itself; every port
// reports coordinatord's levels for them, and the upstream's for everything else (a client
// keeps the feature map of the node with the highest epoch, so all ports must agree).
var groupFeatures = map[string]bool{"group.version": true, "streams.version": true}

// maxTransactionVersion caps the finalized transaction.version clients are told: under version 2
// the group coordinator must add __consumer_offsets-N to the transaction upstream itself
// (AddPartitionsToTxn's broker form, CLUSTER_ACTION), which the marker relay does not do yet,
// and its outcome table is argued for version 1 only (docs/transactions.md). Clients then use
// AddOffsetsToTxn, TxnOffsetCommit v4 and EndTxn v4, all of which the relay sees.
const maxTransactionVersion = 1

// coordinatordFeatures are coordinatord's own group feature levels: streams groups and KIP-848
// consumer groups (group.version 1) are served.
var coordinatordFeatures = []struct {
	name     string
	min, max int16
	level    int16
}{{"group.version", 0, 1, 1}, {"streams.version", 0, 1, 1}}

// apiVersions answers on every port: coordinatord's ranges for the APIs it serves, and the
// upstream broker's ranges (of this port's broker; on coordinatord's own port, of every broker,
// since its forwarded requests may go to any) for the rest, capped at what the gateway's codec
// knows, without the APIs a client must never reach upstream.
func (p *portHandler) apiVersions(ctx context.Context, r *wire.Request) kmsg.Response {
	resp := p.g.opts.Local.Handle(ctx, r).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 {
		return resp // too new, or an invalid software name: the local answer is the right one
	}
	ups := p.g.upstreamVersions(p.node)
	if len(ups) == 0 {
		// Without an upstream answer the table would hold only the group APIs: a client that
		// cached it would find no Metadata, Produce or Fetch on this node and fail for good.
		// Closing makes it reconnect, by when the next refresh has asked the upstream.
		p.g.refresh()
		p.g.lg.Warn("closing connection: no upstream broker's ApiVersions known yet to advertise", zap.Int32("node_id", p.node))
		return nil
	}
	resp.ApiKeys = mergeVersions(resp.ApiKeys, ups)
	mergeFeatures(resp, ups[0], r.Version)
	return resp
}

// upstreamVersions are the ApiVersions answers a port advertises from: its broker's, or on
// coordinatord's own port every broker's. A broker whose answer is not known yet (it joined and
// did not answer the last refresh) advertises what every known broker serves, as coordinatord's
// own port does: its requests go to an upstream broker of the same cluster.
func (g *Gateway) upstreamVersions(node int32) []*kmsg.ApiVersionsResponse {
	view := g.View()
	if view == nil {
		return nil
	}
	if node >= 0 {
		if v := view.Versions[node]; v != nil {
			return []*kmsg.ApiVersionsResponse{v}
		}
		g.refresh()
	}
	var ups []*kmsg.ApiVersionsResponse
	for _, b := range view.Brokers {
		if v := view.Versions[b.NodeID]; v != nil {
			ups = append(ups, v)
		}
	}
	return ups
}

// mergeVersions builds the advertised table from the local one and the upstream answers.
func mergeVersions(local []kmsg.ApiVersionsResponseApiKey, ups []*kmsg.ApiVersionsResponse) []kmsg.ApiVersionsResponseApiKey {
	type span struct{ min, max int16 }
	byKey := map[int16]span{}
	for i, u := range ups {
		seen := map[int16]bool{}
		for _, k := range u.ApiKeys {
			if localKeys[k.ApiKey] || neverForwarded[k.ApiKey] || k.ApiKey == 10 {
				continue
			}
			req := kmsg.RequestForKey(k.ApiKey)
			if req == nil {
				continue // a key the gateway's codec does not know is never forwarded blind
			}
			s := span{k.MinVersion, min(k.MaxVersion, req.MaxVersion())}
			if m, ok := forwardMax[k.ApiKey]; ok {
				s.max = min(s.max, m)
			}
			if prev, ok := byKey[k.ApiKey]; ok {
				s = span{max(prev.min, s.min), min(prev.max, s.max)}
			} else if i > 0 {
				continue // not on every broker: not forwardable from coordinatord's own port
			}
			seen[k.ApiKey] = true
			byKey[k.ApiKey] = s
		}
		for k := range byKey {
			if !seen[k] {
				delete(byKey, k)
			}
		}
	}
	var out []kmsg.ApiVersionsResponseApiKey
	for _, k := range local {
		switch {
		case k.ApiKey == 10:
			// FindCoordinator: groups are answered here, transactions upstream; both must work.
			// An upstream maximum below coordinatord's minimum is no range at all (only a broken
			// upstream sends one): taking it would advertise min above max, which a client
			// cannot negotiate against.
			for _, u := range ups {
				for _, uk := range u.ApiKeys {
					if uk.ApiKey == 10 && uk.MaxVersion >= k.MinVersion {
						k.MaxVersion = min(k.MaxVersion, uk.MaxVersion)
					}
				}
			}
		case !localKeys[k.ApiKey]:
			continue // the local table's non-group APIs (Metadata, CreateTopics, ...) are upstream's here
		case withheld[k.ApiKey]:
			continue
		}
		out = append(out, k)
	}
	for key, s := range byKey {
		if s.min > s.max {
			continue
		}
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = key, s.min, s.max
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ApiKey < out[j].ApiKey })
	return out
}

// mergeFeatures reports the upstream broker's features with coordinatord's group features in
// place of the upstream's.
func mergeFeatures(resp *kmsg.ApiVersionsResponse, up *kmsg.ApiVersionsResponse, version int16) {
	resp.SupportedFeatures = resp.SupportedFeatures[:0]
	for _, f := range up.SupportedFeatures {
		if groupFeatures[f.Name] || (version < 4 && f.MinVersion == 0) {
			continue
		}
		resp.SupportedFeatures = append(resp.SupportedFeatures, f)
	}
	resp.FinalizedFeatures = resp.FinalizedFeatures[:0]
	for _, f := range up.FinalizedFeatures {
		if !groupFeatures[f.Name] {
			if f.Name == "transaction.version" {
				f.MinVersionLevel, f.MaxVersionLevel = min(f.MinVersionLevel, maxTransactionVersion), min(f.MaxVersionLevel, maxTransactionVersion)
			}
			resp.FinalizedFeatures = append(resp.FinalizedFeatures, f)
		}
	}
	for _, f := range coordinatordFeatures {
		if version >= 4 || f.min > 0 {
			sf := kmsg.NewApiVersionsResponseSupportedFeature()
			sf.Name, sf.MinVersion, sf.MaxVersion = f.name, f.min, f.max
			resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
		}
		if f.level > 0 {
			ff := kmsg.NewApiVersionsResponseFinalizedFeature()
			ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = f.name, f.level, f.level
			resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
		}
	}
	resp.FinalizedFeaturesEpoch = up.FinalizedFeaturesEpoch
}
