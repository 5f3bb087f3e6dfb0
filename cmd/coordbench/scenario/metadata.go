package scenario

import (
	"context"
	"fmt"

	"github.com/coordinatord/coordinatord/cmd/coordbench/kconn"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { Register(metadata{}) }

// metadata: every client asks for cluster metadata with an empty topic list (brokers, cluster
// id, controller), which is what a client sends to discover the cluster. Asking for no topics
// keeps the answer the same size on every target: Kafka would list its internal topics.
type metadata struct{}

func (metadata) Name() string { return "metadata" }
func (metadata) Description() string {
	return "One operation is a Metadata request for no topics (brokers, cluster id, controller), " +
		"the request a client sends to discover the cluster; each client has its own connection " +
		"and one request in flight."
}
func (metadata) Needs() []int16        { return []int16{3} }
func (metadata) DefaultClients() []int { return []int{1, 8, 64} }

func (metadata) Setup(ctx context.Context, env *Env) (Instance, error) {
	conns, err := dialAll(ctx, env.Clients, func(ctx context.Context, i int) (*kconn.Conn, error) {
		return env.Dial(ctx, "", i)
	})
	if err != nil {
		return nil, err
	}
	return &metadataRun{env: env, conns: conns}, nil
}

type metadataRun struct {
	env   *Env
	conns []*kconn.Conn
}

func (m *metadataRun) Op(ctx context.Context, i int) error {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // empty, not null: null means every topic
	resp, err := m.conns[i].Request(ctx, req)
	if err != nil {
		return err
	}
	if r := resp.(*kmsg.MetadataResponse); len(r.Brokers) == 0 {
		return fmt.Errorf("metadata: no brokers in answer")
	}
	if i == 0 {
		m.env.Info.Version(req)
	}
	return nil
}

func (m *metadataRun) Teardown(context.Context) error {
	closeAll(m.conns)
	return nil
}
