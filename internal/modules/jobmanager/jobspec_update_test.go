package jobmanager

import (
	"encoding/json"
	"testing"
)

// TestApplyJobspecUpdates: a restart rebuilds the current jobspec from
// the submitted one (what the KVS keeps) and the eventlog's
// jobspec-update events, later ones winning.
func TestApplyJobspecUpdates(t *testing.T) {
	spec := []byte(`{"version":1,"attributes":{"system":{"duration":60,"job":{"name":"a"}}}}`)
	got, err := applyJobspecUpdates(spec, []map[string]any{
		{"attributes.system.duration": 120.0},
		{"attributes.system.duration": 180.0, "attributes.system.job.name": "b"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Attributes struct {
			System struct {
				Duration float64 `json:"duration"`
				Job      struct {
					Name string `json:"name"`
				} `json:"job"`
			} `json:"system"`
		} `json:"attributes"`
	}
	if err := json.Unmarshal(got, &doc); err != nil || doc.Attributes.System.Duration != 180 || doc.Attributes.System.Job.Name != "b" {
		t.Errorf("updated jobspec %s (%v)", got, err)
	}
	if same, _ := applyJobspecUpdates(spec, nil); string(same) != string(spec) {
		t.Errorf("no updates changed the jobspec: %s", same)
	}
	if _, err := applyJobspecUpdates([]byte(`not json`), []map[string]any{{"a": 1}}); err == nil {
		t.Error("a broken jobspec was updated")
	}
}
