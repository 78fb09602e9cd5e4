package job

import "time"

// drainTimeout bounds how long a finished watch waits for the end of its
// stream after a cancel.
const drainTimeout = 5 * time.Second
