package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
)

// fuzzSecrets are short-alphabet values the fuzzer reaches easily, sharing
// prefixes and overlapping one another. They are upper case and their names
// lower case, so no value can be formed with the bytes of a replacement.
var fuzzSecrets = []Secret{
	{Name: "a", Value: "AAAAAAAA"},
	{Name: "b", Value: "AAAAAAAAB"},
	{Name: "ab", Value: "ABABABAB"},
	{Name: "h", Value: "ABCDEFGH"},
	{Name: "j", Value: "ABCDEFGHIJ"},
	{Name: "z", Value: "XYZ12345"},
}

// FuzzStream checks, for a random input, a random chunking and one random
// extra secret, that streaming gives the same output as redacting the whole
// input at once, and that no value is left in the output.
func FuzzStream(f *testing.F) {
	f.Add([]byte("ABCDEFGHIJ AAAAAAAAAB ABABABABAB"), []byte{1, 2, 3}, "password")
	f.Add([]byte("x"+base64.StdEncoding.EncodeToString([]byte("zABCDEFGHIJ"))+"y"), []byte{0, 5, 1}, "")
	f.Add([]byte(hex.EncodeToString([]byte("XYZ12345"))), []byte{1, 1, 1, 1, 1, 1}, "XYZ1234")
	f.Add([]byte("AAAAAAAAAAAAAAAAAB"), []byte{7, 15}, "AAAAAAAAAAAA")
	f.Add([]byte("p=s3cr%3Ct+%22pw s3cr<t \"pw\"/?>~~"), []byte{9}, formValue)
	f.Fuzz(func(t *testing.T, in, cuts []byte, extra string) {
		secrets := append(fuzzSecrets[:len(fuzzSecrets):len(fuzzSecrets)], Secret{Name: "x", Value: extra})
		set := NewSet(secrets)
		want := set.Bytes(in)
		if s := set.String(string(in)); s != string(want) {
			t.Fatalf("String = %q, Bytes = %q", s, want)
		}

		st := set.Stream()
		var got []byte
		rest := in
		for _, c := range cuts {
			n := min(int(c)%17, len(rest)) // 0 gives an empty chunk
			got = append(got, st.Next(rest[:n])...)
			rest = rest[n:]
		}
		got = append(got, st.Next(rest)...)
		got = append(got, st.End()...)
		if !bytes.Equal(got, want) {
			t.Fatalf("input %q cut by %v: stream gave %q, whole input %q", in, cuts, got, want)
		}

		// Every occurrence of a value in the input is replaced or overlaps
		// an earlier match, so a value can appear in the output only by
		// overlapping a replacement: not if it shares no byte with one.
		replBytes := "[redacted:]"
		for _, s := range secrets {
			replBytes += s.Name
		}
		for _, s := range secrets {
			if len(s.Value) < MinLen || strings.ContainsAny(s.Value, replBytes) {
				continue
			}
			if bytes.Contains(got, []byte(s.Value)) {
				t.Fatalf("value %q of %s left in output %q (input %q)", s.Value, s.Name, got, in)
			}
		}
	})
}
