package web

// apiRoutes registers the /v1 routes flux-restful-api lacks: queues
// with their state and limits, resources (nodes with their states and
// jobs), advance reservations and usage reports.
func (s *Server) apiRoutes() {
	s.mux.HandleFunc("GET /v1/queues", s.auth(s.listQueues))
	s.mux.HandleFunc("GET /v1/resources", s.auth(s.listResources))
	s.mux.HandleFunc("GET /v1/reservations", s.auth(s.listReservations))
	s.mux.HandleFunc("GET /v1/usage", s.auth(s.getUsage))
}
