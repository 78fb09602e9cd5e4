package pmi

import (
	"errors"
	"reflect"
	"testing"
)

func TestParseMessage(t *testing.T) {
	type kv = [][2]string
	tests := []struct {
		name  string
		line  string
		cmd   string
		multi bool
		want  kv
	}{
		{"init", "cmd=init pmi_version=1 pmi_subversion=1\n", "init", false,
			kv{{"pmi_version", "1"}, {"pmi_subversion", "1"}}},
		{"no newline", "cmd=get_maxes", "get_maxes", false, nil},
		{"extra space", "  cmd=put   kvsname=k\tkey=a  value=b \n", "put", false,
			kv{{"kvsname", "k"}, {"key", "a"}, {"value", "b"}}},
		{"cmd not first", "rc=0 cmd=barrier_out", "barrier_out", false, kv{{"rc", "0"}}},
		{"empty value", "cmd=get_result rc=0 value=", "get_result", false, kv{{"rc", "0"}, {"value", ""}}},
		{"value with =", "cmd=put kvsname=k key=a value=x=y", "put", false,
			kv{{"kvsname", "k"}, {"key", "a"}, {"value", "x=y"}}},
		{"msg with spaces", "cmd=get_result rc=-1 msg=key  not found", "get_result", false,
			kv{{"rc", "-1"}, {"msg", "key  not found"}}},
		{"msg then key", "cmd=publish_result msg=not supported rc=-1", "publish_result", false,
			kv{{"msg", "not supported"}, {"rc", "-1"}}},
		{"value containing key-ish text", "cmd=x msg=amsg=b c", "x", false, kv{{"msg", "amsg=b c"}}},
		{"mcmd", "mcmd=spawn", "spawn", true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseMessage(tc.line)
			if err != nil {
				t.Fatal(err)
			}
			if m.Cmd != tc.cmd || m.Multi != tc.multi {
				t.Fatalf("cmd %q multi %v, want %q %v", m.Cmd, m.Multi, tc.cmd, tc.multi)
			}
			var got kv
			for _, k := range m.Keys {
				v, _ := m.Get(k)
				got = append(got, [2]string{k, v})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseMessageErrors(t *testing.T) {
	for _, line := range []string{
		"",
		"\n",
		"rc=0",                  // no cmd
		"hello cmd=init",        // leading token without =
		"cmd=init =1",           // empty key
		"cmd=",                  // empty command
		"cmd=a cmd=b",           // two commands
		"cmd=a mcmd=b",          // two commands
		"cmd=put key=a key=b",   // repeated key
		"cmd=barrier in",        // space in command name
		"cmd=get rc=0 rc=1 x=y", // repeated rc
	} {
		t.Run(line, func(t *testing.T) {
			_, err := ParseMessage(line)
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("ParseMessage(%q) = %v, want ErrProtocol", line, err)
			}
		})
	}
}

func TestMessageString(t *testing.T) {
	m := NewMessage("init").SetInt("pmi_version", 1).SetInt("pmi_subversion", 1)
	if got, want := m.String(), "cmd=init pmi_version=1 pmi_subversion=1\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	m.Set("pmi_version", "2")
	if got, want := m.String(), "cmd=init pmi_version=2 pmi_subversion=1\n"; got != want {
		t.Fatalf("after replace: got %q, want %q", got, want)
	}
}

func TestWordAndValue(t *testing.T) {
	for _, tc := range []struct {
		s           string
		word, value bool
	}{
		{"", false, true},
		{"abc", true, true},
		{"a=b", false, true},
		{"a b", false, false},
		{"tcp://127.0.0.1:80", true, true},
		{"é", false, false},
		{"~!", true, true},
	} {
		if got := validWord(tc.s); got != tc.word {
			t.Errorf("validWord(%q) = %v", tc.s, got)
		}
		if got := validValue(tc.s); got != tc.value {
			t.Errorf("validValue(%q) = %v", tc.s, got)
		}
	}
}

// FuzzParseMessage checks that whatever parses renders back to a line
// that parses to the same message.
func FuzzParseMessage(f *testing.F) {
	for _, s := range []string{
		"cmd=init pmi_version=1 pmi_subversion=1\n",
		"cmd=get_result rc=-1 msg=key not found",
		"mcmd=spawn",
		"rc=0 cmd=barrier_out",
		"cmd=put kvsname=k key=a value=x=y",
		"cmd==",
		"a b c",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		m, err := ParseMessage(line)
		if err != nil {
			return
		}
		if m.Multi {
			return
		}
		out := m.String()
		m2, err := ParseMessage(out)
		if err != nil {
			// values with embedded runs of white space that start with a
			// key=value-looking token can't round trip; everything else must.
			for _, k := range m.Keys {
				if v, _ := m.Get(k); containsSpace(v) {
					return
				}
			}
			t.Fatalf("%q rendered as %q which fails: %v", line, out, err)
		}
		if m2.Cmd != m.Cmd || len(m2.Keys) != len(m.Keys) {
			for _, k := range m.Keys {
				if v, _ := m.Get(k); containsSpace(v) {
					return
				}
			}
			t.Fatalf("%q -> %q -> %+v", line, out, m2)
		}
	})
}

func containsSpace(s string) bool {
	for i := 0; i < len(s); i++ {
		if isSpace(s[i]) {
			return true
		}
	}
	return false
}
