package flux

import (
	"fmt"
	"os"
	"strings"
)

// SocketPath resolves a Flux URI to the path of a broker's local socket.
// Accepted forms: "local:///path/to/socket", "local:///rundir" (a
// directory holding a socket named "local"), or a bare path.
func SocketPath(uri string) (string, error) {
	if uri == "" {
		return "", fmt.Errorf("no Flux URI: FLUX_URI is not set and none was given")
	}
	path := uri
	if i := strings.Index(uri, "://"); i >= 0 {
		scheme := uri[:i]
		if scheme != "local" {
			return "", fmt.Errorf("URI %q: unsupported scheme %q (only local:// is supported here)", uri, scheme)
		}
		path = uri[i+3:]
	}
	if path == "" {
		return "", fmt.Errorf("URI %q: empty path", uri)
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = strings.TrimSuffix(path, "/") + "/local"
	}
	return path, nil
}
