package config

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Property is one key=value pair of a properties file with the line it started on, so errors
// can point an operator at the exact place.
type Property struct {
	Key   string
	Value string
	Line  int
}

// ParseProperties reads the Java properties format Kafka's own config files use: '#' and '!'
// comments, '=', ':' or whitespace between key and value, a trailing backslash continuing the
// logical line, and the usual escapes (\t \n \r \f \\ \uXXXX). A key given twice keeps the last
// value, as java.util.Properties does.
func ParseProperties(r io.Reader) ([]Property, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	var (
		out       []Property
		logical   strings.Builder
		startAt   int
		lineNo    int
		continued bool
	)
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if lineNo == 1 {
			// A byte order mark some editors write would otherwise begin the first key,
			// invisibly: "node.id: unknown key" for a line that reads node.id=1.
			line = strings.TrimPrefix(line, "\ufeff")
		}
		if continued {
			line = strings.TrimLeft(line, " \t\f")
		} else {
			trimmed := strings.TrimLeft(line, " \t\f")
			if trimmed == "" || trimmed[0] == '#' || trimmed[0] == '!' {
				continue
			}
			line = trimmed
			startAt = lineNo
			logical.Reset()
		}
		if endsWithContinuation(line) {
			logical.WriteString(line[:len(line)-1])
			continued = true
			continue
		}
		logical.WriteString(line)
		continued = false
		p, err := splitProperty(logical.String())
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", startAt, err)
		}
		p.Line = startAt
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if continued {
		p, err := splitProperty(logical.String())
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", startAt, err)
		}
		p.Line = startAt
		out = append(out, p)
	}
	return out, nil
}

// endsWithContinuation reports an odd number of trailing backslashes: "\\" is an escaped
// backslash, not a continuation.
func endsWithContinuation(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

func splitProperty(s string) (Property, error) {
	var key strings.Builder
	i := 0
	for i < len(s) {
		c := s[i]
		if c == '\\' && i+1 < len(s) {
			key.WriteByte(c)
			key.WriteByte(s[i+1])
			i += 2
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			break
		}
		key.WriteByte(c)
		i++
	}
	rest := strings.TrimLeft(s[i:], " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	k, err := unescape(key.String())
	if err != nil {
		return Property{}, err
	}
	v, err := unescape(rest)
	if err != nil {
		return Property{}, fmt.Errorf("key %s: %w", k, err)
	}
	return Property{Key: k, Value: v}, nil
}

func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("malformed \\u escape")
			}
			r, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("malformed \\u escape %q", s[i-1:i+5])
			}
			b.WriteRune(rune(r))
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}
