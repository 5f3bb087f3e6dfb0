package gateway

import (
	"testing"

	"github.com/coordinatord/coordinatord/internal/upstream"
)

// An upstream broker with coordinatord's node.id would be two nodes under one id to clients
// (broker lists, coordinators, leader hints): the view is refused, nothing is bound for it, and
// the start fails with a message saying which broker clashes. A view without a clash is taken.
func TestUpstreamBrokerWithCoordinatordsNodeIDIsRefused(t *testing.T) {
	g := testGateway(t) // node.id 100
	clash := &upstream.View{Brokers: []upstream.Broker{{NodeID: 1, Host: "kafka-1", Port: 9092}, {NodeID: 100, Host: "kafka-100", Port: 9092}}}
	if err := g.OnView(clash); err == nil {
		t.Fatal("a view with an upstream broker of coordinatord's node id was accepted")
	}
	if g.View() == clash {
		t.Fatal("the clashing view is the gateway's view")
	}
	if _, ok := g.Ports()[100]; ok {
		t.Fatal("a listener was bound for the upstream broker that has coordinatord's node id")
	}
	fine := &upstream.View{Brokers: []upstream.Broker{{NodeID: 1, Host: "kafka-1", Port: 9092}, {NodeID: 2, Host: "kafka-2", Port: 9092}}}
	if err := g.OnView(fine); err != nil || g.View() != fine {
		t.Fatalf("a view without a clash: %v, adopted %v", err, g.View() == fine)
	}
}
