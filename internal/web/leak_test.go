package web

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any leaves a goroutine running
// (the HTTP servers and clients of the tests included).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
