package gateway

import (
	"strings"
	"testing"

	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The forwarding path reads a few fields of client requests in place, without decoding them
// (forward.go, route.go): Produce's acks and timeout (on the head of a frame whose batches
// are still on the socket), Fetch's max wait, FindCoordinator's key type. Each must agree
// with kmsg wherever kmsg reads the request, on a whole frame and on any head of it, and no
// request a client can send may make them panic.

// readRequestKeys are the requests a built target makes: those read in place.
var readRequestKeys = []int16{0, 1, 10}

func buildRequest(key, v int16, s *shape) kmsg.Request {
	switch key {
	case 0:
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(v)
		req.TransactionID, req.Acks, req.TimeoutMillis = s.nullableString(10), s.int16(), s.int32()
		for nt := s.intn(3); nt > 0; nt-- {
			topic := kmsg.NewProduceRequestTopic()
			topic.Topic, topic.TopicID[0] = s.string(8), s.byte()
			for np := s.intn(3); np > 0; np-- {
				p := kmsg.NewProduceRequestTopicPartition()
				p.Partition, p.Records, p.UnknownTags = int32(s.intn(64)), s.bytes(40), s.tags()
				topic.Partitions = append(topic.Partitions, p)
			}
			req.Topics = append(req.Topics, topic)
		}
		req.UnknownTags = s.tags()
		return req
	case 1:
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(v)
		req.ClusterID, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = s.nullableString(6), s.int32(), s.int32(), s.int32(), s.int32()
		if s.bool() {
			req.ReplicaState.ID, req.ReplicaState.Epoch = s.int32(), s.int64()
		}
		req.IsolationLevel, req.SessionID, req.SessionEpoch = int8(s.intn(2)), s.int32(), s.int32()
		for nt := s.intn(3); nt > 0; nt-- {
			topic := kmsg.NewFetchRequestTopic()
			topic.Topic, topic.TopicID[0] = s.string(8), s.byte()
			for np := s.intn(3); np > 0; np-- {
				p := kmsg.NewFetchRequestTopicPartition()
				p.Partition, p.FetchOffset, p.PartitionMaxBytes = int32(s.intn(64)), s.int64(), s.int32()
				topic.Partitions = append(topic.Partitions, p)
			}
			req.Topics = append(req.Topics, topic)
		}
		req.Rack, req.UnknownTags = s.string(6), s.tags()
		return req
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.SetVersion(v)
	req.CoordinatorKey, req.CoordinatorType = s.string(10), int8(s.intn(3))
	for nk := s.intn(3); nk > 0; nk-- {
		req.CoordinatorKeys = append(req.CoordinatorKeys, s.string(6))
	}
	req.UnknownTags = s.tags()
	return req
}

// fuzzPort is upstream node 1's port of a fuzzGateway whose local table decodes every
// request (configsLocal asks it) and answers DescribeConfigs.
func fuzzPort(tb testing.TB) *portHandler {
	g := fuzzGateway(tb)
	g.opts.Local = describeConfigsLocal{}
	return &portHandler{g: g, node: 1}
}

// checkRequestReaders runs every in-place request reader on frame (and the port's forwarding
// decisions, which call them) and, where kmsg reads the whole frame, holds them to kmsg's
// values, on the frame and on each head of it.
func checkRequestReaders(t *testing.T, p *portHandler, frame []byte) {
	h, rest, err := wire.ParseHeader(frame)
	if err != nil {
		if acks, timeout := produceAcksTimeout(0, frame); acks != -2 || timeout != 0 {
			t.Fatalf("acks %d and timeout %d read from a frame without a header", acks, timeout)
		}
		return
	}
	acks, timeout := produceAcksTimeout(h.Version, frame)
	wait := requestWaitMs(h, frame)
	keyType := findCoordinatorKeyType(h.Version, rest)
	_ = validateOnly(h, frame)
	_ = listConfigResourcesLocal(h, rest)
	_ = p.Forwards(nil, h, rest)
	_ = p.ForwardsBody(nil, h, frame)
	if relayKeys[h.Key] {
		_, _ = parseRelayed(h, frame) // as around calls it: for the relayed keys only
	}

	req := kmsg.RequestForKey(h.Key)
	if req == nil || h.Version < 0 || h.Version > req.MaxVersion() {
		return // never forwarded: the wire server closes the connection
	}
	req.SetVersion(h.Version)
	body := rest
	if req.IsFlexible() {
		if body, err = wire.SkipHeaderTags(rest); err != nil {
			return
		}
	}
	if req.ReadFrom(body) != nil {
		return // a request kmsg refuses is the broker's to refuse; the readers only must not panic
	}
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		if acks != r.Acks || timeout != r.TimeoutMillis || wait != r.TimeoutMillis {
			t.Fatalf("Produce v%d: read acks %d, timeout %d, wait %d; kmsg reads acks %d, timeout %d",
				h.Version, acks, timeout, wait, r.Acks, r.TimeoutMillis)
		}
		for cut := range len(frame) {
			// ForwardsBody reads a head whose batches are still on the socket.
			if a, to := produceAcksTimeout(h.Version, frame[:cut]); (a != -2 || to != 0) && (a != r.Acks || to != r.TimeoutMillis) {
				t.Fatalf("Produce v%d: the first %d bytes read as acks %d, timeout %d; the frame has %d, %d",
					h.Version, cut, a, to, r.Acks, r.TimeoutMillis)
			}
		}
	case *kmsg.FetchRequest:
		if wait != r.MaxWaitMillis {
			t.Fatalf("Fetch v%d: read max wait %d; kmsg reads %d", h.Version, wait, r.MaxWaitMillis)
		}
		for cut := range len(frame) {
			if w := requestWaitMs(h, frame[:cut]); w != 0 && w != r.MaxWaitMillis {
				t.Fatalf("Fetch v%d: the first %d bytes read as max wait %d; the frame has %d", h.Version, cut, w, r.MaxWaitMillis)
			}
		}
	case *kmsg.FindCoordinatorRequest:
		if keyType != r.CoordinatorType {
			t.Fatalf("FindCoordinator v%d: read key type %d; kmsg reads %d", h.Version, keyType, r.CoordinatorType)
		}
	}
}

// FuzzRequestReaders: any request frame, kmsg's encodings of every key the gateway reads
// requests of as seeds.
func FuzzRequestReaders(f *testing.F) {
	id := "client"
	for _, key := range []int16{0, 1, 10, 19, 20, 22, 24, 25, 26, 37, 74, 32} {
		for v := int16(0); v <= kmsg.RequestForKey(key).MaxVersion(); v++ {
			var req kmsg.Request
			if key == 0 || key == 1 || key == 10 {
				req = buildRequest(key, v, &shape{[]byte{1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}})
			} else {
				req = kmsg.RequestForKey(key)
				req.SetVersion(v)
			}
			f.Add(fuzzRequestFrame(int32(v), &id, []byte{0}, req))
		}
	}
	f.Add([]byte{0, 0, 0, 9, 0, 0, 0, 1, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 1, 0, 12, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f})
	p := fuzzPort(f)
	f.Fuzz(func(t *testing.T, frame []byte) { checkRequestReaders(t, p, frame) })
}

// FuzzRequestReadersBuilt: requests kmsg builds from fuzzed fields, at every version kmsg
// knows, with or without a client id and header tags.
func FuzzRequestReadersBuilt(f *testing.F) {
	f.Add(uint8(0), uint8(9), []byte{})
	f.Add(uint8(0), uint8(3), []byte{1, 7, 7, 7, 0, 1, 0, 0, 3, 0xe8})
	f.Add(uint8(1), uint8(15), []byte{1, 0, 0, 0, 0, 1, 0, 0, 1, 0xf4})
	f.Add(uint8(2), uint8(4), []byte{3, 2, 1})
	p := fuzzPort(f)
	f.Fuzz(func(t *testing.T, keyPick, versionPick uint8, spec []byte) {
		key := readRequestKeys[int(keyPick)%len(readRequestKeys)]
		v := int16(versionPick) % (kmsg.RequestForKey(key).MaxVersion() + 1)
		s := &shape{spec}
		clientID := s.nullableString(8)
		hdr := s.headerTags()
		req := buildRequest(key, v, s)
		frame := fuzzRequestFrame(9, clientID, hdr, req)
		// The frame must be one kmsg reads, or the differential below checks nothing.
		h, rest, err := wire.ParseHeader(frame)
		if err != nil {
			t.Fatal(err)
		}
		if req.IsFlexible() {
			if rest, err = wire.SkipHeaderTags(rest); err != nil {
				t.Fatal(err)
			}
		}
		back := kmsg.RequestForKey(h.Key)
		back.SetVersion(h.Version)
		if err := back.ReadFrom(rest); err != nil {
			t.Fatalf("kmsg does not read back its own %s v%d: %v", kmsg.NameForKey(key), v, err)
		}
		checkRequestReaders(t, p, frame)
	})
}

// FuzzClaimedUser: the user a relayed SASL login's first client message names (sasl_relay.go)
// is read from any bytes without a panic, and PLAIN and SCRAM messages built around a fuzzed
// user (SCRAM's with and without an authzid, "=" and "," escaped) give that user back.
func FuzzClaimedUser(f *testing.F) {
	f.Add("PLAIN", []byte("\x00alice\x00secret"), "alice", "")
	f.Add("SCRAM-SHA-256", []byte("n,,n=alice,r=abc"), "a=b,c", "admin")
	f.Add("SCRAM-SHA-512", []byte("p=tls-unique,a=x,n=al=2Cice,r=1"), "=2C", "")
	f.Fuzz(func(t *testing.T, mechanism string, msg []byte, user, authzid string) {
		_, _ = claimedUser(mechanism, msg)
		if user == "" {
			return
		}
		if !strings.Contains(user, "\x00") && !strings.Contains(authzid, "\x00") {
			if got, ok := claimedUser("PLAIN", []byte(authzid+"\x00"+user+"\x00secret")); !ok || got != user {
				t.Fatalf("PLAIN names %q, read %q (%v)", user, got, ok)
			}
		}
		escape := strings.NewReplacer("=", "=3D", ",", "=2C")
		gs2 := "n,,"
		if authzid != "" {
			gs2 = "y,a=" + escape.Replace(authzid) + ","
		}
		if got, ok := claimedUser("SCRAM-SHA-256", []byte(gs2+"n="+escape.Replace(user)+",r=nonce")); !ok || got != user {
			t.Fatalf("SCRAM names %q, read %q (%v)", user, got, ok)
		}
	})
}
