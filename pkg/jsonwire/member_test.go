package jsonwire

import (
	"errors"
	"testing"
)

func TestMember(t *testing.T) {
	val, found, err := Member([]byte(`{"a":1,"name":"x","b":[1,2]}`), "name")
	if err != nil || !found || string(val) != `"x"` {
		t.Fatalf("Member name = %q %v %v", val, found, err)
	}
	if _, found, err := Member([]byte(`{"a":1}`), "name"); found || err != nil {
		t.Fatalf("absent member: found %v, err %v", found, err)
	}
	if _, found, err := Member([]byte(`{"a":1,`), "name"); found || !errors.Is(err, ErrSyntax) {
		t.Fatalf("bad object: found %v, err %v", found, err)
	}
	if _, _, err := Member([]byte(`[1]`), "name"); !errors.Is(err, ErrSyntax) {
		t.Fatalf("not an object: %v", err)
	}
}
