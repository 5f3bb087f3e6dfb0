package gateway

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/coordinatord/coordinatord/internal/wire"
)

func TestPortsAreKeptAcrossRestartsAndNewNodes(t *testing.T) {
	dir := t.TempDir()
	m, err := loadPortMap(dir, 20001, 20003, writeFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int32{7, 3} {
		if err := m.bound(id, m.portFor(id)); err != nil {
			t.Fatal(err)
		}
	}
	if m.portFor(7) != 20001 || m.portFor(3) != 20002 {
		t.Fatalf("ports %d, %d; want them in order of first sight", m.portFor(7), m.portFor(3))
	}
	// After a restart node 3 appears first, and a new node 1 joins: nobody moves.
	m2, err := loadPortMap(dir, 20001, 20003, writeFile)
	if err != nil {
		t.Fatal(err)
	}
	if m2.portFor(3) != 20002 || m2.portFor(7) != 20001 {
		t.Fatalf("a restart moved ports: 3->%d, 7->%d", m2.portFor(3), m2.portFor(7))
	}
	if p := m2.portFor(1); p != 20003 {
		t.Fatalf("new node 1 got %d, want the free 20003", p)
	}
	m2.bound(1, 20003)
	if p := m2.portFor(9); p != -1 {
		t.Fatalf("a full range handed out port %d", p)
	}
}

func TestCorruptPortFileRefusesToStart(t *testing.T) {
	// A port outside 0-65535 would leave its node without a listener for good, silently.
	for _, bad := range []string{`{"ports":{"x":1}}`, `{"ports":{"1":-1}}`, `{"ports":{"1":65536}}`} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "gateway-ports.json"), []byte(bad), 0o644)
		if _, err := loadPortMap(dir, 1, 2, writeFile); err == nil {
			t.Fatalf("the port file %s was accepted", bad)
		}
	}
}

func writeFile(path string, data []byte) error { return os.WriteFile(path, data, 0o644) }

// A port of gateway.broker.port.range held by another process is passed over: a new node gets
// the next free one instead of no listener at all.
func TestTakenPortOfTheRangeIsPassedOver(t *testing.T) {
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	taken := other.Addr().(*net.TCPAddr).Port
	served := 0
	g, err := New(Options{NodeID: 100, ListenHost: "127.0.0.1", AdvertisedHost: "127.0.0.1", PortMin: taken, PortMax: taken + 50,
		DataDir: t.TempDir(), WriteFileDurable: writeFile,
		Serve: func(_ string, ln net.Listener, _ wire.Handler) { served++; ln.Close() }})
	if err != nil {
		t.Fatal(err)
	}
	port, err := g.ensureListener(3, true)
	if err != nil {
		t.Fatalf("node 3 got no listener although the range has free ports: %v", err)
	}
	if int(port) == taken || int(port) > taken+50 || served != 1 {
		t.Fatalf("node 3 listens on %d (served %d), want a free port of %d-%d other than %d", port, served, taken, taken+50, taken)
	}
}

// A node's recorded port that another process holds now is not traded for another: clients
// that know the node at that port would reach nothing or, worse, a different node there after
// a later move. The node goes without a listener until the port is free, then gets it back.
func TestRecordedPortIsNeverMoved(t *testing.T) {
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	taken := other.Addr().(*net.TCPAddr).Port
	dir := t.TempDir()
	m, err := loadPortMap(dir, taken, taken+50, writeFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.bound(3, taken); err != nil {
		t.Fatal(err)
	}
	g, err := New(Options{NodeID: 100, ListenHost: "127.0.0.1", AdvertisedHost: "127.0.0.1", PortMin: taken, PortMax: taken + 50,
		DataDir: dir, WriteFileDurable: writeFile, Serve: func(_ string, ln net.Listener, _ wire.Handler) { ln.Close() }})
	if err != nil {
		t.Fatal(err)
	}
	if port, err := g.ensureListener(3, true); err == nil {
		t.Fatalf("node 3 moved from its recorded port %d to %d", taken, port)
	}
	other.Close()
	if port, err := g.ensureListener(3, true); err != nil || int(port) != taken {
		t.Fatalf("node 3 listens on %d (%v) once its port is free, want %d", port, err, taken)
	}
}

// A port of the range that this node's own listener or admin listener uses is never given to a
// broker, even while it is free (the admin listener not up yet): taking it would make this
// node's own listener fail to bind, or hold it for good in gateway-ports.json.
func TestOwnPortsOfTheRangeArePassedOver(t *testing.T) {
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	own := probe.Addr().(*net.TCPAddr).Port
	probe.Close()
	g, err := New(Options{NodeID: 100, ListenHost: "127.0.0.1", AdvertisedHost: "127.0.0.1", PortMin: own, PortMax: own + 50,
		OwnPorts: []int{own}, DataDir: t.TempDir(), WriteFileDurable: writeFile,
		Serve: func(_ string, ln net.Listener, _ wire.Handler) { ln.Close() }})
	if err != nil {
		t.Fatal(err)
	}
	port, err := g.ensureListener(3, true)
	if err != nil {
		t.Fatal(err)
	}
	if int(port) == own || int(port) > own+50 {
		t.Fatalf("node 3 listens on %d, want a port of %d-%d other than this node's own %d", port, own, own+50, own)
	}
}
