package accounting

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// Index is a Snapshot arranged for the checks made at each submission:
// which bank and project a job is charged to, and its association's
// limits and flags. The zero Index (and nil) enforces nothing: an
// instance whose database has no users runs jobs as it did without one.
type Index struct {
	users    map[uint32]*indexUser
	projects map[string]bool
}

type indexUser struct {
	name           string
	banks          map[string]*Association
	defaultBank    string
	projects       []string
	defaultProject string
}

// NewIndex indexes a snapshot.
func NewIndex(s Snapshot) *Index {
	x := &Index{users: map[uint32]*indexUser{}, projects: map[string]bool{}}
	for _, p := range s.Projects {
		x.projects[p] = true
	}
	for i := range s.Associations {
		a := &s.Associations[i]
		u := x.users[a.Userid]
		if u == nil {
			u = &indexUser{name: a.Username, banks: map[string]*Association{}, defaultBank: a.DefaultBank,
				projects: a.Projects, defaultProject: a.DefaultProject}
			x.users[a.Userid] = u
		}
		u.banks[a.Bank] = a
	}
	return x
}

// Enforcing reports whether the database has users (and so whether
// jobs are checked at all).
func (x *Index) Enforcing() bool { return x != nil && len(x.users) > 0 }

// Len is the number of associations indexed.
func (x *Index) Len() int {
	if x == nil {
		return 0
	}
	n := 0
	for _, u := range x.users {
		n += len(u.banks)
	}
	return n
}

func (u *indexUser) activeBanks() string {
	var names []string
	for b, a := range u.banks {
		if a.Active {
			names = append(names, b)
		}
	}
	if len(names) == 0 {
		return "none active"
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// Charge says which bank and project a job of uid's is charged to: the
// ones it names, which must be the user's, or the user's defaults. Once
// the database has projects, a project must be one of the user's (or
// AnyProject), and a job naming none gets the user's default project,
// or AnyProject for a user without one. A
// user the database does not know may not submit, unless they are the
// instance owner (owner): the owner's jobs are then left as they are.
func (x *Index) Charge(uid uint32, owner bool, bank, project string) (string, string, error) {
	if !x.Enforcing() {
		return bank, project, nil
	}
	u := x.users[uid]
	if u == nil {
		if owner {
			return bank, project, nil
		}
		return "", "", errf(syscall.EPERM, "user %s is not in the accounting database: the instance owner adds users with flux account add-user", uidName(uid))
	}
	if bank == "" {
		if u.defaultBank == "" {
			return "", "", errf(syscall.EPERM, "user %s has no active bank (banks: %s)", u.name, u.activeBanks())
		}
		bank = u.defaultBank
	}
	a := u.banks[bank]
	switch {
	case a == nil:
		return "", "", errf(syscall.EPERM, "bank %s: user %s does not belong to it (banks: %s)", bank, u.name, u.activeBanks())
	case !a.Active:
		return "", "", errf(syscall.EPERM, "bank %s: user %s's association with it is inactive (banks: %s)", bank, u.name, u.activeBanks())
	}
	if len(x.projects) == 0 {
		// no projects in the database: --project is a free tag
		if project == "" {
			project = u.defaultProject
		}
		return bank, project, nil
	}
	switch {
	case project == "" && u.defaultProject != "":
		project = u.defaultProject
	case project == "" || project == AnyProject:
		project = AnyProject
	case !x.projects[project]:
		return "", "", errf(syscall.EINVAL, "project %s is not in the accounting database (projects: %s)", project, x.projectNames())
	case !slices.Contains(u.projects, project):
		return "", "", errf(syscall.EPERM, "project %s: user %s does not belong to it (projects: %s)", project, u.name,
			strings.Join(append(slices.Clone(u.projects), AnyProject), ", "))
	}
	return bank, project, nil
}

// AnyProject is the project every user belongs to, as in
// flux-accounting: the project of the jobs of a user without a default
// project once the database has projects (a job may name it too). A
// user may name no other project that is not on their list.
const AnyProject = "*"

func (x *Index) projectNames() string {
	names := make([]string, 0, len(x.projects))
	for p := range x.projects {
		names = append(names, p)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// Association returns uid's association with bank, if the database
// has it.
func (x *Index) Association(uid uint32, bank string) (*Association, bool) {
	if x == nil {
		return nil, false
	}
	u := x.users[uid]
	if u == nil {
		return nil, false
	}
	a, ok := u.banks[bank]
	return a, ok
}

// uidName is a uid for an error: its user name if this host knows it.
func uidName(uid uint32) string {
	s := strconv.FormatUint(uint64(uid), 10)
	if name, ok := lookupUsername(uid); ok {
		return name + " (uid " + s + ")"
	}
	return "uid " + s
}
