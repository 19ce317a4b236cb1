package server

import (
	"strings"
	"sync"
	"testing"

	"github.com/plaudit/plaudit/internal/openapitest"
	"github.com/plaudit/plaudit/transport/httpdoor"
)

// theOpenAPI is the door's document and its validator, built once per test
// binary: parsing it and compiling its schemas takes a good part of a
// second.
var theOpenAPI = sync.OnceValues(func() (*openapitest.Doc, error) { return openapitest.New(httpdoor.OpenAPI()) })

// errorSchema names the error body of a path: google.rpc.Status under
// /v1/workspaces, Error elsewhere.
func errorSchema(path string) string {
	if strings.HasPrefix(path, "/v1/workspaces") {
		return "Status"
	}
	return "Error"
}

// docOperations reads the document's operations: path → method → operationId.
func docOperations(t *testing.T) map[string]map[string]string {
	t.Helper()
	ops, err := openapitest.Operations(httpdoor.OpenAPI())
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return ops
}
