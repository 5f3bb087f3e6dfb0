package gateway

import (
	"reflect"
	"sort"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The advertised ApiVersions table and features are built from upstream answers (apiversions.go),
// whatever those hold: keys the codec does not know, negative keys and versions, a minimum
// above the maximum, a key twice, brokers that disagree. These targets hold the merge to rules
// restated independently: a key is advertised for forwarding only when every upstream serves
// it, the gateway may forward it, and some version of it is within every range, kmsg's and the
// gateway's caps.

// localTable is a local ApiVersions table as coordinatord's handler answers it: the group APIs
// and a few it also serves standalone.
func localTable() []kmsg.ApiVersionsResponseApiKey {
	var out []kmsg.ApiVersionsResponseApiKey
	for key := int16(0); key < 100; key++ {
		if !localKeys[key] && key != 3 && key != 10 && key != 32 && key != 60 {
			continue
		}
		req := kmsg.RequestForKey(key)
		if req == nil {
			continue
		}
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MaxVersion = key, req.MaxVersion()
		out = append(out, k)
	}
	return out
}

func buildUpstreamVersions(s *shape) *kmsg.ApiVersionsResponse {
	up := kmsg.NewPtrApiVersionsResponse()
	if s.bool() {
		// A whole table as a broker of the same codec answers it.
		for key := int16(0); key < 100; key++ {
			if req := kmsg.RequestForKey(key); req != nil {
				k := kmsg.NewApiVersionsResponseApiKey()
				k.ApiKey, k.MaxVersion = key, req.MaxVersion()
				up.ApiKeys = append(up.ApiKeys, k)
			}
		}
	}
	for n := s.intn(12); n > 0; n-- {
		k := kmsg.NewApiVersionsResponseApiKey()
		if s.intn(8) == 0 {
			k.ApiKey = s.int16()
		} else {
			k.ApiKey = int16(s.intn(100))
		}
		k.MinVersion, k.MaxVersion = int16(s.intn(6))-1, int16(s.intn(24))-1
		if s.intn(16) == 0 {
			k.MaxVersion = s.int16()
		}
		if s.bool() && len(up.ApiKeys) > 0 {
			up.ApiKeys[s.intn(len(up.ApiKeys))] = k // a broker that serves less
		} else {
			up.ApiKeys = append(up.ApiKeys, k)
		}
	}
	names := []string{"group.version", "streams.version", "transaction.version", "metadata.version", "share.version", "kraft.version"}
	for n := s.intn(5); n > 0; n-- {
		f := kmsg.NewApiVersionsResponseSupportedFeature()
		f.Name, f.MinVersion, f.MaxVersion = names[s.intn(len(names))], int16(s.intn(3)), int16(s.intn(25))
		up.SupportedFeatures = append(up.SupportedFeatures, f)
	}
	for n := s.intn(5); n > 0; n-- {
		f := kmsg.NewApiVersionsResponseFinalizedFeature()
		f.Name, f.MinVersionLevel, f.MaxVersionLevel = names[s.intn(len(names))], int16(s.intn(4))-1, int16(s.intn(25))-1
		up.FinalizedFeatures = append(up.FinalizedFeatures, f)
	}
	up.FinalizedFeaturesEpoch = s.int64()
	return up
}

// wantVersions restates mergeVersions' rules.
func wantVersions(local []kmsg.ApiVersionsResponseApiKey, ups []*kmsg.ApiVersionsResponse) []kmsg.ApiVersionsResponseApiKey {
	var out []kmsg.ApiVersionsResponseApiKey
	for _, k := range local {
		if k.ApiKey == 10 {
			for _, u := range ups {
				for _, uk := range u.ApiKeys {
					if uk.ApiKey == 10 && uk.MaxVersion >= k.MinVersion {
						k.MaxVersion = min(k.MaxVersion, uk.MaxVersion)
					}
				}
			}
		} else if !localKeys[k.ApiKey] || withheld[k.ApiKey] {
			continue
		}
		out = append(out, k)
	}
	candidates := map[int16]bool{}
	for _, u := range ups {
		for _, k := range u.ApiKeys {
			candidates[k.ApiKey] = true
		}
	}
	for key := range candidates {
		req := kmsg.RequestForKey(key)
		if localKeys[key] || neverForwarded[key] || key == 10 || req == nil {
			continue
		}
		lo, hi := int16(-1<<15), req.MaxVersion()
		if m, ok := forwardMax[key]; ok {
			hi = min(hi, m)
		}
		everywhere := true
		for _, u := range ups {
			served := false
			for _, k := range u.ApiKeys {
				if k.ApiKey == key {
					served, lo, hi = true, max(lo, k.MinVersion), min(hi, k.MaxVersion)
				}
			}
			everywhere = everywhere && served
		}
		if everywhere && lo <= hi {
			k := kmsg.NewApiVersionsResponseApiKey()
			k.ApiKey, k.MinVersion, k.MaxVersion = key, lo, hi
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ApiKey < out[j].ApiKey })
	return out
}

// FuzzMergeVersions: the advertised table is exactly what the rules make of one to three
// upstream answers, never a key the gateway may not forward or a range a broker does not serve.
func FuzzMergeVersions(f *testing.F) {
	f.Add([]byte{1})
	f.Add([]byte{3, 1, 0, 1, 1})
	f.Add([]byte{2, 1, 5, 0, 3, 2, 7, 1, 1, 0, 0, 4, 1, 2, 3, 4, 5, 6})
	f.Add([]byte{1, 0, 4, 0x50, 0, 10, 0, 0xff, 0xff, 1, 8, 0x80, 0, 1, 2})
	f.Fuzz(func(t *testing.T, spec []byte) {
		s := &shape{spec}
		ups := make([]*kmsg.ApiVersionsResponse, 1+s.intn(3))
		for i := range ups {
			ups[i] = buildUpstreamVersions(s)
		}
		local := localTable()
		want := wantVersions(local, ups)
		got := mergeVersions(localTable(), ups)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("advertised\n%v\nwant\n%v", got, want)
		}
		for _, k := range got {
			if k.MinVersion > k.MaxVersion {
				t.Fatalf("key %d advertised as %d-%d: no version a client can pick", k.ApiKey, k.MinVersion, k.MaxVersion)
			}
		}
	})
}

// FuzzMergeFeatures: the advertised features are the upstream's but for the group features,
// which are coordinatord's, and transaction.version, capped at what the relay handles.
func FuzzMergeFeatures(f *testing.F) {
	f.Add(uint8(3), []byte{1, 0, 4, 0, 1, 2, 3, 4, 2, 2, 1, 1})
	f.Add(uint8(4), []byte{0, 0, 3, 1, 0, 5, 2, 1, 7, 4, 2, 2, 9, 0, 1, 2, 3})
	f.Fuzz(func(t *testing.T, version uint8, spec []byte) {
		s := &shape{spec}
		v := int16(version) % (kmsg.NewPtrApiVersionsRequest().MaxVersion() + 1)
		up := buildUpstreamVersions(s)
		// The local answer's own features are replaced whole.
		resp := buildUpstreamVersions(s)
		want := kmsg.NewPtrApiVersionsResponse()
		for _, sf := range up.SupportedFeatures {
			if sf.Name != "group.version" && sf.Name != "streams.version" && (v >= 4 || sf.MinVersion != 0) {
				want.SupportedFeatures = append(want.SupportedFeatures, sf)
			}
		}
		for _, ff := range up.FinalizedFeatures {
			switch ff.Name {
			case "group.version", "streams.version":
				continue
			case "transaction.version":
				ff.MinVersionLevel, ff.MaxVersionLevel = min(ff.MinVersionLevel, 1), min(ff.MaxVersionLevel, 1)
			}
			want.FinalizedFeatures = append(want.FinalizedFeatures, ff)
		}
		for _, name := range []string{"group.version", "streams.version"} {
			if v >= 4 {
				sf := kmsg.NewApiVersionsResponseSupportedFeature()
				sf.Name, sf.MaxVersion = name, 1
				want.SupportedFeatures = append(want.SupportedFeatures, sf)
			}
			ff := kmsg.NewApiVersionsResponseFinalizedFeature()
			ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = name, 1, 1
			want.FinalizedFeatures = append(want.FinalizedFeatures, ff)
		}
		mergeFeatures(resp, up, v)
		if resp.FinalizedFeaturesEpoch != up.FinalizedFeaturesEpoch {
			t.Fatalf("features epoch %d, the upstream's is %d", resp.FinalizedFeaturesEpoch, up.FinalizedFeaturesEpoch)
		}
		if len(resp.SupportedFeatures)+len(want.SupportedFeatures) > 0 && !reflect.DeepEqual(resp.SupportedFeatures, want.SupportedFeatures) {
			t.Fatalf("v%d: supported features\n%+v\nwant\n%+v", v, resp.SupportedFeatures, want.SupportedFeatures)
		}
		if !reflect.DeepEqual(resp.FinalizedFeatures, want.FinalizedFeatures) {
			t.Fatalf("v%d: finalized features\n%+v\nwant\n%+v", v, resp.FinalizedFeatures, want.FinalizedFeatures)
		}
	})
}
