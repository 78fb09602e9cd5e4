package job

import "testing"

func TestDecodeOutput(t *testing.T) {
	o, err := DecodeOutput([]byte(`{"stream":"stdout","rank":"0","data":"/w==","encoding":"base64"}`))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := o.Bytes(); err != nil || string(b) != "\xff" || o.Stream != "stdout" || o.Rank != "0" {
		t.Errorf("%+v: %q %v", o, b, err)
	}
	o, _ = DecodeOutput([]byte(`{"stream":"stderr","rank":"1","data":"hi\n"}`))
	if b, _ := o.Bytes(); string(b) != "hi\n" {
		t.Errorf("utf-8 data %q", b)
	}
	if o, err := DecodeOutput([]byte(`{"stream":"stdout","rank":"0","eof":true}`)); err != nil || !o.EOF {
		t.Errorf("eof: %+v %v", o, err)
	}
	o, _ = DecodeOutput([]byte(`{"stream":"stdout","rank":"0","data":"%%","encoding":"base64"}`))
	if _, err := o.Bytes(); err == nil {
		t.Error("bad base64 accepted")
	}
	if _, err := DecodeOutput([]byte(`[`)); err == nil {
		t.Error("malformed context accepted")
	}
}
