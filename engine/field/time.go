package field

import "time"

// The instants a client may name: from the Unix epoch up to, not
// including, 2200-01-01. The log stores instants as Unix nanoseconds, which
// an int64 holds until 2262-04-11; the bound leaves room beyond it for a
// run finished at the last instant plus the longest horizon
// (objective.MaxDurationS, ten years).
var (
	MinTime = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxTime = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
)

// Time parses an RFC 3339 timestamp a client sent, in UTC, and holds it to
// [MinTime, MaxTime).
func Time(path, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, Errorf(path, "must be an RFC 3339 timestamp")
	}
	if t.Before(MinTime) || !t.Before(MaxTime) {
		return time.Time{}, Errorf(path, "must be from %s to before %s", MinTime.Format(time.RFC3339), MaxTime.Format(time.RFC3339))
	}
	return t.UTC(), nil
}
