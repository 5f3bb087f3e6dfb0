package scenario

import (
	"context"
	"fmt"

	"github.com/coordinatord/coordinatord/cmd/coordbench/kconn"
)

func init() { Register(findCoordinatorScenario{}) }

// findCoordinatorScenario: every client looks up the coordinator of its own group, over and
// over; each lookup is a fresh answer from the server (clients cache it, the server does not).
type findCoordinatorScenario struct{}

func (findCoordinatorScenario) Name() string { return "find-coordinator" }
func (findCoordinatorScenario) Description() string {
	return "One operation is a FindCoordinator request (key type GROUP) for the client's own group; " +
		"each client has its own connection and one request in flight."
}
func (findCoordinatorScenario) Needs() []int16        { return []int16{10} }
func (findCoordinatorScenario) DefaultClients() []int { return []int{8} }

func (findCoordinatorScenario) Setup(ctx context.Context, env *Env) (Instance, error) {
	conns, err := dialAll(ctx, env.Clients, func(ctx context.Context, i int) (*kconn.Conn, error) {
		return env.Dial(ctx, "", i)
	})
	if err != nil {
		return nil, err
	}
	groups := make([]string, env.Clients)
	for i := range groups {
		groups[i] = fmt.Sprintf("%s-fc-%d", env.Tag, i)
	}
	return &findCoordinatorRun{env: env, conns: conns, groups: groups}, nil
}

type findCoordinatorRun struct {
	env    *Env
	conns  []*kconn.Conn
	groups []string
}

func (f *findCoordinatorRun) Op(ctx context.Context, i int) error {
	var info *Info
	if i == 0 {
		info = f.env.Info
	}
	_, err := findCoordinator(ctx, f.conns[i], f.groups[i], info)
	return err
}

func (f *findCoordinatorRun) Teardown(context.Context) error {
	closeAll(f.conns)
	return nil
}
