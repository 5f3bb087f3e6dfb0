package conformance

// A tree is the JSON-like view of a kmsg message that scenarios are written against: objects
// keep the struct's field order, integers are int64, topic ids (UUIDs) are Kafka's base64url
// text, byte fields are hex. Requests are built from scenario JSON through the same view, so
// a field name in a scenario is always the kmsg Go field name.

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Obj is a tree object with ordered keys.
type Obj struct {
	Keys []string
	Vals map[string]any
}

func newObj() *Obj { return &Obj{Vals: map[string]any{}} }

func (o *Obj) set(k string, v any) {
	if _, ok := o.Vals[k]; !ok {
		o.Keys = append(o.Keys, k)
	}
	o.Vals[k] = v
}

// UUID is a topic id (or any [16]byte) in Kafka's text form, kept as its own type so that
// normalization can recognise it.
type UUID string

var zeroUUID = uuidString([16]byte{})

func uuidString(b [16]byte) UUID { return UUID(base64.RawURLEncoding.EncodeToString(b[:])) }

func parseUUID(s string) ([16]byte, error) {
	var out [16]byte
	var raw []byte
	var err error
	switch len(s) {
	case 22:
		raw, err = base64.RawURLEncoding.DecodeString(s)
	case 32:
		raw, err = hex.DecodeString(s)
	case 36:
		raw, err = hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	default:
		err = fmt.Errorf("want 22 base64url characters (Kafka's form), 32 hex digits or a dashed UUID")
	}
	if err == nil && len(raw) != 16 {
		err = fmt.Errorf("decodes to %d bytes, want 16", len(raw))
	}
	if err != nil {
		return out, fmt.Errorf("uuid %q: %w", s, err)
	}
	copy(out[:], raw)
	return out, nil
}

var (
	tagsType = reflect.TypeOf(kmsg.Tags{})
	uuidType = reflect.TypeOf([16]byte{})
)

// toTree renders a kmsg message (pointer to struct) as a tree. The top-level Version field is
// left out: it is the header's version, not part of the body.
func toTree(msg any) any {
	return treeOf(reflect.ValueOf(msg), true)
}

func treeOf(v reflect.Value, top bool) any {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return treeOf(v.Elem(), top)
	case reflect.Struct:
		o := newObj()
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() || (top && f.Name == "Version") {
				continue
			}
			fv := v.Field(i)
			if f.Type == tagsType {
				tags := fv.Addr().Interface().(*kmsg.Tags)
				if tags.Len() == 0 {
					continue
				}
				to := newObj()
				tags.Each(func(k uint32, val []byte) { to.set(strconv.FormatUint(uint64(k), 10), hex.EncodeToString(val)) })
				o.set(f.Name, to)
				continue
			}
			o.set(f.Name, treeOf(fv, false))
		}
		return o
	case reflect.Slice:
		if v.IsNil() {
			return nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return hex.EncodeToString(v.Bytes())
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = treeOf(v.Index(i), false)
		}
		return out
	case reflect.Array:
		if v.Type() == uuidType {
			return uuidString(v.Interface().([16]byte))
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = treeOf(v.Index(i), false)
		}
		return out
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return int64(v.Uint())
	case reflect.Bool:
		return v.Bool()
	case reflect.String:
		return v.String()
	case reflect.Float32, reflect.Float64:
		return v.Float()
	case reflect.Map:
		if v.IsNil() {
			return nil
		}
		o := newObj()
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
		for _, k := range keys {
			o.set(fmt.Sprint(k), treeOf(v.MapIndex(k), false))
		}
		return o
	}
	return fmt.Sprintf("<unsupported %s>", v.Kind())
}

// parseJSON decodes scenario JSON keeping numbers exact.
func parseJSON(text string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return v, nil
}

// fill sets a kmsg message (pointer to struct) from scenario JSON. Unknown field names are
// errors that list the valid ones, so a typo in a scenario never silently sends defaults.
func fill(msg any, j any) error {
	return fillValue(reflect.ValueOf(msg).Elem(), j, "")
}

func defaulted(t reflect.Type) reflect.Value {
	p := reflect.New(t)
	if d, ok := p.Interface().(interface{ Default() }); ok {
		d.Default()
	}
	return p.Elem()
}

func fillValue(v reflect.Value, j any, path string) error {
	at := func(format string, args ...any) error {
		p := path
		if p == "" {
			p = "request"
		}
		return fmt.Errorf("%s: %s", p, fmt.Sprintf(format, args...))
	}
	switch v.Kind() {
	case reflect.Pointer:
		if j == nil {
			v.Set(reflect.Zero(v.Type()))
			return nil
		}
		e := defaulted(v.Type().Elem())
		if err := fillValue(e, j, path); err != nil {
			return err
		}
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(e)
		v.Set(p)
		return nil
	case reflect.Struct:
		m, ok := j.(map[string]any)
		if !ok {
			return at("want an object, got %s", describe(j))
		}
		names := make([]string, 0, len(m))
		for k := range m {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			f, ok := v.Type().FieldByName(k)
			if !ok || !f.IsExported() || f.Type == tagsType || (path == "" && k == "Version") {
				return at("no field %q; fields are %s", k, fieldNames(v.Type(), path == ""))
			}
			if err := fillValue(v.FieldByIndex(f.Index), m[k], join(path, k)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Slice:
		if j == nil {
			v.Set(reflect.Zero(v.Type()))
			return nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			s, ok := j.(string)
			if !ok {
				return at("want hex bytes as a string, got %s", describe(j))
			}
			b, err := hex.DecodeString(strings.TrimPrefix(s, "0x"))
			if err != nil {
				return at("bad hex: %v", err)
			}
			v.SetBytes(b)
			return nil
		}
		arr, ok := j.([]any)
		if !ok {
			return at("want an array, got %s", describe(j))
		}
		s := reflect.MakeSlice(v.Type(), len(arr), len(arr))
		for i, e := range arr {
			ev := defaulted(v.Type().Elem())
			if err := fillValue(ev, e, join(path, strconv.Itoa(i))); err != nil {
				return err
			}
			s.Index(i).Set(ev)
		}
		v.Set(s)
		return nil
	case reflect.Array:
		if v.Type() != uuidType {
			return at("unsupported array type %s", v.Type())
		}
		s, ok := j.(string)
		if !ok {
			return at("want a uuid string, got %s", describe(j))
		}
		u, err := parseUUID(s)
		if err != nil {
			return at("%v", err)
		}
		v.Set(reflect.ValueOf(u))
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := intOf(j, v.Type().Bits(), path)
		if err != nil {
			return at("%v", err)
		}
		v.SetInt(n)
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		num, ok := j.(json.Number)
		if !ok {
			return at("want a number, got %s", describe(j))
		}
		n, err := strconv.ParseUint(num.String(), 10, v.Type().Bits())
		if err != nil {
			return at("%v", err)
		}
		v.SetUint(n)
		return nil
	case reflect.Bool:
		b, ok := j.(bool)
		if !ok {
			return at("want true or false, got %s", describe(j))
		}
		v.SetBool(b)
		return nil
	case reflect.String:
		s, ok := j.(string)
		if !ok {
			return at("want a string, got %s", describe(j))
		}
		v.SetString(s)
		return nil
	case reflect.Float32, reflect.Float64:
		num, ok := j.(json.Number)
		if !ok {
			return at("want a number, got %s", describe(j))
		}
		f, err := num.Float64()
		if err != nil {
			return at("%v", err)
		}
		v.SetFloat(f)
		return nil
	}
	return at("unsupported kind %s", v.Kind())
}

// intOf reads an integer; fields named ...ErrorCode also accept Kafka's error name.
func intOf(j any, bits int, path string) (int64, error) {
	switch x := j.(type) {
	case json.Number:
		n, err := strconv.ParseInt(x.String(), 10, bits)
		if err != nil {
			return 0, err
		}
		return n, nil
	case string:
		if isErrorCodeField(path) {
			if c, ok := errorCodeByName(x); ok {
				return int64(c), nil
			}
			return 0, fmt.Errorf("unknown error name %q", x)
		}
	}
	return 0, fmt.Errorf("want an integer, got %s", describe(j))
}

func isErrorCodeField(path string) bool {
	return strings.HasSuffix(lastSegment(path), "ErrorCode")
}

func lastSegment(path string) string {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[i+1:]
	}
	return path
}

var errorNames = func() map[string]int16 {
	m := map[string]int16{"NONE": 0}
	for c := int16(-1); c < 1000; c++ {
		if e := kerr.TypedErrorForCode(c); e != nil && e.Code == c {
			m[e.Message] = c
		}
	}
	return m
}()

func errorCodeByName(name string) (int16, bool) {
	c, ok := errorNames[name]
	return c, ok
}

// errorName is the Kafka name of an error code, for messages.
func errorName(code int64) string {
	if code == 0 {
		return "NONE"
	}
	if code < math.MinInt16 || code > math.MaxInt16 {
		return "?"
	}
	if e := kerr.TypedErrorForCode(int16(code)); e != nil && int64(e.Code) == code {
		return e.Message
	}
	return "unknown code"
}

func fieldNames(t reflect.Type, top bool) string {
	var names []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() || f.Type == tagsType || (top && f.Name == "Version") {
			continue
		}
		names = append(names, f.Name)
	}
	return strings.Join(names, ", ")
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func describe(j any) string {
	switch j.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	}
	return fmt.Sprintf("%T", j)
}

// render writes a tree as compact JSON with the struct field order kept.
func render(v any) string {
	var b bytes.Buffer
	renderTo(&b, v)
	return b.String()
}

func renderTo(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case *Obj:
		b.WriteByte('{')
		for i, k := range x.Keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, k)
			b.WriteByte(':')
			renderTo(b, x.Vals[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			renderTo(b, e)
		}
		b.WriteByte(']')
	case string:
		writeJSONString(b, x)
	case UUID:
		writeJSONString(b, string(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		b.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
	case bool:
		b.WriteString(strconv.FormatBool(x))
	default:
		fmt.Fprintf(b, "%v", x)
	}
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	b.Truncate(b.Len() - 1) // Encode's newline
}

// clone deep-copies a tree.
func clone(v any) any {
	switch x := v.(type) {
	case *Obj:
		o := &Obj{Keys: append([]string(nil), x.Keys...), Vals: make(map[string]any, len(x.Vals))}
		for k, e := range x.Vals {
			o.Vals[k] = clone(e)
		}
		return o
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = clone(e)
		}
		return out
	}
	return v
}

// lookup walks a dotted path (field names and array indexes) through a tree.
func lookup(v any, path string) (any, error) {
	if path == "" || path == "." {
		return v, nil
	}
	cur := v
	for _, seg := range strings.Split(path, ".") {
		switch x := cur.(type) {
		case *Obj:
			e, ok := x.Vals[seg]
			if !ok {
				return nil, fmt.Errorf("no field %q at %q; fields are %s", seg, path, strings.Join(x.Keys, ", "))
			}
			cur = e
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("index %q out of range (length %d) in %q", seg, len(x), path)
			}
			cur = x[i]
		default:
			return nil, fmt.Errorf("%q: cannot descend into %s", path, render(cur))
		}
	}
	return cur, nil
}

// scalarText is the text a captured value is substituted as: strings and uuids bare (the
// scenario writes the quotes), numbers, booleans, arrays and objects as JSON (a member's
// ActiveTasks, sent back as the tasks it owns).
func scalarText(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case UUID:
		return string(x), nil
	case int64, float64, bool, nil, []any, *Obj:
		return render(x), nil
	}
	return "", fmt.Errorf("cannot capture a non-scalar value %s", render(v))
}
