package mitm

import (
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Swap is one secret to put in place of its placeholder on a connection.
type Swap struct {
	// Placeholder is what the sandbox's variable holds; not secret.
	Placeholder string
	// Value is the secret; never logged nor put in an error.
	Value string
	// Query also swaps the placeholder in the request target's query
	// string, where the value goes URL-encoded (url.QueryEscape).
	Query bool
}

// String hides the value, should a Swap be printed.
func (s Swap) String() string { return "swap of " + s.Placeholder }

// GoString hides the value from %#v.
func (s Swap) GoString() string { return s.String() }

// LogValue hides the value from slog.
func (s Swap) LogValue() slog.Value { return slog.StringValue(s.String()) }

// maxGrowth bounds how much a request's swaps may add to its head. A
// head may be a megabyte and a value 64 KiB: without a bound, a request
// repeating a placeholder would make the daemon build gigabytes.
const maxGrowth = 1 << 20

// errTooLarge is a request whose head the swaps would make too large.
var errTooLarge = errors.New("the placeholders in the request would make its head larger than 1 MiB with their values")

// swapper swaps a connection's placeholders in its requests.
type swapper struct {
	header, query replacement
	// unusable are the placeholders whose values cannot be header values
	// (a control character, such as a line break): not swapped in
	// headers, so that a value cannot add a header or be cut.
	unusable []string
}

// replacement replaces some placeholders in one pass.
type replacement struct {
	r     *strings.Replacer // nil: none
	pairs []pair
}

type pair struct {
	placeholder string
	growth      int // len(value) - len(placeholder)
}

func newSwapper(swaps []Swap) swapper {
	var header, query []string
	var sw swapper
	for _, s := range swaps {
		if s.Placeholder == "" || s.Placeholder == s.Value {
			continue // an empty one would match everywhere
		}
		if validHeaderValue(s.Value) {
			header = append(header, s.Placeholder, s.Value)
		} else {
			sw.unusable = append(sw.unusable, s.Placeholder)
		}
		if s.Query {
			query = append(query, s.Placeholder, url.QueryEscape(s.Value))
		}
	}
	sw.header = newReplacement(header)
	sw.query = newReplacement(query)
	return sw
}

func newReplacement(oldnew []string) replacement {
	if len(oldnew) == 0 {
		return replacement{}
	}
	rp := replacement{r: strings.NewReplacer(oldnew...)}
	for i := 0; i < len(oldnew); i += 2 {
		rp.pairs = append(rp.pairs, pair{oldnew[i], len(oldnew[i+1]) - len(oldnew[i])})
	}
	return rp
}

// replace swaps the placeholders in s, spending from budget what they
// add; it returns how many it swapped.
func (rp replacement) replace(s *string, budget *int) (int, error) {
	if rp.r == nil {
		return 0, nil
	}
	found := 0
	for _, p := range rp.pairs {
		if n := strings.Count(*s, p.placeholder); n > 0 {
			found += n
			*budget -= n * p.growth
		}
	}
	if found == 0 {
		return 0, nil
	}
	if *budget < 0 {
		return 0, errTooLarge
	}
	*s = rp.r.Replace(*s)
	return found, nil
}

// request swaps the placeholders in the values of req's credential
// headers (see credentialHeader), in place (in a basic credential's user
// and password too), and (for swaps that ask for it) in the query of
// target, the request target as the client sent it. It returns the
// target to send and how many placeholders it swapped. Other headers are
// left as they are.
func (sw swapper) request(req *http.Request, target string) (string, int, error) {
	budget, swapped := maxGrowth, 0
	for key, vs := range req.Header {
		if !credentialHeader(key) {
			continue
		}
		credentials := key == "Authorization" || key == "Proxy-Authorization"
		for i := range vs {
			n, err := sw.header.replace(&vs[i], &budget)
			if err != nil {
				return "", 0, err
			}
			swapped += n
			if credentials {
				if n, err = sw.basic(&vs[i], &budget); err != nil {
					return "", 0, err
				}
				swapped += n
			}
		}
	}
	if q := strings.IndexByte(target, '?'); q >= 0 && sw.query.r != nil {
		query := target[q+1:]
		n, err := sw.query.replace(&query, &budget)
		if err != nil {
			return "", 0, err
		}
		target, swapped = target[:q+1]+query, swapped+n
	}
	return target, swapped, nil
}

// basic swaps the placeholders inside a basic credential ("Basic " and
// the base64 of user:password, RFC 7617), where git and most clients put
// a password they were given: there the placeholder is only encoded.
func (sw swapper) basic(v *string, budget *int) (int, error) {
	scheme, encoded, ok := strings.Cut(*v, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") || sw.header.r == nil {
		return 0, nil
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
	if err != nil {
		return 0, nil // not a credential: sent on as it is
	}
	cred, spare := string(raw), *budget
	n, err := sw.header.replace(&cred, &spare)
	if err != nil || n == 0 {
		return 0, err
	}
	out := scheme + " " + base64.StdEncoding.EncodeToString([]byte(cred))
	if *budget -= len(out) - len(*v); *budget < 0 {
		return 0, errTooLarge
	}
	*v = out
	return n, nil
}

// credentialHeader reports whether the header key (canonical, as net/http
// parses it) is one where a credential goes, and so a placeholder is
// swapped: Authorization, Proxy-Authorization, or a name whose last word
// is Key, Token, Secret or Apikey (X-Api-Key, Api-Key, X-Goog-Api-Key,
// Private-Token, X-Auth-Token, X-Api-Secret, X-Apikey). Hosts do not
// echo these as they may other headers (User-Agent, Referer, X-Request-Id
// or one of the client's making), which would hand the value back.
func credentialHeader(key string) bool {
	if key == "Authorization" || key == "Proxy-Authorization" {
		return true
	}
	last := key[strings.LastIndexByte(key, '-')+1:]
	switch strings.ToLower(last) {
	case "key", "token", "secret", "apikey":
		return true
	}
	return false
}

// misplaced returns the headers of h, other than credential headers, in
// whose values a placeholder of swaps is: left as they are, which the
// session tells its log.
func misplaced(h http.Header, swaps []Swap) []string {
	var out []string
	for key, vs := range h {
		if credentialHeader(key) {
			continue
		}
		for _, v := range vs {
			if slices.ContainsFunc(swaps, func(s Swap) bool { return s.Placeholder != "" && strings.Contains(v, s.Placeholder) }) {
				out = append(out, key)
				break
			}
		}
	}
	return out
}

// validHeaderValue reports whether v may be a header field's value: no
// control characters but tab (RFC 9110 section 5.5).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
