package client

import "testing"

func TestFieldOfAMessage(t *testing.T) {
	for _, c := range []struct{ msg, field string }{
		{"data.score: must be between -1.0 and 1.0", "data.score"},
		{"definition.terms[1].scale: lo must be below hi", "definition.terms[1].scale"},
		{"Idempotency-Key: must be 1 to 255 printable characters", "Idempotency-Key"},
		{`metadata.labels["cadenya.com/team"]: key prefix must be a DNS subdomain`, `metadata.labels["cadenya.com/team"]`},
		{`labels[""]: label keys must be 1-317 bytes`, `labels[""]`},
		{`detail["say \"hi\": now"]: must be a string`, `detail["say \"hi\": now"]`},
		{`["a b"]: is given more than once`, `["a b"]`},
		{"labels.0: must be a string", "labels.0"},
		{"malformed JSON at byte 3: expected a value", ""},
		{"run run_x: not found", ""},
	} {
		e := decodeError(400, []byte(`{"error": {"code": "invalid_request", "message": `+quote(c.msg)+`}}`), "req_1", 0, "")
		if e.Field != c.field {
			t.Errorf("%q: field %q, want %q", c.msg, e.Field, c.field)
		}
	}
}

func quote(s string) string {
	b := []byte{'"'}
	for _, r := range s {
		if r == '"' || r == '\\' {
			b = append(b, '\\')
		}
		b = append(b, string(r)...)
	}
	return string(append(b, '"'))
}
