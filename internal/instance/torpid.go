package instance

import (
	"fmt"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/pkg/fsd"
)

// applyTorpid sets the broker's tbon.torpid_min and tbon.torpid_max from
// -S attributes, else from the configuration's [tbon] table (flux-core's
// precedence). torpid_max 0 disables torpid checking.
func applyTorpid(attrs map[string]string, table map[string]any, cfg *broker.Config) error {
	tbon, _ := table["tbon"].(map[string]any)
	for _, k := range []struct {
		key string
		max bool
	}{{"torpid_min", false}, {"torpid_max", true}} {
		v, ok := attrs["tbon."+k.key]
		src := "-S tbon." + k.key
		if !ok {
			if s, isStr := tbon[k.key].(string); isStr {
				v, ok, src = s, true, "[tbon] "+k.key
			}
		}
		if !ok {
			continue
		}
		d, err := fsd.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%s: %q: want a duration (FSD, e.g. \"5s\"): %v", src, v, err)
		}
		switch {
		case k.max && d == 0:
			cfg.TorpidMax = -1 // disabled
		case k.max:
			cfg.TorpidMax = d
		case d == 0:
			return fmt.Errorf("%s: %q: must be greater than zero", src, v)
		default:
			cfg.TorpidMin = d
		}
	}
	return nil
}
