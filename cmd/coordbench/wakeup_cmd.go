package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/coordinatord/coordinatord/cmd/coordbench/hist"
	"github.com/coordinatord/coordinatord/cmd/coordbench/report"
)

// `coordbench wakeup` measures what a wake-up across CPUs costs on this machine: a loopback
// TCP echo of one small message, client and server each a process pinned to a CPU, with the
// server blocking in the kernel between messages as a waiting gateway, broker or client does.
// A forwarded request crosses between the gateway's CPU and the others' four times where the
// direct path may cross none (`coordbench gateway --cpus upstream=0,loadgen=0,gateway=1`), so
// this is the price list for reading a pinned run; on a VM whose idle vCPUs halt without
// polling first it was 25-30 µs a crossing (docs/benchmarks-gateway.md).
type wakeupFlags struct {
	cpus     string
	duration time.Duration
	size     int
	// serve and ping are the child processes' roles.
	serve bool
	spin  bool
	ping  string
}

func newWakeupCommand() *cobra.Command {
	f := &wakeupFlags{}
	cmd := &cobra.Command{
		Use:   "wakeup",
		Short: "Round trip of a loopback echo between processes pinned to the same CPU and to two CPUs: the cost of a cross-CPU wake-up",
		Long: `Runs a loopback TCP echo between two processes pinned with taskset: both on the first CPU of
--cpus, then the client on the first and the server on the second, then the same with a server
that polls its socket instead of blocking (no wake-up on its side). The differences are what
one cross-CPU wake-up costs here, which every pinned coordbench gateway run pays per crossing.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case f.serve:
				return serveEcho(f.size, f.spin, cmd.OutOrStdout())
			case f.ping != "":
				return pingEcho(f.ping, f.size, f.duration, cmd.OutOrStdout())
			}
			return runWakeup(cmd.Context(), f, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&f.cpus, "cpus", "0,1", "two CPUs: the client's and, for the cross-CPU rows, the server's")
	cmd.Flags().DurationVar(&f.duration, "duration", 2*time.Second, "timed window per layout")
	cmd.Flags().IntVar(&f.size, "size", 1024, "message size in bytes")
	cmd.Flags().BoolVar(&f.serve, "serve", false, "child: echo server, prints its address")
	cmd.Flags().BoolVar(&f.spin, "spin", false, "child: the echo server polls its socket instead of blocking")
	cmd.Flags().StringVar(&f.ping, "ping", "", "child: echo client of this address, prints its round trips")
	for _, name := range []string{"serve", "spin", "ping"} {
		cmd.Flags().MarkHidden(name)
	}
	return cmd
}

// wakeupResult is one layout's round trips as a ping child reports them, in nanoseconds.
type wakeupResult struct {
	N             uint64
	P50, P90, P99 int64
}

func runWakeup(ctx context.Context, f *wakeupFlags, out io.Writer) error {
	var cpus []int
	for _, part := range strings.Split(f.cpus, ",") {
		c, err := parseCPURange(part)
		if err != nil {
			return fmt.Errorf("--cpus %q: %w", f.cpus, err)
		}
		cpus = append(cpus, c...)
	}
	if len(cpus) != 2 {
		return fmt.Errorf("--cpus %q: want two CPUs, e.g. 0,1", f.cpus)
	}
	if f.size < 1 || f.size > 1<<20 {
		return fmt.Errorf("--size %d: want 1 byte to 1 MiB", f.size)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	layouts := []struct {
		name           string
		client, server int
		spin           bool
	}{
		{"same CPU", cpus[0], cpus[0], false},
		{"two CPUs, server blocks", cpus[0], cpus[1], false},
		{"two CPUs, server polls", cpus[0], cpus[1], true},
	}
	fmt.Fprintf(out, "Loopback echo of %d bytes, %s per layout, client on CPU %d:\n\n", f.size, f.duration, cpus[0])
	fmt.Fprintln(out, "| layout | round trips | p50 | p90 | p99 |")
	fmt.Fprintln(out, "|---|---:|---:|---:|---:|")
	for _, l := range layouts {
		r, err := wakeupLayout(ctx, self, f, l.client, l.server, l.spin)
		if err != nil {
			return fmt.Errorf("%s: %w", l.name, err)
		}
		fmt.Fprintf(out, "| %s (client CPU %d, server CPU %d) | %d | %s | %s | %s |\n", l.name, l.client, l.server, r.N,
			report.FormatLatency(r.P50), report.FormatLatency(r.P90), report.FormatLatency(r.P99))
	}
	return nil
}

// wakeupLayout runs one echo server and one client, each under taskset on its CPU.
func wakeupLayout(ctx context.Context, self string, f *wakeupFlags, clientCPU, serverCPU int, spin bool) (wakeupResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	args := []string{"-c", fmt.Sprint(serverCPU), self, "wakeup", "--serve", fmt.Sprintf("--size=%d", f.size)}
	if spin {
		args = append(args, "--spin")
	}
	srv := exec.CommandContext(ctx, "taskset", args...)
	srv.Stderr = os.Stderr
	stdout, err := srv.StdoutPipe()
	if err != nil {
		return wakeupResult{}, err
	}
	if err := srv.Start(); err != nil {
		return wakeupResult{}, fmt.Errorf("taskset (util-linux) is needed: %w", err)
	}
	defer srv.Wait()
	defer srv.Process.Kill()
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return wakeupResult{}, fmt.Errorf("echo server: %w", err)
	}
	ping := exec.CommandContext(ctx, "taskset", "-c", fmt.Sprint(clientCPU), self, "wakeup",
		"--ping", strings.TrimSpace(addr), fmt.Sprintf("--size=%d", f.size), "--duration", f.duration.String())
	ping.Stderr = os.Stderr
	res, err := ping.Output()
	if err != nil {
		return wakeupResult{}, fmt.Errorf("echo client: %w", err)
	}
	var r wakeupResult
	if err := json.Unmarshal(res, &r); err != nil {
		return wakeupResult{}, fmt.Errorf("echo client said %q: %w", res, err)
	}
	return r, nil
}

// serveEcho echoes size-byte messages on one connection, printing its address first. With
// spin it reads in a loop of non-blocking reads, so its thread never sleeps and a message
// arriving from another CPU needs no wake-up.
func serveEcho(size int, spin bool, out io.Writer) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Fprintln(out, ln.Addr())
	c, err := ln.Accept()
	if err != nil {
		return err
	}
	ln.Close()
	defer c.Close()
	buf := make([]byte, size)
	read := func() error { _, err := io.ReadFull(c, buf); return err }
	if spin {
		rc, err := c.(*net.TCPConn).SyscallConn()
		if err != nil {
			return err
		}
		read = func() error {
			for got := 0; got < size; {
				var rerr error
				err := rc.Read(func(fd uintptr) bool {
					for {
						n, err := syscall.Read(int(fd), buf[got:])
						if n > 0 {
							got += n
							return true
						}
						if err != syscall.EAGAIN && err != syscall.EINTR {
							rerr = err
							if n == 0 && err == nil {
								rerr = io.EOF
							}
							return true
						}
					}
				})
				if err == nil {
					err = rerr
				}
				if err != nil {
					return err
				}
			}
			return nil
		}
	}
	for {
		if err := read(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if _, err := c.Write(buf); err != nil {
			return err
		}
	}
}

// pingEcho sends size-byte messages to an echo server one at a time for d and prints the
// round trips' quantiles as JSON.
func pingEcho(addr string, size int, d time.Duration, out io.Writer) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	buf := make([]byte, size)
	h := hist.New()
	for end := time.Now().Add(d); time.Now().Before(end); {
		start := time.Now()
		if _, err := c.Write(buf); err != nil {
			return err
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			return err
		}
		h.RecordDuration(time.Since(start))
	}
	return json.NewEncoder(out).Encode(wakeupResult{N: h.Count(), P50: h.Quantile(0.5), P90: h.Quantile(0.9), P99: h.Quantile(0.99)})
}
