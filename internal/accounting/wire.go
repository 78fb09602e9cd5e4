package accounting

import "github.com/fluxgo/fluxgo/pkg/jobid"

// The accounting service's wire contract: the topics the accounting
// module serves (flux account's), what it pushes to the enforcers, and
// their payloads. Writes are the instance owner's; others may read
// their own associations, the banks and the projects.

// Service is the accounting module's service name: its topics are
// Service + "." + a flux account command (add-bank, view-user, ...).
const Service = "accounting"

// Topics the enforcers serve: the module sends each a Snapshot after
// every change (and when it starts).
const (
	IngestUpdateTopic = "job-ingest.accounting-update"
	LimitsUpdateTopic = "job-manager.accounting-limits.update"
)

// Snapshot is what the enforcers need of the database: every
// association (inactive ones too: a job naming one is refused saying
// so) and the projects.
type Snapshot struct {
	Associations []Association `json:"associations"`
	Projects     []string      `json:"projects"`
}

// DeleteRequest is delete-bank, delete-user and delete-project.
type DeleteRequest struct {
	Bank     string `json:"bank,omitempty"`
	Username string `json:"username,omitempty"`
	Project  string `json:"project,omitempty"`
	Force    bool   `json:"force,omitempty"`
}

// NameRequest is view-user, view-bank and add-project.
type NameRequest struct {
	Bank     string `json:"bank,omitempty"`
	Username string `json:"username,omitempty"`
	Project  string `json:"project,omitempty"`
}

// BanksResponse answers list-banks and view-bank (the bank and every
// bank below it, then the associations in them).
type BanksResponse struct {
	Banks        []Bank        `json:"banks"`
	Associations []Association `json:"associations,omitempty"`
}

// AssociationsResponse answers view-user and list-users.
type AssociationsResponse struct {
	Associations []Association `json:"associations"`
}

// ProjectsResponse answers list-projects.
type ProjectsResponse struct {
	Projects []Project `json:"projects"`
}

// PriorityUpdateTopic is the mf-priority jobtap plugin's: the module
// sends it every association's fair-share after each pass over the job
// archive ([accounting.fairshare] interval).
const PriorityUpdateTopic = "job-manager.mf-priority.update"

// FairShareEntry is one association's fair-share: its decayed usage
// (core-hours) and factor in [0,1].
type FairShareEntry struct {
	Userid   uint32  `json:"userid"`
	Username string  `json:"username"`
	Bank     string  `json:"bank"`
	Usage    float64 `json:"usage"`
	Factor   float64 `json:"fairshare"`
}

// FairShareUpdate is what the module sends to PriorityUpdateTopic.
type FairShareUpdate struct {
	// Time is when the usage was computed (seconds since the epoch).
	Time float64 `json:"time"`
	// HalfLife is the decay half-life used, in seconds.
	HalfLife float64          `json:"half_life"`
	Entries  []FairShareEntry `json:"associations"`
}

// PriorityExplainTopic explains a job's priority (flux job priority
// --explain): the job's user, an operator or the instance owner may ask.
const PriorityExplainTopic = "job-manager.mf-priority.explain"

// PriorityExplainRequest names the job.
type PriorityExplainRequest struct {
	ID jobid.ID `json:"id"`
}

// PriorityFactor is one term of a job's priority: Value times Weight.
type PriorityFactor struct {
	Name         string  `json:"name"`
	Value        float64 `json:"value"`
	Weight       float64 `json:"weight"`
	Contribution float64 `json:"contribution"`
}

// PriorityExplanation answers PriorityExplainTopic.
type PriorityExplanation struct {
	ID jobid.ID `json:"id"`
	// Priority is the job's priority as last assigned (-1: none yet),
	// Computed what the factors give now.
	Priority int64  `json:"priority"`
	Computed int64  `json:"computed"`
	Bank     string `json:"bank"`
	Queue    string `json:"queue"`
	// Note says when urgency alone decides (held or expedited).
	Note string `json:"note,omitempty"`
	// FairShareTime is when the fair-share was computed (0: never).
	FairShareTime float64          `json:"fairshare_time"`
	Factors       []PriorityFactor `json:"factors"`
}

// UsageReportRequest is view-usage-report: the usage history of the
// periods starting in [Start, End) (End 0: now) of Username's
// associations (every user's for the owner and operators; a user's own
// for others) in Bank ("": every bank), grouped by ReportType:
// "byassociation" (the default), "byuser" or "bybank"; Daily keeps the
// days apart instead of summing them.
type UsageReportRequest struct {
	Username   string `json:"username,omitempty"`
	Bank       string `json:"bank,omitempty"`
	Start      int64  `json:"start"`
	End        int64  `json:"end,omitempty"`
	ReportType string `json:"report_type,omitempty"`
	Daily      bool   `json:"daily,omitempty"`
}

// The report types (flux-accounting's -r/--report-type).
const (
	ReportByAssociation = "byassociation"
	ReportByUser        = "byuser"
	ReportByBank        = "bybank"
)

// MaxDailyReportDays bounds a daily report's range.
const MaxDailyReportDays = 366

// UsageReportResponse answers view-usage-report.
type UsageReportResponse struct {
	Periods []UsagePeriod `json:"periods"`
}
