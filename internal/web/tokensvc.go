package web

import (
	"context"
	"errors"
	"fmt"
	"math"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// ServiceName is the service flux web registers with the instance;
// TokenTopic is its token request.
const (
	ServiceName = "web"
	TokenTopic  = ServiceName + ".token"
)

// TokenRequest is the web.token request payload.
type TokenRequest struct {
	// Expiry is the token's lifetime in seconds (0: the server's default).
	Expiry float64 `json:"expiry"`
}

// TokenResponse is the web.token response payload.
type TokenResponse struct {
	Token  string `json:"token"`
	Userid uint32 `json:"userid"`
	// Expiry is when the token stops working, in Unix seconds.
	Expiry int64 `json:"expiry"`
}

// Token lifetimes.
const (
	DefaultTokenExpiry = 24 * time.Hour
	MaxTokenExpiry     = 30 * 24 * time.Hour
)

// Issuer answers web.token requests: a token for the requestor, whose
// userid the broker stamped on the request from the connection's peer
// credentials (a guest cannot choose it).
type Issuer struct {
	Signer *Signer
	// Default and Max bound the lifetimes (zero: DefaultTokenExpiry,
	// MaxTokenExpiry).
	Default, Max time.Duration
	Now          func() time.Time
}

// lifetime is the token lifetime a request for expiry seconds gets.
func (is *Issuer) lifetime(expiry float64) (time.Duration, error) {
	def, limit := is.Default, is.Max
	if def == 0 {
		def = DefaultTokenExpiry
	}
	if limit == 0 {
		limit = MaxTokenExpiry
	}
	switch {
	case expiry == 0:
		return min(def, limit), nil
	case expiry < 0 || math.IsNaN(expiry) || math.IsInf(expiry, 0):
		return 0, fmt.Errorf("token expiry must be a positive duration")
	case expiry > limit.Seconds():
		return 0, fmt.Errorf("token expiry %s is longer than this server allows (%s)", time.Duration(expiry*1e9), limit)
	}
	return time.Duration(expiry * float64(time.Second)), nil
}

// Serve answers one web.token request.
func (is *Issuer) Serve(r *flux.Request) {
	var req TokenRequest
	if r.Decode(&req) != nil {
		return
	}
	life, err := is.lifetime(req.Expiry)
	if err != nil {
		r.RespondError(flux.NewError(syscall.EINVAL, err.Error()))
		return
	}
	now := time.Now
	if is.Now != nil {
		now = is.Now
	}
	// round up to whole seconds, so a 1s token is not born expired
	exp := now().Add(life + time.Second - 1).Truncate(time.Second)
	c := Claims{Userid: r.Userid(), Expiry: exp, Operator: r.IsOperator() && !r.IsOwner()}
	r.Respond(TokenResponse{Token: is.Signer.Issue(c), Userid: c.Userid, Expiry: exp.Unix()})
}

// RequestToken asks the instance's flux web server for a token for the
// calling user, valid for expiry (0: the server's default).
func RequestToken(ctx context.Context, h *flux.Handle, expiry time.Duration) (*TokenResponse, error) {
	var resp TokenResponse
	err := h.Call(ctx, TokenTopic, flux.NodeidAny, TokenRequest{Expiry: expiry.Seconds()}, &resp)
	if errors.Is(err, syscall.ENOSYS) {
		return nil, fmt.Errorf("no flux web server is running on this instance (start one with flux web): %w", err)
	}
	if err != nil {
		return nil, err
	}
	return &resp, nil
}
