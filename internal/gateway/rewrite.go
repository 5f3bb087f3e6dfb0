package gateway

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rewrite replaces every upstream address in a forwarded answer with the gateway listener of
// the same node id (rack kept), and adds coordinatord to broker lists. Answers that name no
// broker are returned as they are, without a copy.
//
// Leader hints are a top-level tag 0, which Kafka sends from Produce v10 and Fetch v16 on; but a
// client's decoder (franz-go's) reads that tag as hints at every flexible version, so answers
// are rewritten from Produce v9 and Fetch v12: an upstream that sent the tag early would
// otherwise hand the client an upstream address.
func (g *Gateway) rewrite(h wire.Header, frame []byte) ([]byte, error) {
	return g.rewriteSeeing(h, frame, nil)
}

// rewriteSeeing is rewrite that also hands a decoded Metadata answer to seen (when not nil), so
// that a look at its topics costs no second decode.
func (g *Gateway) rewriteSeeing(h wire.Header, frame []byte, seen func(*kmsg.MetadataResponse)) ([]byte, error) {
	if len(frame) < 8 {
		// roundTrip never reads one (it refuses sizes under 4): a caller's slip, not a panic.
		return nil, errors.New("short response frame")
	}
	switch {
	case h.Key == 3, h.Key == 60, h.Key == 10:
	case h.Key == 0 && h.Version >= 9:
		if !produceHasTopLevelTags(h.Version, frame) {
			// Every acknowledged Produce passes here: decoding the whole answer with kmsg to
			// find it names no broker was 3-4% of a 1 KiB Produce's CPU in the gateway.
			return frame, nil
		}
	case h.Key == 1 && h.Version >= 12:
		return g.rewriteFetch(h, frame)
	default:
		return frame, nil
	}
	resp := kmsg.ResponseForKey(h.Key)
	resp.SetVersion(h.Version)
	bodyAt := 8
	if resp.IsFlexible() {
		var err error
		if bodyAt, err = headerEnd(frame); err != nil {
			return nil, err
		}
	}
	if err := resp.ReadFrom(frame[bodyAt:]); err != nil {
		return nil, err
	}
	changed := true
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		if seen != nil {
			seen(r)
		}
		r.Brokers = g.rewriteMetadataBrokers(r.Brokers)
	case *kmsg.DescribeClusterResponse:
		r.Brokers = g.rewriteClusterBrokers(r.Brokers)
	case *kmsg.FindCoordinatorResponse:
		g.rewriteCoordinators(r)
	case *kmsg.ProduceResponse:
		changed = len(r.Brokers) > 0
		r.Brokers = g.rewriteProduceBrokers(r.Brokers)
	}
	if !changed {
		return frame, nil
	}
	out := append(make([]byte, 0, len(frame)+64), frame[:bodyAt]...)
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out, nil
}

func (g *Gateway) self() (host string, port int32) { return g.opts.SelfHost, g.opts.SelfPort }

func (g *Gateway) rewriteMetadataBrokers(in []kmsg.MetadataResponseBroker) []kmsg.MetadataResponseBroker {
	if len(in) == 0 {
		// Kafka's answer to a request it refuses whole (a topic id before v12) lists no
		// brokers; listing coordinatord would make it look like a cluster view.
		return in
	}
	out := in[:0]
	for _, b := range in {
		host, port, ok := g.address(b.NodeID)
		if !ok {
			continue // never leak an address the client cannot be given a listener for
		}
		b.Host, b.Port = host, port
		out = append(out, b)
	}
	for _, p := range g.nodes() {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = p.ID, p.Host, p.Port
		out = append(out, b)
	}
	return out
}

// nodes are the coordinatord nodes a broker list shows: this one first, then the others.
func (g *Gateway) nodes() []Peer {
	var out []Peer
	unlisted := g.opts.Unlisted != nil && g.opts.Unlisted()
	if !unlisted {
		self := Peer{ID: g.opts.NodeID}
		self.Host, self.Port = g.self()
		out = append(out, self)
	}
	if g.opts.Peers == nil {
		return out
	}
	for _, p := range g.opts.Peers() {
		if unlisted || p.ID != g.opts.NodeID {
			out = append(out, p)
		}
	}
	return out
}

func (g *Gateway) rewriteClusterBrokers(in []kmsg.DescribeClusterResponseBroker) []kmsg.DescribeClusterResponseBroker {
	if len(in) == 0 {
		return in // an error answer (MISMATCHED_ENDPOINT_TYPE...) lists no brokers
	}
	out := in[:0]
	for _, b := range in {
		host, port, ok := g.address(b.NodeID)
		if !ok {
			continue
		}
		b.Host, b.Port = host, port
		out = append(out, b)
	}
	for _, p := range g.nodes() {
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port = p.ID, p.Host, p.Port
		out = append(out, b)
	}
	return out
}

// rewriteCoordinators rewrites transaction coordinators; Kafka's error shape (-1, "", -1) is
// left alone. A coordinator no listener can be bound for is answered in that shape with
// COORDINATOR_NOT_AVAILABLE, which clients retry, rather than with its upstream address.
func (g *Gateway) rewriteCoordinators(r *kmsg.FindCoordinatorResponse) {
	if r.Version < 4 {
		if r.ErrorCode == 0 && r.NodeID >= 0 {
			if host, port, ok := g.address(r.NodeID); ok {
				r.Host, r.Port = host, port
			} else {
				r.ErrorCode, r.NodeID, r.Host, r.Port = kerr.CoordinatorNotAvailable.Code, -1, "", -1
			}
		}
		return
	}
	for i := range r.Coordinators {
		c := &r.Coordinators[i]
		if c.ErrorCode == 0 && c.NodeID >= 0 {
			if host, port, ok := g.address(c.NodeID); ok {
				c.Host, c.Port = host, port
			} else {
				c.ErrorCode, c.NodeID, c.Host, c.Port = kerr.CoordinatorNotAvailable.Code, -1, "", -1
			}
		}
	}
}

func (g *Gateway) rewriteProduceBrokers(in []kmsg.ProduceResponseBroker) []kmsg.ProduceResponseBroker {
	out := in[:0]
	for _, b := range in {
		if host, port, ok := g.address(b.NodeID); ok {
			b.Host, b.Port = host, port
			out = append(out, b)
		}
	}
	return out
}

// produceHasTopLevelTags walks a flexible Produce answer frame to its top-level tagged fields,
// where NodeEndpoints (the leader hints, KIP-951) sit, and says whether there are any; true too
// when the frame cannot be walked, so that kmsg decodes it (and reports what is wrong). The
// partitions' CurrentLeader (an id and an epoch, no address) is skipped as an unknown tag.
func produceHasTopLevelTags(version int16, frame []byte) bool {
	bodyAt, err := headerEnd(frame)
	if err != nil {
		return true
	}
	b := kbin.Reader{Src: frame[bodyAt:]}
	topics := b.CompactArrayLen()
	for i := int32(0); i < topics && b.Ok(); i++ {
		if version >= 13 {
			b.Uuid()
		} else {
			skipCompactString(&b) // topic name
		}
		parts := b.CompactArrayLen()
		for j := int32(0); j < parts && b.Ok(); j++ {
			b.Span(4 + 2 + 8 + 8 + 8) // partition, error, base offset, log append time, log start
			records := b.CompactArrayLen()
			for k := int32(0); k < records && b.Ok(); k++ {
				b.Int32() // batch index
				skipCompactString(&b)
				skipTags(&b)
			}
			skipCompactString(&b) // error message
			skipTags(&b)
		}
		skipTags(&b)
	}
	b.Int32() // ThrottleMillis
	return !b.Ok() || len(b.Src) != 1 || b.Src[0] != 0
}

// rewriteFetch rewrites the leader hints (NodeEndpoints, KIP-951) of a flexible Fetch answer. They
// are the answer's last field, a top-level tag after every record set, so the records are
// walked over by their length prefixes and never decoded; an answer without hints (the
// common case) is returned as it came.
func (g *Gateway) rewriteFetch(h wire.Header, frame []byte) ([]byte, error) {
	bodyAt, err := headerEnd(frame)
	if err != nil {
		return nil, err
	}
	body := frame[bodyAt:]
	headLen, tailAt, err := fetchTail(h.Version, body)
	if err != nil {
		return nil, err
	}
	if tailAt == len(body)-1 && body[tailAt] == 0 {
		return frame, nil // no tagged fields: nothing names a broker
	}
	// Decode the head and the tail alone, as an answer with no topics, with kmsg.
	synthetic := append(append(append(make([]byte, 0, headLen+1+len(body)-tailAt), body[:headLen]...), 1), body[tailAt:]...)
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(h.Version)
	if err := resp.ReadFrom(synthetic); err != nil {
		return nil, err
	}
	out := resp.Brokers[:0]
	for _, b := range resp.Brokers {
		if host, port, ok := g.address(b.NodeID); ok {
			b.Host, b.Port = host, port
			out = append(out, b)
		}
	}
	resp.Brokers = out
	encoded := resp.AppendTo(nil)
	newTail := encoded[headLen+1:]
	res := make([]byte, 0, bodyAt+tailAt+len(newTail))
	res = append(append(res, frame[:bodyAt+tailAt]...), newTail...)
	binary.BigEndian.PutUint32(res, uint32(len(res)-4))
	return res, nil
}

// fetchTail walks a flexible (v12+) Fetch answer body and returns the length of its head
// (throttle, error code, session id) and where its top-level tagged fields start.
func fetchTail(version int16, body []byte) (headLen, tailAt int, err error) {
	b := kbin.Reader{Src: body}
	b.Int32() // ThrottleMillis
	b.Int16() // ErrorCode
	b.Int32() // SessionID
	headLen = len(body) - len(b.Src)
	topics := b.CompactArrayLen()
	for i := int32(0); i < topics && b.Ok(); i++ {
		if version >= 13 {
			b.Uuid()
		} else {
			skipCompactString(&b) // topic name
		}
		parts := b.CompactArrayLen()
		for j := int32(0); j < parts && b.Ok(); j++ {
			b.Span(4 + 2 + 8 + 8 + 8) // partition, error, high watermark, last stable, log start
			aborted := b.CompactArrayLen()
			for k := int32(0); k < aborted && b.Ok(); k++ {
				b.Span(16)
				skipTags(&b)
			}
			b.Int32() // preferred read replica
			// Record batches: compact nullable bytes (length+1, 0 for null), never decoded.
			if n := int(b.Uvarint()); n > 1 {
				b.Span(n - 1)
			}
			skipTags(&b)
		}
		skipTags(&b)
	}
	if !b.Ok() {
		return 0, 0, fmt.Errorf("truncated fetch response")
	}
	return headLen, len(body) - len(b.Src), nil
}

// headerEnd is where the body of a flexible (header v1) response frame starts: after the size,
// the correlation id and the header's tagged fields. Kafka sends none today, but a client
// ignores the ones it does not know, so they are passed on rather than refused.
func headerEnd(frame []byte) (int, error) {
	if len(frame) < 9 {
		return 0, errors.New("short response frame")
	}
	b := kbin.Reader{Src: frame[8:]}
	skipTags(&b)
	if !b.Ok() {
		return 0, errors.New("truncated response header tags")
	}
	return len(frame) - len(b.Src), nil
}

// skipCompactString steps over a compact (nullable) string without allocating it.
func skipCompactString(b *kbin.Reader) {
	if n := int(b.Uvarint()); n > 1 {
		b.Span(n - 1)
	}
}

func skipTags(b *kbin.Reader) {
	for n := b.Uvarint(); n > 0 && b.Ok(); n-- {
		b.Uvarint()
		b.Span(int(b.Uvarint()))
	}
}
