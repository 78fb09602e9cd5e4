package broker

import (
	"fmt"
	"strings"

	"github.com/fluxgo/fluxgo/internal/size"
	"github.com/fluxgo/fluxgo/internal/valuekind"
)

// accessConfig is the configuration's [access] table
// (flux-config-access(5)), read at start and on each reload (new
// connections see the new one). A broker attribute of the same name (-S
// access.KEY=VALUE) wins over it.
type accessConfig struct {
	// allowGuest is allow-guest-user when the table sets it
	allowGuest *bool
	// allowRootOwner gives root the owner's role (allow-root-owner)
	allowRootOwner bool
	maxUserConns   int64 // max-user-connections (0: not set)
	maxUserPending int64 // max-user-pending (0: not set)
}

// accessKeys are the keys [access] may hold (private-mode and roles are
// flux-core's, accepted and not acted on: a guest always sees only their
// own jobs, and operators are the instance owner).
var accessKeys = []string{"allow-guest-user", "allow-root-owner", "max-user-connections", "max-user-pending", "private-mode", "roles"}

// CheckAccess checks the [access] table of a configuration (nil: none):
// flux config reload refuses a bad one.
func CheckAccess(toml map[string]any) error {
	_, err := parseAccess(toml)
	return err
}

// parseAccess reads the [access] table of a configuration (nil: none).
func parseAccess(toml map[string]any) (accessConfig, error) {
	var ac accessConfig
	raw, ok := toml["access"]
	if !ok {
		return ac, nil
	}
	t, ok := raw.(map[string]any)
	if !ok {
		return ac, fmt.Errorf("access: want a table, not %s", valuekind.Of(raw))
	}
	for k, v := range t {
		switch k {
		case "allow-guest-user", "allow-root-owner":
			b, ok := v.(bool)
			if !ok {
				return ac, fmt.Errorf("access.%s: want true or false, got %v", k, v)
			}
			if k == "allow-root-owner" {
				ac.allowRootOwner = b
			} else {
				ac.allowGuest = &b
			}
		case "max-user-connections":
			n, ok := v.(int64)
			if !ok || n < 1 {
				return ac, fmt.Errorf("access.max-user-connections: want a positive integer, got %v", v)
			}
			ac.maxUserConns = n
		case "max-user-pending":
			n, err := size.Parse(v)
			if err != nil {
				return ac, fmt.Errorf("access.max-user-pending: %v", err)
			}
			if n < 64<<10 {
				return ac, fmt.Errorf("access.max-user-pending: %v is less than 64K", v)
			}
			ac.maxUserPending = n
		case "private-mode":
			if _, ok := v.(bool); !ok {
				return ac, fmt.Errorf("access.private-mode: want true or false, got %v", v)
			}
		case "roles":
			if _, ok := v.(map[string]any); !ok {
				return ac, fmt.Errorf("access.roles: want a table of roles, not %s", valuekind.Of(v))
			}
		default:
			return ac, fmt.Errorf("access.%s: unknown key (the [access] table may hold %s)", k, strings.Join(accessKeys, ", "))
		}
	}
	return ac, nil
}
