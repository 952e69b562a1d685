package wire

import (
	"bytes"
	"encoding/xml"
	"reflect"
	"strconv"
	"time"
)

// Namespace is the xmlns of every EC2 response of the 2016-11-15 API.
const Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

// EncodeResponse renders an SDK output struct as the EC2 XML response of action.
func EncodeResponse(action, requestID string, out any) []byte {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	b.WriteString("<" + action + "Response xmlns=\"" + Namespace + "\">")
	b.WriteString("<requestId>" + requestID + "</requestId>")
	rv := reflect.ValueOf(out)
	for rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	encodeFields(&b, rv)
	b.WriteString("</" + action + "Response>")
	return b.Bytes()
}

// EncodeError renders EC2's error envelope.
func EncodeError(requestID, code, message string) []byte {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	b.WriteString("<Response><Errors><Error><Code>")
	xml.EscapeText(&b, []byte(code))
	b.WriteString("</Code><Message>")
	xml.EscapeText(&b, []byte(message))
	b.WriteString("</Message></Error></Errors><RequestID>" + requestID + "</RequestID></Response>")
	return b.Bytes()
}

func encodeFields(b *bytes.Buffer, rv reflect.Value) {
	rt := rv.Type()
	for i := 0; i < rt.NumField(); i++ {
		f := rt.Field(i)
		if !f.IsExported() || f.Name == "ResultMetadata" {
			continue
		}
		name, ok := xmlNames[rt.Name()+"."+f.Name]
		if !ok {
			name = lowerFirst(f.Name)
		}
		encodeValue(b, name, rv.Field(i))
	}
}

func encodeValue(b *bytes.Buffer, name string, v reflect.Value) {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
		// A set pointer is written even when zero: the caller asked for it.
		writeScalarOrNested(b, name, v, true)
		return
	}
	writeScalarOrNested(b, name, v, false)
}

func writeScalarOrNested(b *bytes.Buffer, name string, v reflect.Value, explicit bool) {
	switch {
	case v.Type() == timeType:
		t := v.Interface().(time.Time)
		if t.IsZero() && !explicit {
			return
		}
		text(b, name, t.UTC().Format("2006-01-02T15:04:05.000Z"))
	case v.Kind() == reflect.Struct:
		b.WriteString("<" + name + ">")
		encodeFields(b, v)
		b.WriteString("</" + name + ">")
	case v.Kind() == reflect.Slice:
		if v.IsNil() {
			return
		}
		b.WriteString("<" + name + ">")
		for i := 0; i < v.Len(); i++ {
			encodeValue(b, "item", v.Index(i))
		}
		b.WriteString("</" + name + ">")
	case v.Kind() == reflect.String:
		if v.Len() == 0 && !explicit {
			return
		}
		text(b, name, v.String())
	case v.Kind() == reflect.Bool:
		if !v.Bool() && !explicit {
			return
		}
		text(b, name, strconv.FormatBool(v.Bool()))
	case v.Kind() >= reflect.Int && v.Kind() <= reflect.Int64:
		if v.Int() == 0 && !explicit {
			return
		}
		text(b, name, strconv.FormatInt(v.Int(), 10))
	case v.Kind() == reflect.Float32 || v.Kind() == reflect.Float64:
		if v.Float() == 0 && !explicit {
			return
		}
		text(b, name, strconv.FormatFloat(v.Float(), 'f', -1, 64))
	}
}

func text(b *bytes.Buffer, name, s string) {
	b.WriteString("<" + name + ">")
	xml.EscapeText(b, []byte(s))
	b.WriteString("</" + name + ">")
}

func lowerFirst(s string) string {
	if s == "" || s[0] < 'A' || s[0] > 'Z' {
		return s
	}
	return string(s[0]+('a'-'A')) + s[1:]
}
