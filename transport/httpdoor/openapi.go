package httpdoor

import (
	_ "embed"
)

// openAPI is the OpenAPI 3.1 document of this door: every route of the
// route table, its parameters, bodies, answers and error shapes, and the
// door's own /healthz, /metrics and /openapi.json. Tests hold it to the
// route table (openapi_test.go) and hold real answers to it (server's
// TestOpenAPIConformance), so it cannot drift from the code unnoticed.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI document the door serves at GET /openapi.json.
// The slice is shared: do not modify it.
func OpenAPI() []byte { return openAPI }
