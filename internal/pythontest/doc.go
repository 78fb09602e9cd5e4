// Package pythontest runs the Python client package's unittest suite
// (python/tests) from go test, against the flux binary under test, so
// make check covers the Python bindings too.
package pythontest
