package upstream

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeBroker is a one-broker cluster (node 1) that answers ApiVersions and Metadata only,
// counting the ApiVersions it is asked in apiVersions (when not nil).
func fakeBroker(t *testing.T, apiVersions ...*atomic.Int32) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	addr := ln.Addr().(*net.TCPAddr)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for {
					var size [4]byte
					if _, err := io.ReadFull(c, size[:]); err != nil {
						return
					}
					frame := make([]byte, binary.BigEndian.Uint32(size[:]))
					if _, err := io.ReadFull(c, frame); err != nil {
						return
					}
					h, _, err := wire.ParseHeader(frame)
					if err != nil {
						return
					}
					var resp kmsg.Response
					switch h.Key {
					case 18:
						for _, n := range apiVersions {
							n.Add(1)
						}
						r := kmsg.NewPtrApiVersionsResponse()
						for _, k := range [][3]int16{{3, 0, 12}, {18, 0, 3}} {
							ak := kmsg.NewApiVersionsResponseApiKey()
							ak.ApiKey, ak.MinVersion, ak.MaxVersion = k[0], k[1], k[2]
							r.ApiKeys = append(r.ApiKeys, ak)
						}
						resp = r
					case 3:
						r := kmsg.NewPtrMetadataResponse()
						b := kmsg.NewMetadataResponseBroker()
						b.NodeID, b.Host, b.Port = 1, "127.0.0.1", int32(addr.Port)
						r.Brokers = append(r.Brokers, b)
						resp = r
					default:
						return
					}
					resp.SetVersion(h.Version)
					if _, err := c.Write(wire.AppendResponse(nil, h.CorrelationID, resp)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return addr.String()
}

// Close returns only once no view is being applied any more: coordinatord closes the catalog
// that OnView writes to right after, so a refresh still running would write into closed state.
func TestCloseWaitsForAViewBeingApplied(t *testing.T) {
	var views atomic.Int32
	var applying atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	c, err := New(Options{
		Bootstrap: []string{fakeBroker(t)}, RequestTimeout: 100 * time.Millisecond, ConnectTimeout: time.Second, MaxAge: time.Hour,
		OnView: func(*View) {
			if views.Add(1) == 2 { // the first refresh after Start
				applying.Store(true)
				close(entered)
				<-release
				applying.Store(false)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	c.Refresh()
	<-entered
	go func() {
		time.Sleep(500 * time.Millisecond) // well past RequestTimeout
		close(release)
	}()
	c.Close()
	if applying.Load() {
		t.Fatal("Close returned while OnView was still applying a view")
	}
}

// Looking at the metadata again and again (a topic change polls it) asks the brokers'
// ApiVersions only once per max age, not at every look.
func TestApiVersionsAskedOncePerMaxAge(t *testing.T) {
	var asked atomic.Int32
	c, err := New(Options{Bootstrap: []string{fakeBroker(t, &asked)}, RequestTimeout: time.Second, ConnectTimeout: time.Second, MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	afterStart := asked.Load() // the client's own handshakes and the first view's question
	looks := 0
	if err := c.RefreshUntil(context.Background(), func(*View) bool { looks++; return looks == 5 }); err != nil {
		t.Fatal(err)
	}
	if n := asked.Load() - afterStart; n != 0 {
		t.Fatalf("ApiVersions asked %d more times over 5 more looks at the metadata within the max age, want none", n)
	}
	if c.Current().Versions[1] == nil {
		t.Fatal("the broker's versions were dropped from later views")
	}
}
