package joblist

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// Private mode: guests see only their own jobs. It is on when the module
// was loaded with private=1, when the broker attribute job-list.private
// is 1 at load, or while the configuration's [access] private-mode is
// true (flux-core's key; flux config reload applies it to the next
// request).

// accessPrivate reads access.private-mode from a configuration object.
func accessPrivate(conf []byte) (bool, error) {
	var c struct {
		Access map[string]json.RawMessage `json:"access"`
	}
	if err := json.Unmarshal(conf, &c); err != nil {
		return false, fmt.Errorf("configuration: %v", err)
	}
	raw, ok := c.Access["private-mode"]
	if !ok {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, fmt.Errorf("access.private-mode: want true or false, got %s", raw)
	}
	return b, nil
}

// loadPrivate reads [access] private-mode from the broker's configuration
// at load.
func (s *service) loadPrivate(ctx context.Context) error {
	var conf json.RawMessage
	if err := s.h.Call(ctx, "config.get", flux.NodeidAny, nil, &conf); err != nil {
		return nil // a broker without a configuration service: none
	}
	p, err := accessPrivate(conf)
	if err != nil {
		return err
	}
	s.cfg.Private = s.privateFixed || p
	return nil
}

// configReload (job-list.config-reload, from the broker at flux config
// reload) takes the new configuration's [access] private-mode.
func (s *service) configReload(r *flux.Request) {
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "only the instance owner may reload the configuration")
		return
	}
	p, err := accessPrivate(r.Msg.JSON())
	if err != nil {
		r.Errorf(syscall.EINVAL, "%v", err)
		return
	}
	if on := s.privateFixed || p; on != s.cfg.Private {
		s.cfg.Private = on
		if on {
			s.log.Info("private mode on: guests list only their own jobs")
		} else {
			s.log.Info("private mode off: guests list every job's public fields")
		}
	}
	r.Respond(nil)
}
