package wire

import (
	"reflect"

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

func addSize(v reflect.Value, size *int64, limit int64) bool {
	switch v.Kind() {
	case reflect.String:
		*size += 4 + int64(v.Len())
	case reflect.Slice:
		*size += 4
		if v.Type().Elem().Kind() == reflect.Uint8 {
			*size += int64(v.Len())
			break
		}
		for i := 0; i < v.Len(); i++ {
			if !addSize(v.Index(i), size, limit) {
				return false
			}
		}
	case reflect.Array:
		*size += int64(v.Type().Size())
	case reflect.Pointer:
		*size++
		if !v.IsNil() {
			return addSize(v.Elem(), size, limit)
		}
	case reflect.Struct:
		*size++ // a flexible version's tag section
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			if t.Field(i).IsExported() && !addSize(v.Field(i), size, limit) {
				return false
			}
		}
	case reflect.Bool, reflect.Int8, reflect.Uint8:
		*size++
	case reflect.Int16, reflect.Uint16:
		*size += 2
	case reflect.Int32, reflect.Uint32, reflect.Float32:
		*size += 4
	default:
		*size += 8
	}
	return *size <= limit
}
