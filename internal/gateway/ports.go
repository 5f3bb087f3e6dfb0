package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
)

// portMap keeps the port of each upstream node id's listener, in a file under log.dirs, so that
// a node keeps its port across restarts and membership changes. A port that moved would make
// every KIP-1242 client that reconnects to it rebootstrap, and would hand one node's fetch
// sessions to another.
type portMap struct {
	path     string
	min, max int
	// write replaces a file durably (temporary file, fsync, rename, directory fsync).
	write func(path string, data []byte) error

	mu    sync.Mutex
	ports map[int32]int
}

type portFile struct {
	// Ports maps a node id (decimal) to its listener port.
	Ports map[string]int `json:"ports"`
}

func loadPortMap(dir string, min, max int, write func(string, []byte) error) (*portMap, error) {
	m := &portMap{path: filepath.Join(dir, "gateway-ports.json"), min: min, max: max, write: write, ports: map[int32]int{}}
	data, err := os.ReadFile(m.path)
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	var f portFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", m.path, err)
	}
	for k, p := range f.Ports {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil || p < 0 || p > 65535 {
			return nil, fmt.Errorf("%s: bad entry %q: %d", m.path, k, p)
		}
		m.ports[int32(id)] = p
	}
	return m, nil
}

// portFor returns the port node id is to listen on: the one it had, else the lowest free port
// of the range, else 0 (the kernel picks; record it with bound).
func (m *portMap) portFor(id int32) int {
	p, _ := m.portSkipping(id, nil)
	return p
}

// portSkipping is portFor passing over the range's ports in skip (taken by another process);
// recorded says the port is node id's own from before, which must not move.
func (m *portMap) portSkipping(id int32, skip map[int]bool) (port int, recorded bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.ports[id]; ok {
		return p, true
	}
	if m.min == 0 {
		return 0, false
	}
	used := map[int]bool{}
	for _, p := range m.ports {
		used[p] = true
	}
	for p := m.min; p <= m.max; p++ {
		if !used[p] && !skip[p] {
			return p, false
		}
	}
	return -1, false
}

// bound records the port node id got and makes the record durable before any client hears of
// it: a crash after a client learned the port must not move it.
func (m *portMap) bound(id int32, port int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ports[id] == port {
		return nil
	}
	m.ports[id] = port
	f := portFile{Ports: map[string]int{}}
	ids := make([]int32, 0, len(m.ports))
	for id := range m.ports {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		f.Ports[strconv.Itoa(int(id))] = m.ports[id]
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return m.write(m.path, data)
}
