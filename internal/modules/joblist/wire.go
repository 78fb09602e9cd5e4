package joblist

import (
	"fmt"

	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// job-list reads every journal response and the jobspec and R of every
// job: those are decoded with jsonwire (one strict pass, only the members
// used) rather than encoding/json.

// members calls fn with each member of a JSON object (an event context);
// a malformed object or an error from fn is returned.
func members(ctx []byte, fn func(key, val []byte) error) error {
	if len(ctx) == 0 {
		return fmt.Errorf("%w: no context", jsonwire.ErrSyntax)
	}
	return jsonwire.Object(ctx, fn)
}

// int32Member decodes an integer that must fit in 32 bits.
func int32Member(val []byte) (int32, error) {
	n, err := jsonwire.Int(val)
	if err == nil && (n < -1<<31 || n > 1<<31-1) {
		err = fmt.Errorf("%w: %d is out of range", jsonwire.ErrSyntax, n)
	}
	return int32(n), err
}

// isObject reports whether a raw value is a JSON object.
func isObject(v []byte) bool { return len(v) > 0 && v[0] == '{' }

// isArray reports whether a raw value is a JSON array.
func isArray(v []byte) bool { return len(v) > 0 && v[0] == '[' }

// decodeSpec reads the parts of a jobspec job-list uses. A member of the
// wrong type is an error, as with encoding/json into specDoc.
func decodeSpec(raw []byte) (specDoc, error) {
	var js specDoc
	err := jsonwire.Object(raw, func(key, val []byte) error {
		switch string(key) {
		case "resources":
			var err error
			js.Resources, err = decodeResources(val)
			return err
		case "tasks":
			return decodeTasks(val, &js)
		case "attributes":
			if jsonwire.IsNull(val) {
				return nil
			}
			if !isObject(val) {
				return fmt.Errorf("%w: attributes", jsonwire.ErrSyntax)
			}
			return jsonwire.Object(val, func(k, v []byte) error {
				if string(k) != "system" || jsonwire.IsNull(v) {
					return nil
				}
				if !isObject(v) {
					return fmt.Errorf("%w: attributes.system", jsonwire.ErrSyntax)
				}
				return decodeSystem(v, &js)
			})
		}
		return nil
	})
	return js, err
}

func decodeResources(val []byte) ([]specResource, error) {
	if jsonwire.IsNull(val) {
		return nil, nil
	}
	if !isArray(val) {
		return nil, fmt.Errorf("%w: resources", jsonwire.ErrSyntax)
	}
	var out []specResource
	err := jsonwire.Array(val, func(v []byte) error {
		if !isObject(v) {
			return fmt.Errorf("%w: resource", jsonwire.ErrSyntax)
		}
		var r specResource
		err := jsonwire.Object(v, func(k, val []byte) error {
			var err error
			switch string(k) {
			case "type":
				if !jsonwire.IsNull(val) {
					r.Type, err = jsonwire.String(val)
				}
			case "count":
				r.Count = val
			case "with":
				r.With, err = decodeResources(val)
			}
			return err
		})
		out = append(out, r)
		return err
	})
	return out, err
}

func decodeTasks(val []byte, js *specDoc) error {
	if jsonwire.IsNull(val) {
		return nil
	}
	if !isArray(val) {
		return fmt.Errorf("%w: tasks", jsonwire.ErrSyntax)
	}
	return jsonwire.Array(val, func(v []byte) error {
		if !isObject(v) {
			return fmt.Errorf("%w: task", jsonwire.ErrSyntax)
		}
		var t specTask
		err := jsonwire.Object(v, func(k, val []byte) error {
			switch string(k) {
			case "command":
				if jsonwire.IsNull(val) {
					return nil
				}
				if !isArray(val) {
					return fmt.Errorf("%w: command", jsonwire.ErrSyntax)
				}
				return jsonwire.Array(val, func(a []byte) error {
					s, err := jsonwire.String(a)
					t.Command = append(t.Command, s)
					return err
				})
			case "count":
				if jsonwire.IsNull(val) {
					return nil
				}
				if !isObject(val) {
					return fmt.Errorf("%w: count", jsonwire.ErrSyntax)
				}
				return jsonwire.Object(val, func(ck, cv []byte) error {
					if jsonwire.IsNull(cv) {
						return nil
					}
					n, err := jsonwire.Int(cv)
					switch string(ck) {
					case "per_slot":
						t.Count.PerSlot = intPtr(int(n))
					case "total":
						t.Count.Total = intPtr(int(n))
					default:
						return nil
					}
					return err
				})
			}
			return nil
		})
		js.Tasks = append(js.Tasks, t)
		return err
	})
}

func intPtr(n int) *int { return &n }

func decodeSystem(sys []byte, js *specDoc) error {
	s := &js.Attributes.System
	return jsonwire.Object(sys, func(k, v []byte) error {
		if jsonwire.IsNull(v) {
			return nil
		}
		var err error
		switch string(k) {
		case "duration":
			var f float64
			f, err = jsonwire.Float(v)
			s.Duration = &f
		case "cwd":
			s.Cwd, err = jsonwire.String(v)
		case "queue":
			s.Queue, err = jsonwire.String(v)
		case "project":
			s.Project, err = jsonwire.String(v)
		case "bank":
			s.Bank, err = jsonwire.String(v)
		case "job":
			if !isObject(v) {
				return fmt.Errorf("%w: job", jsonwire.ErrSyntax)
			}
			err = jsonwire.Object(v, func(jk, jv []byte) error {
				if string(jk) == "name" && !jsonwire.IsNull(jv) {
					var err error
					s.Job.Name, err = jsonwire.String(jv)
					return err
				}
				return nil
			})
		case "shell":
			err = decodeShell(v, s)
		}
		if err != nil {
			return fmt.Errorf("attributes.system.%s: %w", k, err)
		}
		return nil
	})
}

// decodeShell reads attributes.system.shell.options.per-resource.
func decodeShell(v []byte, s *specSystem) error {
	if !isObject(v) {
		return fmt.Errorf("%w: want an object", jsonwire.ErrSyntax)
	}
	return jsonwire.Object(v, func(k, opts []byte) error {
		if string(k) != "options" || jsonwire.IsNull(opts) {
			return nil
		}
		if !isObject(opts) {
			return fmt.Errorf("%w: options", jsonwire.ErrSyntax)
		}
		return jsonwire.Object(opts, func(ok, pr []byte) error {
			if string(ok) != "per-resource" || jsonwire.IsNull(pr) {
				return nil
			}
			if !isObject(pr) {
				return fmt.Errorf("%w: per-resource", jsonwire.ErrSyntax)
			}
			p := &specPerResource{}
			s.Shell.Options.PerResource = p
			return jsonwire.Object(pr, func(pk, pv []byte) error {
				if jsonwire.IsNull(pv) {
					return nil
				}
				var err error
				switch string(pk) {
				case "type":
					p.Type, err = jsonwire.String(pv)
				case "count":
					var n int64
					n, err = jsonwire.Int(pv)
					p.Count = intPtr(int(n))
				}
				return err
			})
		})
	})
}

// rInfo is what job-list reads from R.
type rInfo struct {
	rlite []struct {
		rank, cores string
	}
	nodelist   []string
	expiration *float64
}

// decodeR reads R's execution.R_lite (rank and children.core),
// nodelist and expiration.
func decodeR(raw []byte) (rInfo, error) {
	var ri rInfo
	err := jsonwire.Object(raw, func(key, ex []byte) error {
		if string(key) != "execution" || jsonwire.IsNull(ex) {
			return nil
		}
		if !isObject(ex) {
			return fmt.Errorf("%w: execution", jsonwire.ErrSyntax)
		}
		return jsonwire.Object(ex, func(k, v []byte) error {
			if jsonwire.IsNull(v) {
				return nil
			}
			switch string(k) {
			case "R_lite":
				if !isArray(v) {
					return fmt.Errorf("%w: R_lite", jsonwire.ErrSyntax)
				}
				return jsonwire.Array(v, func(e []byte) error {
					if !isObject(e) {
						return fmt.Errorf("%w: R_lite entry", jsonwire.ErrSyntax)
					}
					var ent struct{ rank, cores string }
					err := jsonwire.Object(e, func(ek, ev []byte) error {
						if jsonwire.IsNull(ev) {
							return nil
						}
						var err error
						switch string(ek) {
						case "rank":
							ent.rank, err = jsonwire.String(ev)
						case "children":
							if !isObject(ev) {
								return fmt.Errorf("%w: children", jsonwire.ErrSyntax)
							}
							err = jsonwire.Object(ev, func(ck, cv []byte) error {
								s, err := jsonwire.String(cv)
								if string(ck) == "core" {
									ent.cores = s
								}
								return err
							})
						}
						return err
					})
					ri.rlite = append(ri.rlite, ent)
					return err
				})
			case "nodelist":
				if !isArray(v) {
					return fmt.Errorf("%w: nodelist", jsonwire.ErrSyntax)
				}
				return jsonwire.Array(v, func(h []byte) error {
					s, err := jsonwire.String(h)
					ri.nodelist = append(ri.nodelist, s)
					return err
				})
			case "expiration":
				f, err := jsonwire.Float(v)
				ri.expiration = &f
				return err
			}
			return nil
		})
	})
	return ri, err
}
