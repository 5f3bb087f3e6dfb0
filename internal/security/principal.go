package security

import (
	"crypto/x509"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// PrincipalMapper is Kafka's ssl.principal.mapping.rules: an ordered list of rules, each
// DEFAULT (the distinguished name as it is) or RULE:pattern/replacement/[LU] (the pattern must
// match the whole name; $n in the replacement is its group n; L or U changes the case). The
// first rule that matches names the principal; none matching fails the login.
type PrincipalMapper struct {
	rules []mappingRule
	text  string
}

type mappingRule struct {
	isDefault   bool
	re          *regexp.Regexp
	replacement string
	lower       bool
	upper       bool
}

// ParsePrincipalRules parses ssl.principal.mapping.rules; rules are separated by commas, which
// may also appear inside a pattern or replacement (a rule ends at its closing '/').
func ParsePrincipalRules(text string) (*PrincipalMapper, error) {
	m := &PrincipalMapper{text: text}
	s := strings.TrimSpace(text)
	for s != "" {
		var r mappingRule
		switch {
		case strings.HasPrefix(s, "DEFAULT"):
			r.isDefault = true
			s = s[len("DEFAULT"):]
		case strings.HasPrefix(s, "RULE:"):
			s = s[len("RULE:"):]
			pattern, rest, ok := cutUnescapedSlash(s)
			if !ok {
				return nil, fmt.Errorf("rule RULE:%s: expected RULE:pattern/replacement/[LU]", s)
			}
			replacement, rest, ok := cutUnescapedSlash(rest)
			if !ok {
				return nil, fmt.Errorf("rule RULE:%s: expected RULE:pattern/replacement/[LU]", s)
			}
			re, err := regexp.Compile(`^(?:` + pattern + `)$`)
			if err != nil {
				return nil, fmt.Errorf("rule pattern %q: %v", pattern, err)
			}
			r.re, r.replacement = re, javaReplacement(replacement, re.NumSubexp())
			if strings.HasPrefix(rest, "L") {
				r.lower, rest = true, rest[1:]
			} else if strings.HasPrefix(rest, "U") {
				r.upper, rest = true, rest[1:]
			}
			s = rest
		default:
			return nil, fmt.Errorf("invalid rule %q: expected DEFAULT or RULE:pattern/replacement/[LU]", s)
		}
		s = strings.TrimLeft(s, " \t")
		if s != "" {
			if s[0] != ',' {
				return nil, fmt.Errorf("invalid rule: unexpected %q", s)
			}
			s = strings.TrimLeft(s[1:], " \t")
		}
		m.rules = append(m.rules, r)
	}
	if len(m.rules) == 0 {
		return nil, errors.New("no rules")
	}
	return m, nil
}

// cutUnescapedSlash splits at the first '/' not preceded by a backslash; "\/" becomes "/".
func cutUnescapedSlash(s string) (before, after string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s):
			if s[i+1] == '/' {
				b.WriteByte('/')
			} else {
				b.WriteByte(s[i])
				b.WriteByte(s[i+1])
			}
			i++
		case s[i] == '/':
			return b.String(), s[i+1:], true
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", false
}

var backReference = regexp.MustCompile(`\$(\d+)`)

// javaReplacement turns Java's $n into Go's ${n}. Like Kafka, a reference beyond the groups
// drops trailing digits until it names one ($12 with one group is $1 then "2"), and one that
// names none stays literal.
func javaReplacement(rep string, groups int) string {
	rep = strings.ReplaceAll(rep, "$$", "\x00")
	out := backReference.ReplaceAllStringFunc(rep, func(ref string) string {
		digits := ref[1:]
		for i := len(digits); i > 0; i-- {
			n := 0
			for _, c := range digits[:i] {
				n = n*10 + int(c-'0')
			}
			if n <= groups && (i == 1 || digits[0] != '0') {
				return "${" + digits[:i] + "}" + digits[i:]
			}
		}
		return "$$" + digits
	})
	return strings.ReplaceAll(out, "\x00", "$$")
}

// Map returns the principal name for a distinguished name.
func (m *PrincipalMapper) Map(dn string) (string, error) {
	for _, r := range m.rules {
		if r.isDefault {
			return dn, nil
		}
		sub := r.re.FindStringSubmatchIndex(dn)
		if sub == nil {
			continue
		}
		out := string(r.re.ExpandString(nil, r.replacement, dn, sub))
		switch {
		case r.lower:
			out = strings.ToLower(out)
		case r.upper:
			out = strings.ToUpper(out)
		}
		return out, nil
	}
	return "", fmt.Errorf("no rules apply to %s, rules %s", dn, m.text)
}

// MapCertificate maps a client certificate's subject, written as RFC 2253 writes it (as Java's
// X500Principal.getName does: the most specific attribute first, "CN=alice,OU=eng,O=acme").
func (m *PrincipalMapper) MapCertificate(cert *x509.Certificate) (string, error) {
	return m.Map(cert.Subject.String())
}
