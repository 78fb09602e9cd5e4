package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// SubmitRequest is the body of POST /v1/jobs/submit, with
// flux-restful-api's names. Its Python client sends them as query
// parameters; a form or a JSON object are read too.
type SubmitRequest struct {
	Command      []string          // required; a string is split as a shell would
	NumTasks     int               // num_tasks
	CoresPerTask int               // cores_per_task
	GPUsPerTask  int               // gpus_per_task
	NumNodes     int               // num_nodes
	Exclusive    bool              // exclusive
	OptionFlags  map[string]string // option_flags: "k=v,k=v" or an object: shell options
	Envars       map[string]string // envars: added to the job's environment
	Workdir      string            // workdir (default: the user's home directory)
	Runtime      int               // runtime in seconds (0: unlimited)
	IsLauncher   bool              // is_launcher: not supported
}

// maxBody bounds a submit request's body.
const maxBody = 1 << 20

// parseSubmit reads a SubmitRequest from r, or says everything wrong
// with it.
func parseSubmit(r *http.Request) (*SubmitRequest, []string) {
	vals := map[string]any{}
	for k, v := range r.URL.Query() {
		if len(v) > 0 {
			vals[k] = v[len(v)-1]
		}
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		var body map[string]any
		d := json.NewDecoder(io.LimitReader(r.Body, maxBody))
		d.UseNumber()
		if err := d.Decode(&body); err != nil {
			return nil, []string{"the body is not a JSON object: " + err.Error()}
		}
		for k, v := range body {
			vals[k] = v
		}
	case "application/x-www-form-urlencoded", "multipart/form-data":
		r.Body = http.MaxBytesReader(nil, r.Body, maxBody)
		if err := r.ParseForm(); err != nil {
			return nil, []string{"the form cannot be read: " + err.Error()}
		}
		for k, v := range r.PostForm {
			if len(v) > 0 {
				vals[k] = v[len(v)-1]
			}
		}
	}
	var errs []string
	req := &SubmitRequest{}
	intArg := func(name string, dst *int, min int) {
		v, ok := vals[name]
		if !ok || v == "" || v == nil {
			return
		}
		n, err := strconv.Atoi(fmt.Sprint(v))
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %q is not an integer", name, fmt.Sprint(v)))
			return
		}
		if n < min {
			errs = append(errs, fmt.Sprintf("Parameter %s must be >= %d", name, min))
			return
		}
		*dst = n
	}
	intArg("num_tasks", &req.NumTasks, 1)
	intArg("cores_per_task", &req.CoresPerTask, 1)
	intArg("gpus_per_task", &req.GPUsPerTask, 1)
	intArg("num_nodes", &req.NumNodes, 1)
	intArg("runtime", &req.Runtime, 0)
	boolArg := func(name string, dst *bool) {
		switch v := vals[name].(type) {
		case bool:
			*dst = v
		case string:
			switch strings.ToLower(v) {
			case "true", "1", "yes":
				*dst = true
			case "false", "0", "no", "":
			default:
				errs = append(errs, fmt.Sprintf("%s: %q is not true or false", name, v))
			}
		case nil:
		default:
			errs = append(errs, fmt.Sprintf("%s: want true or false", name))
		}
	}
	boolArg("exclusive", &req.Exclusive)
	boolArg("is_launcher", &req.IsLauncher)
	if v, ok := vals["workdir"].(string); ok {
		req.Workdir = v
	}
	switch v := vals["command"].(type) {
	case string:
		cmd, err := splitCommand(v)
		if err != nil {
			errs = append(errs, "command: "+err.Error())
		}
		req.Command = cmd
	case []any:
		for _, a := range v {
			req.Command = append(req.Command, fmt.Sprint(a))
		}
	}
	if len(req.Command) == 0 {
		errs = append(errs, "'command' is required.")
	}
	req.OptionFlags, errs = mapArg(vals["option_flags"], "option_flags", errs)
	req.Envars, errs = mapArg(vals["envars"], "envars", errs)
	for k := range req.OptionFlags {
		if strings.HasPrefix(k, "-o") {
			errs = append(errs, fmt.Sprintf("Please provide keys without -o, %s is invalid.", k))
		}
	}
	if req.IsLauncher {
		errs = append(errs, "is_launcher is not supported by flux web")
	}
	return req, errs
}

// mapArg reads option_flags or envars: "k=v,k=v" or a JSON object
// (given as an object or as a string holding one).
func mapArg(v any, name string, errs []string) (map[string]string, []string) {
	out := map[string]string{}
	switch v := v.(type) {
	case nil:
	case map[string]any:
		for k, x := range v {
			out[k] = fmt.Sprint(x)
		}
	case string:
		if strings.HasPrefix(strings.TrimSpace(v), "{") {
			var m map[string]any
			if err := json.Unmarshal([]byte(v), &m); err != nil {
				return out, append(errs, fmt.Sprintf("%s: %v", name, err))
			}
			return mapArg(m, name, errs)
		}
		for _, kv := range strings.Split(v, ",") {
			if kv == "" {
				continue
			}
			k, val, ok := strings.Cut(kv, "=")
			if !ok {
				errs = append(errs, fmt.Sprintf("%s: %q is not KEY=VALUE", name, kv))
				continue
			}
			out[k] = val
		}
	default:
		errs = append(errs, fmt.Sprintf("%s: want key/value pairs", name))
	}
	return out, errs
}

// splitCommand splits s into words as a POSIX shell would, without
// expansions: blanks separate words, single quotes keep everything,
// double quotes keep all but \" and \\, a backslash escapes one
// character.
func splitCommand(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\\':
			if i+1 >= len(s) {
				return nil, errors.New("ends with a backslash")
			}
			i++
			cur.WriteByte(s[i])
			inWord = true
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated double quote")
			}
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// jobspecFor builds the jobspec of req for the user uid: the command
// with its per-task resources, the user's HOME, USER and LOGNAME, the
// server's PATH, and the request's envars; the working directory is the
// request's or the user's home directory.
func jobspecFor(req *SubmitRequest, uid uint32) (*jobspec.Jobspec, error) {
	spec, err := jobspec.FromCommand(req.Command, jobspec.CommandOptions{
		NTasks:       req.NumTasks,
		CoresPerTask: req.CoresPerTask,
		GPUsPerTask:  req.GPUsPerTask,
		NNodes:       req.NumNodes,
		Exclusive:    req.Exclusive,
	})
	if err != nil {
		return nil, err
	}
	env := map[string]string{"PATH": os.Getenv("PATH")}
	if env["PATH"] == "" {
		env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
	}
	home := "/"
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		env["USER"], env["LOGNAME"] = u.Username, u.Username
		if u.HomeDir != "" {
			home = u.HomeDir
		}
	}
	env["HOME"] = home
	for k, v := range req.Envars {
		env[k] = v
	}
	spec.SetEnvironment(env)
	cwd := req.Workdir
	if cwd == "" {
		cwd = home
	}
	spec.SetCwd(cwd)
	if req.Runtime > 0 {
		if err := spec.SetDuration(float64(req.Runtime)); err != nil {
			return nil, err
		}
	}
	for k, v := range req.OptionFlags {
		if err := spec.SetShellOption(k, shellValue(v)); err != nil {
			return nil, err
		}
	}
	return spec, nil
}

// shellValue reads a shell option value: JSON when it is (numbers,
// true, objects), the string otherwise.
func shellValue(v string) any {
	var x any
	if err := json.Unmarshal([]byte(v), &x); err == nil {
		return x
	}
	return v
}

// submitJob is POST /v1/jobs/submit: {"Message": "Job submit.", "id":
// ID} on success, 400 with "Errors" for a bad request or "Error" when
// the instance refused the job.
func (s *Server) submitJob(w http.ResponseWriter, r *http.Request, as Caller) {
	req, errs := parseSubmit(r)
	if len(errs) > 0 {
		writeJSON(w, http.StatusBadRequest, reply{Message: "Invalid submit request", Errors: errs})
		return
	}
	spec, err := jobspecFor(req, as.Userid)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, reply{Message: "Invalid submit request", Errors: []string{err.Error()}})
		return
	}
	ctx, cancel := reqContext(r)
	defer cancel()
	id, err := s.o.Instance.Submit(ctx, as, spec)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, reply{Message: "There was an issue submitting that job.", Error: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"Message": "Job submit.", "id": uint64(id)})
}
