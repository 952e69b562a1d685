// Package wire is the EC2 query protocol codec: it decodes form-encoded
// requests into aws-sdk-go-v2 input structs and encodes SDK output structs
// as EC2 XML. Wire names come from the SDK's own generated (de)serializers
// (names_gen.go), so the simulator speaks exactly what the SDK expects.
package wire

import (
	"fmt"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Decode fills the struct pointed to by v from EC2 query parameters.
// Unknown parameters are ignored, as EC2 ignores parameters of newer API versions.
func Decode(form url.Values, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("decode: want pointer to struct, got %T", v)
	}
	d := decoder{form: form, prefixes: map[string]bool{}}
	for k := range form {
		for i := strings.IndexByte(k, '.'); i >= 0; {
			d.prefixes[k[:i]] = true
			j := strings.IndexByte(k[i+1:], '.')
			if j < 0 {
				break
			}
			i += j + 1
		}
		d.prefixes[k] = true
	}
	return d.decodeStruct("", rv.Elem())
}

type decoder struct {
	form     url.Values
	prefixes map[string]bool
}

var timeType = reflect.TypeOf(time.Time{})

func (d decoder) decodeStruct(prefix string, rv reflect.Value) error {
	rt := rv.Type()
	for i := 0; i < rt.NumField(); i++ {
		f := rt.Field(i)
		if !f.IsExported() || f.Name == "ResultMetadata" {
			continue
		}
		name := f.Name
		if n, ok := queryNames[rt.Name()+"."+f.Name]; ok {
			name = n
		}
		if err := d.decodeValue(prefix+name, rv.Field(i)); err != nil {
			return err
		}
	}
	return nil
}

func (d decoder) decodeValue(key string, fv reflect.Value) error {
	if !d.prefixes[key] {
		return nil
	}
	t := fv.Type()
	if t.Kind() == reflect.Pointer {
		nv := reflect.New(t.Elem())
		if err := d.decodeValue(key, nv.Elem()); err != nil {
			return err
		}
		fv.Set(nv)
		return nil
	}
	raw := d.form.Get(key)
	switch {
	case t == timeType:
		ts, err := time.Parse(time.RFC3339, raw)
		if err != nil {
			return fmt.Errorf("parameter %s: invalid timestamp %q", key, raw)
		}
		fv.Set(reflect.ValueOf(ts))
	case t.Kind() == reflect.String:
		fv.SetString(raw)
	case t.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return fmt.Errorf("parameter %s: invalid boolean %q", key, raw)
		}
		fv.SetBool(b)
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return fmt.Errorf("parameter %s: invalid integer %q", key, raw)
		}
		fv.SetInt(n)
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		n, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return fmt.Errorf("parameter %s: invalid number %q", key, raw)
		}
		fv.SetFloat(n)
	case t.Kind() == reflect.Slice:
		out := reflect.MakeSlice(t, 0, 4)
		for n := 1; ; n++ {
			k := key + "." + strconv.Itoa(n)
			if !d.prefixes[k] {
				break
			}
			ev := reflect.New(t.Elem()).Elem()
			if err := d.decodeValue(k, ev); err != nil {
				return err
			}
			out = reflect.Append(out, ev)
		}
		fv.Set(out)
	case t.Kind() == reflect.Struct:
		return d.decodeStruct(key+".", fv)
	}
	return nil
}
