package cli

import (
	"context"
	"strings"

	"github.com/fluxgo/fluxgo/internal/accounting"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// flux jobs -o '{fairshare}': the fair-share factor of each job's
// association (its user and bank; the user's default bank for a job
// charged to none) as the accounting module's last pass computed it,
// the factor flux job priority --explain weighs. One list-users request
// serves every row: the instance owner and operators get every
// association, other users their own (another user's job shows none).

// needsFairShare reports whether a format or sort key uses the field.
func needsFairShare(fields []fmtField, sort string) bool {
	for _, f := range fields {
		if f.name == "fairshare" {
			return true
		}
	}
	return strings.Contains(sort, "fairshare")
}

// fetchFairShare fills in each row's fair-share. An instance without
// the accounting module, or a database without the job's association,
// leaves it empty.
func fetchFairShare(ctx context.Context, h *flux.Handle, rows []jobRow) {
	var resp accounting.AssociationsResponse
	if accountCall(ctx, h, "list-users", nil, &resp) != nil {
		return
	}
	fs := map[accounting.AssocKey]*float64{}
	defaults := map[uint32]string{}
	for _, a := range resp.Associations {
		fs[accounting.AssocKey{Userid: a.Userid, Bank: a.Bank}] = a.FairShare
		defaults[a.Userid] = a.DefaultBank
	}
	for i := range rows {
		bank := rows[i].Bank
		if bank == "" {
			bank = defaults[rows[i].Userid]
		}
		rows[i].fs = fs[accounting.AssocKey{Userid: rows[i].Userid, Bank: bank}]
	}
}
