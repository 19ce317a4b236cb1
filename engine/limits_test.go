package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestLimitsAcceptExactlyTheMaximum: every free-form limit admits a value
// of exactly its maximum and refuses one more, naming the field.
func TestLimitsAcceptExactlyTheMaximum(t *testing.T) {
	labels := func(n, keyLen, valLen int) map[string]string {
		m := map[string]string{}
		for i := range n {
			k := fmt.Sprintf("k%d", i)
			k += strings.Repeat("x", max(keyLen-len(k), 0))
			m[k] = strings.Repeat("v", valLen)
		}
		return m
	}
	tests := []struct {
		name      string
		at, over  CreateAgent
		wantField string
	}{
		{"name", CreateAgent{Name: strings.Repeat("n", maxNameLen)}, CreateAgent{Name: strings.Repeat("n", maxNameLen+1)}, "name"},
		{"external id", CreateAgent{Name: "a", ExternalID: strings.Repeat("e", maxIDLen)}, CreateAgent{Name: "a", ExternalID: strings.Repeat("e", maxIDLen+1)}, "external_id"},
		{"label count", CreateAgent{Name: "a", Labels: labels(maxLabels, 1, 1)}, CreateAgent{Name: "a", Labels: labels(maxLabels+1, 1, 1)}, "labels"},
		{"label key", CreateAgent{Name: "a", Labels: labels(1, maxLabelKey, 1)}, CreateAgent{Name: "a", Labels: labels(1, maxLabelKey+1, 1)}, "labels"},
		{"label value", CreateAgent{Name: "a", Labels: labels(1, 2, maxLabelVal)}, CreateAgent{Name: "a", Labels: labels(1, 2, maxLabelVal+1)}, "labels"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			create := func(c CreateAgent) error {
				c.ID, c.Workspace = "agt_1", "default"
				_, _, err := NewAgent().CreateAgent(c, t0)
				return err
			}
			if err := create(tc.at); err != nil {
				t.Fatalf("at the maximum: %v", err)
			}
			err := create(tc.over)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.wantField) {
				t.Fatalf("one past the maximum: err = %v, want invalid naming %s", err, tc.wantField)
			}
		})
	}
}
