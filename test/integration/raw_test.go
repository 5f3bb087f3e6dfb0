package integration

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn speaks the Kafka protocol byte by byte so tests can send what no client library
// would: bad frames, odd versions, pipelined requests.
type rawConn struct {
	t  testing.TB
	nc net.Conn
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

// frame builds a request frame. extraHeaderTags adds a tagged field to a flexible header;
// trailing is appended after the body.
func frame(req kmsg.Request, version int16, corr int32, clientID *string, trailing []byte) []byte {
	req.SetVersion(version)
	body := kbin.AppendInt16(nil, req.Key())
	body = kbin.AppendInt16(body, version)
	body = kbin.AppendInt32(body, corr)
	body = kbin.AppendNullableString(body, clientID)
	if req.IsFlexible() {
		body = append(body, 0)
	}
	body = req.AppendTo(body)
	body = append(body, trailing...)
	return append(kbin.AppendInt32(nil, int32(len(body))), body...)
}

func (c *rawConn) write(b []byte) {
	c.t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// readFrame returns the next response frame (after the size), or an error when the server
// closed the connection.
func (c *rawConn) readFrame() ([]byte, error) {
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		return nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(c.nc, buf)
	return buf, err
}

// read decodes the next response into resp, checking the correlation id and the response
// header version Kafka uses (v1 with a tag byte for flexible responses other than ApiVersions).
func (c *rawConn) read(resp kmsg.Response, version int16, wantCorr int32) {
	c.t.Helper()
	b, err := c.readFrame()
	if err != nil {
		c.t.Fatalf("reading response: %v", err)
	}
	corr := int32(binary.BigEndian.Uint32(b))
	if corr != wantCorr {
		c.t.Fatalf("correlation id %d, want %d", corr, wantCorr)
	}
	b = b[4:]
	resp.SetVersion(version)
	if resp.IsFlexible() && resp.Key() != 18 {
		if b[0] != 0 {
			c.t.Fatalf("flexible response header tag section should be empty, got %x", b[0])
		}
		b = b[1:]
	}
	if err := resp.ReadFrom(b); err != nil {
		c.t.Fatalf("decoding %T v%d: %v", resp, version, err)
	}
}

// expectClosed asserts the server closes the connection without writing anything.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.nc.Read(make([]byte, 1))
	if n != 0 {
		c.t.Fatalf("server wrote %d bytes instead of closing", n)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatal("server did not close the connection")
	}
	if err == nil {
		c.t.Fatal("expected the connection to be closed")
	}
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

// rssBytes reads the resident set size of the daemon from /proc.
func (d *daemon) rssBytes() int64 {
	d.t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(d.pid()) + "/status")
	if err != nil {
		d.t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	d.t.Fatal("no VmRSS")
	return 0
}

func strp(s string) *string { return &s }
