package jobspec

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// CheckText reports the first string in js (command arguments, names,
// attribute keys and values) that is not valid UTF-8, naming where it
// is: JSON cannot carry such bytes, and MarshalJSON would replace them
// with U+FFFD, so a command run from a file name in another encoding
// would run something else. Submitters call it before they encode.
func (js *Jobspec) CheckText() error {
	for i, t := range js.Tasks {
		for j, a := range t.Command {
			if !utf8.ValidString(a) {
				return textError(fmt.Sprintf("tasks[%d].command[%d]", i, j), a)
			}
		}
		if err := checkValue(fmt.Sprintf("tasks[%d].attributes", i), t.Attributes); err != nil {
			return err
		}
	}
	if err := checkValue("attributes.system", js.Attributes.System); err != nil {
		return err
	}
	if err := checkValue("attributes.user", js.Attributes.User); err != nil {
		return err
	}
	return checkResources("resources", js.Resources)
}

func checkResources(path string, rs []Resource) error {
	for i, r := range rs {
		p := path + "[" + strconv.Itoa(i) + "]"
		for what, s := range map[string]string{"type": r.Type, "unit": r.Unit, "label": r.Label, "id": r.ID} {
			if !utf8.ValidString(s) {
				return textError(p+"."+what, s)
			}
		}
		if err := checkResources(p+".with", r.With); err != nil {
			return err
		}
	}
	return nil
}

func checkValue(path string, v any) error {
	switch t := v.(type) {
	case string:
		if !utf8.ValidString(t) {
			return textError(path, t)
		}
	case []any:
		for i, x := range t {
			if err := checkValue(path+"["+strconv.Itoa(i)+"]", x); err != nil {
				return err
			}
		}
	case map[string]any:
		for k, x := range t {
			if !utf8.ValidString(k) {
				return textError(path+" key", k)
			}
			if err := checkValue(path+"."+k, x); err != nil {
				return err
			}
		}
	}
	return nil
}

func textError(path, s string) error {
	return fmt.Errorf("%s is not valid UTF-8 (%q): a jobspec holds text only", path, s)
}
