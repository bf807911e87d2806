package parquet

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// A row type is a struct whose exported fields carry a `parquet:"name"`
// tag, with the options "optional" (the field is a pointer; nil is null)
// and "dict" (strings: dictionary-encoded). Field types:
//
//	int32, int64        INT32 / INT64, annotated as signed integers
//	float64             DOUBLE
//	bool                BOOLEAN
//	string              BYTE_ARRAY, annotated as STRING (UTF-8)
//	*T of the above     the same, OPTIONAL
//	map[string]V        a MAP of STRING keys (dictionary-encoded) to V of
//	                    the above, written in key order
//
// Fields without a tag, or tagged "-", are left out.

// kind is a leaf's Go type.
type kind uint8

const (
	kInt32 kind = iota
	kInt64
	kDouble
	kBool
	kString
)

func kindOf(t reflect.Type) (kind, bool) {
	switch t.Kind() {
	case reflect.Int32:
		return kInt32, true
	case reflect.Int64:
		return kInt64, true
	case reflect.Float64:
		return kDouble, true
	case reflect.Bool:
		return kBool, true
	case reflect.String:
		return kString, true
	}
	return 0, false
}

// element is the schema element of a leaf of kind k.
func (k kind) element(name string, repetition int32) schemaElement {
	e := schemaElement{name: name, repetition: repetition, converted: -1}
	switch k {
	case kInt32:
		e.typ, e.converted, e.logical, e.intBits = typeInt32, convertedInt32, logicalInt, 32
	case kInt64:
		e.typ, e.converted, e.logical, e.intBits = typeInt64, convertedInt64, logicalInt, 64
	case kDouble:
		e.typ = typeDouble
	case kBool:
		e.typ = typeBoolean
	case kString:
		e.typ, e.converted, e.logical = typeByteArray, convertedUTF8, logicalString
	}
	return e
}

// fieldShape says how a struct field maps to columns.
type fieldShape uint8

const (
	shapeValue fieldShape = iota // one required column
	shapePtr                     // one optional column
	shapeMap                     // a key and a value column
)

type field struct {
	index int
	shape fieldShape
	cols  []*column // the key and value columns of a map
}

// schemaOf builds the schema and the columns of row type t.
func schemaOf(t reflect.Type) ([]schemaElement, []field, []*column, error) {
	if t.Kind() != reflect.Struct {
		return nil, nil, nil, fmt.Errorf("parquet: %v is not a struct", t)
	}
	schema := []schemaElement{{name: "schema", typ: -1, repetition: -1, converted: -1}}
	var fields []field
	var cols []*column
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, ok := sf.Tag.Lookup("parquet")
		if !ok || tag == "-" || !sf.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		optList := strings.Split(opts, ",")
		isOpt, isDict := slices.Contains(optList, "optional"), slices.Contains(optList, "dict")
		bad := func(why string) error { return fmt.Errorf("parquet: %v.%s: %s", t, sf.Name, why) }
		ft := sf.Type
		switch {
		case ft.Kind() == reflect.Map:
			kk, kok := kindOf(ft.Key())
			vk, vok := kindOf(ft.Elem())
			if !kok || kk != kString || !vok || isOpt || isDict {
				return nil, nil, nil, bad("a map must be map[string]V of a scalar V, without options")
			}
			schema = append(schema,
				schemaElement{name: name, typ: -1, repetition: required, numChildren: 1, converted: convertedMap, logical: logicalMap},
				schemaElement{name: "key_value", typ: -1, repetition: repeated, numChildren: 2, converted: -1},
				kString.element("key", required), vk.element("value", required))
			key := &column{path: []string{name, "key_value", "key"}, kind: kString, maxDef: 1, maxRep: 1, dict: true}
			val := &column{path: []string{name, "key_value", "value"}, kind: vk, maxDef: 1, maxRep: 1}
			fields = append(fields, field{index: i, shape: shapeMap, cols: []*column{key, val}})
			cols = append(cols, key, val)
			continue
		case ft.Kind() == reflect.Pointer:
			if !isOpt {
				return nil, nil, nil, bad("a pointer field must be tagged optional")
			}
			ft = ft.Elem()
		case isOpt:
			return nil, nil, nil, bad("an optional field must be a pointer")
		}
		k, ok := kindOf(ft)
		if !ok {
			return nil, nil, nil, bad(fmt.Sprintf("unsupported type %v", sf.Type))
		}
		if isDict && k != kString {
			return nil, nil, nil, bad("only strings can be dictionary-encoded")
		}
		c := &column{path: []string{name}, kind: k, dict: isDict}
		f := field{index: i, shape: shapeValue, cols: []*column{c}}
		rep := int32(required)
		if isOpt {
			f.shape, c.maxDef, rep = shapePtr, 1, optional
		}
		schema = append(schema, k.element(name, rep))
		fields = append(fields, f)
		cols = append(cols, c)
	}
	if len(cols) == 0 {
		return nil, nil, nil, fmt.Errorf("parquet: %v has no parquet fields", t)
	}
	schema[0].numChildren = int32(len(fields))
	return schema, fields, cols, nil
}

// addRow appends the values of row v (a struct) to the columns.
func addRow(v reflect.Value, fields []field) {
	for _, f := range fields {
		fv := v.Field(f.index)
		switch f.shape {
		case shapeValue:
			f.cols[0].add(fv, 0, 0)
		case shapePtr:
			if fv.IsNil() {
				f.cols[0].null(0, 0)
			} else {
				f.cols[0].add(fv.Elem(), 1, 0)
			}
		case shapeMap:
			key, val := f.cols[0], f.cols[1]
			if fv.Len() == 0 {
				key.null(0, 0)
				val.null(0, 0)
				continue
			}
			keys := fv.MapKeys()
			slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
			for i, k := range keys {
				rep := uint32(1)
				if i == 0 {
					rep = 0
				}
				key.add(k, 1, rep)
				val.add(fv.MapIndex(k), 1, rep)
			}
		}
	}
}
