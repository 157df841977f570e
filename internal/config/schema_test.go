package config

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	schemaFile = "../../docs/domain.schema.json"
	refFile    = "../../docs/config.md"
	refBegin   = "<!-- BEGIN GENERATED FIELD REFERENCE (go test ./internal/config -update) -->\n"
	refEnd     = "<!-- END GENERATED FIELD REFERENCE -->\n"
)

// TestSchemaUpToDate fails when docs/domain.schema.json differs from the
// schema generated from the types (go test ./internal/config -update).
func TestSchemaUpToDate(t *testing.T) {
	got, err := Schema()
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(got, &v); err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	if *update {
		if err := os.WriteFile(schemaFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/config -update)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s is stale (-committed +generated):\n%s", schemaFile, diff)
	}
}

// TestReferenceUpToDate does the same for the field reference in
// docs/config.md.
func TestReferenceUpToDate(t *testing.T) {
	doc, err := os.ReadFile(refFile)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, refBegin), strings.Index(s, refEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the generated-section markers", refFile)
	}
	gen := s[:i+len(refBegin)] + Reference() + s[j:]
	if *update {
		if err := os.WriteFile(refFile, []byte(gen), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if diff := cmp.Diff(s, gen); diff != "" {
		t.Errorf("%s field reference is stale (-committed +generated):\n%s", refFile, diff)
	}
}

// TestEveryFieldDocumented: each YAML key has a description and each
// description names a real key.
func TestEveryFieldDocumented(t *testing.T) {
	keys := map[string]bool{}
	var walk func(reflect.Type)
	walk = func(tp reflect.Type) {
		for tp.Kind() == reflect.Pointer || tp.Kind() == reflect.Slice || tp.Kind() == reflect.Map {
			tp = tp.Elem()
		}
		if tp.Kind() != reflect.Struct || keys[schemaName(tp)] {
			return
		}
		keys[schemaName(tp)] = true
		for _, f := range structFields(tp) {
			keys[f.owner+"."+f.key] = true
			walk(f.typ)
		}
	}
	walk(reflect.TypeOf(Domain{}))
	keys["Params"] = true // inline: documented per field
	for k := range keys {
		if _, ok := doc(k); !ok && k != "Params" {
			t.Errorf("no description for %s", k)
		}
	}
	for _, k := range keysOfDoc() {
		if !keys[k] {
			t.Errorf("description of unknown key %s", k)
		}
	}
}
