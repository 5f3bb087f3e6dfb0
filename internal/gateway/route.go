package gateway

import (
	"context"
	"io"
	"time"

	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// localKeys are the APIs coordinatord answers itself on every port: the group APIs, and
// ApiVersions, which every port answers for itself.
var localKeys = map[int16]bool{
	8: true, 9: true, 11: true, 12: true, 13: true, 14: true, 15: true, 16: true, 18: true,
	28: true, 42: true, 47: true, 68: true, 69: true, 88: true, 89: true, 93: true,
}

// neverForwarded are the broker-to-broker, controller and privileged APIs (spec gateway §2),
// and the share-group APIs, which cannot work when coordinatord is every group's coordinator.
// A client that sends one anyway has its connection closed, as a Kafka broker listener does for
// a key it does not serve; WriteTxnMarkers is coordinatord's own (the table answers it).
var neverForwarded = map[int16]bool{
	4: true, 5: true, 6: true, 7: true, 27: true, 52: true, 53: true, 54: true, 56: true, 58: true,
	59: true, 62: true, 63: true, 67: true, 70: true, 73: true, 82: true,
	76: true, 77: true, 78: true, 79: true, 83: true, 84: true, 85: true, 86: true, 87: true,
	90: true, 91: true, 92: true,
}

// withheld are APIs coordinatord serves standalone but not in gateway mode: none since the
// gateway relays transaction outcomes to staged offsets (txnrelay.go). Not advertising a key
// makes a client fail at once with "The node does not support ...".
var withheld = map[int16]bool{}

// forwardMax caps forwarded keys below the upstream's maximum where the gateway's rules differ
// from the codec's: AddPartitionsToTxn v4+ is the broker-only form; DescribeQuorum v2+ lists
// the KRaft controllers' host and port (Nodes[].Listeners), upstream addresses no gateway port
// stands for, which no answer may carry (spec gateway §0 item 3). v1 names the same voters and
// observers by id. EndTxn v5+ is transaction version 2, which the gateway does not advertise
// (maxTransactionVersion).
var forwardMax = map[int16]int16{24: 3, 26: 4, 55: 1}

// portHandler serves one listener: coordinatord's own (node -1) or an upstream broker's.
type portHandler struct {
	g    *Gateway
	node int32
}

var (
	_ wire.Handler       = (*portHandler)(nil)
	_ wire.BodyForwarder = (*portHandler)(nil)
)

func (p *portHandler) NewRequest(key, version int16) (kmsg.Request, bool, bool) {
	if withheld[key] {
		return nil, false, false // not advertised: the connection closes, as for any unserved key
	}
	if p.node < 0 && ownNodeKeys[key] {
		req, ok := ownNodeRequest(key, version)
		return req, ok, ok
	}
	return p.g.opts.Local.NewRequest(key, version)
}

func (p *portHandler) Handle(ctx context.Context, r *wire.Request) kmsg.Response {
	switch r.Key {
	case 18:
		return p.apiVersions(ctx, r)
	case 16:
		if p.node >= 0 {
			// Admin clients ask every broker and concatenate: only coordinatord's own port
			// lists the groups, so each is listed once.
			resp := r.Body.ResponseKind().(*kmsg.ListGroupsResponse)
			resp.SetVersion(r.Version)
			return resp
		}
	case 32, 33, 44:
		return p.splitConfigs(ctx, r)
	case 74:
		return p.listConfigResources(ctx, r)
	case 35, 66:
		if p.node < 0 {
			return p.ownNode(r)
		}
	case 17, 36:
		if r.Conn.SASLRequired() {
			return p.relaySASL(ctx, r)
		}
		// A listener without SASL: the table answers ILLEGAL_SASL_STATE, as Kafka does.
	case 29:
		if p.isACLsNotice(r.Key, r.ClientID) {
			return p.aclsNotice(ctx, r)
		}
	case 28:
		if p.g.relay != nil {
			return p.g.relay.txnOffsetCommit(ctx, r, p.g.opts.Local)
		}
	}
	return p.g.opts.Local.Handle(ctx, r)
}

// Forwards decides per request: group APIs and ApiVersions stay; FindCoordinator stays for
// groups and goes upstream for transactions; config requests naming a GROUP resource or
// coordinatord's BROKER resource stay (and are split, configs.go); the never-forwarded keys stay (and are refused);
// everything else goes to the upstream broker of this port.
func (p *portHandler) Forwards(c *wire.Conn, h wire.Header, rest []byte) bool {
	switch {
	case localKeys[h.Key], neverForwarded[h.Key], h.Key == 17, h.Key == 36:
		// SaslHandshake and SaslAuthenticate are relayed (sasl_relay.go) or refused, never
		// passed on as bytes: the connection's SASL state must follow them.
		return false
	case ownNodeKeys[h.Key] && p.node < 0, p.isACLsNotice(h.Key, h.ClientID):
		return false
	case h.Key == 10:
		return findCoordinatorKeyType(h.Version, rest) == 1
	case configKeys[h.Key]:
		return !p.configsLocal(h, rest)
	case h.Key == 74:
		return !listConfigResourcesLocal(h, rest)
	}
	if max, ok := forwardMax[h.Key]; ok && h.Version > max {
		return false
	}
	return h.Version <= requestMaxVersion(h.Key)
}

// maxVersions is kmsg's highest version of each request key, -1 for a key it does not know:
// looked up per forwarded request, where building a request of the key to ask it (a
// ProduceRequest for every Produce) was an allocation on the hot path.
var maxVersions = func() []int16 {
	var v []int16
	for k := int16(0); k <= 512; k++ {
		req := kmsg.RequestForKey(k)
		if req == nil {
			v = append(v, -1)
			continue
		}
		v = append(v, req.MaxVersion())
	}
	return v
}()

func requestMaxVersion(key int16) int16 {
	if key < 0 || int(key) >= len(maxVersions) {
		return -1
	}
	return maxVersions[key]
}

func (p *portHandler) Forward(ctx context.Context, c *wire.Conn, h wire.Header, frame []byte, reserve func(int) error) ([]byte, error) {
	return p.g.forward(ctx, p.node, c, h, frame, reserve)
}

// ForwardsBody takes Produce requests whose acks and timeout head holds (what forwarding
// reads of one before sending it on): their batches go from the client's socket to the
// upstream's without entering coordinatord's memory.
func (p *portHandler) ForwardsBody(c *wire.Conn, h wire.Header, head []byte) bool {
	if h.Key != 0 {
		return false
	}
	_, rest, err := wire.ParseHeader(head)
	if err != nil || !p.Forwards(c, h, rest) {
		return false
	}
	acks, _ := produceAcksTimeout(h.Version, head)
	return acks != -2
}

func (p *portHandler) ForwardBody(ctx context.Context, c *wire.Conn, h wire.Header, head []byte, body *io.LimitedReader, reserve func(int) error) ([]byte, error) {
	return p.g.forwardFrame(ctx, p.node, c, h, head, body, reserve)
}

func (p *portHandler) Release(c *wire.Conn, frame []byte, read, written time.Time) {
	if !written.IsZero() {
		p.g.observeAdded(c, read, written)
	}
	putBuffer(frame)
}

func (p *portHandler) Closed(c *wire.Conn) { p.g.closeConn(c) }

// findCoordinatorKeyType reads KeyType from a FindCoordinator request body (v1+; v0 is always
// a group), skipping the header's tagged fields first for flexible versions.
func findCoordinatorKeyType(version int16, rest []byte) int8 {
	if version < 1 {
		return 0
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.SetVersion(version)
	if req.IsFlexible() {
		var err error
		if rest, err = wire.SkipHeaderTags(rest); err != nil {
			return 0
		}
	}
	b := kbin.Reader{Src: rest}
	if version <= 3 {
		if version >= 3 {
			_ = b.CompactString()
		} else {
			_ = b.String()
		}
	}
	kt := b.Int8()
	if !b.Ok() {
		return 0
	}
	return kt
}
