package accounting

import (
	"context"
	"os/user"
	"slices"
	"strconv"
	"syscall"

	acct "github.com/fluxgo/fluxgo/internal/accounting"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

func (s *server) handlers(ctx context.Context) {
	h := s.h
	topic := func(cmd string) string { return Name + "." + cmd }
	h.HandleFunc(topic("add-bank"), write(ctx, s, "add-bank", func(b *acct.Bank) (any, error) {
		return nil, s.store.AddBank(ctx, *b)
	}))
	h.HandleFunc(topic("edit-bank"), write(ctx, s, "edit-bank", func(e *acct.BankEdit) (any, error) {
		return nil, s.store.EditBank(ctx, *e)
	}))
	h.HandleFunc(topic("delete-bank"), write(ctx, s, "delete-bank", func(d *acct.DeleteRequest) (any, error) {
		return nil, s.store.DeleteBank(ctx, d.Bank, d.Force)
	}))
	h.HandleFunc(topic("add-user"), write(ctx, s, "add-user", func(a *acct.Association) (any, error) {
		if a.Username == "" {
			return nil, flux.NewError(syscall.EINVAL, "add-user: --username is required")
		}
		if a.Userid == 0 {
			// a user already in the database keeps their uid; a new
			// one is looked up on this host
			uid, err := s.knownUserid(ctx, a.Username)
			if err != nil {
				return nil, err
			}
			a.Userid = uid
		}
		if err := acct.CheckHostUserid(a.Username, a.Userid); err != nil {
			return nil, err
		}
		return nil, s.store.AddUser(ctx, *a)
	}))
	h.HandleFunc(topic("edit-user"), write(ctx, s, "edit-user", func(e *acct.UserEdit) (any, error) {
		if e.Userid != nil {
			if err := acct.CheckHostUserid(e.Username, *e.Userid); err != nil {
				return nil, err
			}
		}
		if err := s.store.EditUser(ctx, *e); err != nil {
			return nil, err
		}
		if e.Userid != nil {
			// the store dropped the user's usage history (charged by
			// the old uid): the pass after this change rewrites every
			// day of the window under the right names
			s.usageMark = rewriteUsageWindow
		}
		return nil, nil
	}))
	h.HandleFunc(topic("delete-user"), write(ctx, s, "delete-user", func(d *acct.DeleteRequest) (any, error) {
		return nil, s.store.DeleteUser(ctx, d.Username, d.Bank, d.Force)
	}))
	h.HandleFunc(topic("add-project"), write(ctx, s, "add-project", func(n *acct.NameRequest) (any, error) {
		return nil, s.store.AddProject(ctx, n.Project)
	}))
	h.HandleFunc(topic("delete-project"), write(ctx, s, "delete-project", func(d *acct.DeleteRequest) (any, error) {
		return nil, s.store.DeleteProject(ctx, d.Project)
	}))

	h.HandleFunc(topic("list-banks"), func(r *flux.Request) {
		banks, err := s.banks(ctx)
		if err != nil {
			r.RespondError(err)
			return
		}
		r.Respond(acct.BanksResponse{Banks: banks})
	})
	h.HandleFunc(topic("view-bank"), func(r *flux.Request) {
		var req acct.NameRequest
		if r.Decode(&req) != nil {
			return
		}
		resp, err := s.viewBank(ctx, req.Bank, r)
		if err != nil {
			r.RespondError(err)
			return
		}
		r.Respond(resp)
	})
	h.HandleFunc(topic("view-user"), func(r *flux.Request) {
		var req acct.NameRequest
		if r.Decode(&req) != nil {
			return
		}
		as, err := s.associations(ctx, req.Username)
		if err != nil {
			r.RespondError(err)
			return
		}
		if !r.IsOperator() && !isCaller(r, req.Username, as) {
			r.Errorf(syscall.EPERM, "view-user %s: only the instance owner and operators may view other users", req.Username)
			return
		}
		if len(as) == 0 {
			r.Errorf(syscall.ENOENT, "user %s is not in the accounting database", req.Username)
			return
		}
		r.Respond(acct.AssociationsResponse{Associations: as})
	})
	h.HandleFunc(topic("list-users"), func(r *flux.Request) {
		as, err := s.associations(ctx, "")
		if err != nil {
			r.RespondError(err)
			return
		}
		if !r.IsOperator() {
			as = slices.DeleteFunc(as, func(a acct.Association) bool { return a.Userid != r.Userid() })
		}
		r.Respond(acct.AssociationsResponse{Associations: as})
	})
	h.HandleFunc(topic("list-projects"), func(r *flux.Request) {
		ps := []acct.Project{}
		if s.store != nil {
			var err error
			if ps, err = s.store.Projects(ctx); err != nil {
				r.RespondError(err)
				return
			}
		}
		r.Respond(acct.ProjectsResponse{Projects: ps})
	})
	// snapshot: for an enforcer (re)loaded after this module
	h.HandleFunc(topic("snapshot"), func(r *flux.Request) {
		if !r.RequireOwner() {
			return
		}
		snap, err := s.snapshot(ctx)
		if err != nil {
			r.RespondError(err)
			return
		}
		r.Respond(snap)
	})
	// update-usage: a fair-share pass now (flux account update-usage)
	h.HandleFunc(topic("update-usage"), func(r *flux.Request) {
		if !r.IsOwner() {
			r.Errorf(syscall.EPERM, "update-usage: only the instance owner may run a fair-share pass")
			return
		}
		upd, err := s.updateFairShare(ctx)
		if err != nil {
			r.Errorf(syscall.EIO, "update-usage: %v", err)
			return
		}
		r.Respond(upd)
	})
	h.HandleFunc(topic("view-usage-report"), func(r *flux.Request) { s.viewUsageReport(ctx, r) })
	h.HandleFunc(topic("stats"), func(r *flux.Request) {
		r.Respond(map[string]any{"dbpath": s.path, "open": s.store != nil})
	})
	h.HandleFunc(topic("disconnect"), func(*flux.Request) {})
}

// knownUserid is username's uid in the database, or else on this host.
func (s *server) knownUserid(ctx context.Context, username string) (uint32, error) {
	as, err := s.store.Associations(ctx, username)
	if err != nil {
		return 0, err
	}
	if len(as) > 0 {
		return as[0].Userid, nil
	}
	return acct.LookupUserid(username)
}

func (s *server) banks(ctx context.Context) ([]acct.Bank, error) {
	if s.store == nil {
		return []acct.Bank{}, nil
	}
	banks, err := s.store.Banks(ctx)
	if banks == nil {
		banks = []acct.Bank{}
	}
	return banks, err
}

func (s *server) associations(ctx context.Context, username string) ([]acct.Association, error) {
	if s.store == nil {
		return []acct.Association{}, nil
	}
	as, err := s.store.Associations(ctx, username)
	if as == nil {
		as = []acct.Association{}
	}
	for i := range as {
		if e, ok := s.fair[acct.AssocKey{Userid: as[i].Userid, Bank: as[i].Bank}]; ok {
			as[i].JobUsage, as[i].FairShare = &e.Usage, &e.Factor
		}
	}
	return as, err
}

// viewBank is the bank, the banks below it, and the associations in
// them (a user other than the owner and operators sees only their own).
func (s *server) viewBank(ctx context.Context, name string, r *flux.Request) (acct.BanksResponse, error) {
	var resp acct.BanksResponse
	banks, err := s.banks(ctx)
	if err != nil {
		return resp, err
	}
	in := map[string]bool{name: true}
	found := false
	for _, b := range banks {
		found = found || b.Name == name
	}
	if !found {
		return resp, flux.NewError(syscall.ENOENT, "bank "+name+" is not in the accounting database")
	}
	// banks are few: a fixed point finds the subtree without recursion
	for grew := true; grew; {
		grew = false
		for _, b := range banks {
			if in[b.Parent] && !in[b.Name] {
				in[b.Name], grew = true, true
			}
		}
	}
	for _, b := range banks {
		if in[b.Name] {
			resp.Banks = append(resp.Banks, b)
		}
	}
	as, err := s.associations(ctx, "")
	if err != nil {
		return resp, err
	}
	for _, a := range as {
		if in[a.Bank] && (r.IsOperator() || a.Userid == r.Userid()) {
			resp.Associations = append(resp.Associations, a)
		}
	}
	return resp, nil
}

// isCaller reports whether username is the requestor: the uid the
// database has for it, or this host's name for the requestor's uid.
func isCaller(r *flux.Request, username string, as []acct.Association) bool {
	for _, a := range as {
		if a.Userid == r.Userid() {
			return true
		}
	}
	if u, err := user.LookupId(strconv.FormatUint(uint64(r.Userid()), 10)); err == nil {
		return u.Username == username
	}
	return false
}
