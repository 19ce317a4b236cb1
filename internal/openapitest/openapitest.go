// Package openapitest holds HTTP exchanges to an OpenAPI document in tests,
// with github.com/pb33f/libopenapi-validator (full OpenAPI 3.1 support). It
// validates in strict mode: a member or header an answer carries that the
// document does not declare fails, as a missing or mistyped one does —
// except inside the members that hold a client's free-form JSON or maps
// (labels, config, detail, judges, a choice's shown and chosen) — so a field
// added to an answer without documenting it fails the tests that see it.
package openapitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	liberrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/paths"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
)

// freeForm are the strict-mode ignore paths of client-shaped members.
var freeForm = []string{"$.body**.labels**", "$.body**.config**", "$.body**.detail**",
	"$.body**.judges**", "$.body**.shown**", "$.body**.chosen**"}

// Doc is a parsed document with its validator. It is safe for concurrent
// use.
type Doc struct {
	mu      sync.Mutex // the validator's caches are not documented as safe for concurrent use
	v       validator.Validator
	model   *v3.Document
	opts    *config.ValidationOptions
	schemas schema_validation.SchemaValidator
}

// New parses spec and builds its validator (most of a second for
// Plaudit's: build one per test binary).
func New(spec []byte) (*Doc, error) {
	doc, err := libopenapi.NewDocument(spec)
	if err != nil {
		return nil, err
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		return nil, err
	}
	opts := []config.Option{config.WithStrictMode(), config.WithStrictIgnorePaths(freeForm...),
		config.WithStrictIgnoredHeadersExtra("server"), config.WithFormatAssertions()}
	v, errs := validator.NewValidator(doc, opts...)
	if len(errs) > 0 {
		return nil, fmt.Errorf("openapi validator: %v", errs)
	}
	return &Doc{v: v, model: &m.Model, opts: config.NewValidationOptions(opts...),
		schemas: schema_validation.NewSchemaValidator(config.WithFormatAssertions())}, nil
}

// Exchange is one request as sent and the answer to it.
type Exchange struct {
	Method, URL string
	Header      http.Header // the request's
	Body        []byte      // the request's
	Status      int
	RespHeader  http.Header
	RespBody    []byte
}

func (x Exchange) request() *http.Request {
	r, _ := http.NewRequest(x.Method, x.URL, bytes.NewReader(x.Body))
	r.Header = x.Header.Clone()
	return r
}

// Operation is the document's path template x's request falls under and
// whether the document has its method there ("", false when no path
// matches).
func (d *Doc) Operation(x Exchange) (template string, documented bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.operation(x.request())
}

func (d *Doc) operation(req *http.Request) (string, bool) {
	item, _, tmpl := paths.FindPath(req, d.model, d.opts)
	if item == nil {
		return "", false
	}
	return tmpl, item.GetOperations().GetOrZero(strings.ToLower(req.Method)) != nil
}

// Check validates x's answer, and its request too when validRequest; it
// returns the violations, one per line ("" when there are none). An
// answer the document has no operation for (an unknown route, a 405) is
// held to errorSchema(path): the name of the component schema of that
// path's error body.
func (d *Doc) Check(x Exchange, validRequest bool, errorSchema func(path string) string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	req := x.request()
	resp := &http.Response{StatusCode: x.Status, Header: x.RespHeader, Request: req,
		Body: io.NopCloser(bytes.NewReader(x.RespBody))}
	var errs []*liberrors.ValidationError
	if _, documented := d.operation(req); !documented {
		name := errorSchema(req.URL.Path)
		schema := d.model.Components.Schemas.GetOrZero(name)
		if schema == nil {
			return fmt.Sprintf("no component schema %q", name)
		}
		_, errs = d.schemas.ValidateSchemaBytes(schema.Schema(), x.RespBody)
	} else if validRequest {
		_, errs = d.v.ValidateHttpRequestResponse(req, resp)
	} else {
		_, errs = d.v.ValidateHttpResponse(req, resp)
	}
	return report(errs)
}

// report renders violations one per line.
func report(errs []*liberrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "%s: %s\n", e.Message, e.Reason)
		for _, f := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\t%s at %s (%s)\n", f.Reason, f.FieldPath, f.KeywordLocation)
		}
	}
	return b.String()
}

// CheckRequest validates x's request alone (its answer is not looked at),
// as Check does.
func (d *Doc) CheckRequest(x Exchange) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, errs := d.v.ValidateHttpRequest(x.request())
	return report(errs)
}

// Operations reads spec's operations: path template → method (upper case)
// → operationId.
func Operations(spec []byte) (map[string]map[string]string, error) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage
	}
	if err := json.Unmarshal(spec, &doc); err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for path, item := range doc.Paths {
		out[path] = map[string]string{}
		for key, raw := range item {
			switch key {
			case "get", "put", "post", "delete", "options", "head", "patch", "trace":
			default:
				continue // parameters, summary, description, servers
			}
			var op struct{ OperationID string }
			if err := json.Unmarshal(raw, &op); err != nil {
				return nil, fmt.Errorf("%s %s: %w", key, path, err)
			}
			out[path][strings.ToUpper(key)] = op.OperationID
		}
	}
	return out, nil
}
