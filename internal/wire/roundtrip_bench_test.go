package wire

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// commitHandler answers every OffsetCommit with one topic of ten partitions, one of them failed,
// so the error-code metrics have something to count.
type commitHandler struct{}

func (commitHandler) NewRequest(key, version int16) (kmsg.Request, bool, bool) {
	req := kmsg.RequestForKey(key)
	return req, true, req != nil
}

func (commitHandler) Handle(_ context.Context, r *Request) kmsg.Response {
	req := r.Body.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			if p.Partition == 9 {
				rp.ErrorCode = 3
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// BenchmarkRequestRoundTrip is one OffsetCommit (v8, ten partitions) written by a client and
// answered by the connection loop over an in-memory connection: frame read, header and body
// decode, handler, metrics, response encode and write.
func BenchmarkRequestRoundTrip(b *testing.B) {
	srv := NewServer(Options{MaxRequestBytes: 1 << 20}, commitHandler{})
	client, server := net.Pipe()
	srv.startConn(server)
	defer func() {
		client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()

	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group = "g"
	req.Generation = -1
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = "orders"
	for p := int32(0); p < 10; p++ {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, int64(p)*100
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	body := req.AppendTo(nil)
	frame := []byte{0, 0, 0, 0, 0, 8, 0, 8, 0, 0, 0, 1, 0, 1, 'c', 0} // key 8 v8, corr 1, client "c", no tags
	frame = append(frame, body...)
	frame[3] = byte(len(frame) - 4)
	frame[2] = byte((len(frame) - 4) >> 8)

	br := bufio.NewReader(client)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := client.Write(frame); err != nil {
			b.Fatal(err)
		}
		if _, err := ReadFrame(br, 1<<20); err != nil {
			b.Fatal(err)
		}
	}
}
