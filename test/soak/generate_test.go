package soak

import (
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"strings"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// names are the group and topic names hostile requests may use. Each class of request has its
// own pool, of a length no well-behaved name has, so that neither a random valid request nor a
// bit flip of one can touch the well-behaved groups' state: what the soak checks there must
// be what the server kept, not what a hostile request legitimately deleted.
type names struct {
	groups, topics []string
}

func pool(prefix string, n int) names {
	var p names
	for i := 0; i < n; i++ {
		p.groups = append(p.groups, fmt.Sprintf("%s-g%d", prefix, i))
		p.topics = append(p.topics, fmt.Sprintf("%s-t%d", prefix, i))
	}
	return p
}

var (
	validNames   = pool("hv", 8)      // "hv-g0": requests sent as built
	mutatedNames = pool("hostile", 8) // "hostile-g0": requests whose bytes are then damaged
)

// filler sets every field of a kmsg request to a random but encodable value. The values are
// mostly small and plausible (so that requests reach the state machines) with a few extremes
// (so that the server's bounds are tried). Timeouts stay short so that a request the server
// may legitimately park (JoinGroup, SyncGroup) is answered well within the soak's read deadline.
type filler struct {
	rng   *rand.Rand
	names names
	bulk  bool // top-level arrays of thousands of entries: one request, much work
}

func (f *filler) fill(v reflect.Value, name string, depth int) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(kmsg.Tags{}) {
			return
		}
		for i := 0; i < v.NumField(); i++ {
			field := v.Type().Field(i)
			if !field.IsExported() || (depth == 0 && field.Name == "Version") {
				continue
			}
			f.fill(v.Field(i), field.Name, depth+1)
		}
	case reflect.Pointer:
		if f.rng.Intn(5) == 0 {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		p := reflect.New(v.Type().Elem())
		if d, ok := p.Interface().(interface{ Default() }); ok {
			d.Default()
		}
		f.fill(p.Elem(), name, depth+1)
		v.Set(p)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if f.rng.Intn(4) == 0 {
				v.SetBytes(nil)
				return
			}
			b := make([]byte, f.rng.Intn(64))
			f.rng.Read(b)
			v.SetBytes(b)
			return
		}
		n := f.rng.Intn(4)
		switch {
		case f.bulk && depth == 1:
			n = 500 + f.rng.Intn(4000)
		case depth > 6:
			n = 0
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := 0; i < n; i++ {
			e := s.Index(i)
			if e.Kind() == reflect.Struct {
				if d, ok := e.Addr().Interface().(interface{ Default() }); ok {
					d.Default()
				}
			}
			f.fill(e, name, depth+1)
		}
		v.Set(s)
	case reflect.Array:
		if f.rng.Intn(2) == 0 {
			for i := 0; i < v.Len(); i++ {
				v.Index(i).SetUint(uint64(f.rng.Intn(256)))
			}
		}
	case reflect.String:
		v.SetString(f.str(name))
	case reflect.Bool:
		v.SetBool(f.rng.Intn(2) == 0)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(f.integer(name, v.Type().Bits()))
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(f.rng.Intn(1000)))
	case reflect.Float64, reflect.Float32:
		v.SetFloat(f.rng.Float64() * 100)
	}
}

func (f *filler) integer(name string, bits int) int64 {
	if strings.Contains(name, "Timeout") || strings.Contains(name, "Millis") || strings.Contains(name, "Ms") {
		return []int64{-1, 0, 1, 100, 1000, 3000}[f.rng.Intn(6)]
	}
	switch r := f.rng.Intn(100); {
	case r < 2: // the extremes a hostile client would try
		lo, hi := int64(math.MinInt64)>>(64-bits), int64(math.MaxInt64)>>(64-bits)
		return []int64{lo, hi}[f.rng.Intn(2)]
	case r < 20:
		return -1
	case r < 60:
		return int64(f.rng.Intn(8))
	default:
		return int64(f.rng.Intn(1000))
	}
}

func (f *filler) str(name string) string {
	switch {
	case f.rng.Intn(20) == 0:
		return ""
	case f.rng.Intn(40) == 0: // not UTF-8, and long
		b := make([]byte, 1+f.rng.Intn(300))
		f.rng.Read(b)
		return string(b)
	case strings.Contains(name, "Group") || name == "CoordinatorKeys" || name == "Key":
		return f.names.groups[f.rng.Intn(len(f.names.groups))]
	case strings.Contains(name, "Topic") || name == "Name" || name == "Names":
		return f.names.topics[f.rng.Intn(len(f.names.topics))]
	case strings.Contains(name, "Member") || strings.Contains(name, "Instance") || strings.Contains(name, "Process"):
		return fmt.Sprintf("m-%d", f.rng.Intn(16))
	case strings.Contains(name, "Protocol") || strings.Contains(name, "Assignor"):
		return []string{"consumer", "range", "roundrobin", "cooperative-sticky", "sticky", "highavailability", "x"}[f.rng.Intn(7)]
	default:
		all := append(append([]string{}, f.names.groups...), f.names.topics...)
		return all[f.rng.Intn(len(all))]
	}
}

// api is one served key and its version range, as ApiVersions of the running daemon says.
type api struct {
	key      int16
	min, max int16
}

// encoded is one request ready to send, with what is known of it for the verdict.
type encoded struct {
	key, version int16
	corr         int32
	frame        []byte // size prefix included
	headerLen    int    // bytes of the frame (after the size) before the body
}

// buildValid encodes a randomly filled request of a.key at a random served version.
func buildValid(rng *rand.Rand, a api, corr int32, pool names, bulk bool) (e encoded, ok bool) {
	req := kmsg.RequestForKey(a.key)
	if req == nil {
		return e, false
	}
	if d, ok := req.(interface{ Default() }); ok {
		d.Default()
	}
	f := filler{rng: rng, names: pool, bulk: bulk}
	f.fill(reflect.ValueOf(req).Elem(), "", 0)
	version := a.min + int16(rng.Intn(int(a.max-a.min)+1))
	e, ok = encode(req, version, corr)
	return e, ok && len(e.frame)-4 <= maxRequestBytes
}

// encode frames req at version; ok=false when kmsg cannot encode the random values at that
// version (a field set that the version cannot carry).
func encode(req kmsg.Request, version int16, corr int32) (e encoded, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	req.SetVersion(version)
	clientID := "soak"
	body := kbin.AppendInt16(nil, req.Key())
	body = kbin.AppendInt16(body, version)
	body = kbin.AppendInt32(body, corr)
	body = kbin.AppendNullableString(body, &clientID)
	if req.IsFlexible() {
		body = append(body, 0)
	}
	hdr := len(body)
	body = req.AppendTo(body)
	return encoded{key: req.Key(), version: version, corr: corr, headerLen: hdr,
		frame: append(kbin.AppendInt32(nil, int32(len(body))), body...)}, true
}
