package redact_test

import (
	"fmt"
	"os"

	"github.com/hutchdev/hutch/internal/base/redact"
)

func ExampleSet_String() {
	set := redact.NewSet([]redact.Secret{{Name: "OPENAI_API_KEY", Value: "sk-test-0123456789"}})
	fmt.Println(set.String("key=sk-test-0123456789 b64=c2stdGVzdC0wMTIzNDU2Nzg5"))
	// Output: key=[redacted:OPENAI_API_KEY] b64=[redacted:OPENAI_API_KEY]
}

func ExampleStream() {
	set := redact.NewSet([]redact.Secret{{Name: "TOKEN", Value: "tok-abcdefgh"}})
	st := set.Stream()
	fmt.Printf("%q\n", st.Next([]byte("$ echo $TOKEN\ntok-ab"))) // "tok-ab" is held back
	fmt.Printf("%q\n", st.Next([]byte("cdefgh\n$ ")))
	fmt.Printf("%q\n", st.End())
	// Output:
	// "$ echo $TOKEN\n"
	// "[redacted:TOKEN]\n$ "
	// ""
}

func ExampleSet_Writer() {
	set := redact.NewSet([]redact.Secret{{Name: "TOKEN", Value: "tok-abcdefgh"}})
	w := set.Writer(os.Stdout)
	_, _ = fmt.Fprint(w, "got tok-abc")
	_, _ = fmt.Fprint(w, "defgh\n")
	if err := w.Close(); err != nil {
		fmt.Println(err)
	}
	// Output: got [redacted:TOKEN]
}
