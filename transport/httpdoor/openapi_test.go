package httpdoor

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/plaudit/plaudit/internal/openapitest"
	"github.com/plaudit/plaudit/transport/api"
)

// ownPaths are the paths the door serves itself, outside the route table,
// each with its one method.
var ownPaths = map[string]string{"/healthz": "GET", "/metrics": "GET", "/openapi.json": "GET", backupPath: "POST"}

// docOperations reads the document's operations: path → method → operationId.
func docOperations(t *testing.T) map[string]map[string]string {
	t.Helper()
	ops, err := openapitest.Operations(OpenAPI())
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return ops
}

// theOpenAPI is the document's validator, built once per test binary.
var theOpenAPI = sync.OnceValues(func() (*openapitest.Doc, error) { return openapitest.New(OpenAPI()) })

// conform fails the test unless x's answer is what the OpenAPI document
// says (its request is not checked: tests send invalid ones on purpose).
func conform(t *testing.T, x openapitest.Exchange) {
	t.Helper()
	if strings.HasSuffix(x.URL, "/openapi.json") {
		return // the document itself, compared byte for byte
	}
	oa, err := theOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	schema := func(path string) string {
		if errorShape(path) == api.ErrorRPC {
			return "Status"
		}
		return "Error"
	}
	if v := oa.Check(x, false, schema); v != "" {
		t.Errorf("%s %s: %d answer does not conform to openapi.json:\n%s\nanswer %.600s", x.Method, x.URL, x.Status, v, x.RespBody)
	}
}

// docPath is a route pattern as the document writes it: {task*} is {task}
// (OpenAPI path parameters hold one segment; clients send a '/' in a task
// id percent-encoded, which the door decodes before routing).
func docPath(pattern string) string { return strings.ReplaceAll(pattern, "{task*}", "{task}") }

// TestOpenAPIDocumentsEveryRoute: every route of the table is an operation
// of the document, under its path and method, with the route's api.Op as
// its operationId; and every operation of the document is a route (or one
// of the door's own paths). A route added without documenting it, or
// documented under another op, fails here.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	doc := docOperations(t)
	want := map[string]map[string]string{}
	for _, r := range routes {
		p := docPath(r.pattern)
		if want[p] == nil {
			want[p] = map[string]string{}
		}
		want[p][r.method] = string(r.op)
	}
	for _, r := range routes {
		p := docPath(r.pattern)
		if got, ok := doc[p][r.method]; !ok {
			t.Errorf("route %s %s is not in openapi.json", r.method, r.pattern)
		} else if got != string(r.op) {
			t.Errorf("%s %s: operationId %q, want the route's op %q", r.method, p, got, r.op)
		}
	}
	for p, m := range ownPaths {
		if _, ok := doc[p][m]; !ok {
			t.Errorf("the door's own %s %s is not in openapi.json", m, p)
		}
	}
	for p, ops := range doc {
		if m, ok := ownPaths[p]; ok {
			if !slices.Equal(slices.Collect(maps.Keys(ops)), []string{m}) {
				t.Errorf("%s: documented methods %v, want %s", p, slices.Collect(maps.Keys(ops)), m)
			}
			continue
		}
		for m := range ops {
			if _, ok := want[p][m]; !ok {
				t.Errorf("openapi.json documents %s %s, which is no route", m, p)
			}
		}
	}
}

// TestOpenAPIDocumentIsValid: the document is valid OpenAPI 3.1 (against
// the specification's schema) and every $ref in it resolves.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	doc, err := libopenapi.NewDocument(OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("building the validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("%s: %s", e.Message, e.Reason)
			for _, se := range e.SchemaValidationErrors {
				t.Errorf("  %s at %s (%s)", se.Reason, se.FieldPath, se.KeywordLocation)
			}
		}
	}
	if _, err := doc.BuildV3Model(); err != nil {
		t.Fatalf("model: %v", err)
	}
	var head struct{ OpenAPI string }
	if err := json.Unmarshal(OpenAPI(), &head); err != nil || head.OpenAPI != "3.1.0" {
		t.Fatalf("openapi.json is OpenAPI %q (%v), want 3.1.0", head.OpenAPI, err)
	}
	if bytes.Contains(OpenAPI(), []byte("../shared")) {
		t.Fatal("openapi.json refers to a file outside the repository")
	}
}

// TestOpenAPIServed: GET /openapi.json answers the embedded document
// without a key; another method is 405 with Allow.
func TestOpenAPIServed(t *testing.T) {
	e := newDoorEnv(t, Config{}, true)
	r := e.do(t, "", "GET", "/openapi.json", "", nil)
	if r.status != 200 || !bytes.Equal(r.body, OpenAPI()) {
		t.Fatalf("GET /openapi.json: %d, %d bytes; want 200 and the document", r.status, len(r.body))
	}
	r = e.do(t, "", "POST", "/openapi.json", "{}", nil)
	expectError(t, r, 405, jsonShape, "method_not_allowed", "POST")
	if got := r.header.Get("Allow"); got != "GET" {
		t.Errorf("Allow %q, want %q", got, "GET")
	}
}

// TestMethodNotAllowedListsAllow: a 405 carries Allow with the methods the
// route table has for the path — for every path of the table, checked
// against the methods the OpenAPI document lists for it.
func TestMethodNotAllowedListsAllow(t *testing.T) {
	e := newDoorEnv(t, Config{}, true)
	fill := strings.NewReplacer("{ws}", "default", "{agent}", "agt_x", "{run}", "run_x", "{variation}", "var_x",
		"{version}", "3", "{key}", "key_x", "{reward}", "rw_x", "{task}", "aicme/example-001")
	for p, ops := range docOperations(t) {
		if _, own := ownPaths[p]; own {
			continue
		}
		methods := slices.Collect(maps.Keys(ops))
		sort.Strings(methods)
		t.Run(p, func(t *testing.T) {
			sh := jsonShape
			if strings.HasPrefix(p, "/v1/workspaces") {
				sh = rpcShape
			}
			r := e.do(t, adminKey, "PATCH", fill.Replace(p), "", nil)
			code := any("method_not_allowed")
			if sh == rpcShape {
				code = 12.0
			}
			expectError(t, r, 405, sh, code, "PATCH")
			got := strings.Split(r.header.Get("Allow"), ", ")
			sort.Strings(got)
			if !slices.Equal(got, methods) {
				t.Errorf("Allow %q, want %v", r.header.Get("Allow"), methods)
			}
		})
	}
	// Explicitly, in table order.
	for _, tc := range []struct{ path, allow string }{
		{"/v1/workspaces", "GET, POST"},
		{"/api/v1/agents/agt_x/objective", "GET, PUT"},
		{"/v1/workspaces/default/api-keys/key_x", "DELETE"},
		{"/v1/tasks/aicme/example-001/calibration", "GET"},
	} {
		r := e.do(t, adminKey, "PATCH", tc.path, "", nil)
		if r.status != 405 || r.header.Get("Allow") != tc.allow {
			t.Errorf("PATCH %s: %d, Allow %q; want 405, Allow %q", tc.path, r.status, r.header.Get("Allow"), tc.allow)
		}
	}
}

// TestOpenAPIExamplesAreValidRequests: every request body example of the
// document, sent to its operation as a client would, passes the document's
// own validation, so the examples users copy cannot drift from the schemas.
func TestOpenAPIExamplesAreValidRequests(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			RequestBody struct {
				Content map[string]struct{ Example json.RawMessage }
			}
		}
	}
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	oa, err := theOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	fill := strings.NewReplacer("{ws}", "default", "{agent}", "agt_x", "{run}", "run_x", "{version}", "j2")
	n := 0
	for p, ops := range doc.Paths {
		for m, op := range ops {
			ex := op.RequestBody.Content["application/json"].Example
			if ex == nil {
				continue
			}
			n++
			hdr := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + adminKey}}
			x := openapitest.Exchange{Method: strings.ToUpper(m), URL: "http://plaudit.test" + fill.Replace(p), Header: hdr, Body: ex}
			if v := oa.CheckRequest(x); v != "" {
				t.Errorf("the example of %s %s is not a valid request:\n%s", m, p, v)
			}
		}
	}
	if n < 10 {
		t.Errorf("%d request examples, want the main operations' (at least 10)", n)
	}
}
