package wire

import (
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// reflectCodes is the reflective walk the metrics used before the compiled walkers, kept as the
// reference they must agree with.
func reflectCodes(v reflect.Value, out *[]int16) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() && v.Elem().Kind() == reflect.Struct && v.Type().Implements(reflect.TypeFor[kmsg.Response]()) {
			reflectCodes(v.Elem(), out)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			fv := v.Field(i)
			if f.Name == "ErrorCode" && fv.Kind() == reflect.Int16 {
				if c := int16(fv.Int()); c != 0 {
					*out = append(*out, c)
				}
				continue
			}
			if k := fv.Kind(); k == reflect.Slice || k == reflect.Struct {
				reflectCodes(fv, out)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.Struct {
			return
		}
		for i := 0; i < v.Len(); i++ {
			reflectCodes(v.Index(i), out)
		}
	}
}

// fill gives every ErrorCode a distinct non-zero value and every slice of structs two elements,
// a few levels deep, so a walker that skips or misplaces a field reports other codes.
func fill(v reflect.Value, next *int16, depth int) {
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			fv := v.Field(i)
			switch {
			case f.Name == "ErrorCode" && fv.Kind() == reflect.Int16:
				*next++
				fv.SetInt(int64(*next))
			case fv.Kind() == reflect.Int16:
				fv.SetInt(-7) // a code-sized neighbour that must not be counted
			case fv.Kind() == reflect.Struct:
				fill(fv, next, depth)
			case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Struct && depth < 4:
				s := reflect.MakeSlice(fv.Type(), 2, 2)
				for j := 0; j < 2; j++ {
					fill(s.Index(j), next, depth+1)
				}
				fv.Set(s)
			}
		}
	}
}

// Error-code metrics count every non-zero ErrorCode of a response, per entry: the walker built
// once per type must find exactly what a full reflective walk finds, for every response kmsg has.
func TestErrorCodeWalkersAgreeWithReflection(t *testing.T) {
	checked := 0
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		resp := kmsg.ResponseForKey(key)
		if resp == nil {
			continue
		}
		var next int16
		fill(reflect.ValueOf(resp).Elem(), &next, 0)
		var want, got []int16
		reflectCodes(reflect.ValueOf(resp), &want)
		eachErrorCode(resp, func(c int16) { got = append(got, c) })
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: walker found codes %v, reflection %v", kmsg.NameForKey(key), got, want)
		}
		if len(want) > 0 {
			checked++
		}
	}
	if checked < 50 {
		t.Fatalf("only %d responses carried error codes; the fill no longer reaches them", checked)
	}
}

// BenchmarkErrorCodeWalk compares the reflective walk with the compiled walker on an
// OffsetCommit answer of one topic and ten partitions.
func BenchmarkErrorCodeWalk(b *testing.B) {
	resp := kmsg.NewPtrOffsetCommitResponse()
	topic := kmsg.NewOffsetCommitResponseTopic()
	for p := int32(0); p < 10; p++ {
		rp := kmsg.NewOffsetCommitResponseTopicPartition()
		rp.Partition = p
		topic.Partitions = append(topic.Partitions, rp)
	}
	topic.Partitions[9].ErrorCode = 3
	resp.Topics = append(resp.Topics, topic)
	n := 0
	b.Run("reflect", func(b *testing.B) {
		b.ReportAllocs()
		var codes []int16
		for b.Loop() {
			codes = codes[:0]
			reflectCodes(reflect.ValueOf(resp), &codes)
			n += len(codes)
		}
	})
	b.Run("compiled", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			eachErrorCode(resp, func(int16) { n++ })
		}
	})
}
