package cli

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/spf13/pflag"

	"github.com/fluxgo/fluxgo/internal/accounting"
)

// Option values of flux account (and of flux submit's -B/--project)
// that refuse what would otherwise pass unnoticed: an empty name, which
// would mean "the default" or "every one", and a uid out of range.

// nameValue is a name option that may not be empty: -B ” is refused
// instead of standing for the default bank.
type nameValue struct{ p *string }

func (v nameValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v nameValue) Set(s string) error {
	if s == "" {
		return errors.New("an empty name: give a name or leave the option out")
	}
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8")
	}
	*v.p = s
	return nil
}

func (nameValue) Type() string { return "string" }

// nameVarP defines a name option that refuses an empty value.
func nameVarP(fs *pflag.FlagSet, p *string, name, short, usage string) {
	fs.VarP(nameValue{p}, name, short, usage)
}

// useridValue is --userid: a uid from 0 to accounting.MaxUserid.
type useridValue struct{ p *uint32 }

func (v useridValue) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.FormatUint(uint64(*v.p), 10)
}

func (v useridValue) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > accounting.MaxUserid {
		return fmt.Errorf("want a uid from 0 to %d", uint64(accounting.MaxUserid))
	}
	*v.p = uint32(n)
	return nil
}

func (useridValue) Type() string { return "uint32" }

// useridVarP defines --userid.
func useridVarP(fs *pflag.FlagSet, p *uint32, name, short, usage string) {
	fs.VarP(useridValue{p}, name, short, usage)
}
