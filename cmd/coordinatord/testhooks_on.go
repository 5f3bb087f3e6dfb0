//go:build testhooks

package main

import (
	"fmt"
	"net/http"

	rt "github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/shard"
)

// registerTestHooks adds endpoints that break the server on purpose, so that integration tests
// can prove how it survives. They are compiled only with the testhooks build tag: a
// release binary has no code that reaches them, whatever its configuration.
//
// POST /test/panic?group=G runs, on G's shard, a write operation that panics.
func registerTestHooks(mux *http.ServeMux, st *state) {
	mux.HandleFunc("POST /test/panic", func(w http.ResponseWriter, r *http.Request) {
		group := r.URL.Query().Get("group")
		_, err := st.groups.For(group).Write(r.Context(), func(*rt.Ctx[*shard.Machine], *shard.Machine) rt.Result {
			panic("test hook: deliberate panic in a write operation for group " + group)
		})
		fmt.Fprintln(w, err)
	})
}
