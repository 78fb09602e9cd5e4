package web

import (
	"encoding/json"
	"testing"
)

// TestOpenAPIRoutes: the OpenAPI document describes the routes of
// apiRoutes and the two event streams (text/event-stream).
func TestOpenAPIRoutes(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Content map[string]any `json:"content"`
			} `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/v1/queues", "/v1/resources", "/v1/reservations", "/v1/usage", "/v1/jobs/{id}/events", "/v1/jobs/events"} {
		op, ok := doc.Paths[p]["get"]
		if !ok {
			t.Errorf("openapi.json has no get %s", p)
			continue
		}
		want := "application/json"
		if p == "/v1/jobs/{id}/events" || p == "/v1/jobs/events" {
			want = "text/event-stream"
		}
		if _, ok := op.Responses["200"].Content[want]; !ok {
			t.Errorf("get %s: its 200 answer is not %s", p, want)
		}
		if _, ok := op.Responses["401"]; !ok {
			t.Errorf("get %s: no 401 answer", p)
		}
	}
}
