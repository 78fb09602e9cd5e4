package job

import (
	"encoding/json"
	"fmt"

	"github.com/fluxgo/fluxgo/pkg/flux/subprocess"
)

// Output is the context of a "data" event of a job's output eventlog
// (RFC 24): an RFC 42 I/O object, {stream, rank, data, encoding?, eof?},
// whose Bytes method returns the data decoded (base64 when the output
// was not UTF-8).
type Output = subprocess.IO

// DecodeOutput reads the context of an output eventlog "data" event.
func DecodeOutput(ctx []byte) (Output, error) {
	var o Output
	if err := json.Unmarshal(ctx, &o); err != nil {
		return o, fmt.Errorf("output data event: %w", err)
	}
	return o, nil
}
