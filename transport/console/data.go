package console

import (
	"bytes"
	"encoding/json"
	"time"
)

// The service's JSON answers, as far as the pages read them. Field names
// are the API's (README; SPEC for the seed shapes).

type items[T any] struct {
	Items []T `json:"items"`
}

type agentJSON struct {
	ID            string    `json:"id"`
	Name          string    `json:"name"`
	SelectionMode string    `json:"selection_mode"`
	CreatedAt     time.Time `json:"created_at"`
}

type overviewJSON struct {
	Seq              uint64   `json:"seq"`
	ObjectiveVersion int      `json:"objective_version"`
	Runs             int      `json:"runs"`
	Runs24h          int      `json:"runs_24h"`
	Runs7d           int      `json:"runs_7d"`
	Matured          int      `json:"matured"`
	Mean             *float64 `json:"mean"`
	FeedbackCount    int      `json:"feedback_count"`
	Versions         []struct {
		Version *string `json:"version"`
		Runs    int     `json:"runs"`
	} `json:"versions"`
	Selections struct {
		Start   time.Time `json:"start"`
		BucketS int       `json:"bucket_s"`
		Items   []struct {
			VariationID string `json:"variation_id"`
			Name        string `json:"name"`
			Counts      []int  `json:"counts"`
		} `json:"items"`
	} `json:"selections"`
}

type variationJSON struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Config    json.RawMessage `json:"config"`
	CreatedAt time.Time       `json:"created_at"`
	Info      struct {
		Score         float64 `json:"score"`
		FeedbackCount int     `json:"feedback_count"`
		Alpha         float64 `json:"alpha"`
		Beta          float64 `json:"beta"`
		// Mean and Interval are the posterior mean and 95 % equal-tailed
		// credible interval, from the engine's exact Beta quantiles.
		Mean     float64    `json:"mean"`
		Interval [2]float64 `json:"interval"`
		// ProbBest is the engine's Monte Carlo probability that this
		// variation is the best; the listing carries it, a single
		// variation's read does not (nil).
		ProbBest *float64 `json:"prob_best"`
	} `json:"info"`
}

type termJSON struct {
	Signal   string   `json:"signal"`
	Weight   float64  `json:"weight"`
	Agg      string   `json:"agg"`
	Count    int      `json:"count"`
	Raw      *float64 `json:"raw"`
	Scaled   *float64 `json:"scaled"`
	Imputed  bool     `json:"imputed"`
	Evidence bool     `json:"evidence"`
}

type guardJSON struct {
	Signal  string  `json:"signal"`
	Op      string  `json:"op"`
	Value   float64 `json:"value"`
	Matched bool    `json:"matched"`
}

type rewardJSON struct {
	RunID            string      `json:"run_id"`
	ObjectiveVersion int         `json:"objective_version"`
	Status           string      `json:"status"`
	Value            *float64    `json:"value"`
	Matured          bool        `json:"matured"`
	MaturesAt        *time.Time  `json:"matures_at"`
	Terms            []termJSON  `json:"terms"`
	Guards           []guardJSON `json:"guards"`
	LateSignals      int         `json:"late_signals"`
}

type summaryJSON struct {
	Version          string        `json:"version"`
	ObjectiveVersion int           `json:"objective_version"`
	Runs             int           `json:"runs"`
	Matured          int           `json:"matured"`
	Scored           int           `json:"scored"`
	Guarded          int           `json:"guarded"`
	Excluded         int           `json:"excluded"`
	Mean             *float64      `json:"mean"`
	Lowest           []rewardJSON  `json:"lowest"`
	Histogram        histogramJSON `json:"histogram"`
}

type definitionJSON struct {
	HorizonS float64         `json:"horizon_s"`
	Default  json.RawMessage `json:"default"`
	Guards   []struct {
		Signal string  `json:"signal"`
		Op     string  `json:"op"`
		Value  float64 `json:"value"`
	} `json:"guards"`
	Terms []struct {
		Signal  string      `json:"signal"`
		Weight  float64     `json:"weight"`
		Agg     string      `json:"agg"`
		Scale   *[2]float64 `json:"scale"`
		WithinS *float64    `json:"within_s"`
	} `json:"terms"`
	Bounds [2]float64 `json:"bounds"`
}

type objectiveJSON struct {
	Version    int             `json:"version"`
	Definition json.RawMessage `json:"definition"`
	Note       *string         `json:"note"`
	CreatedAt  *time.Time      `json:"created_at"`
}

type runJSON struct {
	ID          string            `json:"id"`
	Version     *string           `json:"version"`
	VariationID *string           `json:"variation_id"`
	SessionID   *string           `json:"session_id"`
	ExternalID  *string           `json:"external_id"`
	Labels      map[string]string `json:"labels"`
	Status      string            `json:"status"`
	CreatedAt   time.Time         `json:"created_at"`
	FinishedAt  *time.Time        `json:"finished_at"`
	Claims      []struct {
		Object    string    `json:"object"`
		CreatedAt time.Time `json:"created_at"`
	} `json:"claims"`
	Traces []struct {
		TraceID   string    `json:"trace_id"`
		TurnID    string    `json:"turn_id"`
		CreatedAt time.Time `json:"created_at"`
	} `json:"traces"`
}

type signalJSON struct {
	ID         string    `json:"id"`
	Kind       string    `json:"kind"`
	Value      float64   `json:"value"`
	RunIDs     []string  `json:"run_ids"`
	SessionID  string    `json:"session_id"`
	Object     string    `json:"object"`
	DedupKey   string    `json:"dedup_key"`
	OccurredAt time.Time `json:"occurred_at"`
	ReceivedAt time.Time `json:"received_at"`
}

type evidenceJSON struct {
	ID        string          `json:"id"`
	Kind      string          `json:"kind"`
	Scorer    *string         `json:"scorer"`
	TurnID    *string         `json:"turn_id"`
	TraceID   *string         `json:"trace_id"`
	Value     *float64        `json:"value"`
	Weight    *float64        `json:"weight"`
	Detail    json.RawMessage `json:"detail_json"`
	CreatedAt *time.Time      `json:"created_at"`
	UpdatedAt *time.Time      `json:"updated_at"`
}

type taskJSON struct {
	ID      string `json:"id"`
	Current string `json:"current"`
	Items   []struct {
		Version   string          `json:"version"`
		Seq       int             `json:"seq"`
		CreatedAt time.Time       `json:"created_at"`
		Task      json.RawMessage `json:"task"`
	} `json:"items"`
}

// taskListJSON is GET /v1/tasks.
type taskListJSON struct {
	Items []struct {
		ID        string    `json:"id"`
		Current   string    `json:"current"`
		Versions  int       `json:"versions"`
		UpdatedAt time.Time `json:"updated_at"`
		Prompt    string    `json:"prompt"`
	} `json:"items"`
}

type calibrationJSON struct {
	Task  string `json:"task"`
	Items []struct {
		TaskVersion  string   `json:"task_version"`
		JudgeVersion string   `json:"judge_version"`
		Pairs        int      `json:"pairs"`
		Agreement    *float64 `json:"agreement"`
		Kappa        *float64 `json:"kappa"`
		MAE          *float64 `json:"mae"`
		Confusion    struct {
			TP int `json:"tp"`
			TN int `json:"tn"`
			FP int `json:"fp"`
			FN int `json:"fn"`
		} `json:"confusion"`
	} `json:"items"`
}

// taskRewardsJSON is GET /v1/tasks/{id}/rewards/summary.
type taskRewardsJSON struct {
	Task  string `json:"task"`
	Items []struct {
		TaskVersion string   `json:"task_version"`
		Seq         int      `json:"seq"`
		Rewards     int      `json:"rewards"`
		Scored      int      `json:"scored"`
		Pending     int      `json:"pending"`
		Failed      int      `json:"failed"`
		Mean        *float64 `json:"mean"`
		Histogram   struct {
			Bounds [2]float64 `json:"bounds"`
			Counts []int      `json:"counts"`
		} `json:"histogram"`
		Flags flagCounts `json:"flags"`
	} `json:"items"`
}

// flagCounts are a summary's flag counts in the order the service lists
// them (a map would lose it).
type flagCounts []struct {
	Flag string
	N    int
}

func (f *flagCounts) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil { // {
		return err
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return err
		}
		var n int
		if err := dec.Decode(&n); err != nil {
			return err
		}
		name, _ := k.(string)
		*f = append(*f, struct {
			Flag string
			N    int
		}{name, n})
	}
	return nil
}
