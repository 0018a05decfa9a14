package redact

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// manySecrets returns n secrets with distinct, realistic-looking values.
func manySecrets(n int) []Secret {
	secrets := make([]Secret, n)
	for i := range secrets {
		secrets[i] = Secret{
			Name:  fmt.Sprintf("KEY_%d", i),
			Value: fmt.Sprintf("sk-%02d-%x", i, uint64(i+1)*0x9e3779b97f4a7c15),
		}
	}
	return secrets
}

// streamAll feeds chunks through a Stream of set and returns everything it
// emitted.
func streamAll(set *Set, chunks [][]byte) string {
	st := set.Stream()
	var out []byte
	for _, c := range chunks {
		out = append(out, st.Next(c)...)
	}
	return string(append(out, st.End()...))
}

// cutAt splits in at the given increasing positions.
func cutAt(in string, at ...int) [][]byte {
	var chunks [][]byte
	prev := 0
	for _, a := range at {
		chunks = append(chunks, []byte(in[prev:a]))
		prev = a
	}
	return append(chunks, []byte(in[prev:]))
}

// bytewise splits in into 1-byte chunks.
func bytewise(in string) [][]byte {
	chunks := make([][]byte, len(in))
	for i := range in {
		chunks[i] = []byte{in[i]}
	}
	return chunks
}

// streamSecrets are chosen to share prefixes and overlap each other.
var streamSecrets = []Secret{
	{Name: "short", Value: "abcdefgh"},
	{Name: "long", Value: "abcdefghijkl"},
	{Name: "tail", Value: "hijklmnop"},
	{Name: "pw", Value: formValue},
	{Name: "A", Value: "AAAAAAAAAA"},
}

// streamInputs exercise streaming: values split anywhere, interleaved,
// prefixes of one another, encodings and near misses.
var streamInputs = []struct {
	name string
	in   string
}{
	{"plain text", "hello, world\n$ ls -l\n"},
	{"one value", "token=abcdefgh;"},
	{"value that is a prefix of another", "abcdefghijk abcdefghijkl abcdefgh"},
	{"two values interleaved", "x abcdefghijkl hijklmnop " + formValue + " abcdefgh y"},
	{"overlapping values", "abcdefghijklmnop"},
	{"encoded forms", "czNjcjx0ICJwdyIvPz5+fg== eHhzM2NyPHQgInB3Ii8/Pn5+eXo= 6162636465666768"},
	{"near misses", "abcdefg abcdefgX abcdefghijk hijklmno"},
	{"runs of one letter", strings.Repeat("A", 27) + "B" + strings.Repeat("A", 9)},
	{"value at the very end", "end: abcdefghijkl"},
	{"prefix at the very end", "end: abcdefghij"},
}

func TestStreamSplitAtEveryPosition(t *testing.T) {
	t.Parallel()
	set := NewSet(streamSecrets)
	for _, tt := range streamInputs {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := set.String(tt.in)
			for i := 0; i <= len(tt.in); i++ {
				if got := streamAll(set, cutAt(tt.in, i)); got != want {
					t.Fatalf("cut at %d: got %q, want %q", i, got, want)
				}
				for j := i; j <= len(tt.in); j++ {
					if got := streamAll(set, cutAt(tt.in, i, j)); got != want {
						t.Fatalf("cut at %d and %d: got %q, want %q", i, j, got, want)
					}
				}
			}
		})
	}
}

func TestStreamOneByteChunks(t *testing.T) {
	t.Parallel()
	set := NewSet(streamSecrets)
	for _, tt := range streamInputs {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := set.String(tt.in)
			if got := streamAll(set, bytewise(tt.in)); got != want {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}

func TestStreamHoldsBackOnlyPossibleStarts(t *testing.T) {
	t.Parallel()
	set := NewSet(streamSecrets)
	tests := []struct {
		name   string
		chunks []string // fed in turn; the last one's Next result is checked
		want   string   // what the last Next returns
	}{
		{"text that cannot start a value", []string{"hello\n"}, "hello\n"},
		{"shell prompt", []string{"$ "}, "$ "},
		{"single byte that starts no pattern", []string{"x"}, "x"},
		{"partial value held", []string{"key=abcd"}, "key="},
		{"partial value completed", []string{"key=abcd", "efgh;"}, "[redacted:short];"},
		{"prefix of a longer value held", []string{"abcdefgh"}, ""},
		{"prefix of a longer value resolved", []string{"abcdefgh", "X"}, "[redacted:short]X"},
		{"partial value broken", []string{"abcd", "!"}, "abcd!"},
		{"held run of a repeated letter released", []string{"AAAAA", "!"}, "AAAAA!"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := set.Stream()
			var got []byte
			for _, c := range tt.chunks {
				got = st.Next([]byte(c))
			}
			if string(got) != tt.want {
				t.Errorf("Next = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestStreamReusableAfterEnd(t *testing.T) {
	t.Parallel()
	st := NewSet(streamSecrets).Stream()
	for range 2 {
		got := string(st.Next([]byte("a abcd"))) + string(st.End())
		if got != "a abcd" {
			t.Fatalf("got %q, want %q", got, "a abcd")
		}
	}
}

func TestStreamRandomChunking(t *testing.T) {
	t.Parallel()
	set := NewSet(append(manySecrets(20), streamSecrets...))
	rng := rand.New(rand.NewPCG(1, 2))
	parts := []string{"abcdefghijkl", "abcdefgh", "hijklmnop", "A", "xyz ", "\n",
		manySecrets(20)[7].Value, base64.StdEncoding.EncodeToString([]byte("q" + formValue))}
	for range 500 {
		var in strings.Builder
		for range rng.IntN(30) {
			in.WriteString(parts[rng.IntN(len(parts))])
		}
		s := in.String()
		var cuts []int
		for i := 1; i < len(s); i++ {
			if rng.IntN(4) == 0 {
				cuts = append(cuts, i)
			}
		}
		if got, want := streamAll(set, cutAt(s, cuts...)), set.String(s); got != want {
			t.Fatalf("input %q cut at %v: got %q, want %q", s, cuts, got, want)
		}
	}
}

func TestWriter(t *testing.T) {
	t.Parallel()
	set := NewSet(streamSecrets)
	tests := []struct {
		name      string
		writes    []string
		flushed   bool   // Flush after the writes
		before    string // written to the underlying writer before Flush
		afterward string // written in all
	}{
		{"plain text goes straight through", []string{"hello ", "world\n"}, true, "hello world\n", "hello world\n"},
		{"value split across writes", []string{"k=abc", "defgh\n"}, true, "k=[redacted:short]\n", "k=[redacted:short]\n"},
		{"held back until flush", []string{"k=abcdefgh"}, true, "k=", "k=[redacted:short]"},
		{"partial value flushed as is", []string{"k=abcd"}, true, "k=", "k=abcd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			w := set.Writer(&buf)
			for _, s := range tt.writes {
				n, err := w.Write([]byte(s))
				if err != nil || n != len(s) {
					t.Fatalf("Write(%q) = %d, %v; want %d, nil", s, n, err, len(s))
				}
			}
			if buf.String() != tt.before {
				t.Errorf("before Flush: %q, want %q", buf.String(), tt.before)
			}
			if err := w.Flush(); err != nil {
				t.Fatalf("Flush: %v", err)
			}
			if buf.String() != tt.afterward {
				t.Errorf("after Flush: %q, want %q", buf.String(), tt.afterward)
			}
			if err := w.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
		})
	}
}

// failWriter fails every write.
type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }

func TestWriterErrorIsSticky(t *testing.T) {
	t.Parallel()
	errDisk := errors.New("disk full")
	w := NewSet(streamSecrets).Writer(failWriter{errDisk})
	if _, err := w.Write([]byte("k=abcd")); !errors.Is(err, errDisk) {
		t.Fatalf("first Write: %v, want %v", err, errDisk)
	}
	if n, err := w.Write([]byte("zzz")); n != 0 || !errors.Is(err, errDisk) {
		t.Errorf("second Write = %d, %v; want 0, %v", n, err, errDisk)
	}
	if err := w.Flush(); !errors.Is(err, errDisk) {
		t.Errorf("Flush: %v, want %v", err, errDisk)
	}
}

func TestRedactorZeroAndNil(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		r    *Redactor
	}{
		{"nil", nil},
		{"zero", &Redactor{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.r.Replace([]Secret{{Name: "k", Value: "abcdefgh"}}) // no-op on nil
			want := "abcdefgh"
			if tt.r != nil {
				want = "[redacted:k]"
			}
			if got := tt.r.Set().String("abcdefgh"); got != want {
				t.Errorf("Set().String = %q, want %q", got, want)
			}
			var buf bytes.Buffer
			w := tt.r.Writer(&buf)
			if _, err := w.Write([]byte("abcdefgh")); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if buf.String() != want {
				t.Errorf("Writer wrote %q, want %q", buf.String(), want)
			}
		})
	}
}

func TestRedactorStreamFollowsReplace(t *testing.T) {
	t.Parallel()
	var r Redactor
	st := r.Stream()
	out := string(st.Next([]byte("before abcdefgh ")))
	r.Replace([]Secret{{Name: "k", Value: "abcdefgh"}})
	out += string(st.Next([]byte("after abcdefgh"))) + string(st.End())
	if want := "before abcdefgh after [redacted:k]"; out != want {
		t.Errorf("got %q, want %q", out, want)
	}
}

func TestRedactorReplaceConcurrentWithUse(t *testing.T) {
	t.Parallel()
	var r Redactor
	secrets := manySecrets(4)
	in := "out " + secrets[0].Value + " " + secrets[3].Value
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				r.Replace(secrets[:(g+i)%len(secrets)+1])
			}
		})
		wg.Go(func() {
			w := r.Writer(&bytes.Buffer{})
			for range 200 {
				set := r.Set()
				// Every set made above holds secrets[0]; before the first
				// Replace there is none.
				if got := set.String(in); set.Len() > 0 && strings.Contains(got, secrets[0].Value) {
					t.Errorf("value leaked: %q", got)
					return
				}
				if _, err := w.Write([]byte(in)); err != nil {
					t.Error(err)
					return
				}
			}
			if err := w.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// BenchmarkStreamNext measures Stream.Next on 64 KiB chunks of text with 20
// secrets, a few of which occur in it.
func BenchmarkStreamNext(b *testing.B) {
	secrets := manySecrets(20)
	set := NewSet(secrets)
	line := "2024-05-01T12:00:00Z INFO request handled path=/api/v1/things status=200 bytes=1234 user=ada\n"
	var text []byte
	for len(text) < 64<<10 {
		text = append(text, line...)
		if len(text)%(8<<10) < len(line) {
			text = append(text, "token="+secrets[len(text)%20].Value+"\n"...)
		}
	}
	chunk := text[:64<<10]
	st := set.Stream()
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	for b.Loop() {
		st.Next(chunk)
	}
}
