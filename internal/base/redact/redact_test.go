package redact

import (
	"strings"
	"testing"
)

// formValue has characters that every encoding treats differently: '<' and
// '>' (HTML-escaped JSON), '"' (JSON), ' ', '/', '?' (URL encodings), and
// bytes whose base64 differs between the standard and URL alphabets. It is
// 16 bytes long, so its base64 ends in a partial group.
const formValue = `s3cr<t "pw"/?>~~`

// The expected texts below were computed independently (with Python's
// base64, urllib.parse and by finding which base64 characters stay the same
// for random neighbouring bytes), not with this package's code.
func TestSetCatchesEveryForm(t *testing.T) {
	t.Parallel()
	set := NewSet([]Secret{{Name: "pw", Value: formValue}})
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"raw", formValue, "[redacted:pw]"},
		{"base64 std padded", "czNjcjx0ICJwdyIvPz5+fg==", "[redacted:pw]"},
		{"base64 std unpadded", "czNjcjx0ICJwdyIvPz5+fg", "[redacted:pw]"},
		{"base64 url padded", "czNjcjx0ICJwdyIvPz5-fg==", "[redacted:pw]"},
		{"base64 url unpadded", "czNjcjx0ICJwdyIvPz5-fg", "[redacted:pw]"},
		{"base64 std offset 0 in longer stream", "czNjcjx0ICJwdyIvPz5+fnl6", "[redacted:pw]nl6"},
		{"base64 std offset 1", "eHMzY3I8dCAicHciLz8+fn55eg==", "eH[redacted:pw]55eg=="},
		{"base64 std offset 2", "eHhzM2NyPHQgInB3Ii8/Pn5+eXo=", "eHh[redacted:pw]eXo="},
		{"base64 url offset 0 in longer stream", "czNjcjx0ICJwdyIvPz5-fnl6", "[redacted:pw]nl6"},
		{"base64 url offset 1", "eHMzY3I8dCAicHciLz8-fn55eg==", "eH[redacted:pw]55eg=="},
		{"base64 url offset 2", "eHhzM2NyPHQgInB3Ii8_Pn5-eXo=", "eHh[redacted:pw]eXo="},
		{"query escape", "s3cr%3Ct+%22pw%22%2F%3F%3E~~", "[redacted:pw]"},
		{"path escape", "s3cr%3Ct%20%22pw%22%2F%3F%3E~~", "[redacted:pw]"},
		{"json", `s3cr<t \"pw\"/?>~~`, "[redacted:pw]"},
		{"json html-escaped", `s3cr\u003ct \"pw\"/?\u003e~~`, "[redacted:pw]"},
		{"hex lower", "733363723c7420227077222f3f3e7e7e", "[redacted:pw]"},
		{"hex upper", "733363723C7420227077222F3F3E7E7E", "[redacted:pw]"},
		{"within text", "key=" + formValue + "\n", "key=[redacted:pw]\n"},
		{"twice", formValue + formValue, "[redacted:pw][redacted:pw]"},
		{"prefix only", formValue[:10], formValue[:10]},
		{"one byte changed", "s3cr<t \"pw\"/?>~!", "s3cr<t \"pw\"/?>~!"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := "before " + tt.in + " after"
			want := "before " + tt.want + " after"
			if got := set.String(in); got != want {
				t.Errorf("String(%q) = %q, want %q", in, got, want)
			}
			if got := string(set.Bytes([]byte(in))); got != want {
				t.Errorf("Bytes(%q) = %q, want %q", in, got, want)
			}
		})
	}
}

func TestSetShortValuesAreNotRedacted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		value string
		in    string
		want  string
		len   int
	}{
		{"empty", "", "anything", "anything", 0},
		{"three bytes", "abc", "abc abcabc", "abc abcabc", 0},
		{"seven bytes", "1234567", "pin 1234567", "pin 1234567", 0},
		{"eight bytes", "12345678", "pin 12345678", "pin [redacted:s]", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			set := NewSet([]Secret{{Name: "s", Value: tt.value}})
			if got := set.Len(); got != tt.len {
				t.Errorf("Len() = %d, want %d", got, tt.len)
			}
			if got := set.String(tt.in); got != tt.want {
				t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestSetMatchesLeftmostLongest(t *testing.T) {
	t.Parallel()
	set := NewSet([]Secret{
		{Name: "short", Value: "abcdefgh"},
		{Name: "long", Value: "abcdefghij"},
		{Name: "tail", Value: "hijklmnop"},
		{Name: "a8", Value: "aaaaaaaa"},
	})
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"longer value wins", "abcdefghij", "[redacted:long]"},
		{"shorter value when longer does not complete", "abcdefghiX", "[redacted:short]iX"},
		{"shorter value at end", "xabcdefgh", "x[redacted:short]"},
		{"leftmost wins over overlapping later match", "abcdefghijklmnop", "[redacted:long]klmnop"},
		{"later match after non-match", "abcdefgXhijklmnop", "abcdefgX[redacted:tail]"},
		{"non-overlapping repeats", strings.Repeat("a", 17), "[redacted:a8][redacted:a8]a"},
		{"longest of encodings", "YWJjZGVmZ2hpag==", "[redacted:long]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := set.String(tt.in); got != tt.want {
				t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestSetSameValueTwoNames(t *testing.T) {
	t.Parallel()
	set := NewSet([]Secret{{Name: "a", Value: "same-value"}, {Name: "b", Value: "same-value"}})
	got := set.String("x same-value y")
	if got != "x [redacted:a] y" && got != "x [redacted:b] y" {
		t.Errorf("String = %q, want the value redacted under either name", got)
	}
	if set.Len() != 2 {
		t.Errorf("Len() = %d, want 2", set.Len())
	}
}

func TestNilAndEmptySetRedactNothing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		set  *Set
	}{
		{"nil", nil},
		{"zero", &Set{}},
		{"no secrets", NewSet(nil)},
		{"only short secrets", NewSet([]Secret{{Name: "x", Value: "short"}})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			const in = "some output short"
			if got := tt.set.String(in); got != in {
				t.Errorf("String = %q", got)
			}
			if got := string(tt.set.Bytes([]byte(in))); got != in {
				t.Errorf("Bytes = %q", got)
			}
			st := tt.set.Stream()
			if got := string(st.Next([]byte(in))) + string(st.End()); got != in {
				t.Errorf("Stream = %q", got)
			}
			if tt.set.Len() != 0 {
				t.Errorf("Len() = %d, want 0", tt.set.Len())
			}
		})
	}
}

func TestBytesReturnsCopy(t *testing.T) {
	t.Parallel()
	set := NewSet([]Secret{{Name: "k", Value: "secret-value"}})
	in := []byte("nothing to hide")
	out := set.Bytes(in)
	out[0] = 'N'
	if in[0] != 'n' {
		t.Error("Bytes returned its input, want a copy")
	}
}

func TestStringDoesNotAllocateWithoutMatch(t *testing.T) {
	set := NewSet(manySecrets(20))
	in := strings.Repeat("ordinary output, nothing secret here\n", 100)
	allocs := testing.AllocsPerRun(100, func() {
		if set.String(in) != in {
			t.Fatal("String changed input without secrets")
		}
	})
	if allocs != 0 {
		t.Errorf("String allocated %v times per call, want 0", allocs)
	}
}
