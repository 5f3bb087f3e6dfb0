package gateway

// An ACL change forwarded upstream (CreateAcls 30, DeleteAcls 31) applies on this node and on
// the other nodes (log.backend=kafka) at once, not at their next periodic read
// (upstream.acls.refresh.interval.ms): Kafka applies one on every broker within milliseconds,
// and a revoked permission that stays in force for the interval is a hole. The answer is held
// until this node has read the upstream's ACLs again and every other node has said it did,
// each within aclChangeWaitMax; a node that cannot be told is logged and counted, and keeps
// the change's effect for its next periodic read.
//
// The notice is a DescribeAcls (naming the cluster resource) sent to the other node's own
// listener under PeerForwardClientID over the peer connections: the node receiving it checks
// DESCRIBE on CLUSTER, as for any DescribeAcls (coordinatord's own principal has it upstream,
// since its ACL reads need it), reads the upstream's ACLs again and answers once it has.

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/coordinatord/coordinatord/internal/acl"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// aclChangeWaitMax bounds how long a CreateAcls/DeleteAcls answer is held for the nodes' reads.
const aclChangeWaitMax = 5 * time.Second

// isACLsNotice reports whether a request on a port is another node's notice of an ACL change.
func (p *portHandler) isACLsNotice(key int16, clientID string) bool {
	return key == 29 && p.node < 0 && clientID == PeerForwardClientID && p.g.opts.ACLsReread != nil
}

// aclsNotice answers another node's notice: authorized as a DescribeAcls (the local table's
// answer), then the upstream's ACLs are read again before the answer goes back.
func (p *portHandler) aclsNotice(ctx context.Context, r *wire.Request) kmsg.Response {
	resp := p.g.opts.Local.Handle(ctx, r)
	dr, ok := resp.(*kmsg.DescribeACLsResponse)
	if !ok || dr.ErrorCode != 0 {
		return resp
	}
	dr.Resources = nil
	if err := p.g.opts.ACLsReread(ctx); err != nil {
		msg := err.Error()
		dr.ErrorCode, dr.ErrorMessage = kerr.UnknownServerError.Code, &msg
	}
	return dr
}

// changedACLs reports whether a CreateAcls/DeleteAcls answer says that something changed.
func changedACLs(h wire.Header, frame []byte) bool {
	resp := kmsg.ResponseForKey(h.Key)
	resp.SetVersion(h.Version)
	bodyAt := 8
	if resp.IsFlexible() {
		var err error
		if bodyAt, err = headerEnd(frame); err != nil {
			return true // unreadable: reading again costs less than missing a revocation
		}
	}
	if len(frame) < bodyAt || resp.ReadFrom(frame[bodyAt:]) != nil {
		return true
	}
	switch r := resp.(type) {
	case *kmsg.CreateACLsResponse:
		for _, x := range r.Results {
			if x.ErrorCode == 0 {
				return true
			}
		}
	case *kmsg.DeleteACLsResponse:
		for _, x := range r.Results {
			for _, m := range x.MatchingACLs {
				if x.ErrorCode == 0 && m.ErrorCode == 0 {
					return true
				}
			}
		}
	}
	return false
}

// afterACLChange holds a forwarded CreateAcls/DeleteAcls answer that changed something until
// this node and every other node have read the upstream's ACLs again (or aclChangeWaitMax).
func (g *Gateway) afterACLChange(ctx context.Context, h wire.Header, frame []byte) {
	if g.opts.ACLsReread == nil || h.ClientID == PeerForwardClientID || !changedACLs(h, frame) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, aclChangeWaitMax)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := g.opts.ACLsReread(ctx); err != nil {
			g.opts.Metrics.aclNotice("self", "failed")
			g.lg.Warn("could not read the upstream cluster's ACLs after an ACL change; the last ones read stay in force until the next read",
				zap.String("api", apiName(h.Key)), zap.Error(err))
			return
		}
		g.opts.Metrics.aclNotice("self", "applied")
	}()
	if g.opts.Peers != nil && g.opts.PeerRequest != nil {
		for _, peer := range g.opts.Peers() {
			if peer.ID == g.opts.NodeID {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := g.tellACLsChanged(ctx, peer)
				if err != nil {
					g.opts.Metrics.aclNotice("peer", "failed")
					g.lg.Warn("could not tell another node of an ACL change; it applies the change at its next periodic read (upstream.acls.refresh.interval.ms)",
						zap.Int32("node", peer.ID), zap.String("api", apiName(h.Key)), zap.Error(err))
					return
				}
				g.opts.Metrics.aclNotice("peer", "applied")
			}()
		}
	}
	wg.Wait()
}

var errMalformedNotice = errors.New("malformed answer to an ACL change notice")

func (g *Gateway) tellACLsChanged(ctx context.Context, peer Peer) error {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.Version = 1
	req.ResourceType = kmsg.ACLResourceTypeCluster
	name := acl.ClusterName
	req.ResourceName = &name
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	out, err := g.opts.PeerRequest(ctx, peer, req)
	if err != nil {
		return err
	}
	resp, ok := out.(*kmsg.DescribeACLsResponse)
	if !ok {
		return errMalformedNotice
	}
	if resp.ErrorCode != 0 {
		err := kerr.ErrorForCode(resp.ErrorCode)
		if resp.ErrorMessage != nil {
			return errors.Join(err, errors.New(*resp.ErrorMessage))
		}
		return err
	}
	return nil
}
