//go:build testhooks

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	rt "github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/state/streams/assign"
)

// scriptedAssignor is the test-only task assignor of spec online-migration §9.1, registered as
// "scripted" in testhooks builds: it returns the targets posted to /test/assignor, one per call,
// repeating the last, so that a walk-through over the wire tests the migration machinery and
// not an assignor.
type scriptedAssignor struct {
	mu      sync.Mutex
	targets []assign.Output
}

var scripted = &scriptedAssignor{}

func (*scriptedAssignor) Name() string { return "scripted" }

func (s *scriptedAssignor) Assign(assign.Input) (assign.Output, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.targets) == 0 {
		return nil, fmt.Errorf("no scripted target posted")
	}
	out := s.targets[0]
	if len(s.targets) > 1 {
		s.targets = s.targets[1:]
	}
	return out, nil
}

func init() {
	lookupAssignor = func(name string) (assign.Assignor, bool) {
		if name == scripted.Name() {
			return scripted, true
		}
		return assign.Lookup(name)
	}
}

// registerTestHooks adds endpoints that break the server on purpose, so that integration tests
// can prove how it survives. They are compiled only with the testhooks build tag: a
// release binary has no code that reaches them, whatever its configuration.
//
// POST /test/panic?group=G runs, on G's shard, a write operation that panics.
//
// POST /test/assignor with a JSON list of targets (member id -> {"Active": {"0": [1, 2]}, ...})
// replaces the scripted assignor's targets.
func registerTestHooks(mux *http.ServeMux, st *state) {
	mux.HandleFunc("POST /test/assignor", func(w http.ResponseWriter, r *http.Request) {
		var targets []assign.Output
		if err := json.NewDecoder(r.Body).Decode(&targets); err != nil || len(targets) == 0 {
			http.Error(w, fmt.Sprint("bad targets: ", err), http.StatusBadRequest)
			return
		}
		scripted.mu.Lock()
		scripted.targets = targets
		scripted.mu.Unlock()
	})
	mux.HandleFunc("POST /test/panic", func(w http.ResponseWriter, r *http.Request) {
		group := r.URL.Query().Get("group")
		_, err := st.groups.For(group).Write(r.Context(), func(*rt.Ctx[*shard.Machine], *shard.Machine) rt.Result {
			panic("test hook: deliberate panic in a write operation for group " + group)
		})
		fmt.Fprintln(w, err)
	})
}
