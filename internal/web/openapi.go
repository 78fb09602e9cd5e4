package web

import (
	_ "embed"
	"net/http"
)

// openAPI is the OpenAPI 3 document of the /v1 routes, served at
// /v1/openapi.json (a test checks it names every route the server has).
//
//go:embed openapi.json
var openAPI []byte

func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPI)
}
