package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// upstreamWatch watches, for the whole run, every TCP connection the upstream broker accepts
// and names each one whose client end belongs to a process other than coordinatord, the broker
// itself and this test process (whose admin clients check the upstream on purpose). A Java
// Streams application, a Kafka tool or the librdkafka consumer found there learned an upstream
// address through the gateway: the leak gateway mode must never have.
type upstreamWatch struct {
	port    int
	allowed func(socketOwner) bool

	mu     sync.Mutex
	seen   map[string]bool // socket inodes already judged
	leaks  []string
	stop   chan struct{}
	done   chan struct{}
	period time.Duration
}

func watchUpstream(addr string, allowed func(socketOwner) bool) (*upstreamWatch, error) {
	_, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, err
	}
	w := &upstreamWatch{port: port, allowed: allowed, seen: map[string]bool{},
		stop: make(chan struct{}), done: make(chan struct{}), period: 20 * time.Millisecond}
	go w.run()
	return w, nil
}

func (w *upstreamWatch) run() {
	defer close(w.done)
	t := time.NewTicker(w.period)
	defer t.Stop()
	for {
		w.scan()
		select {
		case <-w.stop:
			w.scan()
			return
		case <-t.C:
		}
	}
}

// Stop ends the watch and returns every leak it saw, one line each.
func (w *upstreamWatch) Stop() []string {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.leaks
}

// scan reads the kernel's connection tables, which is cheap, and looks for the owning process
// only of a connection it has not judged yet, so a long run costs little between connections.
func (w *upstreamWatch) scan() {
	var fresh []string
	for _, sk := range tcpSockets(tcpEstablished) {
		if sk.remotePort == w.port && sk.inode != "0" && !w.seen[sk.inode] {
			fresh = append(fresh, sk.inode)
		}
	}
	if len(fresh) == 0 {
		return
	}
	owners := socketOwners()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, inode := range fresh {
		holders, ok := owners[inode]
		if !ok {
			continue // closed since, or its process gone: judged at the next scan if still there
		}
		w.seen[inode] = true
		// The socket is the gateway's (or the broker's, or the test's own) if any holder is:
		// a child that also holds it only inherited it and is about to exec.
		if !slices.ContainsFunc(holders, w.allowed) {
			w.leaks = append(w.leaks, fmt.Sprintf("%s connected to the upstream at 127.0.0.1:%d directly",
				holders[0], w.port))
		}
	}
}

// socketOwner is the process holding a socket, as it was when its descriptors were read.
type socketOwner struct {
	pid     int
	exe     string
	cmdline []string
}

func (o socketOwner) String() string {
	args := o.cmdline
	if len(args) > 6 {
		args = append(args[:6:6], "...")
	}
	return fmt.Sprintf("process %d (%s)", o.pid, strings.Join(args, " "))
}

// socketOwners maps every socket inode of every live process to the processes holding it. A
// process is read whole at once (its executable and command line before its descriptors): one
// killed meanwhile, as the kill -9 tests do to coordinatord, is left out rather than judged by a
// process that is no longer there to name. A socket can have several holders: a process forked
// by the test (a JVM, a tool) holds every descriptor of the test process between its fork and
// its exec, and with tests running side by side one of them often forks while another's socket
// is young.
func socketOwners() map[string][]socketOwner {
	owners := map[string][]socketOwner{}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", p.Name(), "exe"))
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		owner := socketOwner{pid: pid, exe: exe, cmdline: strings.Fields(strings.ReplaceAll(string(cmdline), "\x00", " "))}
		fds, _ := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name()))
			if err == nil && strings.HasPrefix(link, "socket:[") {
				inode := strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")
				owners[inode] = append(owners[inode], owner)
			}
		}
	}
	return owners
}

// listenerPid is the process listening on port: the broker, whose own connections to its
// listener (controller and inter-broker traffic) are not clients'.
func listenerPid(port int) int {
	for _, sk := range tcpSockets(tcpListen) {
		if sk.localPort == port {
			if holders := socketOwners()[sk.inode]; len(holders) > 0 {
				return holders[0].pid
			}
		}
	}
	return -1
}

// The states of /proc/net/tcp's "st" column this file looks for.
const (
	tcpEstablished = "01"
	tcpListen      = "0A"
)

type tcpSocket struct {
	localPort, remotePort int
	inode                 string
}

// tcpSockets lists the IPv4 and IPv6 TCP sockets of this network namespace in state.
func tcpSockets(state string) []tcpSocket {
	var out []tcpSocket
	port := func(addr string) int {
		_, hex, _ := strings.Cut(addr, ":")
		p, err := strconv.ParseInt(hex, 16, 32)
		if err != nil {
			return -1
		}
		return int(p)
	}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			if f := strings.Fields(line); len(f) >= 10 && f[3] == state {
				out = append(out, tcpSocket{localPort: port(f[1]), remotePort: port(f[2]), inode: f[9]})
			}
		}
	}
	return out
}

// gatewayOrBroker allows the connections coordinatord (any process running the binary under
// test), the broker and this test process make to the upstream.
func gatewayOrBroker(upstream string) func(socketOwner) bool {
	_, portText, _ := net.SplitHostPort(upstream)
	port, _ := strconv.Atoi(portText)
	broker := listenerPid(port)
	self := os.Getpid()
	coordinatord, err := filepath.EvalSymlinks(binaryPath)
	if err != nil {
		coordinatord = binaryPath
	}
	return func(o socketOwner) bool {
		return o.pid == self || o.pid == broker || o.exe == coordinatord
	}
}

// The watch that guards every run must name a client that connects around the gateway, and
// only that one: here a shell plays the leaking client against a listener of the test's own,
// beside a connection of the test process itself, which is allowed.
func TestUpstreamWatchNamesADirectClient(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	own, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	// A child of the test holding the test's own connection, as every process the test starts
	// does between its fork and its exec, is not a leak either. It holds it until the watch's
	// last scan.
	ownFile, err := own.(*net.TCPConn).File()
	if err != nil {
		t.Fatal(err)
	}
	heir := exec.Command("sleep", "60")
	heir.ExtraFiles = []*os.File{ownFile}
	if err := heir.Start(); err != nil {
		t.Fatal(err)
	}
	ownFile.Close()
	defer func() { heir.Process.Kill(); heir.Wait() }()
	w, err := watchUpstream(ln.Addr().String(), gatewayOrBroker(ln.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	shell := exec.Command("bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/"+port+"; sleep 1")
	if out, err := shell.CombinedOutput(); err != nil {
		t.Fatalf("the leaking client could not connect: %v\n%s", err, out)
	}
	leaks := w.Stop()
	if len(leaks) != 1 || !strings.HasPrefix(leaks[0], fmt.Sprintf("process %d ", shell.Process.Pid)) {
		t.Fatalf("the watch saw %q, want exactly the shell's connection", leaks)
	}
}
