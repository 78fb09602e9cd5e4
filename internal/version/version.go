// Package version holds the fluxgo release string, set at link time with
// -ldflags "-X github.com/fluxgo/fluxgo/internal/version.Version=...".
package version

// Version is the fluxgo release. The Makefile stamps it from git describe.
var Version = "0.1.0-dev"
