package field

import (
	"errors"
	"testing"
)

func TestRename(t *testing.T) {
	names := map[string]string{"score": "data.score", "labels": "metadata.labels", "terms": "definition.terms"}
	cases := []struct{ path, want string }{
		{"score", "data.score"},
		{"labels.team", "metadata.labels.team"},
		{"terms[1].scale", "definition.terms[1].scale"},
		{"scorer", "scorer"}, // a prefix of the name, not of the path
		{"", ""},
	}
	for _, c := range cases {
		var fe *Error
		if err := Rename(Errorf(c.path, "bad"), names); !errors.As(err, &fe) || fe.Path != c.want || fe.Reason != "bad" {
			t.Errorf("Rename(%q) = %v, want path %q", c.path, err, c.want)
		}
	}
	other := errors.New("not a field error")
	if Rename(other, names) != other {
		t.Error("Rename changed an error that is not a field error")
	}
}
