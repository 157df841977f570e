package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

// compileSchema compiles docs/domain.schema.json with a real JSON Schema
// (2020-12) validator, formats asserted.
func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(SchemaID, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(SchemaID)
	if err != nil {
		t.Fatalf("compile %s: %v", schemaFile, err)
	}
	return sch
}

// yamlToJSON turns a domain file into the JSON value an editor validates.
func yamlToJSON(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(stringKeys(v))
	if err != nil {
		t.Fatal(err)
	}
	j, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// stringKeys turns YAML maps with non-string keys (firewall args: 0: drop)
// into JSON objects, whose keys are strings.
func stringKeys(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = stringKeys(e)
		}
	case map[any]any:
		m := map[string]any{}
		for k, e := range x {
			m[fmt.Sprint(k)] = stringKeys(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = stringKeys(e)
		}
	}
	return v
}

// TestJSONSchemaValidator runs a JSON Schema validator over every example
// (all valid) and over broken files (each invalid for a reason the schema
// can express: prefixes, ports, names, enums, unknown keys).
func TestJSONSchemaValidator(t *testing.T) {
	sch := compileSchema(t)
	files, _ := filepath.Glob("../../examples/*.yaml")
	if len(files) == 0 {
		t.Fatal("no examples")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(yamlToJSON(t, b)); err != nil {
			t.Errorf("%s: the schema rejects a valid example: %v", f, err)
		}
	}
	// The default example with lower-case behaviours: validate takes them.
	b, _ := os.ReadFile("../../examples/default.yaml")
	// What validate takes in any case, the schema does too.
	anyCase := bytes.ReplaceAll(bytes.ReplaceAll(b, []byte("behavior: End"), []byte("behavior: end")), []byte("proto: tcp"), []byte("proto: TCP"))
	if _, err := Parse(anyCase, "../../examples"); err != nil {
		t.Fatalf("validate: %v", err)
	}
	if err := sch.Validate(yamlToJSON(t, anyCase)); err != nil {
		t.Errorf("lower-case behaviours or upper-case protocols rejected by the schema: %v", err)
	}

	base := string(b)
	broken := []struct{ name, from, to string }{
		{"link prefix not IPv6", `ipv6: "fc00:1a::/64"`, `ipv6: "fc00:1a::/200"`},
		{"link prefix IPv4 in ipv6", `ipv6: "fc00:1a::/64"`, `ipv6: "198.18.1.0/24"`},
		{"ipv4 link prefix", `ipv4: "198.18.1.0/24"`, `ipv4: "198.18.1.0/33"`},
		{"locator not a prefix", `locator: "fc00:1::/64"`, `locator: "fc00:1::"`},
		{"node name", "  nfv1:    {role: nfv", "  NFV_1:    {role: nfv"},
		{"role", "{role: router,  id: 5}", "{role: gateway, id: 5}"},
		{"behavior", "behavior: End}", "behavior: End.Y}"},
		{"egress behavior", "behavior: End.DX6, nh6", "behavior: End.X, nh6"},
		{"nh6 not IPv6", `nh6: "fc00:4d::d"`, `nh6: "198.18.4.13"`},
		{"endpoint", `"s:eth-ingress"`, `"s/eth-ingress"`},
		{"unknown key", "nodes:\n", "nodez: {}\nnodes:\n"},
		{"node id", "id: 5}", "id: 0}"},
	}
	for _, bc := range broken {
		if !strings.Contains(base, bc.from) {
			t.Fatalf("%s: examples/default.yaml has no %q: update the test", bc.name, bc.from)
		}
		doc := strings.Replace(base, bc.from, bc.to, 1)
		if err := sch.Validate(yamlToJSON(t, []byte(doc))); err == nil {
			t.Errorf("%s: the schema accepts a broken file", bc.name)
		}
		if _, err := Parse([]byte(doc), "../../examples"); err == nil {
			t.Errorf("%s: validate accepts it (the schema must not be stricter)", bc.name)
		}
	}
}
