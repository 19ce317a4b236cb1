package api

import (
	"regexp"
	"strings"

	"github.com/plaudit/plaudit/engine/field"
)

// Seed-004 labels: values are 0-63 alphanumeric characters with "-", "_" or
// "." allowed between; keys have the same shape (1-63) with an optional
// DNS-subdomain prefix of at most 253 characters ("cadenya.com/priority").
var (
	labelName  = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	dnsSubname = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

func checkSeedLabels(path string, labels map[string]string) error {
	if len(labels) > maxSeedLabels {
		return field.Errorf(path, "at most %d labels", maxSeedLabels)
	}
	for k, v := range labels {
		at := field.Join(path, k)
		name := k
		if prefix, rest, ok := strings.Cut(k, "/"); ok {
			if len(prefix) == 0 || len(prefix) > 253 || !dnsSubname.MatchString(prefix) {
				return field.Errorf(at, "key prefix must be a DNS subdomain of at most 253 characters")
			}
			name = rest
		}
		if !labelName.MatchString(name) {
			return field.Errorf(at, "key must be 1-63 alphanumeric characters with '-', '_' or '.' between")
		}
		if v != "" && !labelName.MatchString(v) {
			return field.Errorf(at, "value must be 0-63 alphanumeric characters with '-', '_' or '.' between")
		}
	}
	return nil
}

// maxSeedLabels bounds the labels of one record, as on the native door.
const maxSeedLabels = 64

// parseLabelFilter reads a "k1=v1,k2=v2" query parameter.
func parseLabelFilter(path, s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	m := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		if !ok || k == "" {
			return nil, field.Errorf(path, "must be k1=v1,k2=v2, got %s", field.Quote(s))
		}
		m[k] = v
	}
	return m, nil
}
