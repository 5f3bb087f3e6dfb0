package wire

import (
	"reflect"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// encodedSizeAtMost estimates the bytes resp encodes to, from above, without encoding it: every
// length prefix is counted at its widest (4 bytes) and every number at 8. A response's bytes
// are counted against the request budget before its buffer is allocated, since a small request
// can ask for a large answer (the same large group named many times). The walk stops as soon
// as the estimate passes limit (ok=false), so an enormous response costs no more than limit to
// look at.
func encodedSizeAtMost(resp kmsg.Response, limit int64) (size int64, ok bool) {
	v := reflect.ValueOf(resp)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	size = 16 // size prefix, correlation id, header tags
	return size, addSize(v, &size, limit)
}

// sizePlan is what the walk needs of a struct type, worked out once per type: asking
// reflect.Type for a field (StructField) allocates, and that was a per-request cost on every
// answer (a heartbeat's too). fixed reports that no value of the type can differ in estimate
// (no strings, slices or pointers anywhere inside), so its estimate is size without a walk.
type sizePlan struct {
	fields []int // exported fields, in order
	fixed  bool
	size   int64 // the estimate of any value, when fixed
}

var sizePlans sync.Map // reflect.Type -> *sizePlan

func planFor(t reflect.Type) *sizePlan {
	if p, ok := sizePlans.Load(t); ok {
		return p.(*sizePlan)
	}
	p := &sizePlan{fixed: true, size: 1} // 1: a flexible version's tag section
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		p.fields = append(p.fields, i)
		if n, ok := fixedSize(f.Type); ok {
			p.size += n
		} else {
			p.fixed = false
		}
	}
	sizePlans.Store(t, p)
	return p
}

// fixedSize is the estimate addSize gives every value of t, when it is the same for all.
func fixedSize(t reflect.Type) (int64, bool) {
	switch t.Kind() {
	case reflect.String, reflect.Slice, reflect.Pointer, reflect.Interface, reflect.Map:
		return 0, false
	case reflect.Struct:
		p := planFor(t)
		return p.size, p.fixed
	}
	return scalarSize(t), true
}

// scalarSize is the estimate of a value of a kind that has no parts to walk.
func scalarSize(t reflect.Type) int64 {
	switch t.Kind() {
	case reflect.Array:
		return int64(t.Size())
	case reflect.Bool, reflect.Int8, reflect.Uint8:
		return 1
	case reflect.Int16, reflect.Uint16:
		return 2
	case reflect.Int32, reflect.Uint32, reflect.Float32:
		return 4
	default:
		return 8
	}
}

func addSize(v reflect.Value, size *int64, limit int64) bool {
	switch v.Kind() {
	case reflect.String:
		*size += 4 + int64(v.Len())
	case reflect.Slice:
		*size += 4
		et := v.Type().Elem()
		if et.Kind() == reflect.Uint8 {
			*size += int64(v.Len())
			break
		}
		if n, ok := fixedSize(et); ok {
			// Every element estimates the same: no walk. Elements exist in memory, so the
			// product cannot overflow.
			*size += n * int64(v.Len())
			break
		}
		for i := 0; i < v.Len(); i++ {
			if !addSize(v.Index(i), size, limit) {
				return false
			}
		}
	case reflect.Pointer:
		*size++
		if !v.IsNil() {
			return addSize(v.Elem(), size, limit)
		}
	case reflect.Struct:
		p := planFor(v.Type())
		if p.fixed {
			*size += p.size
			break
		}
		*size++ // a flexible version's tag section
		for _, i := range p.fields {
			if !addSize(v.Field(i), size, limit) {
				return false
			}
		}
	default:
		*size += scalarSize(v.Type())
	}
	return *size <= limit
}
