package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/coordinatord/coordinatord/pkg/topologyplugin"
)

// desc builds a small description whose content depends on tag, so that tests can tell
// descriptions of different groups and epochs apart.
func desc(tag string) *topologyplugin.Description {
	sink := "out-" + tag
	return &topologyplugin.Description{
		Subtopologies: []topologyplugin.Subtopology{{
			ID: "0",
			Nodes: []topologyplugin.Node{
				{Name: "src-" + tag, Type: topologyplugin.NodeSource, SourceTopics: []string{"in-" + tag}, Successors: []string{"proc"}},
				{Name: "proc", Type: topologyplugin.NodeProcessor, Stores: []string{"store"}, Successors: []string{"sink"}},
				{Name: "sink", Type: topologyplugin.NodeSink, SinkTopic: &sink},
			},
		}},
		GlobalStores: []topologyplugin.GlobalStore{{
			Source:    topologyplugin.Node{Name: "gsrc", Type: topologyplugin.NodeSource, SourceTopics: []string{"g"}, Successors: []string{"gproc"}},
			Processor: topologyplugin.Node{Name: "gproc", Type: topologyplugin.NodeProcessor, Stores: []string{"gs"}},
		}},
	}
}

// refServer is a reference implementation of the documented http plugin protocol with the same
// semantics as the built-in plugins (exact-epoch get, lower-epoch set ignored).
type refServer struct {
	mu     sync.Mutex
	m      map[string]refEntry
	hook   func(w http.ResponseWriter, r *http.Request) bool // true: handled
	calls  int
	header http.Header
}

type refEntry struct {
	epoch int32
	body  []byte
}

func (s *refServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.calls++
	s.header = r.Header.Clone()
	hook := s.hook
	s.mu.Unlock()
	if hook != nil && hook(w, r) {
		return
	}
	// /groups/{group}/topology[/{epoch}], group path-escaped.
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/base/groups/")
	if !ok {
		http.Error(w, "bad path", http.StatusBadRequest)
		return
	}
	parts := strings.Split(rest, "/")
	group, err := url.PathUnescape(parts[0])
	if err != nil || len(parts) < 2 || parts[1] != "topology" {
		http.Error(w, "bad path", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]refEntry{}
	}
	if r.Method == http.MethodDelete {
		delete(s.m, group)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if len(parts) != 3 {
		http.Error(w, "bad path", http.StatusBadRequest)
		return
	}
	epoch, err := strconv.ParseInt(parts[2], 10, 32)
	if err != nil {
		http.Error(w, "bad epoch", http.StatusBadRequest)
		return
	}
	switch r.Method {
	case http.MethodPut:
		body, _ := io.ReadAll(r.Body)
		var d topologyplugin.Description
		if json.Unmarshal(body, &d) != nil {
			http.Error(w, "not a description", http.StatusUnprocessableEntity)
			return
		}
		if cur, ok := s.m[group]; !ok || cur.epoch <= int32(epoch) {
			s.m[group] = refEntry{int32(epoch), body}
		}
		w.WriteHeader(http.StatusNoContent)
	case http.MethodGet:
		cur, ok := s.m[group]
		if !ok || cur.epoch != int32(epoch) {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(cur.body)
	default:
		http.Error(w, "method", http.StatusMethodNotAllowed)
	}
}

type pluginCase struct {
	name string
	open func(t *testing.T) topologyplugin.Plugin
}

func allPlugins() []pluginCase {
	return []pluginCase{
		{"memory", func(t *testing.T) topologyplugin.Plugin {
			p, err := NewMemory(topologyplugin.Config{})
			if err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{"file", func(t *testing.T) topologyplugin.Plugin {
			p, err := NewFile(topologyplugin.Config{"dir": t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{"http", func(t *testing.T) topologyplugin.Plugin {
			srv := httptest.NewServer(&refServer{})
			t.Cleanup(srv.Close)
			p, err := NewHTTP(topologyplugin.Config{"url": srv.URL + "/base/"})
			if err != nil {
				t.Fatal(err)
			}
			return p
		}},
	}
}

func forEachPlugin(t *testing.T, fn func(t *testing.T, p topologyplugin.Plugin)) {
	for _, pc := range allPlugins() {
		t.Run(pc.name, func(t *testing.T) {
			p := pc.open(t)
			t.Cleanup(func() { p.Close() })
			fn(t, p)
		})
	}
}

func mustGet(t *testing.T, p topologyplugin.Plugin, group string, epoch int32) *topologyplugin.Description {
	t.Helper()
	d, err := p.Get(context.Background(), group, epoch)
	if err != nil {
		t.Fatalf("Get(%q, %d): %v", group, epoch, err)
	}
	return d
}

func mustSet(t *testing.T, p topologyplugin.Plugin, group string, epoch int32, d *topologyplugin.Description) {
	t.Helper()
	if err := p.Set(context.Background(), group, epoch, d); err != nil {
		t.Fatalf("Set(%q, %d): %v", group, epoch, err)
	}
}

// Spec §7.1: get returns the description only for that epoch and nothing otherwise; delete
// removes every epoch and is idempotent, also when nothing is stored.
func TestSpec7_1ContractSetGetDelete(t *testing.T) {
	forEachPlugin(t, func(t *testing.T, p topologyplugin.Plugin) {
		ctx := context.Background()
		if d := mustGet(t, p, "orders", 3); d != nil {
			t.Fatalf("nothing stored yet, got %v", d)
		}
		mustSet(t, p, "orders", 3, desc("a"))
		if d := mustGet(t, p, "orders", 3); !topologyplugin.Equal(d, desc("a")) {
			t.Fatalf("Get at the stored epoch: %+v", d)
		}
		for _, e := range []int32{2, 4} {
			if d := mustGet(t, p, "orders", e); d != nil {
				t.Fatalf("Get at epoch %d must find nothing, got %v", e, d)
			}
		}
		if d := mustGet(t, p, "payments", 3); d != nil {
			t.Fatal("another group must find nothing")
		}
		for i := 0; i < 2; i++ {
			if err := p.Delete(ctx, "orders"); err != nil {
				t.Fatalf("Delete #%d: %v", i+1, err)
			}
		}
		if err := p.Delete(ctx, "never-stored"); err != nil {
			t.Fatalf("Delete of a group with nothing stored: %v", err)
		}
		if d := mustGet(t, p, "orders", 3); d != nil {
			t.Fatal("deleted description still returned")
		}
		// A group deleted and recreated starts from scratch, also at a lower epoch.
		mustSet(t, p, "orders", 0, desc("new"))
		if d := mustGet(t, p, "orders", 0); !topologyplugin.Equal(d, desc("new")) {
			t.Fatal("recreated group not stored")
		}
	})
}

// Spec §7.1 / §7.3: set is idempotent per (group, epoch); a newer epoch replaces the older one;
// a late set for a lower epoch is ignored and succeeds.
func TestSpec7_3ContractIdempotencyAndEpochGuard(t *testing.T) {
	forEachPlugin(t, func(t *testing.T, p topologyplugin.Plugin) {
		mustSet(t, p, "g", 3, desc("three"))
		mustSet(t, p, "g", 3, desc("three"))
		if d := mustGet(t, p, "g", 3); !topologyplugin.Equal(d, desc("three")) {
			t.Fatal("repeated set changed the description")
		}
		mustSet(t, p, "g", 4, desc("four"))
		if mustGet(t, p, "g", 3) != nil {
			t.Fatal("the older epoch must be gone after a newer set")
		}
		mustSet(t, p, "g", 3, desc("three"))
		if d := mustGet(t, p, "g", 4); !topologyplugin.Equal(d, desc("four")) {
			t.Fatal("a late lower-epoch set replaced newer data")
		}
		if mustGet(t, p, "g", 3) != nil {
			t.Fatal("a late lower-epoch set was stored")
		}
	})
}

// Group ids are arbitrary strings: they must not collide (also not by case) or escape the
// plugin's namespace.
func TestContractGroupIDsAreOpaque(t *testing.T) {
	ids := []string{"a", "A", "a/b", "../a", "a%2Fb", "grüße 🚀", strings.Repeat("long-", 100), strings.Repeat("long-", 100) + "x", "with space", "."}
	forEachPlugin(t, func(t *testing.T, p topologyplugin.Plugin) {
		for i, id := range ids {
			mustSet(t, p, id, 1, desc(strconv.Itoa(i)))
		}
		for i, id := range ids {
			if d := mustGet(t, p, id, 1); !topologyplugin.Equal(d, desc(strconv.Itoa(i))) {
				t.Fatalf("group %q: got another group's description", id)
			}
		}
		if err := p.Delete(context.Background(), "a"); err != nil {
			t.Fatal(err)
		}
		if mustGet(t, p, "a", 1) != nil || mustGet(t, p, "A", 1) == nil {
			t.Fatal("delete of a touched another group")
		}
	})
}

// The coordinator may modify what Get returns; the plugin's state must not change with it.
func TestContractGetReturnsACopy(t *testing.T) {
	forEachPlugin(t, func(t *testing.T, p topologyplugin.Plugin) {
		in := desc("x")
		mustSet(t, p, "g", 1, in)
		in.Subtopologies[0].Nodes[0].Name = "changed-after-set"
		d := mustGet(t, p, "g", 1)
		d.Subtopologies[0].Nodes[0].SourceTopics[0] = "changed"
		if !topologyplugin.Equal(mustGet(t, p, "g", 1), desc("x")) {
			t.Fatal("stored description aliased the caller's memory")
		}
	})
}

// A cancelled context is reported as an error, which the coordinator treats as transient.
func TestContractCancelledContextIsTransient(t *testing.T) {
	forEachPlugin(t, func(t *testing.T, p topologyplugin.Plugin) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := p.Set(ctx, "g", 1, desc("x"))
		if err == nil || !topologyplugin.IsTransient(err) {
			t.Fatalf("want a transient error, got %v", err)
		}
	})
}

// Spec §7.1: concurrent sets of one (group, epoch), gets and deletes race safely (-race) and the
// state afterwards is the last operation's.
func TestSpec7_1ContractConcurrentUse(t *testing.T) {
	forEachPlugin(t, func(t *testing.T, p topologyplugin.Plugin) {
		ctx := context.Background()
		var wg sync.WaitGroup
		errs := make(chan error, 1000)
		for w := 0; w < 8; w++ {
			wg.Go(func() {
				for i := 0; i < 25; i++ {
					g := fmt.Sprintf("g%d", i%4)
					if err := p.Set(ctx, g, 7, desc(g)); err != nil {
						errs <- err
					}
					d, err := p.Get(ctx, g, 7)
					if err != nil {
						errs <- err
					} else if d != nil && !topologyplugin.Equal(d, desc(g)) {
						errs <- fmt.Errorf("group %s: torn or foreign description", g)
					}
					if w == 0 && i%5 == 0 {
						if err := p.Delete(ctx, g); err != nil {
							errs <- err
						}
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		for i := 0; i < 4; i++ {
			g := fmt.Sprintf("g%d", i)
			mustSet(t, p, g, 7, desc(g))
			if !topologyplugin.Equal(mustGet(t, p, g, 7), desc(g)) {
				t.Fatalf("group %s lost after concurrent use", g)
			}
		}
	})
}
